"""A real nginx WebDAV server for remote-cache tests and benchmarks.

nginx (Debian's package includes the WebDAV module) runs in the foreground as one process
(`daemon off; master_process off;`), as the current user, on a free loopback port, with its
document root, pid file, logs and temp folders in a private folder. PUT creates the folders it
needs, bodies of any size are accepted; `limit_rate` throttles each response (benchmarks of a
slower link). Start it, `kill()` it (SIGKILL) or `stop()` it; a stopped server can be started
again on the same port and root.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    client_max_body_size 0;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port};
        root {prefix}/root;
        location / {{
            {limit}
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }}
    }}
}}
"""


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Nginx:
    def __init__(self, prefix: Path, binary: str, *, limit_rate: str | None = None) -> None:
        self.prefix = prefix
        self.limit_rate = limit_rate  # e.g. "25m": bytes per second of each response
        self.binary = binary
        self.root = prefix / "root"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        for sub in ("root", "tmp"):
            (prefix / sub).mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> Nginx:
        if self.process is not None and self.process.poll() is None:
            return self  # running
        conf = self.prefix / "nginx.conf"
        limit = f"limit_rate {self.limit_rate};" if self.limit_rate else ""
        conf.write_text(CONF.format(prefix=self.prefix, port=self.port, limit=limit))
        self.process = subprocess.Popen(
            [self.binary, "-c", str(conf), "-p", str(self.prefix), "-e",
             str(self.prefix / "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = (self.prefix / "error.log").read_text(errors="replace")
                raise RuntimeError(f"nginx exited with {self.process.returncode}: {log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"nginx did not listen on port {self.port} within {timeout} s")

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, as a crashed or unplugged cache would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    stop = kill

    def files(self, space: str) -> list[Path]:
        folder = self.root / space
        return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
