"""Build contexts: the rendered Dockerfile, the files it copies, and the wheelhouse when building offline."""

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
        path.chmod(0o755 if name.endswith((".py", ".pyz")) else 0o644)
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
