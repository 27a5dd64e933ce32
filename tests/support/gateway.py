"""An S3 gateway process for tests, boto3 clients of it, and the fixtures of the
gateway's tests (a pytest plugin of tests/conftest.py): `s3_root` (a directory anyone
may make buckets in), `gateway` (the process, acting as root), `alice_keys` and
`bob_keys` (S3 key pairs), `s3` (alice's boto3 client)."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from plasmafs.client import Client
from plasmafs.local.cluster import start_daemon

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import DataCluster


@dataclass
class GatewayProcess:
    """`python -m plasmafs.gateway` against a test's namenode, acting as `token_file`'s
    user (root: a superuser may act for every key's user)."""

    namenode: str
    workdir: Path
    token_file: Path
    root: str = "/"
    env: dict[str, str] = field(default_factory=dict)  # PFS_GATEWAY_* settings
    proc: subprocess.Popen[bytes] | None = None
    address: str = ""

    def start(self) -> GatewayProcess:
        """Start and wait until it serves."""
        args = [
            "plasmafs.gateway", "--namenode", self.namenode, "--token-file",
            str(self.token_file), "--listen", "127.0.0.1:0", "--root", self.root,
        ]  # fmt: skip
        self.proc, addresses = start_daemon("gateway", self.workdir, args, extra_env=self.env)
        self.address = addresses[0]
        return self

    @property
    def url(self) -> str:
        """The endpoint URL."""
        return f"http://{self.address}"

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after 20 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log(self) -> str:
        """The gateway's log."""
        return (self.workdir / "gateway.log").read_text(errors="replace")


def s3_client(url: str, access_key_id: str, secret: str, **config: Any) -> Any:
    """A boto3 S3 client of the gateway at `url`."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            **config,
        ),
    )


ROOT = "/s3"
MIN_TEST_PART = 64 * 1024


@pytest.fixture
async def s3_root(dfs: Client) -> str:
    """The gateway's root: a directory anyone may make buckets in (sticky, as /tmp)."""
    await dfs.mkdir(ROOT)
    await dfs.chmod(ROOT, 0o1777)
    return ROOT


@pytest.fixture
def gateway(
    data_cluster: DataCluster, tmp_path: Path, cluster_pki: Path, s3_root: str
) -> Iterator[GatewayProcess]:
    work = tmp_path / "gateway"
    work.mkdir()
    process = GatewayProcess(
        data_cluster.namenode.address, work, cluster_pki / "root.token", root=s3_root,
        # Parts of a block (64 KiB) may be completed: the test datanodes hold 16 MiB each.
        env={"PFS_GATEWAY_MIN_PART_SIZE": str(MIN_TEST_PART)},
    )  # fmt: skip
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def alice_keys(dfs: Client) -> tuple[str, str]:
    key, secret = await (await dfs.s3_keys()).create("alice")
    return key.access_key_id, secret


@pytest.fixture
async def bob_keys(dfs: Client) -> tuple[str, str]:
    key, secret = await (await dfs.s3_keys()).create("bob")
    return key.access_key_id, secret


@pytest.fixture
def s3(gateway: GatewayProcess, alice_keys: tuple[str, str]) -> Any:
    return s3_client(gateway.url, *alice_keys)
