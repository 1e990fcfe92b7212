"""Run records as the catalog reads them: tolerant of old and hostile files, strict about types."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from builder.core import safefs
from builder.core.text import printable
from builder.registry.client import Manifest
from builder.registry.models import ImageConfig
from builder.registry.transport import is_digest
from builder.validate.runner import Check

DEFAULT_REPOSITORY = "pytorch"
MARKER = ".rif-catalog.json"  # names the files a previous catalog wrote into --out, so a rerun replaces them
MAX_DOCKERFILE_BYTES = 1 << 20
MAX_STEP_CHARS = 400  # a build step's command, as the image's history records it, is cut here
CHECK_STATUSES = frozenset({"pass", "fail", "skip", "warn", "info"})
REPOSITORY_RE = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")
CHART_WIDTH = 520  # px of the longest bar
MAX_BAKE_BYTES = 16 << 20  # a bake file of thousands of targets is a few MB
MAX_RECORD_BYTES = 16 << 20  # a run record of hundreds of images, each with its checks and packages, is a few MB
# (JSON of tiny objects takes ~30 times its size in memory: 64 MiB of them was a 1.7 GB catalog)
MAX_ROW_TAG_CHARS = 256  # a tag is at most 128 characters; a repository path a few dozen
MAX_ROW_ITEMS = 5000  # checks or packages of one row: a page lists them all (an image has a few hundred)
MAX_ROW_WARNINGS = 100  # per record file: a file of a million bad rows is not a million warnings
MAX_INT = 1 << 53  # sizes and seconds: exact in a float, far beyond any image



@dataclass(frozen=True)
class Reference:
    """A published size of one of AMD's rocm/pytorch images, for comparison, with where it was reported."""

    label: str
    size_bytes: int
    kind: str  # compressed | installed
    source: str
    url: str


# AMD's rocm/pytorch images as their users measured them (decimal GB).
REFERENCES = (
    Reference("rocm/pytorch ROCm 7.2.4, PyTorch 2.10", 10_390_000_000, "compressed", "ROCm/ROCm-docker#166",
              "https://github.com/ROCm/ROCm-docker/issues/166"),
    Reference("rocm/pytorch ROCm 7.14, PyTorch 2.10", 19_140_000_000, "compressed", "ROCm/ROCm-docker#166",
              "https://github.com/ROCm/ROCm-docker/issues/166"),
    Reference("rocm/pytorch ROCm 10.0, PyTorch 2.12", 20_190_000_000, "compressed", "ROCm/ROCm-docker#166",
              "https://github.com/ROCm/ROCm-docker/issues/166"),
    Reference("rocm/pytorch (2023 tags, smallest)", 29_200_000_000, "installed", "ROCm/ROCm-docker#104",
              "https://github.com/ROCm/ROCm-docker/issues/104"),
    Reference("rocm/pytorch rocm5.4.2 pytorch 2.0.0 preview", 37_500_000_000, "installed", "ROCm/ROCm-docker#104",
              "https://github.com/ROCm/ROCm-docker/issues/104"),
    Reference("rocm/pytorch:latest (Dec 2023)", 54_000_000_000, "installed", "ROCm/ROCm-docker#120",
              "https://github.com/ROCm/ROCm-docker/issues/120"),
)


class RegistryReader(Protocol):
    """What the catalog reads from a registry (builder.registry.client.RegistryClient; a fake in tests)."""

    def tags(self, repository: str) -> list[str]: ...

    def manifest(self, repository: str, reference: str) -> Manifest | None: ...

    def config(self, repository: str, manifest: Manifest) -> ImageConfig: ...


# -- run records ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RecordRow:
    """One image of one run record, every field checked for its type (a record is data from outside)."""

    tag: str
    repository: str
    tags: tuple[str, ...]
    state: str
    finished: str  # when its record was written: the newest row wins
    registry: str | None = None
    immutable_tag: str | None = None
    content_hash: str | None = None
    digest: str | None = None
    failed_stage: str | None = None
    failure: str | None = None
    image_bytes: int | None = None
    compressed_bytes: int | None = None
    build_seconds: float | None = None
    validation: tuple[Check, ...] = ()
    packages: tuple[str, ...] = ()  # `name==version` lines, where a record carries them
    source: str = ""  # the record file
    published_at: str | None = None  # when a run pushed this build (its record's time): the catalog's "Published"

    @property
    def published_time(self) -> str | None:
        """When this build reached the registry, as far as this row knows."""
        return self.published_at or (self.finished or None if self.state == "published" else None)

    def as_json(self) -> dict[str, Any]:
        """Back into the record's own row format, so a catalog's records.json can be read as a record."""
        return {"tag": self.tag, "repository": self.repository, "tags": list(self.tags), "state": self.state,
                "immutable_tag": self.immutable_tag, "content_hash": self.content_hash, "digest": self.digest,
                "failed_stage": self.failed_stage, "failure": self.failure, "image_bytes": self.image_bytes,
                "compressed_bytes": self.compressed_bytes, "build_seconds": self.build_seconds,
                "validation": [c.__dict__ for c in self.validation], "packages": list(self.packages),
                "finished": self.finished, "published_at": self.published_time}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    """A size or count: a non-negative int no larger than MAX_INT (10**400 would overflow every float)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT else None


def _float(value: object) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not -MAX_INT <= value <= MAX_INT:
        return None
    return float(value) if math.isfinite(value) else None


def _digest(value: object) -> str | None:
    """Only a sha256 digest reaches a page or a `docker pull` line."""
    return value if is_digest(value) else None


def _strs(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _checks(value: object) -> tuple[Check, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(Check(str(c.get("suite", "")), str(c.get("name", "")), str(c.get("status", "")),
                       str(c.get("detail", "") or ""), str(c.get("fix", "") or ""))
                 for c in value if isinstance(c, dict))


def _packages(value: object) -> tuple[str, ...]:
    """`["torch==2.13.0", ...]` or `[{"name": ..., "version": ...}, ...]`."""
    if not isinstance(value, list):
        return ()
    found = []
    for p in value:
        if isinstance(p, str):
            found.append(p)
        elif isinstance(p, dict) and isinstance(p.get("name"), str):
            found.append(f"{p['name']}=={p.get('version', '?')}")
    return tuple(found)


def _row_problem(row: object) -> str | None:
    """Why a record's row is no image row the catalog can use; None when it is one."""
    if not isinstance(row, dict):
        return "not an object"
    tag, repository = row.get("tag"), row.get("repository", DEFAULT_REPOSITORY)
    if not isinstance(tag, str) or not tag or len(tag) > MAX_ROW_TAG_CHARS:
        return "no tag"
    if repository is not None and not (isinstance(repository, str) and len(repository) <= MAX_ROW_TAG_CHARS
                                       and REPOSITORY_RE.fullmatch(repository)):
        return f"repository {printable(str(repository)[:80])!r} is not a repository name"
    return None


def parse_record(data: object, source: str, warnings: list[str] | None = None) -> list[RecordRow]:
    """The rows of one record (builder/publish/record.py's format). A row that is no image row (no tag, a
    repository that is no repository name: `../../x`, `PyTorch`) costs that row, with a warning."""
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise ValueError("not a run record (no `images` list)")
    finished, registry = _str(data.get("finished")) or "", _str(data.get("registry"))
    rows, skipped = [], []
    for number, row in enumerate(data["images"]):
        problem = _row_problem(row)
        if problem is not None:
            skipped.append(f"{source}: images[{number}]: {problem}: row skipped")
            continue
        assert isinstance(row, dict)
        rows.append(RecordRow(
            tag=row["tag"], repository=_str(row.get("repository")) or DEFAULT_REPOSITORY,
            tags=_strs(row.get("tags")), state=_str(row.get("state")) or "unknown",
            finished=_str(row.get("finished")) or finished, registry=registry,
            immutable_tag=_str(row.get("immutable_tag")), content_hash=_str(row.get("content_hash")),
            digest=_digest(row.get("digest")), failed_stage=_str(row.get("failed_stage")),
            failure=_str(row.get("failure")), image_bytes=_int(row.get("image_bytes")),
            compressed_bytes=_int(row.get("compressed_bytes")), build_seconds=_float(row.get("build_seconds")),
            validation=_checks(row.get("validation"))[:MAX_ROW_ITEMS],
            packages=_packages(row.get("packages"))[:MAX_ROW_ITEMS], source=source,
            published_at=_str(row.get("published_at"))))
    if warnings is not None and skipped:
        warnings += skipped[:MAX_ROW_WARNINGS]
        if len(skipped) > MAX_ROW_WARNINGS:
            warnings.append(f"{source}: {len(skipped) - MAX_ROW_WARNINGS} more rows skipped")
    return rows


def record_files(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a directory stands for every *.json under it."""
    found: list[Path] = []
    for path in paths:
        found += sorted(p for p in path.rglob("*.json") if p.is_file() and not p.is_symlink()) \
            if path.is_dir() else [path]
    return found


def load_records(paths: Iterable[Path]) -> tuple[list[RecordRow], list[str]]:
    """Every row of every record, and a warning per file that is not one (a catalog is still worth making)."""
    rows: list[RecordRow] = []
    warnings: list[str] = []
    paths = list(paths)
    named = set(paths)
    for path in record_files(paths):
        try:  # a file named on the command line may be a link; what a folder holds is read without following
            data = safefs.read_regular(path, MAX_RECORD_BYTES, follow=path in named)
            rows += parse_record(json.loads(data.decode("utf-8")), str(path), warnings)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
            warnings.append(f"{path}: skipped: {_why(exc)}")
    return rows, warnings


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, MemoryError):
        return "too big to read in memory"
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]


# -- what the registry holds ---------------------------------------------------------------------------------
