"""A registry whose every answer a test scripts, on loopback, with every request recorded.

Tests say exactly which request carried which credentials, and what a lying or broken registry answers; real
registries (anonymous, htpasswd, token) are in tests/fakes/registries.py. The `server` fixture is registered for
every test by tests/conftest.py (pytest_plugins): a test takes it as a parameter and imports nothing for it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from builder.registry import retry
from builder.registry.credentials import Credentials
from testkit.serving import POLL_S

FAST = retry.Policy(attempts=3, backoff_s=0.01, total_s=5)
SECRET = "pa55-word"
CREDS = Credentials("alice", SECRET, "test")
BASIC = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
Reply = tuple[int, dict[str, str], bytes]

MANIFEST = json.dumps({"schemaVersion": 2, "config": {"digest": "sha256:" + "c" * 64, "size": 1},
                       "layers": []}).encode()
MANIFEST_HEADERS = {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json",
                    "Docker-Content-Digest": "sha256:" + hashlib.sha256(MANIFEST).hexdigest()}  # what it is


@dataclass
class Seen:
    method: str
    path: str
    auth: str | None
    body: bytes = b""  # what a PUT or POST carried


@dataclass
class Scripted:
    """A registry whose every answer is decided by `answer`, with every request recorded."""

    answer: Callable[[Seen], Reply]
    seen: list[Seen] = field(default_factory=list)
    address: str = ""

    @property
    def auths(self) -> list[str]:
        """Every Authorization header it was sent."""
        return [s.auth for s in self.seen if s.auth]


def oci_error(status: int, code: str, message: str) -> Reply:
    return status, {"Content-Type": "application/json"}, json.dumps(
        {"errors": [{"code": code, "message": message}]}).encode()


def _handler(scripted: Scripted) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def handle_one(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            sent = self.rfile.read(length) if length else b""
            seen = Seen(self.command, self.path, self.headers.get("Authorization"), sent)
            scripted.seen.append(seen)
            status, headers, body = scripted.answer(seen)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_HEAD = do_POST = handle_one

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def serve(answer: Callable[[Seen], Reply]) -> tuple[Scripted, ThreadingHTTPServer]:
    """A scripted registry on a free loopback port, serving from a thread until shut down (benchmarks use it)."""
    scripted = Scripted(answer)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(scripted))
    httpd.daemon_threads = True
    httpd.handle_error = lambda *args: None  # type: ignore[method-assign]  # a client that hung up
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()
    scripted.address = f"127.0.0.1:{httpd.server_address[1]}"
    return scripted, httpd


Start = Callable[[Callable[[Seen], Reply]], Scripted]  # what the server fixture gives: start one, answering so


@pytest.fixture
def server() -> Iterator[Start]:
    """Start scripted registries (as many as a test asks for); all are shut down after the test."""
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Callable[[Seen], Reply]) -> Scripted:
        scripted, httpd = serve(answer)
        servers.append(httpd)
        return scripted

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()
