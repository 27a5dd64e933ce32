"""In-process tests of plasmafs.mount's pure parts (no cluster)."""
