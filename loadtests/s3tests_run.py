"""ceph's s3-tests against the S3 gateway: the subset for the features it has.

    python -m loadtests.s3tests_run --suite DIR --python VENV_PYTHON [--update README.md]

s3-tests is no package: clone it outside the project (github.com/ceph/s3-tests) and
install its requirements.txt into a virtual environment of its own; give the clone
with --suite and that environment's interpreter with --python. A throw-away cluster
(two datanodes, TLS between them) and a gateway on the loopback serve it; the suite's
users (main, alt, tenant, iam) are plasmafs users with an S3 key each. The tests of
features the gateway does not have (README: what is not supported) are deselected by
their markers and names; every other test of s3tests/functional/test_s3.py runs, and
the table lists each failure. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from loadtests.harness import bench_cluster, update_benchmarks_md
from plasmafs.client import Client
from plasmafs.local.cluster import start_daemon

ROOT = "/s3"
USERS = ("main", "alt", "tenant", "iam", "iamroot", "iamaltroot")
# Markers of features the gateway does not have.
UNSUPPORTED_MARKERS = (
    "bucket_logging", "bucket_logging_cleanup", "encryption", "sse_s3", "bucket_encryption",
    "lifecycle", "lifecycle_expiration", "lifecycle_transition", "bucket_policy", "tagging",
    "object_ownership", "cloud_transition", "cloud_restore", "delete_marker",
    "iam_user", "iam_account", "iam_tenant", "iam_role", "iam_cross_account", "s3select",
    "s3website", "versioning", "object_lock", "storage_class", "appendobject", "sns",
    "fails_on_aws", "auth_aws2",
)  # fmt: skip
# Words in the names of tests of features the gateway does not have.
UNSUPPORTED_NAMES = (
    "versioning", "versioned", "acl", "policy", "cors", "website", "lifecycle",
    "tagging", "lock", "retention", "legal_hold", "post_object", "encryption", "sse",
    "logging", "ownership", "restore", "select", "append", "storage_class", "attributes",
    "torrent", "requestpayment", "anon", "public", "tenant", "bucket_create_special_key_names",
    "virtual", "delete_marker", "put_bucket_ownership", "accelerate",
    "notification", "v2_signature", "object_read_not_exist", "presigned_url_put_get",
    "bucket_head_extended",
)  # fmt: skip

# Tests of supported features that also use one the gateway does not have (so they
# fail for that reason), and tests of behaviours it differs in on purpose.
REASONS = {
    "test_100_continue": "uses ACLs (a bucket made public-write)",
    "test_access_bucket_private_object_private": "uses ACLs",
    "test_access_bucket_private_objectv2_private": "uses ACLs",
    "test_bucket_list_return_data": "uses ACLs (GetObjectAcl)",
    "test_expected_bucket_owner": "uses ACLs",
    "test_object_raw_get": "anonymous access (off by design)",
    "test_object_raw_get_bucket_gone": "anonymous access (off by design)",
    "test_object_raw_get_object_gone": "anonymous access (off by design)",
    "test_object_delete_key_bucket_gone": "anonymous access (off by design)",
    "test_object_raw_get_x_amz_expires_not_expired": "uses ACLs, and OPTIONS (CORS)",
    "test_put_current_object_if_match": "uses versioning",
    "test_put_current_object_if_none_match": "uses versioning",
    "test_put_object_current_if_match": "uses versioning",
    "test_multipart_put_current_object_if_match": "uses versioning",
    "test_multipart_put_current_object_if_none_match": "uses versioning",
    "test_list_multipart_upload_owner": "uses ACLs",
    "test_object_copy_not_owned_object_bucket": "uses ACLs",
    "test_object_copy_not_owned_bucket": "objects are files of mode 644 and buckets "
    "directories of 755: another user may read (and so copy) them, as on the file system",
    **{
        f"test_multipart_use_cksum_helper_{name}": "uses GetObjectAttributes, and each part's "
        "checksum on a GET by part number (the upload's checksum it checks first matches)"
        for name in ("sha1", "sha256", "crc32", "crc32c", "crc64nvme")
    },
    "test_bucket_list_delimiter_basic": "keys foo/bar and foo/bar/xyzzy need one name as "
    "file and directory (PathConflict)",
    "test_bucket_listv2_delimiter_basic": "keys foo/bar and foo/bar/xyzzy (PathConflict)",
    "test_bucket_list_delimiter_not_skip_special": "an object 'x/' with content: a "
    "directory has none",
    "test_bucket_list_delimiter_prefix_ends_with_delimiter": "an object 'x/' with content",
    "test_bucket_listv2_delimiter_prefix_ends_with_delimiter": "an object 'x/' with content",
    "test_object_set_get_unicode_metadata": "metadata that is not ASCII (which S3 requires "
    "of REST headers) comes back UTF-8 encoded, not in the bytes the client sent",
    "test_object_read_unreadable": "the key '\\xae\\x8a-' is valid UTF-8 and a valid name "
    "here: NoSuchKey rather than a refusal",
}

CONFIG = """[DEFAULT]
host = {host}
port = {port}
is_secure = False
ssl_verify = False

[fixtures]
bucket prefix = pfs-{{random}}-

{users}
"""


def _user_section(section: str, name: str, key: str, secret: str) -> str:
    lines = [
        f"[{section}]",
        f"display_name = {name}",
        f"user_id = {name}",
        f"email = {name}@example.com",
        f"access_key = {key}",
        f"secret_key = {secret}",
    ]
    if section == "s3 main":
        lines.append("api_name =")  # us-east-1: no location constraint
    if section == "s3 tenant":
        lines.append("tenant = pfs")
    return "\n".join(lines) + "\n"


async def _users(address: str) -> dict[str, tuple[str, str]]:
    fs = Client(address)
    try:
        await fs.mkdir(ROOT)
        await fs.chmod(ROOT, 0o1777)
        accounts = await fs.accounts()
        keys = await fs.s3_keys()
        made = {}
        for name in USERS:
            await accounts.add_user(f"s3{name}")
            key, secret = await keys.create(f"s3{name}")
            made[name] = (key.access_key_id, secret)
        return made
    finally:
        await fs.close()


def run(suite: Path, python: str, only: str) -> dict[str, Any]:
    """Run the subset and collect every test's outcome."""
    work = Path(tempfile.mkdtemp(prefix="pfs-s3tests-"))
    with bench_cluster(datanodes=2, capacity=2**30) as cluster:
        keys = asyncio.run(_users(cluster.namenode_address))
        env = {**os.environ, **cluster.client_env, "PFS_CLIENT_NAMENODE": cluster.namenode_address}
        gateway_dir = work / "gateway"
        gateway_dir.mkdir()
        args = ["plasmafs.gateway", "--listen", "127.0.0.1:0", "--root", ROOT]
        gateway, addresses = start_daemon("gateway", gateway_dir, args, extra_env=env)
        try:
            host, port = addresses[0].rsplit(":", 1)
            sections = {
                "main": "s3 main", "alt": "s3 alt", "tenant": "s3 tenant", "iam": "iam",
                "iamroot": "iam root", "iamaltroot": "iam alt root",
            }  # fmt: skip
            users = "\n".join(_user_section(sections[n], f"s3{n}", *keys[n]) for n in USERS)
            conf = work / "s3tests.conf"
            conf.write_text(CONFIG.format(host=host, port=port, users=users))
            report = work / "report.xml"
            deselect = " and ".join(f"not {w}" for w in UNSUPPORTED_NAMES)
            if only:
                deselect = f"({only}) and {deselect}"
            markers = " and ".join(f"not {m}" for m in UNSUPPORTED_MARKERS)
            started = time.monotonic()
            subprocess.run(
                [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "s3tests/functional/test_s3.py", "-m", markers, "-k", deselect,
                 f"--junitxml={report}"],
                cwd=suite, env={**os.environ, "S3TEST_CONF": str(conf)},
                capture_output=True, text=True, timeout=3600,
            )  # fmt: skip
            seconds = time.monotonic() - started
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)
    outcomes = _outcomes(report)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=suite, capture_output=True, text=True
    ).stdout.strip()
    return {"commit": commit, "seconds": seconds, "outcomes": outcomes}


def _outcomes(report: Path) -> dict[str, str]:
    """test name -> passed, or the first line of why it failed."""
    found: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if case.find("skipped") is not None:
            found[name] = "skipped"
        elif failure is None:
            found[name] = "passed"
        else:
            found[name] = (failure.get("message") or "failed").splitlines()[0][:160]
    return found


def markdown(f: dict[str, Any], command: str) -> str:
    """The README section with the pass list and each failure."""
    outcomes = f["outcomes"]
    passed = sorted(n for n, o in outcomes.items() if o == "passed")
    failed = {n: o for n, o in sorted(outcomes.items()) if o not in ("passed", "skipped")}
    lines = [
        "### S3 conformance: ceph's s3-tests (`loadtests/s3tests_run.py`)",
        "",
        f"Command: `{command}` (s3-tests {f['commit']}, {f['seconds']:.0f} s). The tests of "
        "s3tests/functional/test_s3.py for the features above: those of the features this "
        "gateway does not have are deselected by marker and name (the runner lists them). "
        f"**{len(passed)} of {len(passed) + len(failed)} pass.**",
        "",
    ]
    if failed:
        lines += ["| failing test | why |", "|---|---|"]
        lines += [
            f"| `{n}` | {REASONS.get(n) or 'unexplained: ' + why.replace('|', '/')} |"
            for n, why in failed.items()
        ]
        lines.append("")
    lines += [
        "<details><summary>Passing tests</summary>",
        "",
        ", ".join(f"`{n}`" for n in passed),
        "",
        "</details>",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, required=True, help="a clone of ceph/s3-tests")
    parser.add_argument("--python", required=True, help="the interpreter of its environment")
    parser.add_argument("--only", default="", help="a pytest -k expression to narrow it")
    parser.add_argument("--update", type=Path, help="rewrite this README section")
    args = parser.parse_args(argv)
    figures = run(args.suite, args.python, args.only)
    command = "python -m loadtests.s3tests_run --suite DIR --python VENV/bin/python"
    text = markdown(figures, command)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "s3tests_run", text)
    print(json.dumps({k: v for k, v in figures.items()}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
