"""What several commands share: the store and remote-cache options, and sizes for people.

Not a command. It imports no other command module (only the reporter may be imported by it),
so the commands never import each other.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..builder.settings import RemoteRequest, RemoteSummary


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="DIR",
                        help="the artifact store (default: $UDO_BUILD_STORE or ./store)")


def add_remote_arguments(parser: argparse.ArgumentParser, *, upload: bool) -> None:
    group = parser.add_argument_group("remote cache (see README 'Shared caches')")
    group.add_argument("--remote", metavar="URL",
                       help="a shared cache speaking the Bazel HTTP protocol (nginx WebDAV, "
                            "bazel-remote); default: $UDO_BUILD_REMOTE or the config files")
    group.add_argument("--no-remote", action="store_true",
                       help="use no remote cache, whatever the config says")
    if upload:
        group.add_argument("--remote-upload", action="store_true", default=None,
                           help="upload what this build makes, signed with the signing key "
                                "(default: off, or 'upload' in the config)")
        group.add_argument("--ci", action="store_true",
                           help="a CI build: upload to the remote cache (as --remote-upload)")
    group.add_argument("--signing-key", metavar="FILE",
                       help="the private key that signs uploads (default: "
                            "$UDO_BUILD_SIGNING_KEY or 'signing_key' in the config)")
    group.add_argument("--trusted-key", metavar="KEY", action="append", default=[],
                       help="also accept entries signed by this public key (NAME:BASE64; "
                            "repeatable; added to $UDO_BUILD_TRUSTED_KEYS and 'trusted_keys')")


def remote_request(args: argparse.Namespace) -> RemoteRequest:
    """The remote-cache options as given; uploads are asked for by --ci or --remote-upload
    (else left to the config)."""
    from ..builder.settings import RemoteRequest

    upload = True if getattr(args, "ci", False) or getattr(args, "remote_upload", None) else None
    return RemoteRequest(url=args.remote, no_remote=args.no_remote, upload=upload,
                         signing_key=args.signing_key, trusted_keys=tuple(args.trusted_key))


def remote_line(summary: RemoteSummary) -> str:
    """One line for people: what the remote tier did in a build."""
    parts = [f"{summary.hits} hits", f"{summary.misses} misses"]
    if summary.bytes_downloaded:
        parts.append(f"{human_size(summary.bytes_downloaded)} downloaded")
    if summary.entries_uploaded or summary.bytes_uploaded:
        parts.append(f"{summary.entries_uploaded} entries "
                     f"({human_size(summary.bytes_uploaded)}) uploaded")
    rejected = sum(summary.rejected.values())
    if rejected:
        parts.append(f"{rejected} refused")
    state = "; disabled after failures" if summary.disabled else ""
    return f"remote cache {summary.url}: {', '.join(parts)}{state}"


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
