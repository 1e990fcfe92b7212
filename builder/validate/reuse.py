"""A validation that passed, kept so that the next run of the same image takes it instead of running it again.

What a validation says is decided by: the image's content (its ID, the digest of its config, which names every
layer), what it is held to (the cell's expectations and labels), the checks themselves (this builder's code, the
Python and the pytest, testinfra and docker versions that run them) and the engine that starts the containers
(its ID, version, kernel, runtime). When every one of those is the same as a pass on record, the checks would
start the same three containers on the same bytes and say the same thing: `builder build` then `builder publish`
of one image, a rerun after a push failed, a second build of an unchanged cell. A ROCm image starts its
containers on several GB, so each pass repeated costs a runner minutes. A build's pass is kept for `builder push
IMAGE` of the same image too, when the matrix's labels agree with the image's cell.json (keys_of).

What is never reused: a failure (never kept), a validation with --gpu (the host's GPUs and driver change under an
unchanged image), the Apptainer part (run whenever asked), and `builder test` or `--revalidate`, which always run
the checks (and keep their pass). The run record says when a validation was taken from here
(`validation_reused`: when it ran).

The folder is the user's cache (XDG_CACHE_HOME), so each file is read as hostile input: bounded in size, parsed
into a typed entry (pydantic, strict, unknown keys refused), held to its own key and to passing checks; a file
that fails any of that is a miss (the checks run), never an error. Entries are written whole (safefs.write_inside);
the oldest of them go past MAX_ENTRIES, and nothing else in the folder is touched.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import stat
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import docker
from docker.errors import DockerException
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.core import safefs, scratch, tags
from builder.registry import transport
from builder.validate.runner import Check, ValidationResult

FORMAT: Literal[1] = 1
MAX_ENTRY_BYTES = 32 << 20  # the checks and the SBOM's facts (a ROCm image's OS and Python package lists)
MAX_CHECKS = 1000
MAX_ENTRIES = 512
MAX_AGE_S = 30 * 86400.0
ENGINE_FACTS = ("ID", "ServerVersion", "KernelVersion", "OperatingSystem", "Architecture", "DefaultRuntime",
                "CgroupVersion", "CgroupDriver", "SecurityOptions")
RUNNERS = ("pytest", "pytest-testinfra", "docker")  # the packages that run the checks from the host
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.json")


class KeptCheck(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    suite: str = Field(max_length=64)
    name: str = Field(max_length=256)
    status: Literal["pass", "skip", "warn", "info"]  # a kept validation passed: no check in it failed
    detail: str = Field(default="", max_length=4096)
    fix: str = Field(default="", max_length=4096)


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format: Literal[1]
    key: str = Field(pattern=r"^[0-9a-f]{64}$")
    image_id: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    validated_at: float = Field(ge=0)
    seconds: float = Field(ge=0)
    checks: list[KeptCheck] = Field(min_length=1, max_length=MAX_CHECKS)
    facts: dict[str, Any]


@dataclass(frozen=True)
class Kept:
    """A pass taken from the folder: its checks, the SBOM's facts read beside them, and when it ran."""

    result: ValidationResult
    facts: dict[str, Any]
    validated_at: str  # UTC, ISO 8601


def folder() -> Path:
    return scratch.user_cache() / "validations"


def keys_of(client: docker.DockerClient, image_id: str, expect: dict[str, Any],
            labels: dict[str, str] | None) -> list[str]:
    """The key a pass is looked up under, then any other key the same pass answers for; [] when the engine cannot
    say what it is (nothing is then kept or reused).

    A pass held to the matrix's labels (build, publish) answers too for the same image held to the labels its own
    cell.json decides (`builder push IMAGE` has no matrix): the pass proved the image carries every one of those
    labels, so when they agree with the expectations the checks would say the same."""
    if not transport.DIGEST_RE.fullmatch(image_id):
        return []
    engine = _engine(client)
    if engine is None:
        return []
    held = [labels]
    if labels is not None and not tags.labels_against_cell(labels, expect):
        held.append(None)
    return [_key(image_id, expect, each, engine) for each in held]


def _key(image_id: str, expect: dict[str, Any], labels: dict[str, str] | None, engine: dict[str, Any]) -> str:
    parts = {"image": image_id, "expect": expect, "labels": labels, "checks": checks_version(), "engine": engine}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _engine(client: docker.DockerClient) -> dict[str, Any] | None:
    try:
        info = client.info()
    except (DockerException, OSError):
        return None
    if not isinstance(info, dict) or not info.get("ID"):
        return None
    return {name: info.get(name) for name in ENGINE_FACTS}


@functools.cache
def checks_version() -> str:
    """A digest of the code that validates (this builder's modules and data: the suite reads the OS families and
    labels from them) and of what runs it."""
    digest = hashlib.sha256(sys.version.encode())
    for name in RUNNERS:
        try:
            digest.update(f"\0{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"\0{name}=none".encode())
    package = Path(__file__).resolve().parents[1]
    for path in sorted(p for p in package.rglob("*") if p.suffix in {".py", ".yaml", ".ini"} and p.is_file()):
        digest.update(b"\0" + str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def find(key: str, image_id: str, now: float | None = None) -> Kept | None:
    """The pass kept under key, or None (none, too old, or a file that is not one of ours in every detail)."""
    try:
        entry = Entry.model_validate_json(safefs.read_regular(folder() / f"{key}.json", MAX_ENTRY_BYTES))
    except (OSError, ValueError, ValidationError, RecursionError):
        return None
    age = (time.time() if now is None else now) - entry.validated_at
    if entry.key != key or entry.image_id != image_id or not 0 <= age < MAX_AGE_S:
        return None
    checks = [Check(c.suite, c.name, c.status, c.detail, c.fix) for c in entry.checks]
    result = ValidationResult(image_id, checks, entry.seconds)
    if not result.ok:
        return None
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(entry.validated_at))
    return Kept(result, entry.facts, when)


def keep(keys: list[str], image_id: str, result: ValidationResult, facts: dict[str, Any] | str | None) -> None:
    """Keep a pass under each of keys (with the facts read beside it, which the SBOM is made from): checked into an
    entry once, written once per key, the folder trimmed once. A failure, a pass without its facts, or a folder
    that cannot be written keeps nothing (the next run validates again)."""
    if not keys or not result.ok or not isinstance(facts, dict):
        return
    try:
        entry = Entry(format=FORMAT, key=keys[0], image_id=image_id, validated_at=time.time(),
                      seconds=round(result.seconds, 3), facts=facts,
                      checks=[KeptCheck(suite=c.suite, name=c.name, status=c.status,  # type: ignore[arg-type]
                                        detail=c.detail, fix=c.fix) for c in result.checks])
        bodies = {key: entry.model_copy(update={"key": key}).model_dump_json().encode() for key in keys}
    except (ValidationError, ValueError, TypeError):
        return
    for key, body in bodies.items():
        if len(body) > MAX_ENTRY_BYTES:
            return
        try:
            safefs.write_inside(folder(), f"{key}.json", body)
        except OSError:
            return
    _trim(folder())


def _trim(where: Path) -> None:
    """The oldest entries past MAX_ENTRIES go; only regular files named as this module names them."""
    try:
        found = [(p.name, p.lstat()) for p in where.iterdir() if _ENTRY_NAME.fullmatch(p.name)]
    except OSError:
        return
    named = [(info.st_mtime, name) for name, info in found if stat.S_ISREG(info.st_mode)]
    for _, name in sorted(named)[:max(0, len(named) - MAX_ENTRIES)]:
        try:
            safefs.remove_inside(where, name)
        except OSError:
            continue
