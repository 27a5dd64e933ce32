"""plasmafs test suite: real PostgreSQL, real namenode processes."""
