"""A fault-injecting HTTP proxy on loopback, between the factory (its own client and dockerd) and a registry.

FaultProxy forwards every request byte for byte to its upstream registry (the Host header is left alone, so
the registry's upload Locations point back at the proxy and dockerd's whole push passes through it), except
the requests matched by one of its rules: a rule names a method and a path pattern, how many matching
requests it takes (or all of them), and what it does to each instead:

- `Fault.server_error()`: 500 with an OCI error body (code UNKNOWN);
- `Fault.disk_full()`: 500 `{"errors":[{"code":"UNKNOWN","message":"... no space left on device"}]}`, what
  distribution answers when its storage is full;
- `Fault.reset()`: the connection is reset (RST, SO_LINGER 0), no answer; `Fault.drop()` closes it (FIN);
- `Fault.stall(seconds)`: the request waits, then goes on to the registry unchanged;
- `Fault.unauthorized(realm)` / `Fault.denied(realm)`: 401 / 403 with a `WWW-Authenticate: Basic realm=...`
  challenge, or with a Bearer challenge that names no realm (realm=False).

Clients here never pipeline (docker's and Python's both wait for a response before the next request on a
connection), so an injected answer never overtakes a forwarded one. An injected answer closes the connection.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Literal

LOOPBACK = "127.0.0.1"
WRITES = frozenset({"PUT", "POST", "PATCH", "DELETE"})


Kind = Literal["respond", "reset", "drop", "stall"]
REASONS = {401: "Unauthorized", 403: "Forbidden", 500: "Internal Server Error", 503: "Service Unavailable"}
DISK_FULL = ("filesystem: write /var/lib/registry/docker/registry/v2/repositories/_uploads/data: "
             "no space left on device")


@dataclass(frozen=True)
class Fault:
    """What happens to a request a rule matches."""

    kind: Kind
    status: int = 0
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    name: str = ""

    @classmethod
    def error(cls, status: int, code: str, message: str, headers: tuple[tuple[str, str], ...] = (),
              name: str = "") -> Fault:
        body = json.dumps({"errors": [{"code": code, "message": message, "detail": None}]}).encode()
        return cls("respond", status, body, headers, name=name or f"{status} {code}")

    @classmethod
    def server_error(cls) -> Fault:
        return cls.error(500, "UNKNOWN", "unknown error: injected by the fault proxy", name="500")

    @classmethod
    def disk_full(cls) -> Fault:
        return cls.error(500, "UNKNOWN", DISK_FULL, name="disk full")

    @classmethod
    def unauthorized(cls, realm: bool) -> Fault:
        return cls.error(401, "UNAUTHORIZED", "authentication required", (_challenge(realm),),
                         name=f"401 {'with' if realm else 'without'} realm")

    @classmethod
    def denied(cls, realm: bool) -> Fault:
        return cls.error(403, "DENIED", "requested access to the resource is denied", (_challenge(realm),),
                         name=f"403 {'with' if realm else 'without'} realm")

    @classmethod
    def reset(cls) -> Fault:
        return cls("reset", name="reset")

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop", name="drop")

    @classmethod
    def stall(cls, seconds: float = 10.0) -> Fault:
        return cls("stall", seconds=seconds, name=f"stall {seconds:g}s")


def _challenge(realm: bool) -> tuple[str, str]:
    if realm:
        return ("WWW-Authenticate", 'Basic realm="rif-faults"')
    return ("WWW-Authenticate", 'Bearer service="rif-faults",scope="repository:x:pull"')  # no realm=


@dataclass
class Rule:
    """Fault the requests whose method and path (query included) match; `times` of them, or all (None)."""

    fault: Fault
    method: str = ".*"  # a regular expression the method must match in full
    path: str = ".*"  # a regular expression searched in the request target (path and query)
    times: int | None = 1
    hits: int = 0

    def take(self, method: str, target: str) -> bool:
        """Whether this request is faulted (counted); called under the proxy's lock."""
        if self.times is not None and self.hits >= self.times:
            return False
        if not re.fullmatch(self.method, method) or not re.search(self.path, target):
            return False
        self.hits += 1
        return True


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    fault: Fault | None  # the fault injected, if one was
    query: str = ""  # the request's query (a finished upload's `digest=`, a mount's `mount=&from=`)


@dataclass
class FaultProxy:
    """127.0.0.1:PORT -> upstream (HOST:PORT), faulting the requests its rules match."""

    upstream: str
    rules: list[Rule] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        host, _, port = self.upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server((LOOPBACK, 0))
        self.address = f"{LOOPBACK}:{self._listener.getsockname()[1]}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    # -- the test's side -------------------------------------------------------------------------------
    def inject(self, fault: Fault, method: str = ".*", path: str = ".*", times: int | None = 1) -> Rule:
        rule = Rule(fault, method, path, times)
        with self._lock:
            self.rules.append(rule)
        return rule

    @contextlib.contextmanager
    def faults(self, *rules: Rule) -> Iterator[list[Rule]]:
        """The rules apply inside the block only; the requests seen are cleared when it starts."""
        with self._lock:
            self.rules[:] = list(rules)
            self.seen.clear()
        try:
            yield list(rules)
        finally:
            with self._lock:
                self.rules.clear()

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
            self.seen.clear()

    @property
    def writes(self) -> list[Seen]:
        """The requests that could change the registry: a dry run or a no-op republish sends none."""
        return [s for s in self.snapshot() if s.method in WRITES]

    def snapshot(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            _close(sock)

    # -- connections -------------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(client,), daemon=True).start()

    def _connection(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._upstream)
        except OSError:
            _close(client)
            return
        with self._lock:
            self._sockets |= {client, upstream}
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        rfile = client.makefile("rb")
        try:
            self._requests(client, rfile, upstream)
        except (OSError, ValueError):
            pass
        finally:
            rfile.close()  # the socket's descriptor closes only once its file is closed too
            _close(upstream)  # its reader thread then closes the client side (unless a fault did already)
            with self._lock:
                self._sockets -= {client, upstream}

    def _requests(self, client: socket.socket, rfile: BinaryIO, upstream: socket.socket) -> None:
        """Request after request: parse line and headers; forward it, or fault it."""
        if rfile.peek(1)[:1] == b"\x16":  # type: ignore[attr-defined]
            # A TLS handshake: answer as a plain-HTTP registry does (Go's net/http), so a client that tries HTTPS
            # first (containerd's pusher, for loopback) sees plain HTTP and falls back to it.
            client.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
            return
        while True:
            line = rfile.readline(65536)
            if not line:
                return
            parts = line.split(b" ")
            if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
                raise ValueError("not HTTP/1.x")
            head, length, chunked = [line], 0, False
            while (header := rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
                head.append(header)
                name, _, value = header.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
                elif name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
                    chunked = True
            head.append(b"\r\n")
            method, target = parts[0].decode("ascii", "replace"), parts[1].decode("ascii", "replace")
            fault = self._match(method, target)
            with self._lock:
                self.seen.append(Seen(method, urllib.parse.urlsplit(target).path, fault,
                                     urllib.parse.urlsplit(target).query))
            if fault is not None and fault.kind == "stall":
                time.sleep(fault.seconds)
            elif fault is not None:
                if fault.kind in ("reset", "drop"):
                    rfile.close()
                    _hang_up(client, reset=fault.kind == "reset")
                    return
                _body(rfile, None, length, chunked)  # read it all: closing on unread data would reset
                _answer(client, fault, method == "HEAD")
                return
            upstream.sendall(b"".join(head))
            _body(rfile, upstream, length, chunked)

    def _match(self, method: str, target: str) -> Fault | None:
        with self._lock:
            for rule in self.rules:
                if rule.take(method, target):
                    return rule.fault
        return None


def _answer(client: socket.socket, fault: Fault, head_only: bool) -> None:
    lines = [f"HTTP/1.1 {fault.status} {REASONS.get(fault.status, 'Error')}",
             "Content-Type: application/json; charset=utf-8", f"Content-Length: {len(fault.body)}",
             "Docker-Distribution-Api-Version: registry/2.0", "Connection: close",
             *(f"{k}: {v}" for k, v in fault.headers)]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else fault.body)
    with contextlib.suppress(OSError):
        client.sendall(data)
        client.shutdown(socket.SHUT_WR)


def _hang_up(client: socket.socket, reset: bool) -> None:
    """Close without an answer: RST (SO_LINGER on, timeout 0) or an orderly FIN."""
    with contextlib.suppress(OSError):
        if reset:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
        else:
            client.shutdown(socket.SHUT_RDWR)
            client.close()


def _body(rfile: BinaryIO, upstream: socket.socket | None, length: int, chunked: bool) -> None:
    """Forward (or, upstream None, read away) a request body given by Content-Length or in chunks."""
    if not chunked:
        _copy(rfile, upstream, length)
        return
    while True:
        size_line = rfile.readline(65536)
        if not size_line:
            raise OSError("client closed mid-chunk")
        _send(upstream, size_line)
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while (trailer := rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
                _send(upstream, trailer)
            _send(upstream, b"\r\n")
            return
        _copy(rfile, upstream, size + 2)  # the chunk and its CRLF


def _copy(rfile: BinaryIO, upstream: socket.socket | None, length: int) -> None:
    while length > 0:
        chunk = rfile.read(min(length, 1 << 20))
        if not chunk:
            raise OSError("client closed mid-body")
        _send(upstream, chunk)
        length -= len(chunk)


def _send(upstream: socket.socket | None, data: bytes) -> None:
    if upstream is not None:
        upstream.sendall(data)


def _pipe(source: socket.socket, dest: socket.socket) -> None:
    try:
        while chunk := source.recv(1 << 20):
            dest.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(dest)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
