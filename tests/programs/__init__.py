"""Small programs that tests run as separate processes (on a mount, say)."""
