"""How a remote cache is reached (part of the [remote] settings, see `settings`): the headers
sent with every request, the TLS files and the REAPI instance name.

    [remote]
    headers = ["Authorization: Bearer <token>", "X-Api-Key: <key>"]
    ca_bundle = "certs/ca.pem"       # PEM CAs to trust (https, grpcs); relative: to this file
    client_cert = "certs/me.pem"     # a client certificate for servers that require one (mTLS)
    client_key = "certs/me.key"      # its key, when it is not in the certificate's file
    instance_name = "main"           # the REAPI instance (gRPC remotes)

`UDO_BUILD_REMOTE_HEADERS` holds more header lines, one per line (newlines, not `;`, separate
them: a value may hold a `;`). A header of the same name given later (the project's file after
the user's, the environment after the files) replaces the earlier one. Without `ca_bundle` the
CA bundle is `$REQUESTS_CA_BUNDLE`, else `$SSL_CERT_FILE`, else the system's. Header values may
be secrets: no error shows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError

ENV_HEADERS = "UDO_BUILD_REMOTE_HEADERS"
ENV_CA = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
FILES = ("ca_bundle", "client_cert", "client_key")
KEYS = ("headers", *FILES, "instance_name")

Headers = tuple[tuple[str, str], ...]


def access_setting(headers: Headers, name: str, value: Any, path: Path) -> dict[str, Any]:
    """The settings' changes that `name = value` of the [remote] table of `path` makes."""
    where = f"remote.{name}"
    if name == "headers":
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise UserError("must be a list of 'Name: value' strings", file=str(path),
                            field=where)
        return {"headers": merge(headers, header_lines(value, str(path), where))}
    if name == "instance_name":
        if not isinstance(value, str):
            raise UserError(f"must be a string, not {value!r}", file=str(path), field=where)
        return {"instance": value}
    if not isinstance(value, str) or not value.strip():
        raise UserError("must be the path of a PEM file (a string)", file=str(path),
                        field=where)
    given = Path(value).expanduser()
    found = given if given.is_absolute() else path.parent / given
    if not found.is_file():
        raise UserError(f"no such file: {found}", file=str(path), field=where,
                        hint="a relative path is relative to the config file's folder")
    return {name: found}


def access_env(headers: Headers, ca_bundle: Path | None, env: dict[str, str]
               ) -> dict[str, Any]:
    """The changes the environment makes: its header lines, its CA bundle when none is set."""
    changes: dict[str, Any] = {}
    if env.get(ENV_HEADERS, "").strip():
        lines = [line for line in env[ENV_HEADERS].splitlines() if line.strip()]
        changes["headers"] = merge(headers, header_lines(lines, None, f"${ENV_HEADERS}"))
    for name in ENV_CA if ca_bundle is None else ():
        if env.get(name, "").strip():
            found = Path(env[name].strip()).expanduser()
            if not found.is_file():
                raise UserError(f"${name}: no such file: {found}",
                                hint="it names the CA bundle (PEM) to trust")
            changes["ca_bundle"] = found
            break
    return changes


def check_access(client_cert: Path | None, client_key: Path | None, files: tuple[str, ...]
                 ) -> None:
    if client_key is not None and client_cert is None:
        raise UserError("client_key is set without client_cert", file=files[-1] if files
                        else None, field="remote.client_key",
                        hint="set client_cert to the PEM client certificate")


def header_lines(lines: list[str], file: str | None, where: str) -> Headers:
    """`Name: value` lines as pairs; a bad one is named by its place, never shown."""
    from ..store.remote.transport import parse_headers

    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(lines):
        try:
            pairs += parse_headers([line], where)
        except ValueError:
            place = f"{where}[{number}]" if file else f"{where}, line {number + 1}"
            raise UserError("a header is 'Name: value' (one line, a name without spaces); "
                            "this one is not (its text is not shown: it may hold a secret)",
                            file=file, field=place) from None
    return tuple(pairs)


def merge(old: Headers, new: Headers) -> Headers:
    """`old` with the headers of `new` replacing those of the same name (any case)."""
    names = {name.lower() for name, _ in new}
    return tuple(p for p in old if p[0].lower() not in names) + new
