"""A TCP proxy on loopback in front of a registry that counts the bytes clients send through it: what a
publish uploads (BuildKit's cache export and the engine's push both go through it), each byte as often as it
was sent, where the registry's own storage keeps each blob once."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field

CHUNK = 1 << 20


@dataclass
class CountingProxy:
    """127.0.0.1:<port> -> upstream (HOST:PORT); sent: bytes clients sent upstream, in all."""

    upstream: str
    sent: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))

    def __post_init__(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.getsockname()[1]}"

    def close(self) -> None:
        self._server.close()

    def count(self, n: int) -> None:
        with self._lock:
            self.sent += n

    def _accept(self) -> None:
        host, port = self.upstream.rsplit(":", 1)
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection((host, int(port)))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, counted: bool) -> None:
        try:
            while data := src.recv(CHUNK):
                if counted:  # before it goes on: once the upstream answers, every byte it had is counted
                    self.count(len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
