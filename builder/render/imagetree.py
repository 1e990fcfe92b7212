"""A build tree (docker-library style: generated, committed, drift-checked): write it, check it for drift.

The tree is what `docker buildx bake -f DIR/docker-bake.json` needs: the bake file, one folder per
combination with its Dockerfile, `cells/<tag>/cell.json` per image and the smoke program, plus `wheels/` (links
to a local wheelhouse) when building offline. It is owned through a manifest (`.rif-rendered.json`) that
lists every file the factory wrote. Pruning removes only listed files that the matrix no longer renders,
and folders only when that leaves them empty: whatever else lives in the output folder (`.git`, notes, a
maintainer's files) is never touched.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.core import safefs, scratch, wheels
from builder.render import bakefile
from builder.render.dockerfile import RenderedCell, tree_files
from builder.render.lockfile import BASE_FILE, LOCK_DIR, pins_of
from builder.render.sources import WHEELS_DIR, WheelSource, pinned_wheels, step_wheels, usable

MANIFEST = ".rif-rendered.json"
BAKE_FILE = "docker-bake.json"
DOCKERFILE = "Dockerfile"
MAX_MANIFEST_BYTES = 16 << 20
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class TreeError(RuntimeError):
    """The output folder cannot be written as asked (it is a file, or not writable)."""


def context_path(tree: Path) -> str:
    """How the bake file names its context: relative to the working folder when inside it (images/ in a
    checkout, so the committed file works from the repository's root), else absolute."""
    resolved, here = tree.resolve(), Path.cwd().resolve()
    return os.path.relpath(resolved, here) if resolved.is_relative_to(here) else str(resolved)


def contents(tree: Path, rendered: list[RenderedCell]) -> dict[str, bytes]:
    """Every file of the tree, path relative to it -> bytes (wheel links excepted)."""
    files = tree_files(rendered)
    files[BAKE_FILE] = bakefile.dumps(bakefile.definition(rendered, context_path(tree)))
    return dict(sorted(files.items()))


def written_before(tree: Path) -> set[str]:
    """Files the manifest says the factory wrote; paths that could leave the tree are ignored."""
    try:
        data = json.loads(safefs.read_regular(tree / MANIFEST, MAX_MANIFEST_BYTES))
    except (OSError, ValueError, RecursionError):
        return set()
    if not isinstance(data, dict):
        return set()
    listed = data.get("files")
    if not isinstance(listed, list):  # the first manifests listed per-image folders of one Dockerfile each
        folders = data.get("folders")
        listed = [f"{n}/{DOCKERFILE}" for n in folders if isinstance(n, str)] if isinstance(folders, list) else []
    return {p for p in listed if isinstance(p, str) and all(_PART.fullmatch(x) for x in p.split("/"))}


def write(tree: Path, rendered: list[RenderedCell], prune: bool, source: WheelSource | None = None) -> list[Path]:
    """Write the tree and its manifest; with prune, remove what the factory wrote before and no longer renders."""
    try:
        if tree.exists() and not tree.is_dir():  # in the try: a name too long for the file system is an OSError
            raise TreeError(f"{tree} is not a directory")
        files = contents(tree, rendered)
        for rel, data in files.items():
            path = tree / rel
            if not _inside(tree, path):  # before mkdir: no folder is made through a link either
                raise TreeError(f"{path.parent} leads out of {tree} (a symbolic link?): nothing written there")
            path.parent.mkdir(parents=True, exist_ok=True)
            mode = 0o755 if rel.endswith(".pyz") else 0o644
            if _current(path, len(data)) != data:  # a link is replaced, never written through (builder.core.safefs)
                safefs.write_inside(tree, rel, data, mode)
            else:
                path.chmod(mode)  # the same regular file (never a link): BuildKit sees nothing new
        owned = set(files) | _link_wheels(tree, source or WheelSource(), rendered)
        stale = sorted(written_before(tree) - owned)
        if prune:
            _remove_ours(tree, stale)
        else:
            owned |= {p for p in stale if (tree / p).exists()}  # still ours, kept: a later --prune may remove it
        safefs.write_inside(tree, MANIFEST, (json.dumps({"files": sorted(owned)}, indent=1) + "\n").encode())
    except OSError as exc:
        raise TreeError(f"cannot write {tree}: {exc.strerror or exc}") from exc
    return [tree / rel for rel in files]


@contextmanager
def run_tree(source: WheelSource, builder: str) -> Iterator[Path]:
    """The build tree of a run, at one place per wheel source and builder, held under a lock for the run's bake.

    BuildKit syncs a build context incrementally per context path: at a fixed path a rerun sends only what
    changed, where a fresh temporary folder would send a multi-GB wheelhouse again on every run. That state is
    each BuildKit's own, so runs on different builders (builder: BuildKit.identity) get folders of their own and
    never wait for each other's bake; two runs on one builder share one, the second waiting for the first. The wheel
    links go when the run ends (the next run links the same files again, which BuildKit sees as unchanged),
    so a wheelhouse a user deletes frees its disk, and so do the folders of them (a combination's, a locked
    step's), so that none outlives the run that made it.
    """
    base = scratch.user_cache() / "trees"
    key = hashlib.sha256(f"{source.wheelhouse or 'index'}\0{builder}".encode()).hexdigest()[:16]
    folder = base / key
    folder.mkdir(parents=True, exist_ok=True)
    fd = _lock_file(folder / "lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # two runs at once: the second waits, then finds its files in place
        _let_go(folder / "images" / WHEELS_DIR)  # what a run that was killed left
        try:
            yield folder / "images"
        finally:
            _let_go(folder / "images" / WHEELS_DIR)
    finally:
        os.close(fd)


def _let_go(wheels_dir: Path) -> None:
    """The wheel links, then the folders under wheels/ left empty (deepest first; a link is never followed and a
    folder that still holds anything stays)."""
    for link in wheels_dir.rglob("*.whl"):
        link.unlink(missing_ok=True)
    for parent, _, _ in os.walk(wheels_dir, topdown=False):  # bottom-up: a folder after the folders inside it
        if Path(parent) != wheels_dir:
            with contextlib.suppress(OSError):
                os.rmdir(parent)


def _lock_file(path: Path) -> int:
    """The run lock, opened without truncating or following anything; anything but a regular file of its own
    there (a FIFO, a hard link to a file elsewhere) is replaced by an empty one first."""
    for _ in range(2):
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                return fd
            os.close(fd)
        safefs.replace_file(path, b"")
    raise TreeError(f"{path}: cannot hold the run lock")


def _link_wheels(tree: Path, source: WheelSource, rendered: list[RenderedCell]) -> set[str]:
    """A wheelhouse goes into the tree as hard links (free for a 4 GB wheel), bind-mounted by the build: each
    combination's in `wheels/<its pins>/` (all but other versions of what it pins: sources.usable), or, locked,
    each step's own wheels in `wheels/<its lock>/` (by name and version: pip's --require-hashes, not this,
    judges the bytes)."""
    if source.wheelhouse is None:
        return set()
    found = wheels.wheels(source.wheelhouse)  # each a regular file inside the wheelhouse, named as a wheel
    if source.locks is None:
        return {_link(wheel, tree, pinned_wheels(pins)) for pins in {image.pins for image in rendered}
                for wheel in found if usable(wheel, pins)}
    names = set()
    for path, data in tree_files(rendered).items():
        if f"/{LOCK_DIR}/" not in path or path.endswith("/" + BASE_FILE):
            continue
        text = data.decode()
        wanted = {(_norm(p.name), p.version) for p in pins_of(text)}
        for wheel in found:
            if (_norm(wheel.name), str(wheel.version)) in wanted or (_norm(wheel.name), _filed(wheel)) in wanted:
                names.add(_link(wheel, tree, step_wheels(text)))
    return names


def _filed(wheel: wheels.Wheel) -> str:
    """The version as the wheel's file name spells it (a lock pins what pip reported)."""
    return wheel.path.name.split("-")[1]


def _link(wheel: wheels.Wheel, tree: Path, folder: str) -> str:
    """The wheel in the tree: a hard link when its mode is no more than a wheel needs (0644), else a copy with
    that mode; a link is never made to or through anything but the checked file."""
    (tree / folder).mkdir(parents=True, exist_ok=True)
    name = wheel.path.name
    dest = tree / folder / name
    if dest.is_file() and not dest.is_symlink() and os.path.samefile(wheel.file, dest):
        return f"{folder}/{name}"  # the same file: BuildKit's sync sees nothing new
    dest.unlink(missing_ok=True)
    try:
        if os.stat(wheel.file, follow_symlinks=False).st_mode & 0o7777 & ~wheels.WHEEL_MODE:
            raise PermissionError(errno.EPERM, "more permission than a wheel needs: copied instead")
        os.link(wheel.file, dest, follow_symlinks=False)
    except OSError:
        safefs.copy_file(wheel.file, dest, wheels.WHEEL_MODE)  # beside, renamed: nothing planted is written through
    return f"{folder}/{name}"


def _current(path: Path, size: int) -> bytes | None:
    """What a regular file (not a link, no second hard link: its mode is set in place) at path holds, when it is
    no larger than size; else None."""
    try:
        if path.lstat().st_nlink != 1:
            return None
        return safefs.read_regular(path, size)
    except OSError:
        return None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _inside(tree: Path, path: Path) -> bool:
    """The file's folder really is under the tree: a folder replaced by a link never leads a write or a
    removal elsewhere."""
    return path.parent.resolve().is_relative_to(tree.resolve())


def _remove_ours(tree: Path, stale: list[str]) -> None:
    """Remove files the factory wrote, then each folder it emptied; nothing else."""
    folders: set[Path] = set()
    for rel in stale:
        path = tree / rel
        if _inside(tree, path) and (path.is_symlink() or path.is_file()):
            path.unlink()
        folders.update(p for p in Path(rel).parents if p != Path("."))
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        path = tree / folder
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()


def drift(tree: Path, rendered: list[RenderedCell]) -> list[str]:
    """Files under tree that differ from what the template and matrix produce (verify-templating)."""
    problems = []
    files = contents(tree, rendered)
    for rel, data in files.items():
        path = tree / rel
        try:  # read as hostile input: a FIFO planted where a Dockerfile goes never holds the check
            held = safefs.read_regular(path, len(data))
        except FileNotFoundError:
            problems.append(f"{path}: missing")
            continue
        except OSError as exc:
            held = None
            if exc.errno != errno.EFBIG:
                problems.append(f"{path}: {exc.strerror or exc}")
                continue
        if held != data:
            problems.append(f"{path}: differs from the rendered template")
    listed = written_before(tree)
    problems += [f"{tree / p}: no cell of the matrix renders here" for p in sorted(listed - set(files))
                 if (tree / p).exists()]
    if rendered and listed != set(files):
        problems.append(f"{tree / MANIFEST}: does not list exactly the rendered files")
    return problems
