"""The lock files: every image's exact inputs (its base image by digest, every wheel by sha256), committed.

They live beside each Dockerfile, at `<tree>/<combination>/lock/`, one file per step that installs
something, so a refresh is a reviewable diff of exactly what moved:

    base.txt               the base image, by digest (and the snapshot it was made from, when `builder base
                           --snapshot` made it)
    torch.txt              torch alone (the largest layer)
    torch-deps.txt         torch's dependencies
    <stage>-device.txt     a GPU family's device packages
    <stage>.txt            the companions and numpy of one runtime image

A pin's hash line may end with `  # size=<bytes>`, the wheel's size as its index gives it, and base.txt may hold one
`# size=<bytes>` line, the base image's compressed size: what builder.publish.sizes plans a runner's disk from.
Locks written before sizes were recorded have neither and still parse.

Each pip file is a requirements file with `--hash` on every line, installed with `--no-deps --require-hashes`:
the files of an image's layers together are its complete resolved wheel set. The first line records what the
file was resolved for; a lock whose inputs differ from what the matrix now asks is stale. This module only
reads and writes the format (render reads it, `builder lock` writes it); resolution is lock.py's job.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from builder.core import ospins, safefs
from builder.core.errors import InputError, Problem

LOCK_DIR = "lock"
BASE_FILE = "base.txt"
_HEADER = "# rif-lock "
_NOTE = "# Written by `builder lock`; refresh with `builder lock --update`, never by hand.\n"
MAX_LOCK_BYTES = 16 << 20  # a lock of a few hundred pins is tens of KB
# The only lines a lock holds after its header (what pip_text and base_text write): a comment, a blank line, a
# pin `NAME==VERSION \` and its one `    --hash=sha256:<64 hex>`; in base.txt, one reference by digest and at most
# one `snapshot: <UTC timestamp>`. Nothing else, so no option (--extra-index-url, --trusted-host, -r FILE), URL or
# marker ever reaches pip.
_PIN = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9.+!_-]{1,64}) \\", re.ASCII)
_HASH = re.compile(r"    --hash=sha256:[0-9a-f]{64}(?:  # size=[0-9]{1,15})?", re.ASCII)
_SIZE_NOTE = "# size="
_BASE_SIZE = re.compile(r"# size=([0-9]{1,15})", re.ASCII)
_COMMENT = re.compile(r"(#[ -\[\]-~]*)?", re.ASCII)  # printable ASCII, no backslash: pip splits lines at \f too
_HEADER_LINE = re.compile(r"# rif-lock [ -~]*", re.ASCII)
_REFERENCE = re.compile(r"[a-z0-9][A-Za-z0-9._/:-]{0,250}@sha256:[0-9a-f]{64}", re.ASCII)
SNAPSHOT_KEY = "snapshot: "  # base.txt: the archive snapshot the base image was made from (builder base --snapshot)
_SNAPSHOT = re.compile(SNAPSHOT_KEY + ospins.TIMESTAMP.pattern, re.ASCII)


@dataclass(frozen=True)
class Step:
    """One installing step of a combination's Dockerfile and what its lock is resolved for."""

    file: str  # the lock file's name in <combination>/lock/
    wants: tuple[str, ...]  # requirements (or, for base.txt, the base image reference)
    python: str = ""  # the Python the wheels are for; empty for the base image
    after: tuple[str, ...] = ()  # lock files of the earlier steps: their pins constrain this one
    no_deps: bool = False  # the step installs its requirements alone (torch, before its dependencies)

    @property
    def inputs(self) -> dict[str, object]:
        return {"for": list(self.wants), "python": self.python}


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: str
    size: int | None = None  # the wheel's bytes, where its index gave them

    def line(self) -> str:
        note = f"  {_SIZE_NOTE}{self.size}" if self.size else ""
        return f"{self.name}=={self.version} \\\n    --hash=sha256:{self.sha256}{note}\n"


class LockProblem(ValueError):
    """A lock that a locked render needs is missing or was resolved for other inputs."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def pip_text(step: Step, pins: list[Pin]) -> str:
    body = "".join(p.line() for p in sorted(pins, key=lambda p: p.name.lower()))
    return f"{_HEADER}{json.dumps(step.inputs, sort_keys=True)}\n{_NOTE}{body}"


def base_text(step: Step, pinned: str, *, snapshot: str | None = None, size: int | None = None) -> str:
    made = f"{SNAPSHOT_KEY}{snapshot}\n" if snapshot else ""
    note = f"{_SIZE_NOTE}{size}\n" if size else ""
    return f"{_HEADER}{json.dumps(step.inputs, sort_keys=True)}\n{_NOTE}{note}{pinned}\n{made}"


def inputs_of(text: str) -> dict[str, object] | None:
    first = text.split("\n", 1)[0]
    if not first.startswith(_HEADER):
        return None
    try:
        data = json.loads(first.removeprefix(_HEADER))
    except (ValueError, RecursionError):  # a header nested 100,000 deep is no header
        return None
    return data if isinstance(data, dict) else None


def pinned_base(text: str) -> str:
    """The digest-pinned reference in a base.txt (its one line that is not a comment)."""
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.startswith("#") and not ln.startswith(SNAPSHOT_KEY)]
    if len(lines) != 1 or "@sha256:" not in lines[0]:
        raise ValueError("base.txt must hold one reference pinned by @sha256:")
    return lines[0]


def snapshot_of(text: str) -> str | None:
    """The snapshot a base.txt says its base image was made from (`builder base --snapshot`); None for any other."""
    found = [ln for ln in text.splitlines() if _SNAPSHOT.fullmatch(ln)]
    return found[0].removeprefix(SNAPSHOT_KEY) if found else None


def pins_of(text: str) -> list[Pin]:
    """The pins of a pip lock file (continuation lines joined)."""
    pins = []
    for entry in text.replace("\\\n", " ").splitlines():
        parts = entry.split()
        if not parts or parts[0].startswith("#"):
            continue
        name, _, version = parts[0].partition("==")
        hashes = [p.removeprefix("--hash=sha256:") for p in parts[1:] if p.startswith("--hash=sha256:")]
        sizes = [int(p.removeprefix("size=")) for p in parts[1:] if p.startswith("size=") and p[5:].isdigit()]
        pins.append(Pin(name, version, hashes[0] if hashes else "", sizes[0] if sizes else None))
    return pins


def recorded_size(text: str) -> int:
    """The bytes a lock records: base.txt's compressed size, or the sum of a pip lock's wheel sizes; 0 when it
    records none (an older lock) or not every pin's."""
    if inputs_of(text) is not None and any(_BASE_SIZE.fullmatch(ln) for ln in text.splitlines()):
        return next(int(m[1]) for ln in text.splitlines() if (m := _BASE_SIZE.fullmatch(ln)))
    pins = pins_of(text)
    return sum(p.size or 0 for p in pins) if pins and all(p.size for p in pins) else 0


def grammar_problems(path: Path, text: str) -> list[Problem]:
    """Each line of a lock that is not what `builder lock` writes, by file and line; none for a good lock."""
    lines = text.split("\n")
    if inputs_of(text) is None or not _HEADER_LINE.fullmatch(lines[0]):
        return [Problem(path, 1, "lock", "the first line is not `# rif-lock {...}`: not a lock `builder lock` wrote")]
    problems, names, references, snapshots, open_pin, sizes = [], set(), 0, 0, 0, 0
    for number, line in enumerate(lines[1:], start=2):
        if open_pin:
            if not _HASH.fullmatch(line):
                problems.append(_bad(path, number, "a pin's line must be followed by `    --hash=sha256:<64 hex>`"))
            open_pin = 0
        elif (pin := _PIN.fullmatch(line)) is not None and path.name != BASE_FILE:
            open_pin = number
            name = re.sub(r"[-_.]+", "-", pin[1]).lower()
            if name in names or not _version(pin[2]):
                problems.append(_bad(path, number, "pinned twice" if name in names else "not a version"))
            names.add(name)
        elif _REFERENCE.fullmatch(line) and path.name == BASE_FILE:
            references += 1
        elif line.startswith(SNAPSHOT_KEY) and path.name == BASE_FILE:
            snapshots += 1
            if not _SNAPSHOT.fullmatch(line) or snapshots > 1:
                problems.append(_bad(path, number, "a second snapshot" if snapshots > 1 else
                                     f"{line[:80]!r} is not `snapshot: <UTC timestamp like 20261101T000000Z>`"))
        elif line.startswith(_SIZE_NOTE) and path.name == BASE_FILE:
            sizes += 1
            if not _BASE_SIZE.fullmatch(line) or sizes > 1:
                problems.append(_bad(path, number, "one `# size=<bytes>` line at most, digits only"))
        elif line.startswith(_SIZE_NOTE):
            problems.append(_bad(path, number, "a size belongs at the end of its pin's hash line"))
        elif not _COMMENT.fullmatch(line):
            problems.append(_bad(path, number, f"{line[:80]!r} is not a pin with its hash (options, includes, URLs "
                                               "and markers are refused)"))
    if open_pin:
        problems.append(_bad(path, open_pin, "a pin without its hash"))
    if path.name == BASE_FILE and references != 1:
        problems.append(_bad(path, len(lines), "base.txt must hold one reference pinned by @sha256:<64 hex>"))
    return problems


def _bad(path: Path, line: int, message: str) -> Problem:
    return Problem(path, line, "lock", message)


def _version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def read_lock(path: Path) -> str:
    """A lock file's text, read as hostile input: a regular file (a link only inside its folder), at most
    MAX_LOCK_BYTES, UTF-8, and in the grammar; else an InputError naming the file (and line)."""
    try:
        text = safefs.read_text(path, MAX_LOCK_BYTES)
    except safefs.UnsafePath as exc:
        raise InputError([Problem(path, None, "lock", f"cannot read: {exc.strerror}")]) from None
    problems = grammar_problems(path, text)
    if problems:
        raise InputError(problems)
    return text


def lock_path(tree: Path, group: str, step: Step) -> Path:
    return tree / group / LOCK_DIR / step.file


def read_fresh(tree: Path, group: str, steps: list[Step]) -> dict[str, str]:
    """file -> text for every step, or LockProblem naming each lock that is missing or stale."""
    found, problems, bad = {}, [], []
    for step in steps:
        path = lock_path(tree, group, step)
        try:
            text = read_lock(path)
        except FileNotFoundError:
            problems.append(f"{path}: missing")
            continue
        except InputError as exc:
            bad += exc.problems
            continue
        recorded = inputs_of(text)
        if recorded != step.inputs:
            problems.append(f"{path}: stale (resolved for {_describe(recorded)}; the matrix now asks for "
                            f"{_describe(step.inputs)})")
            continue
        found[step.file] = text
    if bad:  # a lock that breaks the grammar renders nothing, stale or not
        raise InputError(bad)
    if problems:
        raise LockProblem(problems)
    return found


def _describe(inputs: dict[str, object] | None) -> str:
    if inputs is None:
        return "nothing readable"
    wants = inputs.get("for")
    python = inputs.get("python")
    text = " ".join(str(w) for w in wants) if isinstance(wants, list) else "?"
    return text + (f" on Python {python}" if python else "")


def has_locks(tree: Path) -> bool:
    """Whether a tree is locked: any combination of it has a base.txt."""
    return tree.is_dir() and any(tree.glob(f"*/{LOCK_DIR}/{BASE_FILE}"))
