"""In-process tests of plasmafs.cli's pure parts (no cluster)."""
