"""What `builder lock --update` resolved last time, kept between nights (`--index-cache DIR`), so that a step whose
index pages did not change is not resolved again.

An entry is one pip step: its key (a hash of everything pip was given: pip's version, the step's requirements,
Python, platforms, index, the earlier steps' pins as constraints), the lock text pip's answer became, and every
index page pip asked for while resolving it (from pip's own log), each remembered as builder.render.indexpages
fetched it just after. Next time the same key is reused only when every page answers `304 Not Modified` (or the
same body): same pages and same constraints give pip the same answer, so nothing is lost by not asking pip.

The folder comes back from a CI cache, so each file is read as hostile input: bounded in size, parsed into
typed records (pydantic, unknown keys refused), its pages held to the step's own index, its lock text held to the
lock grammar and to the step's inputs; a file that fails any of that is a miss (resolved again), never an error.
Files are written whole or not at all (safefs.write_inside). A page can change between pip's fetch and the
one remembered (seconds apart): an entry is therefore reused for 7 to 13 days after pip resolved it (spread by
its key, so a refresh re-resolves a few steps a night, not all in one), then resolved again regardless.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.core import safefs
from builder.core.errors import InputError
from builder.render import indexpages, lockfile

FORMAT: Literal[1] = 1
MAX_ENTRY_BYTES = lockfile.MAX_LOCK_BYTES + (4 << 20)
MAX_PAGES = 4096
DAY_S = 86400.0
MIN_DAYS, SPREAD_DAYS = 7, 7
STEPS_DIR = "steps"


class CachedPage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    url: str = Field(max_length=2048)
    status: int = Field(ge=100, le=599)
    etag: str = Field(default="", max_length=indexpages.MAX_VALIDATOR)
    last_modified: str = Field(default="", max_length=indexpages.MAX_VALIDATOR)
    sha256: str = Field(default="", pattern=r"^([0-9a-f]{64})?$")


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format: Literal[1]
    key: str = Field(pattern=r"^[0-9a-f]{64}$")
    resolved_at: float = Field(ge=0)
    pages: list[CachedPage] = Field(max_length=MAX_PAGES)
    lock: str = Field(max_length=lockfile.MAX_LOCK_BYTES)


Resolver = Callable[[], tuple[str, list[str]]]  # pip's answer: (the lock text, the index pages it asked for)


def step_key(parts: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class LockCache:
    """The cache folder, shared by the combinations resolved at once; the keys it reused and resolved."""

    def __init__(self, folder: Path, clock: Callable[[], float] = time.time) -> None:
        self.folder, self.clock = folder, clock
        self.checks = indexpages.Checks()
        self.reused: set[str] = set()
        self.resolved: set[str] = set()
        self._pages: dict[str, indexpages.Page] = {}
        self._lock = threading.Lock()

    def lock_text(self, key: str, step: lockfile.Step, index: str, resolver: Resolver) -> str:
        """The step's lock text: the entry's when every page it was resolved from is unchanged, else pip's
        (and then remembered)."""
        entry = self._read(key, step, index)
        if entry is not None and all(self.checks.unchanged(_page(p)) for p in entry.pages):
            self.reused.add(key)
            return entry.lock
        text, urls = resolver()
        self.resolved.add(key)
        self._write(key, text, urls, index)
        return text

    def _read(self, key: str, step: lockfile.Step, index: str) -> Entry | None:
        path = self.folder / STEPS_DIR / f"{key}.json"
        try:
            entry = Entry.model_validate_json(safefs.read_regular(path, MAX_ENTRY_BYTES))
        except (OSError, ValueError, ValidationError):
            return None
        if entry.key != key or not self._fresh(entry) or not entry.pages:
            return None
        if not all(_on_index(p.url, index) for p in entry.pages):
            return None
        try:
            if lockfile.grammar_problems(path, entry.lock) or lockfile.inputs_of(entry.lock) != step.inputs:
                return None
        except (InputError, ValueError):
            return None
        return entry

    def _fresh(self, entry: Entry) -> bool:
        days = MIN_DAYS + int(entry.key[:8], 16) % SPREAD_DAYS
        return 0 <= self.clock() - entry.resolved_at < days * DAY_S

    def _write(self, key: str, text: str, urls: list[str], index: str) -> None:
        """Remembered only when every page pip asked for is on the step's index and could be fetched; a cache
        that cannot be written is no error (the next night resolves again)."""
        urls = list(dict.fromkeys(urls))
        if not urls or len(urls) > MAX_PAGES or not all(_on_index(u, index) for u in urls):
            return
        try:
            pages = [self._fetch(u) for u in urls]
        except OSError:
            return
        entry = Entry(format=FORMAT, key=key, resolved_at=self.clock(), lock=text,
                      pages=[CachedPage(url=p.url, status=p.status, etag=p.etag, last_modified=p.last_modified,
                                        sha256=p.sha256) for p in pages])
        try:
            safefs.write_inside(self.folder, f"{STEPS_DIR}/{key}.json", entry.model_dump_json().encode())
        except OSError:
            return

    def _fetch(self, url: str) -> indexpages.Page:
        """A page as it is now, fetched once per run (steps of many combinations read numpy's page)."""
        with self._lock:
            page = self._pages.get(url)
        if page is None:
            page = indexpages.fetch(url)
            with self._lock:
                self._pages[url] = page
        return page

    def prune(self) -> int:
        """Remove the entries no refresh will reuse again (expired, unreadable); the count removed."""
        removed = 0
        folder = self.folder / STEPS_DIR
        if folder.is_symlink() or not folder.is_dir():
            return 0
        for path in folder.glob("*.json"):
            try:
                entry = Entry.model_validate_json(safefs.read_regular(path, MAX_ENTRY_BYTES))
                keep = entry.key == path.stem and self._fresh(entry)
            except (OSError, ValueError, ValidationError):
                keep = False
            if not keep:
                removed += safefs.remove_inside(self.folder, f"{STEPS_DIR}/{path.name}")
        return removed


def _on_index(url: str, index: str) -> bool:
    """A project page of the step's own index: under it, one plain path segment, no query, no `..`."""
    rest = url[len(index):] if url.startswith(index) else ""
    return indexpages.is_page_url(url) and bool(re.fullmatch(r"[A-Za-z0-9._-]+/?", rest)) and ".." not in rest


def _page(p: CachedPage) -> indexpages.Page:
    return indexpages.Page(p.url, p.status, p.etag, p.last_modified, p.sha256)
