"""Content hashes: what an image is built from, as one sha256, so equal hashes mean equal inputs.

An image's hash covers the stages it is built through (their instructions, not their names or comments), the
files those stages copy or mount, its labels, and for unlocked local builds every wheel of the wheelhouse its
combination can install (a lock pins the wheels by their own sha256 instead).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from builder.core import scratch, wheels
from builder.core.safefs import read_regular, replace_file
from builder.render.sources import Pins, usable

MAX_CACHE_BYTES = 64 << 20  # a line per wheel ever hashed
_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)

_FROM = re.compile(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE)
_BIND = re.compile(r"--mount=(\S*type=bind\S*)")
_FACTORY_FILES = re.compile(r"(^|,)source=(rif|cells/[^,/]+)(,|$)")  # the smoke program and an image's cell.json


@dataclass(frozen=True)
class Chain:
    names: tuple[str, ...]  # the stages an image is built through, its own last
    text: str  # their instructions, comments and stage names left out


def stage_chains(dockerfile: str) -> dict[str, Chain]:
    """Per stage of a multi-stage Dockerfile, the instructions it is built from, from its base image up."""
    bodies: dict[str, list[str]] = {}
    parents: dict[str, str] = {}
    current: list[str] = []
    for line in dockerfile.splitlines():
        found = _FROM.match(line)
        if found:
            name = found.group(2) or f"#{len(bodies)}"
            parents[name], current = found.group(1), []
            bodies[name] = current
        elif line.strip() and not line.lstrip().startswith("#") and bodies:
            current.append(line)
    chains: dict[str, Chain] = {}
    for name in bodies:
        names, lines = [name], list(bodies[name])
        while parents[names[0]] in bodies:
            names.insert(0, parents[names[0]])
            lines = bodies[names[0]] + lines
        chains[name] = Chain(tuple(names), f"FROM {parents[names[0]]}\n" + "\n".join(lines))
    return chains


def runs_on_context(text: str) -> bool:
    """Whether a RUN depends on the build context (its own bind mount without `from=`, or a COPY or ADD
    without `--from`, or a step installing the factory's files from their folders, before it). BuildKit gives
    each target its own copy of the context, so such a RUN is a separate vertex per target; a COPY alone is
    not a risk: it gives the same bytes however often it runs."""
    copied = False
    for instruction in re.sub(r"\\\n", " ", text).splitlines():
        words = instruction.split(None, 1)
        kind = words[0].upper() if words else ""
        if kind in ("COPY", "ADD") and "--from=" not in instruction:
            copied = True
        elif kind == "RUN":
            binds = [m for m in _BIND.findall(instruction) if "from=" not in m]
            if binds and all(_FACTORY_FILES.search(m) for m in binds):
                copied = True  # installing the factory's own files is a COPY: same bytes however often it runs
            elif copied or binds:
                return True
    return False


def content_hash(text: str, files: dict[str, bytes], labels: dict[str, str], wheelhouse: Path | None = None,
                 pins: Pins = ()) -> str:
    """sha256 over an image's stage chain, the files it copies or mounts, its labels and (unlocked local builds)
    the wheels of its wheelhouse that its combination can install (pins: sources.usable)."""
    digest = hashlib.sha256(text.encode())
    for name in sorted(files):
        digest.update(b"\0" + name.encode() + b"\0" + files[name])
    digest.update(b"\0" + json.dumps(labels, sort_keys=True).encode())
    if wheelhouse is not None:
        digest.update(wheelhouse_digest(wheelhouse, pins).encode())
    return "sha256:" + digest.hexdigest()


def wheelhouse_digest(wheelhouse: Path, pins: Pins = ()) -> str:
    """sha256 over the name and sha256 of every wheel the pins let pip install: a changed wheel changes the
    content hash, one only another combination can install does not."""
    digest = hashlib.sha256()
    for wheel, sha256 in wheel_sha256s(wheelhouse):
        if usable(wheel, pins):
            digest.update(wheel.path.name.encode() + b"\0" + sha256.encode())
    return digest.hexdigest()


@cache
def wheel_sha256s(wheelhouse: Path) -> tuple[tuple[wheels.Wheel, str], ...]:
    """Every wheel of the wheelhouse with its sha256, read once per run: each combination's digest filters this list
    by its pins, so N combinations list the folder and read the cache file once, not N times."""
    cache_file = _digest_cache_file()
    try:
        cached = json.loads(read_regular(cache_file, MAX_CACHE_BYTES))  # a FIFO: not waited on
    except (OSError, ValueError, RecursionError):
        cached = {}
    known: dict[str, str] = {k: v for k, v in cached.items() if isinstance(v, str) and _SHA256.fullmatch(v)} \
        if isinstance(cached, dict) else {}  # a cache is input too: only digests are taken from it
    found = []
    for wheel in wheels.wheels(wheelhouse):  # checked first: a FIFO or a link out is refused, never hashed
        st = wheel.file.stat()
        key = f"{wheel.file}|{st.st_size}|{st.st_mtime_ns}"
        if key not in known:
            known[key] = _file_sha256(wheel)
        found.append((wheel, known[key]))
    with contextlib.suppress(OSError):
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        replace_file(cache_file, json.dumps(known).encode())
    return tuple(found)


def _digest_cache_file() -> Path:
    """Per-wheel digests keyed by path, size and mtime: a 1 GB torch wheel is hashed once, not every run."""
    return scratch.user_cache() / "wheel-sha256.json"


def _file_sha256(wheel: wheels.Wheel) -> str:
    digest = hashlib.sha256()
    with os.fdopen(wheels.open_wheel(wheel), "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
