"""In-process tests of plasmafs.core's pure parts (no cluster)."""
