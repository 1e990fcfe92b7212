"""The committed images/ tree (Dockerfiles only, docker-library style): write it, check it for drift.

The tree is owned through a manifest (`.rif-rendered.json`) naming the folders the factory wrote. Pruning
removes only such folders that the matrix no longer renders, and only the files the factory put there:
whatever else lives in the output folder (`.git`, notes, a maintainer's files) is never touched.
"""

from __future__ import annotations

import json
from pathlib import Path

from builder.render import RenderedCell
from builder.tags import TAG_RE

MANIFEST = ".rif-rendered.json"
DOCKERFILE = "Dockerfile"


class TreeError(RuntimeError):
    """The output folder cannot be written as asked (it is a file, or not writable)."""


def dockerfile_path(images_dir: Path, rendered: RenderedCell) -> Path:
    return images_dir / rendered.cell.tag / DOCKERFILE


def written_before(images_dir: Path) -> set[str]:
    """Folder names the manifest says the factory wrote; names that are not plain tags are ignored."""
    try:
        data = json.loads((images_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    names = data.get("folders") if isinstance(data, dict) else None
    return {n for n in names if isinstance(n, str) and TAG_RE.fullmatch(n)} if isinstance(names, list) else set()


def stale(images_dir: Path, rendered: list[RenderedCell]) -> list[Path]:
    """Folders the factory wrote earlier and the matrix no longer renders."""
    wanted = {r.cell.tag for r in rendered}
    return sorted(images_dir / n for n in written_before(images_dir) - wanted if (images_dir / n).is_dir())


def write(images_dir: Path, rendered: list[RenderedCell], prune: bool) -> list[Path]:
    """Write images/<tag>/Dockerfile per image and the manifest; with prune, remove what went stale."""
    if images_dir.exists() and not images_dir.is_dir():
        raise TreeError(f"{images_dir} is not a directory")
    try:
        written = []
        for r in rendered:
            path = dockerfile_path(images_dir, r)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(r.dockerfile, encoding="utf-8")
            written.append(path)
        owned = {r.cell.tag for r in rendered}
        for folder in stale(images_dir, rendered):
            if prune:
                _remove_ours(folder)
            else:
                owned.add(folder.name)  # still ours, kept: a later --prune may remove it
        (images_dir / MANIFEST).write_text(json.dumps({"folders": sorted(owned)}, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise TreeError(f"cannot write {images_dir}: {exc.strerror or exc}") from exc
    return written


def _remove_ours(folder: Path) -> None:
    """Remove the Dockerfile the factory wrote, and the folder if nothing else is left in it."""
    (folder / DOCKERFILE).unlink(missing_ok=True)
    if not any(folder.iterdir()):
        folder.rmdir()


def drift(images_dir: Path, rendered: list[RenderedCell]) -> list[str]:
    """Files under images_dir that differ from what the template and matrix produce (verify-templating)."""
    problems = []
    for r in rendered:
        path = dockerfile_path(images_dir, r)
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != r.dockerfile:
            problems.append(f"{path}: differs from the rendered template")
    problems += [f"{p}: no cell of the matrix renders here" for p in stale(images_dir, rendered)]
    if rendered and written_before(images_dir) != {r.cell.tag for r in rendered}:
        problems.append(f"{images_dir / MANIFEST}: does not list exactly the rendered folders")
    return problems
