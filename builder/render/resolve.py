"""`builder lock`: resolve every combination's installing steps into its lock files, building nothing.

Wheels: the host's pip resolves each step for the image's Python and platform (`pip install --dry-run
--report`, isolated from the host's pip configuration) against the cell's index or a wheelhouse, with the
earlier steps' pins as constraints, so the layers of a combination never disagree; the report carries every
wheel's sha256. The base image: the registry's digest of its tag (Docker Hub, or a mirror with --base-registry);
a base that `builder base --snapshot T` made (its label says T) is recorded with its snapshot.
Without --update only missing and stale locks are resolved; everything else keeps its pins.
A step that cannot be resolved is a data error of the images that need it (the compatibility data promises wheels
or a base tag the index or registry does not serve): it is reported, and every other lock is still refreshed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from builder.core import aptindex, safefs
from builder.core.errors import InputError
from builder.core.logfiles import LOG_DIR
from builder.core.scratch import scratch_dir
from builder.core.spec import CellSpec
from builder.registry.errors import RegistryError
from builder.render import basepin, indexpages, lockcache, lockfile, oslock, wheelsizes
from builder.render.dockerfile import render_all
from builder.render.sources import WheelSource
from builder.render.stages import lock_steps, stages_of
from builder.render.wheelhouse import PLATFORMS

# pip's log line for every index page it asks for (pip/_internal/index/collector.py: "Getting page %s").
_PAGE_LINE = re.compile(r"Getting page (https?://\S+)")
_MAX_PIP_LOG = 64 << 20
OnStep = Callable[[str, str, str], None]  # (combination, lock file, "kept" | "written" | "unchanged" | "error")


class LockError(RuntimeError):
    """A step could not be resolved (no wheel satisfies it, the index or registry is unreachable)."""


@dataclass(frozen=True)
class DataError:
    """Images the data promises whose wheels or base the index or registry does not serve."""

    cells: tuple[str, ...]  # the tags of the images that need the step
    index: str  # where it was looked for: the index URL (or wheelhouse), or the base image's registry
    step: str  # the lock file: what was being resolved
    missing: str  # what pip or the registry said was missing

    def line(self) -> str:
        return f"{', '.join(self.cells)}: {self.step} from {self.index}: {self.missing}"


@dataclass
class LockReport:
    written: list[Path] = field(default_factory=list)  # files whose pins changed
    kept: list[Path] = field(default_factory=list)  # files already fresh (or re-resolved to the same pins)
    errors: list[DataError] = field(default_factory=list)  # steps no index or registry could resolve

    @property
    def failed_cells(self) -> set[str]:
        return {tag for e in self.errors for tag in e.cells}


def lock_tree(cells: list[CellSpec], tree: Path, wheelhouse: Path | None = None, update: bool = False,
              base_registry: str | None = None, insecure: frozenset[str] = frozenset(),
              on_step: OnStep = lambda g, f, s: None, write: bool = True,
              snapshot: oslock.Snapshot | None = None, workers: int = 1,
              cache: lockcache.LockCache | None = None) -> LockReport:
    """Resolve every combination's steps into lock files (write=False: resolve every step, write none: `--check-data`).
    A step that fails is a DataError of the images needing it and the steps built on it are skipped (those images
    are reported already); every other step is still resolved. With a snapshot, each combination's OS package steps
    are pinned too (oslock). Combinations are resolved by up to `workers` at once (their steps one after another:
    each constrains the next); with a cache, a pip step whose index pages did not change is not resolved again."""
    groups: dict[str, list[CellSpec]] = {}
    for rendered in render_all(cells, WheelSource(wheelhouse)):
        groups.setdefault(rendered.group, []).append(rendered.cell)
    context = _Context(tree, wheelhouse, update, base_registry, insecure, on_step, write, snapshot, cache)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        parts = list(pool.map(lambda item: _lock_group(item[0], item[1], context), groups.items()))
    report = LockReport()
    for part in parts:  # in the combinations' order, whichever finished first
        report.written += part.written
        report.kept += part.kept
        report.errors += part.errors
    return report


@dataclass(frozen=True)
class _Context:
    tree: Path
    wheelhouse: Path | None
    update: bool
    base_registry: str | None
    insecure: frozenset[str]
    on_step: OnStep
    write: bool
    snapshot: oslock.Snapshot | None
    cache: lockcache.LockCache | None


def _lock_group(group: str, members: list[CellSpec], c: _Context) -> LockReport:
    """One combination's steps, one after another (each step's pins constrain the next)."""
    report = LockReport()
    texts: dict[str, str] = {}
    failed: set[str] = set()
    for step in lock_steps(members):
        path = lockfile.lock_path(c.tree, group, step)
        old = _old_lock(path)
        if failed & set(step.after):
            failed.add(step.file)
            continue
        if old is not None and not c.update and c.write and lockfile.inputs_of(old) == step.inputs:
            texts[step.file] = old
            report.kept.append(path)
            c.on_step(group, step.file, "kept")
            continue
        try:
            new = _resolve_step(step, texts, members[0], c)
        except LockError as exc:
            failed.add(step.file)
            where = _where(step, members[0], c.wheelhouse, c.base_registry)
            missing = str(exc).removeprefix(f"{step.file}: ")
            report.errors.append(DataError(_needing(members, step.file), where, step.file, missing))
            c.on_step(group, step.file, "error")
            continue
        texts[step.file] = new
        changed = new != old
        if changed and c.write:
            safefs.write_inside(c.tree, path.relative_to(c.tree).as_posix(), new.encode())
        (report.written if changed else report.kept).append(path)
        c.on_step(group, step.file, ("written" if c.write else "resolved") if changed else "unchanged")
    if c.snapshot is not None:
        _lock_os(group, members, c.tree, c.snapshot, c.update, c.write, report, c.on_step)
    return report


def _lock_os(group: str, members: list[CellSpec], tree: Path, snapshot: oslock.Snapshot, update: bool, write: bool,
             report: LockReport, on_step: OnStep) -> None:
    """The combination's OS package locks (oslock); an archive that cannot serve them is a data error of every
    image of the combination."""
    lock_dir = tree / group / lockfile.LOCK_DIR
    try:
        texts = oslock.lock_group(members, lock_dir, snapshot, update)
    except aptindex.ArchiveError as exc:
        where = snapshot.url or "the OS's snapshot archive"
        missing = oslock.unreachable(members[0], snapshot, exc) if isinstance(exc, aptindex.Unreachable) else str(exc)
        report.errors.append(DataError(tuple(c.tag for c in members), where, "os-*.txt", missing))
        on_step(group, "os-*.txt", "error")
        return
    for file, text in texts.items():
        rel = f"{group}/{lockfile.LOCK_DIR}/{file}"
        changed = oslock.write(tree, rel, text) if write else _old_lock(tree / rel) != text
        (report.written if changed else report.kept).append(tree / rel)
        on_step(group, file, ("written" if write else "resolved") if changed else "kept")


def _resolve_step(step: lockfile.Step, texts: dict[str, str], cell: CellSpec, c: _Context) -> str:
    if step.file == lockfile.BASE_FILE:
        try:
            pinned = pin_base(step.wants[0], c.base_registry, c.insecure)
            made = basepin.snapshot(pinned, c.insecure) if c.base_registry else None  # Docker Hub's carry no such label
            return lockfile.base_text(step, pinned, snapshot=made, size=basepin.SIZES.get(pinned))
        except (RegistryError, basepin.BaseError) as exc:  # unreachable, refused: this base is not resolved either
            raise LockError(f"base image {step.wants[0]}: {exc}") from exc
    after = [p for f in step.after for p in lockfile.pins_of(texts[f])]
    index = cell.index_url.rstrip("/") + "/"
    if c.cache is None or c.wheelhouse is not None or not indexpages.is_page_url(index):
        return lockfile.pip_text(step, resolve(step, after, cell, c.wheelhouse))

    def by_pip() -> tuple[str, list[str]]:
        pages: list[str] = []
        return lockfile.pip_text(step, resolve(step, after, cell, c.wheelhouse, pages)), pages

    key = lockcache.step_key({"pip": _pip_version(), "args": _pip_args(step, cell, None), "constraints":
                              sorted(f"{p.name}=={p.version}" for p in after)})
    return c.cache.lock_text(key, step, index, by_pip)


def _needing(members: list[CellSpec], file: str) -> tuple[str, ...]:
    """The tags of the combination's images whose layers include the step of this lock file."""
    if file in (lockfile.BASE_FILE, "torch.txt", "torch-deps.txt"):
        return tuple(c.tag for c in members)
    runtimes, develops = stages_of(members)
    tags = [s.cell.tag for name, s in runtimes.items() if file in (f"{name}.txt", f"{name}-device.txt")]
    tags += [s.cell.tag for name, s in develops.items()
             if file == f"{name}.txt" or file in (f"{s.parent}.txt", f"{s.parent}-device.txt")]
    member_tags = {c.tag for c in members}
    return tuple(t for t in dict.fromkeys(tags) if t in member_tags)


def _where(step: lockfile.Step, cell: CellSpec, wheelhouse: Path | None, base_registry: str | None) -> str:
    if step.file == lockfile.BASE_FILE:
        return base_registry or "Docker Hub"
    return str(wheelhouse) if wheelhouse is not None else cell.index_url


def pin_base(ref: str, base_registry: str | None, insecure: frozenset[str]) -> str:
    """`debian:12` -> `debian:12@sha256:...` (or `MIRROR/debian:12@sha256:...`), the registry's current digest; its
    compressed size goes to basepin.SIZES, for base.txt to record."""
    try:
        pinned, size = basepin.pin_sized(ref, base_registry, insecure)
    except basepin.BaseError as exc:
        raise LockError(str(exc)) from None
    if size is not None:
        basepin.SIZES[pinned] = size
    return pinned


def resolve(step: lockfile.Step, after: list[lockfile.Pin], cell: CellSpec,
            wheelhouse: Path | None, pages: list[str] | None = None) -> list[lockfile.Pin]:
    """The wheels one step adds: pip's resolution of its requirements, minus what earlier steps installed (pages:
    filled with every index page pip asked for, from its log)."""
    earlier = {_key(p.name) for p in after}
    with scratch_dir("rif-lock-") as tmp:
        (tmp / "constraints.txt").write_text("".join(f"{p.name}=={p.version}\n" for p in after))
        cmd = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", "install", "--dry-run",
               "--ignore-installed", "--quiet", "--report", str(tmp / "report.json"), "--target", str(tmp / "target"),
               "--log", str(tmp / "pip.log"), "--constraint", str(tmp / "constraints.txt"),
               *_pip_args(step, cell, wheelhouse)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        _log(cmd, proc)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise LockError(f"{step.file}: pip cannot resolve {' '.join(step.wants)} for Python {step.python}: {tail}")
        installs = json.loads((tmp / "report.json").read_text())["install"]
        if pages is not None:
            pages += _PAGE_LINE.findall(safefs.read_regular(tmp / "pip.log", _MAX_PIP_LOG, cut=True).decode(
                errors="replace"))
    pins = []
    sizes = wheelsizes.sizes([(item.get("download_info") or {}).get("url", "") for item in installs])
    for item, size in zip(installs, sizes, strict=True):
        meta, info = item["metadata"], item.get("download_info", {})
        sha = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
        if not sha:
            raise LockError(f"{step.file}: {meta['name']} {meta['version']} came without a sha256 ({info.get('url')})")
        if _key(meta["name"]) not in earlier:
            pins.append(lockfile.Pin(meta["name"], meta["version"], sha, size))
    return pins


def _pip_args(step: lockfile.Step, cell: CellSpec, wheelhouse: Path | None) -> list[str]:
    """What pip is asked, but the scratch files: also the cache key of the step's answer."""
    return ["--only-binary=:all:", "--implementation", "cp", "--python-version", step.python,
            *[arg for platform in PLATFORMS for arg in ("--platform", platform)],
            *source_args(cell, wheelhouse), *(["--no-deps"] if step.no_deps else []), *step.wants]


def source_args(cell: CellSpec, wheelhouse: Path | None) -> list[str]:
    """Where pip resolves from: exactly where the build installs from (the wheelhouse, or the cell's index
    alone: a second index would let a same-named package from elsewhere into the lock)."""
    if wheelhouse is not None:
        return ["--no-index", "--find-links", str(wheelhouse)]
    return WheelSource().pip_args(cell)


def _pip_version() -> str:
    """The resolver's version is part of what an answer depends on."""
    try:
        return metadata.version("pip")
    except metadata.PackageNotFoundError:
        return ""


def _key(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _log(cmd: list[str], proc: subprocess.CompletedProcess[str]) -> None:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with safefs.open_log(LOG_DIR / "lock.log", append=True) as fh:
        fh.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}(exit {proc.returncode})\n")


def _old_lock(path: Path) -> str | None:
    """The lock already there, when it is one (lockfile.read_lock: a FIFO, a link out of its folder or a line pip
    would take for an option is no lock); else None, and it is resolved again."""
    try:
        return lockfile.read_lock(path)
    except (OSError, InputError):
        return None
