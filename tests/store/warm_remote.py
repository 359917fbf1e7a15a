"""A remote cache filled by a build with uploads, for the tests that read it back
(registered by tests/store/conftest.py): `warm` (one per test module), `shared` (restored to
what the build uploaded before each test), and the helpers that poison it."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from udo_build.store import ActionResult, Store
from udo_build.store.remote import reapi as R

from ..builder.fakes import fake_kinds
from ..builder.test_engine import Project
from .nginx import Nginx
from .remote_fixtures import ENV, Keys, build, start_nginx


@dataclass
class Warm:
    """A remote filled by a build with uploads (once per module), restored before each test."""

    server: Nginx
    keys: Keys
    source: Project
    summary: dict[str, Any]
    snapshot: Path

    def restore(self) -> None:
        shutil.rmtree(self.server.root)
        shutil.copytree(self.snapshot, self.server.root)

    def key(self, action: str) -> str:
        return next(a["key"] for a in self.summary["actions"] if a["id"] == action)

    def result(self, action: str) -> ActionResult:
        store = Store(self.source.store, create=False)
        result = store.ac.get(self.key(action))
        assert result is not None
        return result

    def entry(self, action: str) -> Path:
        return self.server.root / "ac" / self.key(action)

    def entries(self, action: str) -> list[Path]:
        """The action's entry, and the index entries filed with the same bytes (by its chain
        key: see udo_build.builder.lookahead): poisoning an entry poisons them all."""
        data = self.entry(action).read_bytes()
        return [self.entry(action), *(p for p in self.server.files("ac")
                                      if p != self.entry(action) and p.read_bytes() == data)]

    def blob(self, digest: str) -> Path:
        return self.server.root / "cas" / digest

    def envelope(self, action: str) -> Path:
        """The blob of the signed envelope that the action's entry names."""
        pointer = R.entry_envelope(self.entry(action).read_bytes(), 1 << 20)
        assert isinstance(pointer, R.Pointer), pointer
        return self.blob(pointer.digest)

    def file_entry(self, action: str, data: bytes) -> None:
        """Write `data` as the action's entry, and as its index entries."""
        for entry in self.entries(action):
            write(entry, data)

    def file_envelope(self, action: str, envelope: bytes) -> None:
        """File `envelope` as the action's, as a writer would: the blob, then the entry."""
        digest = hashlib.sha256(envelope).hexdigest()
        write(self.blob(digest), envelope)
        outputs = {n: (o.digest, o.size) for n, o in self.result(action).outputs.items()}
        self.file_entry(action, R.entry_bytes(R.Pointer(digest, len(envelope)), outputs))

    @property
    def read(self) -> list[str]:
        return ["--remote", self.server.url, "--trusted-key", self.keys.public]

    @property
    def write(self) -> list[str]:
        return ["--remote", self.server.url, "--remote-upload", "--signing-key",
                str(self.keys.writer_file)]


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Warm]:
    folder = tmp_path_factory.mktemp("warm")
    with pytest.MonkeyPatch.context() as env, fake_kinds():
        for name in ENV:
            env.delenv(name, raising=False)
        env.setenv("XDG_CONFIG_HOME", str(folder / "xdg-config"))
        server = start_nginx(folder / "nginx")
        try:
            source = Project(folder / "a")
            summary, _ = build(source, "--remote", server.url, "--remote-upload",
                               "--signing-key", str(keys.writer_file))
            shutil.copytree(server.root, folder / "snapshot")
            yield Warm(server, keys, source, summary, folder / "snapshot")
        finally:
            server.kill()


@pytest.fixture
def shared(warm: Warm) -> Iterator[Warm]:
    warm.restore()
    with fake_kinds():
        yield warm


def clone(tmp_path: Path) -> Project:
    """A second checkout of the same project, with an empty store."""
    return Project(tmp_path / "clone")


def write(path: Path, data: bytes) -> None:
    if path.exists():
        path.chmod(0o644)
    path.write_bytes(data)
