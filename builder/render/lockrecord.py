"""The lock an image was built from, as the artifact published with it, and read back from a registry as hostile.

A locked image's inputs are the lock files its own layers were built from (base.txt, the pip locks of its steps,
its OS package locks). Publishing attaches them to the image's manifest as one JSON document (an OCI 1.1 artifact
of MEDIA_TYPE: `{"schemaVersion": 1, "files": {"base.txt": "...", ...}}`), so `builder reproduce` rebuilds an image
from the lock it was published from, not from whatever the checkout locks today.

What a registry serves back is anyone's bytes: it is read bounded (MAX_BYTES), its sha256 checked against the
digest the artifact names, parsed into a typed model (at most MAX_FILES files, each at most MAX_FILE_CHARS), every
file name one a lock can have (NAME: no folder, no `..`), and every file read by its own grammar (lockfile's for
base.txt and the pip locks, ospins' for os-*.txt), before one byte of it is written to a scratch lock folder.
A record whose OS lock says `trusted: yes` for an archive off the loopback is refused as a bad lock file (exit 2,
naming the record, the file and the line); one that says it for a loopback archive is trusted only where the person
running `builder reproduce` allows it (RIF_APT_SNAPSHOT_TRUSTED=yes): a record narrows, never widens.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from builder.core import ospins, safefs
from builder.core.errors import InputError
from builder.core.tags import LABEL_PREFIX
from builder.core.text import printable
from builder.registry import models
from builder.render import lockfile, oslock

MEDIA_TYPE = "application/vnd.rocm-image-factory.lock.v1+json"
TITLE = "lock.json"
MAX_BYTES = 4 << 20  # an image's locks are tens of KB: a few hundred pins and a few hundred OS packages
MAX_FILES = 64  # base, torch, its deps, a family's device and runtime steps, a devel's SDK, three OS steps
MAX_FILE_CHARS = ospins.MAX_BYTES
# A lock file's name as `builder lock` writes them (base.txt, torch.txt, torch-deps.txt, <stage>-device.txt,
# <stage>.txt, os-base.txt, os-devel.txt, os-sdk.txt): one name, no folder, no dot first.
NAME = re.compile(r"[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9_-]+)*\.txt", re.ASCII)
OS_FILES = (oslock.BASE_STEP, oslock.DEVEL_STEP, oslock.SDK_STEP)
ANNOTATIONS = {"snapshot": LABEL_PREFIX + "lock.snapshot", "base": LABEL_PREFIX + "lock.base-snapshot",
               "wheels": LABEL_PREFIX + "lock.wheels", "os": LABEL_PREFIX + "lock.os-packages"}


class RecordError(ValueError):
    """A lock artifact that is not one this factory wrote: refused, with what is wrong."""


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)

    schema_version: Literal[1] = Field(alias="schemaVersion")
    files: dict[Annotated[StrictStr, Field(max_length=200)], Annotated[StrictStr, Field(max_length=MAX_FILE_CHARS)]] \
        = Field(max_length=MAX_FILES)


@dataclass(frozen=True)
class Recorded:
    """An image's lock files by name, as its render read them (OS locks in their canonical text)."""

    files: dict[str, str]

    @property
    def body(self) -> bytes:
        """The artifact's one blob: the same files give the same bytes (and digest)."""
        return json.dumps({"schemaVersion": 1, "files": self.files}, sort_keys=True, separators=(",", ":")).encode()

    @property
    def os_locks(self) -> list[ospins.OsLock]:
        return [ospins.parse(text, Path(name)) for name, text in sorted(self.files.items()) if name in OS_FILES]

    @property
    def snapshot(self) -> str | None:
        """The archive snapshot its OS packages were pinned from (one per lock); None: OS packages unpinned."""
        return next((lock.snapshot for lock in self.os_locks), None)

    @property
    def base_snapshot(self) -> str | None:
        base = self.files.get(lockfile.BASE_FILE)
        return lockfile.snapshot_of(base) if base is not None else None

    @property
    def wheels(self) -> int:
        return sum(len(lockfile.pins_of(text)) for name, text in self.files.items()
                   if name not in OS_FILES and name != lockfile.BASE_FILE)

    @property
    def os_packages(self) -> int:
        return sum(len(lock.packages) for lock in self.os_locks)

    def annotations(self) -> dict[str, str]:
        """Its identity on the artifact's manifest, readable without fetching the blob."""
        found = {"snapshot": self.snapshot, "base": self.base_snapshot, "wheels": str(self.wheels),
                 "os": str(self.os_packages)}
        return {ANNOTATIONS[key]: value for key, value in found.items() if value is not None}

    def summary(self) -> str:
        """`OS snapshot 20261101T000000Z, 16 wheels, 31 OS packages` (and the base's snapshot, when it has one)."""
        snapshot = f"OS snapshot {self.snapshot}" if self.snapshot else "OS packages unpinned"
        base = f", base made from snapshot {self.base_snapshot}" if self.base_snapshot else ""
        return f"{snapshot}{base}, {self.wheels} wheels, {self.os_packages} OS packages"

    def write(self, tree: Path, group: str) -> None:
        """Into tree/<group>/lock/, as `builder lock --out tree` would have left them."""
        for name, text in sorted(self.files.items()):
            safefs.write_inside(tree, f"{group}/{lockfile.LOCK_DIR}/{name}", text.encode())


def parse(body: bytes, digest: str, what: str) -> Recorded:
    """A lock artifact's blob, checked against the digest it was listed under, every file in its grammar; else a
    RecordError naming what (the registry's artifact) and the first thing wrong."""
    if len(body) > MAX_BYTES:
        raise RecordError(f"{what}: {len(body)} bytes, over the {MAX_BYTES} a lock record may have")
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        raise RecordError(f"{what}: its bytes are not {digest}")
    try:
        doc = models.parse(_Doc, body, what)
    except models.ShapeError as exc:
        raise RecordError(str(exc)) from None
    if lockfile.BASE_FILE not in doc.files:
        raise RecordError(f"{what}: it holds no {lockfile.BASE_FILE}")
    for name, text in doc.files.items():
        _check(name, text, what)
    return Recorded(dict(doc.files))


def _check(name: str, text: str, what: str) -> None:
    if not NAME.fullmatch(name) or (name.startswith("os-") and name not in OS_FILES):
        raise RecordError(f"{what}: {name[:80]!r} is no lock file's name")
    where = Path(name)
    try:
        if name in OS_FILES:
            ospins.parse(text, where)
            return
    except ospins.TrustError as exc:  # a record never decides whom apt trusts: a bad lock, exit 2, file and line
        raise ospins.TrustError([replace(p, file=Path(f"{printable(what)}: {name}")) for p in exc.problems]) from None
    except InputError as exc:
        raise RecordError(f"{what}: {exc.problems[0]}") from None
    problems = lockfile.grammar_problems(where, text)
    if problems:
        raise RecordError(f"{what}: {problems[0]}")
