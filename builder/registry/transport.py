"""HTTP for talking to registries that may be hostile: what urllib does not guard against by default.

- Credentials stay on their origin: a redirect to another scheme, host or port drops `Authorization`; a
  redirect to anything but http(s), or to a Location that is no URL, is refused (builder.registry.redirects).
- Proxies (HTTP(S)_PROXY, NO_PROXY) are honoured as curl does, except that loopback is never proxied, and a
  plain-HTTP request that carries credentials is refused rather than handed to a proxy in cleartext.
- Every body is read up to a size cap, and every request (connect, headers, redirects, body) ends within a
  total deadline: a watchdog shuts the sockets down, so a server dripping one byte every few seconds cannot
  hold a command. Errors are TimeoutError / RegistryError, which builder.registry.retry classifies.
- Digests are `sha256:<64 hex>` and computed from the bytes (`verify_digest`), never taken from a header alone.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
import http.client
import io
import itertools
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import IO, Any, TypeGuard

from builder.registry.address import is_loopback
from builder.registry.errors import RegistryError
from builder.registry.redirects import Redirects

DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
MAX_MANIFEST_BYTES = 4 << 20  # the distribution spec's size registries must accept for a manifest
MAX_BLOB_BYTES = 64 << 20  # configs and SBOMs read through the API (layers are never read this way)
MAX_TOKEN_BYTES = 1 << 20  # a token server's JSON answer
MAX_ERROR_BYTES = 64 << 10  # an error body: only its first OCI error is read
DEADLINE_S = 60.0  # one request, start to last byte (redirects included)
_CHUNK = 64 << 10


def is_digest(value: object) -> TypeGuard[str]:
    """A sha256 digest as registries and records spell it: nothing else reaches a page or a command line."""
    return isinstance(value, str) and DIGEST_RE.fullmatch(value) is not None


def digest_of(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def verify_digest(body: bytes, expected: str | None, what: str) -> str:
    """The body's digest; a RegistryError when expected (a reference, a descriptor, a header) names another."""
    actual = digest_of(body)
    if expected is not None and expected != actual:
        shown = expected if is_digest(expected) else "something that is not a sha256 digest"
        raise RegistryError(f"{what}: the bytes served are {actual}, not {shown}: refused")
    return actual


class _Proxies(urllib.request.ProxyHandler):
    """The environment's proxies, never for loopback, never given a password in cleartext."""

    def proxy_open(self, req: urllib.request.Request, proxy: str, type: str) -> Any:

        if is_loopback(req.host):
            return None  # the next handler connects directly
        if req.type == "http" and req.has_header("Authorization") \
                and not urllib.request.proxy_bypass(req.host):
            raise RegistryError(f"{req.host} is plain HTTP and a proxy is set: the password would reach the proxy "
                                "in cleartext: refused (name the host in NO_PROXY, or use HTTPS)")
        return super().proxy_open(req, proxy, type)


@dataclass
class _Watchdog:
    """Shuts down every socket of one request once its deadline passes."""

    seconds: float
    sockets: list[socket.socket] = field(default_factory=list)
    fired: bool = False
    cancelled: bool = False

    def __post_init__(self) -> None:
        self.end = time.monotonic() + self.seconds
        self._lock = threading.Lock()
        _REAPER.watch(self)

    def remaining(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0 or self.fired:
            raise TimeoutError(f"no complete answer within {self.seconds:g} s")
        return left

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self.sockets.append(sock)
            if self.fired:
                self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self.sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        _REAPER.forget(self)


class _Reaper:
    """One thread fires every request's watchdog at its deadline: a timer thread per request cost a thread start
    (and a wait for it to be scheduled) per request, more than a loopback registry's answer."""

    def reset(self) -> None:
        """Nothing watched, no thread yet: at the start, and in a fork's child (none of the parent's waits)."""
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Watchdog]] = []  # deadline, order, watchdog: the next deadline first
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, dog: _Watchdog) -> None:
        with self._cond:
            heapq.heappush(self._heap, (dog.end, next(self._order), dog))
            if self._thread is None or not self._thread.is_alive():  # a fork's child has the thread object only
                self._thread = threading.Thread(target=self._run, name="rif-registry-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is dog:
                self._cond.notify()  # an earlier deadline than the one the thread sleeps towards

    def forget(self, dog: _Watchdog) -> None:
        with self._cond:
            dog.cancelled = True
            if self._heap and self._heap[0][2] is dog:
                self._cond.notify()  # the thread drops it (and every finished request behind it) now

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                left = self._heap[0][0] - time.monotonic() if self._heap else None
                if left is None or left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)[2]._fire()


_REAPER = _Reaper()
_REAPER.reset()
os.register_at_fork(after_in_child=_REAPER.reset)


def _watched(connection: http.client.HTTPConnection, watchdog: _Watchdog) -> None:
    """Every socket the connection opens (to the server, or to a proxy) is the watchdog's from its first byte:
    a TLS handshake or a CONNECT answered one byte at a time is cut at the deadline too."""
    def create(address: tuple[str, int], timeout: float | None = DEADLINE_S,
               source_address: tuple[str, int] | None = None) -> socket.socket:
        sock = socket.create_connection(address, min(timeout or DEADLINE_S, watchdog.remaining()), source_address)
        watchdog.watch(sock)
        return sock

    connection._create_connection = create  # type: ignore[attr-defined]


class _Http(http.client.HTTPConnection):
    def __init__(self, *args: Any, watchdog: _Watchdog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _watched(self, watchdog)


class _Https(http.client.HTTPSConnection):
    def __init__(self, *args: Any, watchdog: _Watchdog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _watched(self, watchdog)


class _HttpHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_Http, watchdog=_THREAD.watchdog), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_Https, watchdog=_THREAD.watchdog), req)  # the default TLS context


_THREAD = threading.local()  # this thread's opener (and the proxy settings it was made for), its request's watchdog


def _opener() -> urllib.request.OpenerDirector:
    """This thread's opener, made again only when the proxy settings change (making one cost more CPU than a request
    to a nearby registry; a plan sends thousands). Only http(s) handlers: no file:, ftp: or data: URL is opened."""
    key = tuple((k, v) for k, v in os.environ.items() if k[-6:].lower() == "_proxy" or k == "REQUEST_METHOD")
    made = getattr(_THREAD, "opener", None)
    if made is None or made[0] != key:
        opener = urllib.request.OpenerDirector()
        for handler in (_Proxies(), urllib.request.UnknownHandler(), _HttpHandler(), _HttpsHandler(),
                        urllib.request.HTTPDefaultErrorHandler(), Redirects(), urllib.request.HTTPErrorProcessor()):
            opener.add_handler(handler)
        made = _THREAD.opener = (key, opener)
    return made[1]


@dataclass
class Response:
    body: bytes
    headers: dict[str, str]


class CutShort(ConnectionError):
    """An answer that ended before its Content-Length: the connection dropped (retried like one), never a body."""


def _read(stream: Any, limit: int, watchdog: _Watchdog, what: str, cut: bool = False,
          sink: IO[bytes] | None = None, whole: bool = False) -> bytes:
    """At most limit bytes, before the deadline; past the cap a RegistryError (or, with cut, the first limit).
    With a sink, the bytes go there as they come (a multi-GB layer is never held in memory) and none are returned.
    With whole, a body shorter than its Content-Length is CutShort: http.client's read1 ends quietly
    where the connection did, and a plain index or a manifest cut short would otherwise read as a whole one."""
    length = stream.headers.get("Content-Length") if hasattr(stream, "headers") else None
    if not cut and length and length.isdigit() and len(length) < 20 and int(length) > limit:
        raise RegistryError(f"{what}: {int(length)} bytes is more than the {limit} read: refused")
    parts, size = [], 0
    while True:
        watchdog.remaining()
        chunk = stream.read1(_CHUNK) if hasattr(stream, "read1") else stream.read(_CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > limit and cut:
            parts.append(chunk[:limit - size + len(chunk)])
            break
        if size > limit:
            raise RegistryError(f"{what}: more than the {limit} bytes read: refused")
        if sink is not None:
            sink.write(chunk)
        else:
            parts.append(chunk)
    watchdog.remaining()  # a body cut short by the watchdog is no body
    if whole and length and length.isdigit() and len(length) < 20 and size < int(length):
        raise CutShort(f"{what}: the answer ended after {size} of its {int(length)} bytes")
    return b"".join(parts)


def request(req: urllib.request.Request, limit: int, what: str, deadline_s: float | None = None,
            sink: IO[bytes] | None = None) -> Response:
    """Send req (redirects, proxies and credentials as above) and read its answer, capped and in time.

    An HTTP error status raises urllib's HTTPError, its body already read (capped) into memory."""
    watchdog = _Watchdog(DEADLINE_S if deadline_s is None else deadline_s)
    opener = _opener()
    _THREAD.watchdog = watchdog  # what the handlers give each connection they open (redirects included)
    try:
        try:
            with opener.open(req, timeout=watchdog.remaining()) as resp:
                return Response(_read(resp, limit, watchdog, what, sink=sink, whole=req.get_method() != "HEAD"),
                                {k.lower(): v for k, v in resp.headers.items()})
        except urllib.error.HTTPError as exc:
            body = _read(exc, MAX_ERROR_BYTES, watchdog, what, cut=True) if exc.fp is not None else b""
            raise urllib.error.HTTPError(exc.url, exc.code, exc.msg, exc.hdrs, io.BytesIO(body)) from None
        except (OSError, http.client.HTTPException) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if watchdog.fired or isinstance(reason, TimeoutError):  # a socket's timeout ends at the deadline too
                raise TimeoutError(f"{what}: no complete answer within {watchdog.seconds:g} s") from None
            if isinstance(exc, http.client.HTTPException):
                raise ConnectionError(f"{what}: {type(exc).__name__}") from None
            raise
    finally:
        watchdog.cancel()
        _THREAD.watchdog = None
