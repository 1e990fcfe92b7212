"""The entries of a wheelhouse, checked before anything hashes, links or copies them.

A wheelhouse is a folder someone else may have filled: an entry named like a wheel may be a FIFO (hashing it
would hang), a directory, a link to a private file elsewhere (its bytes would reach a build context and
whatever builder `--builder` names) or a name that is no wheel. Only a regular file whose name parses as a
wheel (PEP 427) is one, reached without a link out of the wheelhouse; anything else named `*.whl` is refused
by name, and files not named `*.whl` are never looked at.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import Version

from builder.core import safefs

MAX_WHEEL_BYTES = 8 << 30  # the largest torch wheels are near 5 GB
WHEEL_MODE = 0o644  # what a build needs of a wheel: read by anyone; never executable, never writable by others


@dataclass(frozen=True)
class Wheel:
    path: Path  # where it was found in the wheelhouse (its name is the wheel's file name)
    file: Path  # the regular file it is, links (inside the wheelhouse) resolved
    name: NormalizedName
    version: Version


class WheelhouseError(ValueError):
    """Entries of a wheelhouse that are no wheel: one line each, naming the entry and why."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def wheels(wheelhouse: Path) -> list[Wheel]:
    """Every `*.whl` of the wheelhouse, checked (by name order), or a WheelhouseError naming each bad entry."""
    found, problems = [], []
    try:
        entries = sorted(p for p in wheelhouse.iterdir() if p.name.endswith(".whl"))
    except OSError as exc:
        raise WheelhouseError([f"{wheelhouse}: cannot list the wheelhouse: {exc.strerror or exc}"]) from None
    for path in entries:
        try:
            found.append(check(path, wheelhouse))
        except (OSError, InvalidWheelFilename) as exc:
            problems.append(f"{path}: not a wheel: {exc.strerror if isinstance(exc, OSError) else exc}")
    if problems:
        raise WheelhouseError(problems)
    return found


def check(path: Path, wheelhouse: Path) -> Wheel:
    """One entry: its name a wheel's, a regular file reached without leaving the wheelhouse."""
    name, version, _, _ = parse_wheel_filename(path.name)
    file = safefs.resolve_inside(path, wheelhouse)
    info = os.stat(file, follow_symlinks=False)
    if not stat.S_ISREG(info.st_mode):
        kind = safefs.FILE_KINDS.get(stat.S_IFMT(info.st_mode), "something else")
        raise safefs.UnsafePath(errno.EINVAL, f"{kind}, not a regular file", str(path))
    if info.st_size > MAX_WHEEL_BYTES:
        raise safefs.UnsafePath(errno.EFBIG, f"{info.st_size:,} bytes, over {MAX_WHEEL_BYTES:,}", str(path))
    return Wheel(path, file, name, version)


def open_wheel(wheel: Wheel) -> int:
    """A file descriptor of the wheel's bytes, opened without following a link or blocking, checked to be the
    regular file it was (not swapped for a FIFO or a link since)."""
    fd = os.open(wheel.file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise safefs.UnsafePath(errno.EINVAL, "no longer a regular file", str(wheel.path))
    return fd
