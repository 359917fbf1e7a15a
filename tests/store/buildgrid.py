"""A real BuildGrid server (REAPI over gRPC) for remote-cache tests and benchmarks.

BuildGrid comes from PyPI, installed as deployed: in a virtual environment of its own (its
dependencies are not udo-build's). Its `bgd` executable is UDO_BUILD_BUILDGRID_BGD, else
DEFAULT_BGD; CI creates it:

    python3 -m venv /opt/buildgrid && /opt/buildgrid/bin/pip install buildgrid

The server runs `bgd server start CONFIG` on a free loopback port, with an in-memory CAS and
action cache (updates allowed) for each instance name, apart (one instance's entries are not
another's); with `jwt_secret`, every call must carry `authorization: Bearer <JWT>` signed with
that secret (HS256, see `token`); with `tls` (server key, server certificate, the CA of client
certificates: PEM files), it serves TLS and asks clients for a certificate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import socket
import subprocess
import time
from pathlib import Path

from .nginx import free_port

DEFAULT_BGD = "/opt/buildgrid/bin/bgd"
INSTANCE = """\
  - name: "{name}"
    services:
      - !action-cache
        cache: *ac{n}
      - !cas
        storage: *cas{n}
      - !bytestream
        storage: *cas{n}
"""


def bgd_binary() -> str | None:
    path = os.environ.get("UDO_BUILD_BUILDGRID_BGD") or DEFAULT_BGD
    return path if Path(path).is_file() and os.access(path, os.X_OK) else None


def config(port: int, instances: tuple[str, ...], secret: Path | None,
           tls: tuple[Path, Path, Path] | None = None) -> str:
    lines = ["server:", "  - !channel", f'    address: "127.0.0.1:{port}"',
             f"    insecure-mode: {'false' if tls else 'true'}"]
    if tls:
        lines += ["    credentials:", f"      tls-server-key: {tls[0]}",
                  f"      tls-server-cert: {tls[1]}", f"      tls-client-certs: {tls[2]}"]
    lines += ["thread-pool-size: 32", "authorization:"]  # calls served at once (default: 5
    # per core, fewer than a build's download threads on a small machine)
    lines += ["  method: jwt", f"  secret: {secret}", "  algorithm: hs256"] if secret \
        else ["  method: none"]
    lines.append("storages:")
    for n in range(len(instances)):
        lines += [f"  - !lru-storage &cas{n}", "    size: 2GB"]
    lines.append("caches:")
    for n in range(len(instances)):
        lines += [f"  - !lru-action-cache &ac{n}", f"    storage: *cas{n}",
                  "    max-cached-refs: 100000", "    allow-updates: true",
                  "    cache-failed-actions: true"]
    lines.append("instances:")
    body = "\n".join(lines) + "\n"
    return body + "".join(INSTANCE.format(name=name, n=n) for n, name in enumerate(instances))


class BuildGrid:
    def __init__(self, prefix: Path, binary: str, *, instances: tuple[str, ...] = ("",),
                 jwt_secret: str | None = None,
                 tls: tuple[Path, Path, Path] | None = None) -> None:
        self.prefix = prefix
        self.binary = binary
        self.instances = instances
        self.jwt_secret = jwt_secret
        self.tls = tls
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        prefix.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"{'grpcs' if self.tls else 'grpc'}://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.prefix / "bgd.log"

    def start(self, timeout: float = 120.0) -> BuildGrid:
        """Start the server and wait until it listens (its imports take seconds)."""
        secret = None
        if self.jwt_secret is not None:
            secret = self.prefix / "jwt.secret"
            secret.write_text(self.jwt_secret)
        conf = self.prefix / "bgd.yml"
        conf.write_text(config(self.port, self.instances, secret, self.tls))
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([self.binary, "server", "start", str(conf)],
                                            stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.prefix)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"bgd exited with {self.process.returncode}: "
                                   f"{self.log.read_text(errors='replace')[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"bgd did not listen on port {self.port} within {timeout} s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


def token(secret: str, subject: str = "udo-build-tests", seconds: float = 3600) -> str:
    """A JWT (HS256) signed with `secret`, valid for `seconds`."""
    def part(doc: dict[str, object] | bytes) -> str:
        raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    head = part({"alg": "HS256", "typ": "JWT"}) + "." + part(
        {"sub": subject, "exp": int(time.time() + seconds)})
    signature = hmac.new(secret.encode(), head.encode(), hashlib.sha256).digest()
    return head + "." + part(signature)
