"""A real nginx WebDAV server for remote-cache tests and benchmarks.

nginx (Debian's package includes the WebDAV module) runs in the foreground as one process
(`daemon off; master_process off;`), as the current user, on a free loopback port, with its
document root, pid file, logs and temp folders in a private folder. PUT creates the folders it
needs, bodies of any size are accepted; `limit_rate` throttles each response (benchmarks of a
slower link). Start it, `kill()` it (SIGKILL) or `stop()` it; a stopped server can be started
again on the same port and root.
"""

from __future__ import annotations

import http.client
import secrets
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
        location = /.server-id {{ access_log off; return 200 "{token}"; }}
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
    """A loopback port nothing listens on, drawn below Linux's ephemeral range (32768 and up):
    a port the kernel hands out for bind(0) or an outgoing connection can be taken by another
    test worker's client between this check and the server's bind, or while a killed server is
    restarted on it."""
    while True:
        port = secrets.randbelow(32000 - 20000) + 20000
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


class Nginx:
    def __init__(self, prefix: Path, binary: str, *, limit_rate: str | None = None) -> None:
        self.prefix = prefix
        self.limit_rate = limit_rate  # e.g. "25m": bytes per second of each response
        self.binary = binary
        self.root = prefix / "root"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.served = False  # clients know its port from now on
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
        token = secrets.token_hex(8)
        conf.write_text(CONF.format(prefix=self.prefix, port=self.port, limit=limit, token=token))
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
                answer = self._server_id()
            except OSError:
                time.sleep(0.02)
                continue
            if answer == token:
                self.served = True
                return self
            self.kill()  # another server holds the port: this one could not bind
            if self.served:
                raise RuntimeError(f"port {self.port} is held by another server now")
            self.port = free_port()  # never served: any port will do
            return self.start(timeout)
        self.kill()
        raise RuntimeError(f"nginx did not listen on port {self.port} within {timeout} s")

    def _server_id(self) -> str:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            connection.request("GET", "/.server-id")
            return connection.getresponse().read().decode(errors="replace")
        finally:
            connection.close()

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, as a crashed or unplugged cache would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    stop = kill

    def settled_log(self, timeout: float = 10.0) -> str:
        """The access log with a line for every request answered before this call. nginx writes
        a request's line when the request ends, which can be after its client has read the
        whole answer; it ends and logs the requests in the order its one worker handles them,
        so a request of our own, sent now, is logged after every one answered before it: the
        log is complete once our request's line is in it. Ours asks for a path no test uses
        (GET /.settled-<token>, a 404)."""
        marker = f"/.settled-{secrets.token_hex(6)}"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request("GET", marker)
            connection.getresponse().read()
        finally:
            connection.close()
        path = self.prefix / "access.log"
        deadline = time.monotonic() + timeout
        while True:
            text = path.read_text() if path.exists() else ""
            if marker in text:
                return text
            if time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not log {marker} within {timeout} s")
            time.sleep(0.01)

    def access_log(self, lines: int, timeout: float = 10.0) -> str:
        """The access log once it holds at least `lines` requests: nginx writes a request's line
        after the last byte of its answer is handed to the kernel, so a client that has read the
        whole answer can look before the line is there."""
        path = self.prefix / "access.log"
        deadline = time.monotonic() + timeout
        while True:
            text = path.read_text() if path.exists() else ""
            if len(text.splitlines()) >= lines or time.monotonic() > deadline:
                return text
            time.sleep(0.02)

    def files(self, space: str) -> list[Path]:
        folder = self.root / space
        return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
