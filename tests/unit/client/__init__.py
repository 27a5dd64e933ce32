"""In-process tests of plasmafs.client's pure parts (no cluster)."""
