"""bench/_throttle.py, the benchmarks' slow link: bytes arrive whole and in order, at about the
set rate per connection in each direction."""

from __future__ import annotations

import socket
import threading
import time

from .test_bench_smoke import _script


def _server(payload: bytes) -> tuple[socket.socket, threading.Thread]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        got = b""
        while len(got) < len(payload):
            got += conn.recv(1 << 16)
        conn.sendall(got[::-1])  # proves the upload arrived whole, then downloads it
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_throttle_limits_each_direction() -> None:
    throttle = _script("_throttle")
    payload = bytes(range(256)) * 4096  # 1 MiB
    listener, thread = _server(payload)
    rate = 2e6
    with throttle.Throttle("127.0.0.1", listener.getsockname()[1], rate) as proxy:
        started = time.monotonic()
        client = socket.create_connection(("127.0.0.1", proxy.port))
        client.sendall(payload)
        back = bytearray()
        while chunk := client.recv(1 << 16):
            back += chunk
        seconds = time.monotonic() - started
    thread.join(5)
    listener.close()
    assert bytes(back) == payload[::-1]
    ideal = 2 * len(payload) / rate  # up, then down, each at the rate (less one burst each)
    assert seconds >= ideal * 0.8, seconds  # throttled (the upper end is load, not the proxy)
