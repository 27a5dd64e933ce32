"""In-process tests of plasmafs.datanode's pure parts (no cluster)."""
