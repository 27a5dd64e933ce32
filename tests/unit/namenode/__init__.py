"""In-process tests of plasmafs.namenode's pure parts (no cluster)."""
