"""Fixtures of the remote-cache tests (registered by tests/store/conftest.py and
tests/cli/conftest.py): a real nginx WebDAV server, signing keys, a clean environment, and
builds of the engine tests' project through `main()` that keep stderr."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from udo_build.cli import main
from udo_build.store.remote.trust import SigningKey, generate

from .nginx import Nginx, nginx_binary

ENV = ("UDO_BUILD_REMOTE", "UDO_BUILD_REMOTE_UPLOAD", "UDO_BUILD_SIGNING_KEY",
       "UDO_BUILD_TRUSTED_KEYS", "UDO_BUILD_STORE")


def start_nginx(folder: Path) -> Nginx:
    binary = nginx_binary()
    if binary is None:
        pytest.skip("nginx is not installed (apt-get install nginx): the remote-cache tests run "
                    "against a real WebDAV server")
    return Nginx(folder, binary).start()


@pytest.fixture
def nginx_server(tmp_path: Path) -> Iterator[Nginx]:
    server = start_nginx(tmp_path / "nginx")
    try:
        yield server
    finally:
        server.kill()


@dataclass(frozen=True)
class Keys:
    writer: SigningKey
    writer_file: Path
    other: SigningKey  # a key nobody trusts
    other_file: Path

    @property
    def public(self) -> str:
        return self.writer.public().line


def write_key(path: Path, key: SigningKey) -> Path:
    path.write_text(key.line + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    folder = tmp_path_factory.mktemp("keys")
    writer, other = generate("ci-1"), generate("intruder")
    return Keys(writer, write_key(folder / "ci.key", writer), other,
                write_key(folder / "other.key", other))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No remote settings from the environment or the user's config files."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def build(project: Any, *extra: str, code: int = 0) -> tuple[dict[str, Any], str]:
    """`udo-build build --json` of an engine-test Project: (summary, stderr)."""
    got, out, err = cli("build", str(project.recipe), "--store", str(project.store), "--out",
                        str(project.out), "-j", "1", "--json", *extra)
    assert got == code, err
    return json.loads(out), err


def executed(summary: dict[str, Any]) -> list[str]:
    return [a["id"] for a in summary["actions"] if a["status"] == "built"]


def out_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".udo-build-manifest.json"}


def entry_files(server: Nginx) -> dict[str, Path]:
    return {p.name: p for p in server.files("ac")}


def chain_key(project: Any, action: str) -> str:
    """The chain key of an action of an engine-test Project (see udo_build.builder.lookahead):
    where a build with uploads files its entry too when it has upstream actions."""
    from udo_build.builder.actions import load_kinds
    from udo_build.builder.lookahead import ChainKeys
    from udo_build.builder.plan import plan_recipe
    from udo_build.errors import Diagnostics
    from udo_build.recipe import load_recipe
    from udo_build.store import Store

    load_kinds()
    store = Store(project.store, create=False)
    try:
        plan = plan_recipe(load_recipe(str(project.recipe), Diagnostics()))
        key = ChainKeys(plan, lambda s: store.files.digest(s.path, kind=s.digest)[0]).key(action)
    finally:
        store.close()
    assert key is not None
    return key
