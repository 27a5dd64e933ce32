"""Bucket names and object keys as plasmafs paths.

A bucket is a directory under the gateway's root; a key is a path below it, its
"/"-separated parts the names of directories and of the file. A key ending with "/"
names a directory (an empty one is listed as such an object). Keys that are not valid
paths (empty parts as in "a//b", "." or "..", NUL, a part over 255 bytes) are refused.
"""

from __future__ import annotations

import re

from plasmafs.core import paths
from plasmafs.gateway.s3_errors import S3Error

# S3's rules for new buckets; existing top-level directories with other names are
# still served when their names are valid path names.
_NEW_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IP_ADDRESS = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
MAX_KEY_BYTES = 1024  # S3's limit


def check_new_bucket(name: str) -> str:
    """A name S3 allows for a new bucket; S3Error InvalidBucketName otherwise."""
    if not _NEW_BUCKET.fullmatch(name) or ".." in name or _IP_ADDRESS.fullmatch(name):
        raise S3Error(
            "InvalidBucketName", 400, "The specified bucket is not valid.", BucketName=name
        )
    return name


STAGING = ".s3-staging"  # under the root: uploads until they are complete


def check_bucket(name: str) -> str:
    """A bucket name that can name a directory (not a hidden one: the root's hidden
    directories are the gateway's)."""
    if not name or name.startswith(".") or "\0" in name or len(name.encode()) > 255:
        raise S3Error(
            "InvalidBucketName", 400, "The specified bucket is not valid.", BucketName=name
        )
    return name


def key_parts(key: str) -> list[str]:
    """The names a key's path is made of (a trailing "/" dropped); S3Error otherwise."""
    if not key:
        raise S3Error("InvalidArgument", 400, "an object key is not empty")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise S3Error("KeyTooLongError", 400, "Your key is too long")
    parts = (key[:-1] if key.endswith("/") else key).split("/")
    for part in parts:
        if part in ("", ".", "..") or "\0" in part or len(part.encode()) > paths.MAX_NAME_BYTES:
            raise S3Error(
                "InvalidArgument",
                400,
                "this key is not a valid path: no empty parts, '.', '..', NUL, or part over "
                "255 bytes",
                Key=key,
            )
    return parts


def object_path(root: str, bucket: str, key: str) -> str:
    """The path of object `key` of `bucket`."""
    return "/".join([bucket_path(root, bucket), *key_parts(key)])


def staging_path(root: str, name: str) -> str:
    """The path of an upload in progress."""
    return f"{root.rstrip('/')}/{STAGING}/{name}"


def bucket_path(root: str, bucket: str) -> str:
    """The path of `bucket`'s directory."""
    check_bucket(bucket)
    return f"{root.rstrip('/')}/{bucket}"
