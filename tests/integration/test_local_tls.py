"""`pfs local up` makes a cluster CA and certificates under PFS_HOME and runs every
daemon with TLS: the CLI works with no extra step, plaintext connections to the
namenode's and the datanodes' ports fail, and private keys are the owner's alone.
Daemons given a certificate without its key refuse to start."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.proto import datanode_pb2_grpc as dpb_grpc
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.local.postgres import postgres_running, stop_postgres
from tests.integration.test_cli import _daemons_under
from tests.support.cli_runner import assert_ok, clean_env, run_pfs


def test_the_local_cluster_speaks_tls_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    try:
        assert_ok(
            run_pfs(env, "local", "up", "--datanodes", "2", "--capacity", "64M", timeout=120), None
        )
        config = json.loads((home / "client.json").read_text())
        ca = Path(config["ca"])
        assert ca == home / "tls" / "ca.pem"
        for key in (home / "tls").glob("*.key"):
            assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
        # The CLI and the library find the CA through PFS_HOME.
        local = tmp_path / "data"
        local.write_bytes(os.urandom(3 * 1024 * 1024 + 5))
        put = run_pfs(env, "put", "-rep", "2", str(local), "/f")
        assert put.rc == 0, put
        back = tmp_path / "back"
        got = run_pfs(env, "--no-local-reads", "get", "/f", str(back))
        assert got.rc == 0, got
        assert back.read_bytes() == local.read_bytes()

        state = json.loads((home / "cluster.json").read_text())
        with (
            grpc.insecure_channel(state["namenode_address"]) as channel,
            pytest.raises(grpc.RpcError) as refused,
        ):
            pb_grpc.NamenodeStub(channel).Ping(pb.PingRequest(), timeout=5)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        for datanode in state["datanodes"]:
            with (
                grpc.insecure_channel(datanode["address"]) as channel,
                pytest.raises(grpc.RpcError) as refused,
            ):
                dpb_grpc.DatanodeStub(channel).Info(dpb.InfoRequest(), timeout=5)
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        trusted = grpc.ssl_channel_credentials(ca.read_bytes())
        token = (home / "credentials" / "token").read_text().strip()
        assert stat.S_IMODE((home / "credentials" / "token").stat().st_mode) == 0o600
        assert config["token_file"] == str(home / "credentials" / "token")
        with grpc.secure_channel(state["namenode_address"], trusted) as channel:
            stub = pb_grpc.NamenodeStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Ping(pb.PingRequest(), timeout=10)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
            bearer = (("authorization", f"Bearer {token}"),)
            assert stub.Ping(pb.PingRequest(), timeout=10, metadata=bearer).version
        # Datanodes register on a port of their own that wants a certificate of the CA.
        assert state["registry_address"] != state["namenode_address"]
        for credentials in (None, trusted):
            with (
                grpc.secure_channel(state["registry_address"], credentials)
                if credentials
                else grpc.insecure_channel(state["registry_address"]) as channel,
                pytest.raises(grpc.RpcError) as refused,
            ):
                pb_grpc.DatanodeRegistryStub(channel).Register(pb.RegisterRequest(), timeout=5)
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        for datanode in state["datanodes"]:
            meta = Path(datanode["dir"]) / "volume" / "volume.json"
            assert stat.S_IMODE(meta.stat().st_mode) == 0o600, meta
    finally:
        run_pfs(env, "local", "down", timeout=120)
        for pid, _ in _daemons_under(home):
            os.kill(pid, signal.SIGKILL)
        if postgres_running(home / "postgres"):
            stop_postgres(home / "postgres")


def test_a_certificate_without_its_key_is_a_configuration_error(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    for role, extra in (("namenode", []), ("datanode", ["--volume", str(tmp_path / "v")])):
        env = dict(os.environ, **{f"PFS_{role.upper()}_TLS_CERT": str(cert)})
        done = subprocess.run(
            [sys.executable, "-m", f"plasmafs.{role}", *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "tls_cert and tls_key go together" in done.stderr


def test_a_daemon_without_tls_refuses_to_start_unless_told_insecure(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if "_TLS_" not in k and "_INSECURE" not in k}
    for role, extra in (
        ("namenode", ["--listen", "127.0.0.1:0"]),
        ("datanode", ["--volume", str(tmp_path / "v")]),
    ):
        done = subprocess.run(
            [sys.executable, "-m", f"plasmafs.{role}", *extra],
            env=base,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "no tls_cert, tls_key, tls_ca" in done.stderr
        assert "insecure = true" in done.stderr
        assert len(done.stderr.splitlines()) == 1
    both = dict(base, PFS_DATANODE_INSECURE="true", PFS_DATANODE_TLS_CA="/ca.pem")
    done = subprocess.run(
        [sys.executable, "-m", "plasmafs.datanode", "--volume", str(tmp_path / "v")],
        env=both,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "insecure is for running without TLS" in done.stderr
