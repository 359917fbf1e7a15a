"""`udo-build key generate [--name NAME] [--out FILE]` and `udo-build key public FILE`.

generate writes a new ed25519 private key (mode 0600; an existing file is kept unless --force)
and prints the public key line (NAME:BASE64) on stdout alone, for readers' `trusted_keys`.
public prints the public key line of a private key file.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

from ..errors import UserError, display_path
from .reporter import Reporter

DEFAULT_FILE = "udo-build/signing-key"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="key_command", metavar="SUBCOMMAND", required=True)
    gen = sub.add_parser("generate", parents=[common],
                         help="write a new private signing key; print its public key",
                         description="Write a new ed25519 private key for signing uploads to a "
                                     "remote cache, and print the public key line that readers "
                                     "add to trusted_keys.")
    gen.add_argument("--name", metavar="NAME",
                     help="the key's name, shown to readers (default: udo-build-<host>)")
    gen.add_argument("--out", metavar="FILE",
                     help=f"where to write the private key (default: ~/.config/{DEFAULT_FILE})")
    gen.add_argument("--force", action="store_true", help="replace an existing key file")
    public = sub.add_parser("public", parents=[common],
                            help="print the public key line of a private key file",
                            description="Print the public key line (NAME:BASE64) of a private "
                                        "key file.")
    public.add_argument("file", metavar="FILE", help="the private key file")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    if args.key_command == "public":
        from ..store.remote.trust import load_signing_key

        key = load_signing_key(Path(args.file))
        line = key.public().line
        rep.emit({"ok": True, "file": display_path(args.file), "name": key.name,
                  "public_key": line})
        if rep.mode != "json":
            print(line, file=rep.out)
        return 0
    return _generate(args, rep)


def _generate(args: argparse.Namespace, rep: Reporter) -> int:
    from ..store.remote.trust import generate

    name = args.name or "udo-build-" + (socket.gethostname().split(".")[0] or "key")
    try:
        key = generate(name)
    except ValueError as exc:
        raise UserError(str(exc), field="--name") from None
    path = Path(args.out).expanduser() if args.out else _default_path()
    if path.exists() and not args.force:
        raise UserError("a key file is already there; it is kept", file=str(path),
                        hint="pass --force to replace it, or --out another file")
    _write_secret(path, (key.line + "\n").encode())
    line = key.public().line
    rep.emit({"ok": True, "private_key": display_path(path), "name": key.name,
              "public_key": line})
    if rep.mode != "json":
        print(line, file=rep.out)
        rep.note(f"wrote the private key to {display_path(path)} (mode 0600): keep it secret "
                 "(a CI secret); readers add the public key above to trusted_keys")
    return 0


def _default_path() -> Path:
    home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(home) / DEFAULT_FILE


def _write_secret(path: Path, data: bytes) -> None:
    """Write a file readable by its owner only, atomically (never world-readable, even
    briefly)."""
    from ..atomic import write_atomic

    try:
        write_atomic(path, data, mode=0o600)
    except OSError as exc:
        raise UserError(f"the key file cannot be written: {exc.strerror}", file=str(path)) \
            from None
