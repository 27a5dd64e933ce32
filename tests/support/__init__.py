"""What the tests share: clusters of real processes, accounts, the CLI runner,
mounts, waiting for conditions."""
