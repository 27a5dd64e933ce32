"""The benchmark commands run briefly on a small scale (marker benchmark_smoke)."""
