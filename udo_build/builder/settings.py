"""Where the remote cache settings come from: options, environment, config files.

    [remote]                       # in udo-build.toml or .udo-build/config.toml of the project,
    url = "http://cache:8080/udo"  # or ~/.config/udo-build/config.toml ($XDG_CONFIG_HOME)
    upload = false                 # upload what this machine builds (on with --ci)
    signing_key = "~/.config/udo-build/signing-key"   # relative: to the config file's folder
    trusted_keys = ["ci-1:Zm9v..."]                   # whose entries to accept
    connect_timeout = 2.0          # seconds
    read_timeout = 5.0             # seconds, each read
    retries = 2                    # more attempts of a failed request
    max_failures = 3               # failed attempts in a row that disable the remote

An option beats the environment (UDO_BUILD_REMOTE, UDO_BUILD_REMOTE_UPLOAD,
UDO_BUILD_SIGNING_KEY, UDO_BUILD_TRUSTED_KEYS), which beats the project's file, which beats the
user's. `trusted_keys` are the union of all of them. The project's file is looked for from the
recipe's folder up to the project folder. Nothing is read or imported when no file exists.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import Problem, UserError

PROJECT_FILES = ("udo-build.toml", ".udo-build/config.toml")
USER_FILE = "udo-build/config.toml"
ENV_URL = "UDO_BUILD_REMOTE"
ENV_UPLOAD = "UDO_BUILD_REMOTE_UPLOAD"
ENV_SIGNING_KEY = "UDO_BUILD_SIGNING_KEY"
ENV_TRUSTED = "UDO_BUILD_TRUSTED_KEYS"

NUMBERS = {"connect_timeout": (float, 0.05, 120.0), "read_timeout": (float, 0.05, 600.0),
           "retries": (int, 0, 10), "max_failures": (int, 1, 1000)}
KEYS = ("url", "upload", "signing_key", "trusted_keys", *NUMBERS)


class RemoteSettings(NamedTuple):  # a NamedTuple: cheaper to define than a dataclass (no-op)
    url: str | None = None
    upload: bool = False
    signing_key: Path | None = None
    trusted_keys: tuple[tuple[str, str], ...] = ()  # (key line, where it was given)
    connect_timeout: float = 2.0
    read_timeout: float = 5.0
    retries: int = 2
    max_failures: int = 3
    files: tuple[str, ...] = ()  # the config files read
    warnings: tuple[Problem, ...] = ()


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
        else:
            changes[name] = _number(name, value, path, where)
    return current._replace(**changes, warnings=tuple(warnings))


def _read_table(path: Path) -> dict[str, Any]:
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
    table = doc.get("remote", {})
    if not isinstance(table, dict):
        raise UserError("must be a table ([remote])", file=str(path), field="remote")
    return table


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
