"""A PEP 503 simple index of the synthetic wheels, served from the host to the builds, counting downloads.

It listens on loopback: BuildKit's RUN steps run on the host's network (the engine has no bridge), so nothing
is ever served on docker0 or any other address. Wheel files go out with PyPI's
`Cache-Control: max-age=365000000, immutable, public`, so pip's HTTP
cache keeps them exactly as it keeps PyPI's. Every GET of a wheel file is counted: "each wheel downloaded
once per machine" is then a number, not a belief. A random prefix in every URL makes each benchmark run's
RUN steps new to BuildKit (a cold build), however many runs came before.
"""

from __future__ import annotations

import html
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote

from benchmarks.support.rocmwheels import Wheel
from testkit.serving import POLL_S

FILE_CACHE = "max-age=365000000, immutable, public"  # what PyPI sends with every file
PAGE_CACHE = "max-age=600, public"


def normalize(project: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", project).lower()


class WheelIndex:
    """The index: which wheels are visible now, and how often each file was fetched."""

    def __init__(self, wheels: list[Wheel], host: str, prefix: str) -> None:
        self.wheels = {w.filename: w for w in wheels}
        self.visible: set[str] = set()
        self.host, self.prefix = host, prefix
        self.downloads: Counter[str] = Counter()
        self.pings = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The index URL a matrix names (index_urls) and pip is given."""
        return f"http://{self.host}:{self.port}/{self.prefix}/simple"

    def show(self, wheel: Wheel, visible: bool = True) -> None:
        (self.visible.add if visible else self.visible.discard)(wheel.filename)

    def count(self, filename: str) -> None:
        with self._lock:
            self.downloads[filename] += 1

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.downloads)

    def start(self) -> None:
        handler = type("Handler", (_Handler,), {"index": self})
        self._server = ThreadingHTTPServer((self.host, 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": POLL_S}, name="wheel-index",
                         daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def page(self, project: str | None) -> str | None:
        """The root page (project is None) or a project's page; None for a project with no visible wheel."""
        shown = [self.wheels[name] for name in sorted(self.visible)]
        if project is None:
            names = sorted({normalize(w.project) for w in shown})
            return _html("".join(f'<a href="{n}/">{n}</a>\n' for n in names))
        files = [w for w in shown if normalize(w.project) == project]
        if not files:
            return None
        return _html("".join(f'<a href="../../files/{quote(w.filename)}#sha256={w.sha256}">{html.escape(w.filename)}'
                             "</a>\n" for w in files))


def _html(body: str) -> str:
    return f"<!DOCTYPE html>\n<html><body>\n{body}</body></html>\n"


class _Handler(BaseHTTPRequestHandler):
    index: WheelIndex
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the benchmark prints figures, not an access log."""

    def do_GET(self) -> None:
        path = unquote(self.path.split("?", 1)[0])
        prefix = f"/{self.index.prefix}/"
        if not path.startswith(prefix):
            return self._send(404, b"not found\n", "text/plain", PAGE_CACHE)
        rest = path.removeprefix(prefix)
        if rest == "ping":
            self.index.pings += 1
            return self._send(200, b"pong\n", "text/plain", "no-store")
        if rest.startswith("files/"):
            return self._file(rest.removeprefix("files/"))
        if rest == "simple" or (rest.startswith("simple/") and not rest.endswith("/")):
            self.send_response(301)
            self.send_header("Location", f"/{self.index.prefix}/{rest}/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        parts = [p for p in rest.split("/") if p]
        page = self.index.page(normalize(parts[1]) if len(parts) == 2 else None) if parts[:1] == ["simple"] else None
        if page is None:
            return self._send(404, b"not found\n", "text/plain", PAGE_CACHE)
        return self._send(200, page.encode(), "text/html", PAGE_CACHE)

    def _send(self, status: int, body: bytes, content_type: str, cache: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache)
        self.end_headers()
        self.wfile.write(body)

    def _file(self, name: str) -> None:
        wheel = self.index.wheels.get(name)
        if wheel is None or name not in self.index.visible:
            return self._send(404, b"not found\n", "text/plain", PAGE_CACHE)
        self.index.count(name)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(wheel.size))
        self.send_header("Cache-Control", FILE_CACHE)
        self.send_header("ETag", f'"{wheel.sha256}"')
        self.end_headers()
        with Path(wheel.path).open("rb") as fh:
            self.connection.sendfile(fh)
        return None
