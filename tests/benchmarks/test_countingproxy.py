"""The row benchmark's counting proxy: what clients send through it arrives unchanged, and is counted each time."""

from __future__ import annotations

import socket
import threading

from benchmarks.support.countingproxy import CountingProxy


def _echo_server() -> tuple[socket.socket, list[bytes]]:
    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    got.append(data)
                    conn.sendall(b"ok" * len(data))

    threading.Thread(target=serve, daemon=True).start()
    return server, got


def test_bytes_sent_through_are_counted_every_time_and_answers_are_not() -> None:
    server, got = _echo_server()
    proxy = CountingProxy(f"127.0.0.1:{server.getsockname()[1]}")
    try:
        for _ in range(2):  # the same bytes twice: an upload repeated is counted twice
            host, port = proxy.address.split(":")
            with socket.create_connection((host, int(port))) as client:
                client.sendall(b"x" * 100_000)
                answer = b""
                while len(answer) < 200_000:
                    answer += client.recv(65536)
        assert b"".join(got) == b"x" * 200_000
        assert proxy.sent == 200_000
    finally:
        proxy.close()
        server.close()
