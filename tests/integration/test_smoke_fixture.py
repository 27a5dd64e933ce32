"""The fixtures themselves: a namenode answers on a fresh database."""

from plasmafs.client import Client


async def test_root_is_an_empty_directory(fs: Client) -> None:
    root = await fs.stat("/")
    assert root.is_dir and root.ino == 1
    assert await fs.listdir("/") == []
