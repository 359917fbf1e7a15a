"""Where the remote cache settings (and the executor) come from: options, environment, config
files.

    executor = "dask://scheduler:8786"  # top level: where actions run (default: this machine)

    [remote]                       # in udo-build.toml or .udo-build/config.toml of the project,
    url = "http://cache:8080/udo"  # or ~/.config/udo-build/config.toml ($XDG_CONFIG_HOME)
    upload = false                 # upload what this machine builds (on with --ci)
    signing_key = "~/.config/udo-build/signing-key"   # relative: to the config file's folder
    trusted_keys = ["ci-1:Zm9v..."]                   # whose entries to accept
    connect_timeout = 2.0          # seconds
    read_timeout = 5.0             # seconds, each read; and the window of min_rate
    min_rate = 32768               # bytes per second a transfer keeps up, or it is dropped
    budget = 10.0                  # seconds of failed requests per build, then it is dropped
    retries = 2                    # more attempts of a failed request
    max_failures = 3               # failed attempts in a row that disable reads (or uploads)
    headers = ["Authorization: Bearer ..."]   # and TLS files, the REAPI instance name: see
                                              # remote_access.py

An https remote may also be reached through a proxy (`https_proxy`, `no_proxy`...) and with
`.netrc` credentials: see store/remote/httpclient.py.

An option beats the environment (UDO_BUILD_EXECUTOR, UDO_BUILD_REMOTE, UDO_BUILD_REMOTE_UPLOAD,
UDO_BUILD_SIGNING_KEY, UDO_BUILD_TRUSTED_KEYS, UDO_BUILD_REMOTE_HEADERS), which beats the
project's file, which beats the user's. `trusted_keys` are the union of all of them. The
project's file is looked for from the recipe's folder up to the project folder. Nothing is read
or imported when no file exists.

`open_remote` attaches the tier those settings name to a store (nothing of the remote is
imported unless a URL is configured); `remote_summary` says what it did in this process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import Problem, UserError
from . import remote_access

if TYPE_CHECKING:
    from ..store import Store
    from ..store.remote.tier import Remote

PROJECT_FILES = ("udo-build.toml", ".udo-build/config.toml")
USER_FILE = "udo-build/config.toml"
ENV_URL = "UDO_BUILD_REMOTE"
ENV_UPLOAD = "UDO_BUILD_REMOTE_UPLOAD"
ENV_SIGNING_KEY = "UDO_BUILD_SIGNING_KEY"
ENV_TRUSTED = "UDO_BUILD_TRUSTED_KEYS"
ENV_EXECUTOR = "UDO_BUILD_EXECUTOR"

NUMBERS = {"connect_timeout": (float, 0.05, 120.0), "read_timeout": (float, 0.05, 600.0),
           "min_rate": (int, 1, 1 << 40), "budget": (float, 0.1, 86400.0),
           "retries": (int, 0, 10), "max_failures": (int, 1, 1000)}
KEYS = ("url", "upload", "signing_key", "trusted_keys", *NUMBERS, *remote_access.KEYS)


class RemoteSettings(NamedTuple):  # a NamedTuple: cheaper to define than a dataclass (no-op)
    url: str | None = None
    upload: bool = False
    signing_key: Path | None = None
    trusted_keys: tuple[tuple[str, str], ...] = ()  # (key line, where it was given)
    connect_timeout: float = 2.0
    read_timeout: float = 5.0
    min_rate: int = 32 * 1024
    budget: float = 10.0
    retries: int = 2
    max_failures: int = 3
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request
    ca_bundle: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    instance: str = ""  # the REAPI instance name
    files: tuple[str, ...] = ()  # the config files read
    warnings: tuple[Problem, ...] = ()


class RemoteRequest(NamedTuple):
    """What a command asks of the remote tier (its options); unset fields leave it to the
    environment and the config files."""

    url: str | None = None
    no_remote: bool = False
    upload: bool | None = None  # None: as the config says
    signing_key: str | None = None
    trusted_keys: tuple[str, ...] = ()


class RemoteSummary(NamedTuple):
    """What the remote tier did in this process (for summaries)."""

    url: str
    hits: int
    misses: int
    incomplete: int
    bytes_downloaded: int
    blobs_downloaded: int
    bytes_uploaded: int
    blobs_uploaded: int
    entries_uploaded: int
    rejected: dict[str, int]
    errors: int
    disabled: str | None  # why reads were disabled
    uploading: bool
    warnings: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**self._asdict(), "warnings": list(self.warnings)}


def settings(start: Path | None, *, url: str | None = None, no_remote: bool = False,
             upload: bool | None = None, signing_key: str | None = None,
             trusted_keys: list[str] | tuple[str, ...] = (),
             env: dict[str, str] | None = None) -> RemoteSettings:
    """The remote settings for a build of a recipe in `start` (its folder)."""
    env = dict(os.environ) if env is None else env
    current = RemoteSettings()
    for path in config_files(start, env):
        current = _apply_file(current, path)
    current = _apply_env(current, env)
    current = current._replace(**remote_access.access_env(current.headers, current.ca_bundle,
                                                          env))
    remote_access.check_access(current.client_cert, current.client_key, current.files)
    if url is not None:
        current = current._replace(url=url or None)
    if no_remote:
        current = current._replace(url=None)
    if upload is not None:
        current = current._replace(upload=upload)
    if signing_key:
        current = current._replace(signing_key=Path(signing_key).expanduser())
    extra = tuple((k, "--trusted-key") for k in trusted_keys)
    return current._replace(trusted_keys=current.trusted_keys + extra)


def config_files(start: Path | None, env: dict[str, str]) -> list[Path]:
    """The files that apply, weakest first: the user's, then the project's."""
    found = []
    home = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or "~", ".config")
    user = Path(home).expanduser() / USER_FILE
    if user.is_file():
        found.append(user)
    if start is not None:
        from ..source import find_root

        start = start.resolve()
        root = find_root(start)
        project = []
        for folder in (start, *start.parents):
            project += [folder / name for name in PROJECT_FILES if (folder / name).is_file()]
            if folder == root:
                break
        found += reversed(project)  # the nearest file wins
    return found


def _apply_file(current: RemoteSettings, path: Path) -> RemoteSettings:
    table = _read_table(path)
    changes: dict[str, Any] = {"files": (*current.files, str(path))}
    warnings = list(current.warnings)
    for name, value in table.items():
        where = f"remote.{name}"
        if name not in KEYS:
            warnings.append(Problem(f"unknown setting '{name}' ignored", file=str(path),
                                    field=where, hint="known: " + ", ".join(KEYS)))
        elif name == "url":
            changes["url"] = _string(value, path, where) or None
        elif name == "upload":
            if not isinstance(value, bool):
                raise UserError("must be true or false", file=str(path), field=where)
            changes["upload"] = value
        elif name == "signing_key":
            given = Path(_string(value, path, where)).expanduser()
            changes["signing_key"] = given if given.is_absolute() else path.parent / given
        elif name == "trusted_keys":
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise UserError("must be a list of public keys (strings)", file=str(path),
                                field=where)
            changes["trusted_keys"] = current.trusted_keys + tuple((v, str(path)) for v in value)
        elif name in remote_access.KEYS:
            changes.update(remote_access.access_setting(changes.get("headers", current.headers),
                                                        name, value, path))
        else:
            changes[name] = _number(name, value, path, where)
    return current._replace(**changes, warnings=tuple(warnings))


def executor_setting(start: Path | None, given: str | None = None,
                     env: dict[str, str] | None = None) -> str:
    """Where a build's actions run ("" for this machine, "dask://HOST:PORT"): --executor, else
    $UDO_BUILD_EXECUTOR, else the top-level `executor` of the nearest config file."""
    env = dict(os.environ) if env is None else env
    value, where, field = given, "--executor", None
    if value is None and ENV_EXECUTOR in env:
        value, where = env[ENV_EXECUTOR], f"${ENV_EXECUTOR}"
    for path in [] if value is not None else config_files(start, env):
        found = _read_doc(path).get("executor")
        if found is not None:
            value, where, field = _string(found, path, "executor"), str(path), "executor"
    value = (value or "").strip()
    if value:
        from .executors import check_executor

        problem = check_executor(value)
        if problem is not None:
            raise UserError(problem, file=where if field else None, field=field or where)
    return value


def _read_table(path: Path) -> dict[str, Any]:
    table = _read_doc(path).get("remote", {})
    if not isinstance(table, dict):
        raise UserError("must be a table ([remote])", file=str(path), field="remote")
    return table


def _read_doc(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"the config file cannot be read: {exc.strerror}", file=str(path)) \
            from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"not valid TOML: {exc}", file=str(path)) from None
    return doc


def _string(value: Any, path: Path, where: str) -> str:
    if not isinstance(value, str):
        raise UserError(f"must be a string, not {value!r}", file=str(path), field=where)
    return value


def _number(name: str, value: Any, path: Path | str, where: str) -> float | int:
    kind, low, high = NUMBERS[name]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
        kind is float or isinstance(value, int))
    if not ok or not low <= value <= high:
        what = "a number" if kind is float else "a whole number"
        raise UserError(f"must be {what} from {low} to {high}, not {value!r}", file=str(path),
                        field=where)
    return kind(value)


def _apply_env(current: RemoteSettings, env: dict[str, str]) -> RemoteSettings:
    changes: dict[str, Any] = {}
    if ENV_URL in env:
        changes["url"] = env[ENV_URL].strip() or None
    if env.get(ENV_UPLOAD, "").strip():
        value = env[ENV_UPLOAD].strip().lower()
        if value not in ("1", "0", "true", "false", "yes", "no"):
            raise UserError(f"{ENV_UPLOAD} must be 1 or 0 (true or false), not {value!r}")
        changes["upload"] = value in ("1", "true", "yes")
    if env.get(ENV_SIGNING_KEY, "").strip():
        changes["signing_key"] = Path(env[ENV_SIGNING_KEY].strip()).expanduser()
    words = env.get(ENV_TRUSTED, "").replace(",", " ").split()
    changes["trusted_keys"] = current.trusted_keys + tuple((w, f"${ENV_TRUSTED}") for w in words)
    return current._replace(**changes)


# -- the remote tier ------------------------------------------------------------------------------

Warn = Callable[[Problem], None]


def open_remote(store: Store, start: Path, request: RemoteRequest, warn: Warn, *,
                need_upload: bool = False) -> Remote | None:
    """Attach the configured remote tier to `store` (None when no remote is configured, or it
    could not be used: that is told once). With `need_upload`, a missing remote or signing key
    is a user error."""
    cfg = settings(start, url=request.url, no_remote=request.no_remote, upload=request.upload,
                   signing_key=request.signing_key, trusted_keys=request.trusted_keys)
    for warning in cfg.warnings:
        warn(warning)
    if cfg.url is None:
        if need_upload or request.upload is False:
            raise UserError("no remote cache is configured",
                            hint="pass --remote URL, set UDO_BUILD_REMOTE, or 'url' under "
                                 "[remote] in udo-build.toml")
        return None
    trusted = _trusted(cfg.trusted_keys)
    signing = _signing_key(cfg, warn, need_upload) if cfg.upload or need_upload else None
    if not trusted and signing is None:
        warn(Problem(f"remote cache {cfg.url}: no trusted keys, so none of its entries can be "
                     "used; not using it",
                     hint="add the writers' public keys to trusted_keys (or --trusted-key, "
                          "UDO_BUILD_TRUSTED_KEYS)"))
        return None
    from ..store.remote.connect import open_transport
    from ..store.remote.tier import Remote
    from ..store.remote.transport import RemoteOptions
    from ..store.remote.trust import trusted_set

    options = RemoteOptions(connect_timeout=cfg.connect_timeout, read_timeout=cfg.read_timeout,
                            retries=cfg.retries, max_failures=cfg.max_failures,
                            min_rate=cfg.min_rate, budget=cfg.budget, headers=cfg.headers,
                            ca_bundle=_path(cfg.ca_bundle), client_cert=_path(cfg.client_cert),
                            client_key=_path(cfg.client_key), instance=cfg.instance)
    try:
        transport = open_transport(cfg.url, options)
    except ValueError as exc:  # the URL, or what reaching it needs (proxy, .netrc, TLS files)
        raise UserError(str(exc), field="remote") from None
    remote = Remote(store.cas, store.ac, transport, trusted_set(trusted), store.counters,
                    signing_key=signing, warn=warn)
    store.attach_remote(remote)
    return remote


def _path(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _trusted(lines: tuple[tuple[str, str], ...]) -> list[Any]:
    from ..store.remote.trust import parse_public_key

    keys = []
    for line, where in lines:
        try:
            keys.append(parse_public_key(line))
        except ValueError as exc:
            if where in ("--trusted-key", f"${ENV_TRUSTED}"):
                raise UserError(f"{where}: {exc}") from None
            raise UserError(str(exc), file=where, field="remote.trusted_keys") from None
    return keys


def _signing_key(cfg: RemoteSettings, warn: Warn, need: bool) -> Any:
    from ..store.remote.trust import load_signing_key

    if cfg.signing_key is None:
        problem = Problem("uploads are on, but no signing key is set: not uploading",
                          hint="pass --signing-key FILE, set UDO_BUILD_SIGNING_KEY, or "
                               "'signing_key' under [remote] (see 'udo-build key generate')")
        if need:
            raise UserError(problem.message.replace(": not uploading", ""), hint=problem.hint)
        warn(problem)
        return None
    key = load_signing_key(cfg.signing_key)
    try:
        loose = os.stat(cfg.signing_key).st_mode & 0o077
    except OSError:
        loose = 0
    if loose:
        warn(Problem("the private signing key is readable by other users",
                     file=str(cfg.signing_key), hint="chmod 600 it"))
    return key


def remote_summary(store: Store) -> RemoteSummary | None:
    """What the remote tier did in this process (None without one)."""
    remote = store.remote
    if remote is None:
        return None
    c = store.counters
    return RemoteSummary(
        url=remote.url, hits=c.remote_hits, misses=c.remote_misses,
        incomplete=c.remote_incomplete, bytes_downloaded=c.bytes_downloaded,
        blobs_downloaded=c.blobs_downloaded, bytes_uploaded=c.bytes_uploaded,
        blobs_uploaded=c.blobs_uploaded, entries_uploaded=c.entries_uploaded,
        rejected=dict(sorted(c.rejected.items())), errors=c.remote_errors,
        disabled=remote.transport.disabled, uploading=remote.uploading,
        warnings=tuple(remote.warnings))
