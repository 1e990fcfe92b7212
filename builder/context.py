"""Build contexts: the rendered Dockerfile, the files it copies, and the wheelhouse when building offline.

Also writes the committed images/ tree (Dockerfiles only, docker-library style) and checks it for drift.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from builder.render import RenderedCell

DOCKERIGNORE = "# generated: the context holds exactly what the Dockerfile copies\n"


def write_context(rendered: RenderedCell, dest: Path) -> Path:
    """Materialise a complete build context in dest (created fresh); returns dest."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / "Dockerfile").write_text(rendered.dockerfile, encoding="utf-8")
    (dest / ".dockerignore").write_text(DOCKERIGNORE, encoding="utf-8")
    for name, data in rendered.files.items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o755 if name.endswith(".py") else 0o644)
    wheelhouse = rendered.source.wheelhouse
    if wheelhouse is not None:
        wheels = dest / "wheels"
        wheels.mkdir()
        for wheel in sorted(wheelhouse.glob("*.whl")):
            _link_or_copy(wheel, wheels / wheel.name)
    return dest


def _link_or_copy(src: Path, dst: Path) -> None:
    """Hard links make a 1 GB wheelhouse free to stage; fall back to a copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def dockerfile_path(images_dir: Path, rendered: RenderedCell) -> Path:
    return images_dir / rendered.cell.tag / "Dockerfile"


def write_images(images_dir: Path, rendered: list[RenderedCell]) -> list[Path]:
    """Write images/<tag>/Dockerfile for every cell and remove folders of cells no longer in the matrix."""
    written = []
    for r in rendered:
        path = dockerfile_path(images_dir, r)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(r.dockerfile, encoding="utf-8")
        written.append(path)
    for stale in stale_dirs(images_dir, rendered):
        shutil.rmtree(stale)
    return written


def stale_dirs(images_dir: Path, rendered: list[RenderedCell]) -> list[Path]:
    wanted = {r.cell.tag for r in rendered}
    if not images_dir.is_dir():
        return []
    return sorted(p for p in images_dir.iterdir() if p.is_dir() and p.name not in wanted)


def drift(images_dir: Path, rendered: list[RenderedCell]) -> list[str]:
    """Files under images_dir that differ from what the template and matrix produce (verify-templating)."""
    problems = []
    for r in rendered:
        path = dockerfile_path(images_dir, r)
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != r.dockerfile:
            problems.append(f"{path}: differs from the rendered template")
    problems += [f"{p}: no cell of the matrix renders here" for p in stale_dirs(images_dir, rendered)]
    return problems
