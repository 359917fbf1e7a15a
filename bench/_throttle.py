"""A loopback TCP proxy that limits each connection's rate in each direction: a remote across a
network, for the remote-cache benchmarks of backends that cannot throttle themselves (nginx
can: `limit_rate`; a gRPC or S3 server cannot).

    with Throttle("127.0.0.1", server_port, 25e6) as proxy:
        ...  # connect to 127.0.0.1:proxy.port instead of the server

Each accepted connection gets one connection to the target and two pump threads; each pump
sends at most `rate` bytes per second (a token bucket refilled continuously, with a burst of
one chunk), so a client opening N connections gets N times the rate, as through nginx's
per-connection `limit_rate`.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

CHUNK = 64 << 10


class Throttle:
    def __init__(self, host: str, port: int, rate: float) -> None:
        self.target = (host, port)
        self.rate = rate
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="throttle")

    def __enter__(self) -> Throttle:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                _shut(sock)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        """Copy src to dst at most `rate` bytes per second; end both ways when one ends."""
        allowance, last = float(CHUNK), time.monotonic()
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                now = time.monotonic()
                allowance = min(float(CHUNK), allowance + (now - last) * self.rate)
                last = now
                allowance -= len(data)
                if allowance < 0:
                    time.sleep(-allowance / self.rate)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(dst)
            _shut(src)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
