"""An S3 gateway process for tests, and boto3 clients of it."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plasmafs.local.cluster import start_daemon


@dataclass
class GatewayProcess:
    """`python -m plasmafs.gateway` against a test's namenode, acting as `token_file`'s
    user (root: a superuser may act for every key's user)."""

    namenode: str
    workdir: Path
    token_file: Path
    root: str = "/"
    proc: subprocess.Popen[bytes] | None = None
    address: str = ""

    def start(self) -> GatewayProcess:
        """Start and wait until it serves."""
        args = [
            "plasmafs.gateway", "--namenode", self.namenode, "--token-file",
            str(self.token_file), "--listen", "127.0.0.1:0", "--root", self.root,
        ]  # fmt: skip
        self.proc, addresses = start_daemon("gateway", self.workdir, args)
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
