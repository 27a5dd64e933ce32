"""`pfs getfattr` and `pfs setfattr`: extended attributes as getfattr(1) and setfattr(1)
of the attr package print and read them.

Values print as text in double quotes when every byte is printable, otherwise as 0s
and base64 (or as `-e` asks: text, hex with 0x, base64 with 0s); setfattr reads the
same three forms back. `getfattr -d` dumps the names matching `-m` (default `^user\\.`,
as getfattr; `-m -` for all).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import re
import string
import sys
from typing import TYPE_CHECKING, Any

from plasmafs.core.errors import InvalidArgumentError, NoDataError

if TYPE_CHECKING:  # the parsers are built without loading the client library
    from plasmafs.cli.exits import Reporter
    from plasmafs.client import Client

ENCODINGS = ("text", "hex", "base64")
_PRINTABLE = frozenset(string.printable.encode()) - frozenset(b"\x0b\x0c")


def add_parsers(sub: Any) -> None:
    """The getfattr and setfattr commands' arguments."""
    p = sub.add_parser("getfattr", add_help=False, help="print extended attributes, as getfattr(1)")
    p.add_argument("--help", action="help", help="show this help message and exit")
    p.add_argument("-n", "--name", help="the attribute to print")
    p.add_argument("-d", "--dump", action="store_true", help="print every matching attribute")
    p.add_argument("-m", "--match", help="names to dump, a regular expression (- for all)")
    p.add_argument("-e", "--encoding", choices=ENCODINGS, help="how values are printed")
    p.add_argument("--only-values", action="store_true", help="the raw values, nothing else")
    p.add_argument("-h", "--no-dereference", dest="nofollow", action="store_true",
                   help="a symbolic link's own attributes")  # fmt: skip
    p.add_argument("paths", nargs="+", metavar="PATH")
    p = sub.add_parser("setfattr", add_help=False, help="set or remove an extended attribute")
    p.add_argument("--help", action="help", help="show this help message and exit")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("-n", "--name", help="the attribute to set")
    what.add_argument("-x", "--remove", metavar="NAME", help="the attribute to remove")
    p.add_argument("-v", "--value", default="", help='"text", 0x hex or 0s base64')
    p.add_argument("-h", "--no-dereference", dest="nofollow", action="store_true",
                   help="a symbolic link's own attributes")  # fmt: skip
    p.add_argument("paths", nargs="+", metavar="PATH")


async def cmd_getfattr(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """Print the attributes asked for, each file's under a `# file:` line."""
    pattern = re.compile(_match_pattern(args))
    follow = not args.nofollow

    async def one(path: str) -> None:
        if args.name is None and not args.dump:  # names only, as getfattr without -d
            names = [
                n for n in await fs.listxattr(path, follow_symlinks=follow) if pattern.search(n)
            ]
            if names:
                print("\n".join([f"# file: {path}", *names]) + "\n")
            return
        if args.name is not None:
            try:
                values = {args.name: await fs.getxattr(path, args.name, follow_symlinks=follow)}
            except NoDataError:
                raise NoDataError(f"{path}: {args.name}: No such attribute") from None
        else:
            names = [
                n for n in await fs.listxattr(path, follow_symlinks=follow) if pattern.search(n)
            ]
            values = {n: await fs.getxattr(path, n, follow_symlinks=follow) for n in names}
        if args.only_values:
            for value in values.values():
                sys.stdout.buffer.write(value)
            sys.stdout.flush()
            return
        if not values:
            return
        lines = [f"# file: {path}"]
        lines += [f"{name}={encode_value(value, args.encoding)}" for name, value in values.items()]
        print("\n".join(lines) + "\n")

    await out.each(args.paths, one)


async def cmd_setfattr(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """Set (-n, -v) or remove (-x) one attribute of every path."""
    follow = not args.nofollow
    value = decode_value(args.value)

    async def one(path: str) -> None:
        if args.remove is not None:
            await fs.removexattr(path, args.remove, follow_symlinks=follow)
        else:
            await fs.setxattr(path, args.name, value, follow_symlinks=follow)

    await out.each(args.paths, one)


def encode_value(value: bytes, encoding: str | None) -> str:
    """A value as getfattr prints it: "text", 0x hex or 0s base64 (None: text when
    printable, else base64)."""
    if encoding is None:
        encoding = "text" if all(b in _PRINTABLE for b in value) else "base64"
    if encoding == "hex":
        return "0x" + value.hex()
    if encoding == "base64":
        return "0s" + base64.b64encode(value).decode()
    text = value.decode("latin-1").replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(c if c.isprintable() else f"\\{ord(c):03o}" for c in text)
    return f'"{escaped}"'


def decode_value(text: str) -> bytes:
    """A value as setfattr reads it: 0x hex, 0s base64, "quoted" or plain text."""
    prefix, rest = text[:2].lower(), text[2:]
    try:
        if prefix == "0x":
            return bytes.fromhex(rest)
        if prefix == "0s":
            return base64.b64decode(rest, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise InvalidArgumentError(f"bad {prefix} value {text!r}: {exc}") from None
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    return text.encode()


def _match_pattern(args: argparse.Namespace) -> str:
    if args.match == "-":
        return ""
    return args.match if args.match is not None else r"^user\."
