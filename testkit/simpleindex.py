"""A wheel index on loopback that behaves as PyPI's and download.pytorch.org's do for `builder lock`'s conditional
requests: the simple API (PEP 503 HTML, PEP 691 JSON, chosen by the Accept header), each file's sha256 in its link,
a strong ETag per representation and a Last-Modified per project page, `304 Not Modified` to a request whose
If-None-Match matches (or, without If-None-Match, whose If-Modified-Since is not older than the page: RFC 9110
13.1.3), PyPI's `Cache-Control: max-age=600, public` on pages. It records every request (path, User-Agent,
whether it was conditional, the status sent), so a test can tell pip's requests from the factory's checks.
Every URL starts with a prefix of its own (PyPI's file URLs name the file's hash): another test's index on a reused
port never serves other bytes under a URL pip has cached as immutable.
"""

from __future__ import annotations

import hashlib
import html
import http.server
import json
import re
import secrets
import threading
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path

from testkit.serving import POLL_S

JSON = "application/vnd.pypi.simple.v1+json"
HTML = "application/vnd.pypi.simple.v1+html"


@dataclass(frozen=True)
class Request:
    path: str
    agent: str
    conditional: bool
    status: int


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def choose(accept: str) -> str:
    """The representation the Accept header prefers (PEP 691: JSON, v1 HTML, or legacy text/html)."""
    best, best_q = "text/html", -1.0
    for part in accept.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        q = next((float(p[2:]) for p in params if p.startswith("q=")), 1.0)
        if kind in (JSON, HTML, "text/html") and q > best_q:
            best, best_q = kind, q
    return best if best_q > 0 else "text/html"


class SimpleIndex:
    """The wheels of a folder as a simple index at `url`; `validators=False` serves no ETag nor Last-Modified."""

    def __init__(self, wheels: Path, validators: bool = True) -> None:
        self.wheels, self.validators = wheels, validators
        self.prefix = f"i{secrets.token_hex(6)}"
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.handle(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/{self.prefix}/simple/"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()

    def project_files(self, project: str) -> list[Path]:
        return [w for w in sorted(self.wheels.glob("*.whl")) if normalized(w.name.split("-")[0]) == project]

    def page(self, project: str, kind: str) -> bytes:
        files = [(w.name, hashlib.sha256(w.read_bytes()).hexdigest()) for w in self.project_files(project)]
        at = f"/{self.prefix}/files/{project}"
        if kind == JSON:
            return json.dumps({"meta": {"api-version": "1.1"}, "name": project,
                               "files": [{"filename": n, "url": f"{at}/{n}", "hashes": {"sha256": h}}
                                         for n, h in files]}).encode()
        links = "".join(f'<a href="{at}/{html.escape(n)}#sha256={h}">{html.escape(n)}</a><br/>'
                        for n, h in files)
        return (f'<!DOCTYPE html><html><head><meta name="pypi:repository-version" content="1.1"></head>'
                f"<body>{links}</body></html>").encode()

    def handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        parts = [p for p in h.path.split("?")[0].split("/") if p]
        parts = parts[1:] if parts[:1] == [self.prefix] else []
        conditional = "If-None-Match" in h.headers or "If-Modified-Since" in h.headers
        status, body, headers = 404, b"not found", {"Content-Type": "text/plain"}
        if len(parts) == 3 and parts[0] == "files" and (self.wheels / parts[2]).is_file():
            status, body = 200, (self.wheels / parts[2]).read_bytes()
            headers = {"Content-Type": "application/octet-stream", "Cache-Control": "max-age=365000000, immutable"}
        elif len(parts) == 2 and parts[0] == "simple" and self.project_files(normalized(parts[1])):
            project = normalized(parts[1])
            kind = choose(h.headers.get("Accept", "text/html"))
            status, body = 200, self.page(project, kind)
            headers = {"Content-Type": kind, "Cache-Control": "max-age=600, public", "Vary": "Accept"}
            if self.validators:
                headers["ETag"] = f'"{hashlib.sha256(kind.encode() + body).hexdigest()[:32]}"'
                headers["Last-Modified"] = formatdate(max(w.stat().st_mtime for w in self.project_files(project)),
                                                      usegmt=True)
                if self.not_modified(h, headers["ETag"], headers["Last-Modified"]):
                    status, body = 304, b""
        self.requests_add(Request(h.path, h.headers.get("User-Agent", ""), conditional, status))
        h.send_response(status)
        for name, value in headers.items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    @staticmethod
    def not_modified(h: http.server.BaseHTTPRequestHandler, etag: str, modified: str) -> bool:
        match = h.headers.get("If-None-Match")
        if match is not None:  # weak comparison; If-Modified-Since is then ignored
            return any(t.strip().removeprefix("W/") == etag for t in match.split(",")) or match.strip() == "*"
        since = h.headers.get("If-Modified-Since")
        if since is None:
            return False
        try:
            return parsedate_to_datetime(since) >= parsedate_to_datetime(modified)
        except (TypeError, ValueError):
            return False

    def requests_add(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def seen(self, agent: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if agent in r.agent]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
