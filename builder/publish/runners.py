"""The runner pool a plan's rows run on: each runner's label and the disk it has free, and which one is the default.

Declared once, in `runners.yaml` beside the matrix file (the repository's: ./runners.yaml), and read by
`builder matrix --format github`, `builder plan` and `builder stages` alike, so both workflows plan on
the same pool. A row runs on the smallest runner whose disk holds its peak (builder.publish.rows). A matrix with
no pool beside it plans on the one standard hosted runner (RUNNER, sizes.DEFAULT_RUNNER_DISK). `--runner-disk`
is a one-runner pool; `--runner LABEL` alone takes that runner of the pool.

The file is read through the matrix's bounded YAML reader (a regular file, size and nesting limits, no aliases,
duplicate keys refused) into a typed model; a bad file is an InputError naming its file, line and key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import COMMAND_LINE, InputError, Problem, usage_error
from builder.matrix import yamlsrc
from builder.publish import sizes

FILE = "runners.yaml"  # the pool's file, beside the matrix file
RUNNER = "ubuntu-24.04"  # the standard hosted runner: the pool of a matrix with no runners.yaml beside it
MAX_RUNNERS = 32  # a pool is a handful of machine sizes; more is a mistake, not a pool
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", re.ASCII)


@dataclass(frozen=True)
class Runner:
    """Where a row runs: the runner's label and the disk it has free (the budget a row's peak must fit)."""

    label: str = RUNNER
    disk: int = sizes.DEFAULT_RUNNER_DISK


@dataclass(frozen=True)
class Pool:
    """The runners a plan may put a row on, smallest disk first; `source` and `key` say where a plan error points
    (the pool's file, or the command line's --runner-disk)."""

    runners: tuple[Runner, ...]
    default: str
    source: Path = COMMAND_LINE
    key: str = "--runner-disk"

    def fitting(self, peak: int) -> Runner | None:
        """The smallest runner whose disk holds `peak` bytes (None: no runner of the pool does)."""
        return next((r for r in self.runners if peak <= r.disk), None)

    @property
    def largest(self) -> Runner:
        return self.runners[-1]

    def error(self, message: str) -> InputError:
        return InputError([Problem(self.source, None, self.key, message)])


def one(runner: Runner) -> Pool:
    """A pool of this runner alone (what --runner-disk gives)."""
    return Pool((runner,), runner.label)


def pool_of(where: Pool | Runner) -> Pool:
    return where if isinstance(where, Pool) else one(where)


HOSTED = one(Runner())  # the standard hosted runner alone: a matrix with no pool file beside it


def check_label(label: str, option: str = "--runner") -> str:
    """A label a workflow can put in runs-on: [A-Za-z0-9_.-], at most 100, not starting with - . or _."""
    if not _LABEL.fullmatch(label):
        raise usage_error(option, f"{label[:80]!r} is not a runner label: [A-Za-z0-9_.-], at most 100")
    return label


def load(path: Path) -> Pool:
    """The pool a runners.yaml declares: `default: LABEL` and `runners: {LABEL: SIZE, ...}` (SIZE as
    --runner-disk takes it: 48G, 1T or bytes)."""
    located = yamlsrc.load_located(path)
    data = located.data

    def bad(key: tuple[str | int, ...], message: str) -> InputError:
        return InputError([located.problem(key, message)])

    if not isinstance(data, dict) or set(data) != {"default", "runners"}:
        raise bad((), "a pool is a mapping of exactly two keys: default (a label) and runners (label: disk)")
    declared = data["runners"]
    if not isinstance(declared, dict) or not declared:
        raise bad(("runners",), "a mapping of at least one runner label to the disk it has free, e.g. "
                                "`ubuntu-24.04: 48G`")
    if len(declared) > MAX_RUNNERS:
        raise bad(("runners",), f"{len(declared)} runners, over the limit of {MAX_RUNNERS}")
    found = []
    for label, disk in declared.items():
        if not _LABEL.fullmatch(label):
            raise bad(("runners", label), "not a runner label: [A-Za-z0-9_.-], at most 100")
        if not isinstance(disk, str):
            raise bad(("runners", label), "the disk it has free is a size, e.g. 48G")
        try:
            found.append(Runner(label, sizes.parse_size(disk, "runners")))
        except InputError as exc:
            raise bad(("runners", label), f"{disk[:40]!r} is not a size: bytes, or a whole number with K, M, G or "
                                          "T (binary: 48G is 48 GiB)") from exc
    default = data["default"]
    if not isinstance(default, str) or default not in declared:
        raise bad(("default",), f"names no runner of the pool ({', '.join(sorted(declared))})")
    return Pool(tuple(sorted(found, key=lambda r: (r.disk, r.label))), default, path, "runners")


def beside(matrix: Path) -> Pool:
    """The pool declared beside the matrix file; the standard hosted runner alone where none is."""
    path = matrix.parent / FILE
    return load(path) if path.exists() or path.is_symlink() else HOSTED


def resolve(matrix: Path, label: str | None, disk: str | None) -> Pool:
    """The pool a command plans on: --runner-disk (with --runner's label, else the pool's default) is a one-runner
    pool; --runner alone is that runner of the pool; neither, the pool beside the matrix."""
    if label is not None:
        check_label(label)
    size = sizes.parse_size(disk) if disk is not None else None  # a bad size is refused before any file is read
    pool = beside(matrix)
    if size is not None:
        return one(Runner(label or pool.default, size))
    if label is None:
        return pool
    chosen = next((r for r in pool.runners if r.label == label), None)
    if chosen is None:
        raise usage_error("--runner", f"{label!r} is not a runner of the pool ({pool.source}: "
                                      f"{', '.join(r.label for r in pool.runners)}): name one, or give its disk "
                                      "with --runner-disk")
    return one(chosen)
