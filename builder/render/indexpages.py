"""The wheel index pages a lock step was resolved from, and whether each is still what it was.

A page (PEP 503 HTML or PEP 691 JSON, asked for with pip's own Accept header, so the server picks the same
representation pip got) is remembered by its status, its validators (ETag, Last-Modified) and the sha256 of its
body. Checking it again is one conditional GET: `304 Not Modified`, or the same status and body, is unchanged;
anything else (a new body, another status, an error, an answer too large) is changed, so the step is resolved
again. Never trusted to be unchanged when unsure.
"""

from __future__ import annotations

import hashlib
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
          "text/html; q=0.01")  # pip's own (pip/_internal/index/collector.py)
USER_AGENT = "rocm-image-factory lock (conditional index check)"
MAX_PAGE_BYTES = 64 << 20  # download.pytorch.org's torch page is a few MB
TIMEOUT_S = 60.0
MAX_VALIDATOR = 256  # an ETag or a date longer than this is no validator


@dataclass(frozen=True)
class Page:
    """One index page as it was answered: the status, its validators and the sha256 of its body."""

    url: str
    status: int
    etag: str = ""
    last_modified: str = ""
    sha256: str = ""


class _Keep304(urllib.request.HTTPErrorProcessor):
    """A 304 is an answer here, not an error."""

    def http_response(self, request: urllib.request.Request, response):  # type: ignore[no-untyped-def]
        if response.status == 304:
            return response
        return super().http_response(request, response)

    https_response = http_response


_OPENER = urllib.request.build_opener(_Keep304())


def is_page_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.username and not parts.password


def fetch(url: str) -> Page:
    """The page as it is now (no validators sent): what a step resolved by pip is remembered with."""
    status, etag, modified, body = _get(url, {})
    return Page(url, status, etag, modified, hashlib.sha256(body).hexdigest() if body is not None else "")


def unchanged(page: Page) -> bool:
    """One conditional GET: True only for 304, or the same status and body as remembered."""
    headers = {}
    if page.etag:
        headers["If-None-Match"] = page.etag
    if page.last_modified:
        headers["If-Modified-Since"] = page.last_modified
    try:
        status, _, _, body = _get(page.url, headers)
    except OSError:
        return False
    if status == 304:
        return bool(headers)
    return status == page.status and body is not None and hashlib.sha256(body).hexdigest() == page.sha256


def _get(url: str, headers: dict[str, str]) -> tuple[int, str, str, bytes | None]:
    """(status, ETag, Last-Modified, body: None when too large) of one GET; an HTTP error status is an answer."""
    if not is_page_url(url):
        raise OSError(f"not an index page URL: {url!r}")
    request = urllib.request.Request(url, headers={"Accept": ACCEPT, "User-Agent": USER_AGENT,
                                                   "Accept-Encoding": "identity", **headers})
    try:
        response = _OPENER.open(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, "", "", _bounded(exc)
    with response:
        return (response.status, _validator(response.headers.get("ETag")),
                _validator(response.headers.get("Last-Modified")), _bounded(response))


def _bounded(stream: object) -> bytes | None:
    read = getattr(stream, "read", None)
    if read is None:
        return b""
    body: bytes = read(MAX_PAGE_BYTES + 1)
    return body if len(body) <= MAX_PAGE_BYTES else None


def _validator(value: str | None) -> str:
    if not value or len(value) > MAX_VALIDATOR or not value.isprintable() or not value.isascii():
        return ""
    return value


class Checks:
    """Each page checked at most once per run, whichever step asks first (steps share numpy's page); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[Page, threading.Event] = {}
        self._answers: dict[Page, bool] = {}
        self.requests = 0

    def unchanged(self, page: Page) -> bool:
        with self._lock:
            event = self._known.get(page)
            mine = event is None
            if mine:
                event = self._known[page] = threading.Event()
                self.requests += 1
        assert event is not None
        if mine:
            self._answers[page] = False
            try:
                self._answers[page] = unchanged(page)
            finally:
                event.set()
        event.wait()
        return self._answers[page]
