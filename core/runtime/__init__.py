"""The runtime of long-running plasmafs processes: daemon settings and run loop
(`daemon`, which needs the `server` extra's pydantic-settings), the Prometheus registry
(`metrics`, prometheus-client), and memory tuning every daemon and the mount apply
(`gc_tuning`, `freed_buffers`, standard library only)."""
