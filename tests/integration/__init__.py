"""Tests against real processes: PostgreSQL, namenode, datanodes, mounts, the CLI."""
