"""The remote-cache options of `build`, `cache push` and `cache pull`, and opening the tier.

Not a command: the helpers the commands share. Nothing of the remote is imported unless a
remote URL is configured.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Problem, UserError
from .reporter import Reporter

if TYPE_CHECKING:
    from ..store import Store
    from ..store.remote import Remote


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


def upload_wanted(args: argparse.Namespace) -> bool | None:
    """True when the options ask for uploads; None leaves it to the config."""
    return True if getattr(args, "ci", False) or getattr(args, "remote_upload", None) else None


def open_remote(args: argparse.Namespace, store: Store, start: Path, rep: Reporter, *,
                upload: bool | None, need_upload: bool = False) -> Remote | None:
    """Attach the configured remote tier to `store` (None when no remote is configured, or it
    could not be used: that is told once). With `need_upload`, a missing remote or signing key
    is a user error."""
    from ..builder.settings import settings

    cfg = settings(start, url=args.remote, no_remote=args.no_remote, upload=upload,
                   signing_key=args.signing_key, trusted_keys=args.trusted_key)
    for warning in cfg.warnings:
        rep.warning(warning)
    if cfg.url is None:
        if need_upload or upload is False:
            raise UserError("no remote cache is configured",
                            hint="pass --remote URL, set UDO_BUILD_REMOTE, or 'url' under "
                                 "[remote] in udo-build.toml")
        return None
    trusted = _trusted(cfg.trusted_keys)
    signing = _signing_key(cfg, rep, need_upload) if cfg.upload or need_upload else None
    if not trusted and signing is None:
        rep.warning(Problem(f"remote cache {cfg.url}: no trusted keys, so none of its entries "
                            "can be used; not using it",
                            hint="add the writers' public keys to trusted_keys (or "
                                 "--trusted-key, UDO_BUILD_TRUSTED_KEYS)"))
        return None
    from ..store.httpcache import HttpCache, RemoteOptions
    from ..store.remote import Remote
    from ..store.trust import trusted_set

    options = RemoteOptions(connect_timeout=cfg.connect_timeout, read_timeout=cfg.read_timeout,
                            retries=cfg.retries, max_failures=cfg.max_failures)
    try:
        http = HttpCache(cfg.url, options)
    except ValueError as exc:
        raise UserError(str(exc), field="remote URL") from None
    remote = Remote(store.cas, store.ac, http, trusted_set(trusted), store.counters,
                    signing_key=signing, warn=rep.warning)
    store.attach_remote(remote)
    return remote


def _trusted(lines: tuple[tuple[str, str], ...]) -> list[Any]:
    from ..builder.settings import ENV_TRUSTED
    from ..store.trust import parse_public_key

    keys = []
    for line, where in lines:
        try:
            keys.append(parse_public_key(line))
        except ValueError as exc:
            if where in ("--trusted-key", f"${ENV_TRUSTED}"):
                raise UserError(f"{where}: {exc}") from None
            raise UserError(str(exc), file=where, field="remote.trusted_keys") from None
    return keys


def _signing_key(cfg: Any, rep: Reporter, need: bool) -> Any:
    from ..store.trust import load_signing_key

    if cfg.signing_key is None:
        problem = Problem("uploads are on, but no signing key is set: not uploading",
                          hint="pass --signing-key FILE, set UDO_BUILD_SIGNING_KEY, or "
                               "'signing_key' under [remote] (see 'udo-build key generate')")
        if need:
            raise UserError(problem.message.replace(": not uploading", ""), hint=problem.hint)
        rep.warning(problem)
        return None
    key = load_signing_key(cfg.signing_key)
    try:
        loose = os.stat(cfg.signing_key).st_mode & 0o077
    except OSError:
        loose = 0
    if loose:
        rep.warning(Problem("the private signing key is readable by other users",
                            file=str(cfg.signing_key), hint="chmod 600 it"))
    return key


def remote_summary(store: Store) -> dict[str, Any] | None:
    """What the remote tier did in this process (None without one), for --json summaries."""
    remote = store.remote
    if remote is None:
        return None
    c = store.counters
    return {"url": remote.url, "hits": c.remote_hits, "misses": c.remote_misses,
            "incomplete": c.remote_incomplete, "bytes_downloaded": c.bytes_downloaded,
            "blobs_downloaded": c.blobs_downloaded, "bytes_uploaded": c.bytes_uploaded,
            "blobs_uploaded": c.blobs_uploaded, "entries_uploaded": c.entries_uploaded,
            "rejected": dict(sorted(c.rejected.items())), "errors": c.remote_errors,
            "disabled": remote.http.disabled, "uploading": remote.uploading,
            "warnings": list(remote.warnings)}


def remote_line(summary: dict[str, Any]) -> str:
    """One line for people: what the remote tier did in a build."""
    from .store import human_size

    parts = [f"{summary['hits']} hits", f"{summary['misses']} misses"]
    if summary["bytes_downloaded"]:
        parts.append(f"{human_size(summary['bytes_downloaded'])} downloaded")
    if summary["entries_uploaded"] or summary["bytes_uploaded"]:
        parts.append(f"{summary['entries_uploaded']} entries "
                     f"({human_size(summary['bytes_uploaded'])}) uploaded")
    rejected = sum(summary["rejected"].values())
    if rejected:
        parts.append(f"{rejected} refused")
    state = "; disabled after failures" if summary["disabled"] else ""
    return f"remote cache {summary['url']}: {', '.join(parts)}{state}"
