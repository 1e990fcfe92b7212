"""bench_night's trees: a copy of the repository's matrix and locks, and the one-change variants of it.

Each scenario is a temporary copy (`matrix.yaml`, `images/<combination>/lock/`): the repository's own locks when it
has them, else synthetic ones written in the lock format `builder lock` writes (lockfile.base_text/pip_text), with
made-up digests: one per base image reference, one per wheel (the same wheel in several combinations gets the
same sha256, as a real index serves one file), so a change touches every lock that pins that image or wheel.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from builder.core.spec import CellSpec
from builder.matrix.expand import expand_matrix
from builder.render import lockfile
from builder.render.dockerfile import render_all
from builder.render.stages import lock_steps

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Change:
    """One scenario's edit of the locks: what it changed and the combinations whose locks it touched."""

    what: str
    groups: tuple[str, ...]


def _sha(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _pin(requirement: str, python: str, index: str) -> lockfile.Pin:
    try:
        parsed = Requirement(requirement)
        name = parsed.name
        version = next((s.version for s in parsed.specifier if s.operator == "=="), "0")
    except InvalidRequirement:
        name, version = requirement, "0"
    return lockfile.Pin(name, version, _sha("wheel", name, version, python, index))


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def copy_tree(dest: Path, matrix: Path = ROOT / "matrix.yaml", images: Path = ROOT / "images") -> bool:
    """dest/matrix.yaml and dest/images/*/lock/: the repository's locks (True) or synthetic ones (False)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(matrix, dest / "matrix.yaml")
    locks = sorted(images.glob(f"*/{lockfile.LOCK_DIR}"))
    if any((lock / lockfile.BASE_FILE).is_file() for lock in locks):
        for lock in locks:
            shutil.copytree(lock, dest / "images" / lock.parent.name / lockfile.LOCK_DIR)
        return True
    write_synthetic_locks(dest / "matrix.yaml", dest / "images")
    return False


def write_synthetic_locks(matrix: Path, tree: Path) -> None:
    """Every combination's lock files, fresh for the matrix (their headers name what the matrix asks)."""
    groups: dict[str, list[CellSpec]] = {}
    for rendered in render_all(expand_matrix(matrix).cells):
        groups.setdefault(rendered.group, []).append(rendered.cell)
    for group, members in groups.items():
        first = members[0]
        for step in lock_steps(members):
            path = lockfile.lock_path(tree, group, step)
            path.parent.mkdir(parents=True, exist_ok=True)
            if step.file == lockfile.BASE_FILE:
                base = step.wants[0]
                text = lockfile.base_text(step, f"{base}@sha256:{_sha('base', base)}")
            else:
                pins = {_key(p.name): p for p in (_pin(r, step.python, first.index_url) for r in step.wants)}
                text = lockfile.pip_text(step, list(pins.values()))  # torch and torch[device-X]: one pin
            path.write_text(text, encoding="utf-8")


def change_base(tree: Path) -> Change:
    """A new digest for one base image reference (one OS's), in the base.txt of every combination pinning it."""
    bases = sorted((tree / "images").glob(f"*/{lockfile.LOCK_DIR}/{lockfile.BASE_FILE}"))
    pinned = {path: lockfile.pinned_base(path.read_text()) for path in bases}
    reference = pinned[bases[0]].split("@")[0]
    touched = []
    for path, ref in pinned.items():
        if ref.split("@")[0] == reference:
            path.write_text(path.read_text().replace(ref, f"{reference}@sha256:{_sha('new base', reference)}"))
            touched.append(path.parents[1].name)
    return Change(f"base image {reference}: new digest", tuple(sorted(touched)))


def change_torch_wheel(tree: Path) -> Change:
    """A new sha256 for one torch wheel (the first ROCm combination's), in every torch.txt that pins that file."""
    locks = sorted((tree / "images").glob(f"*/{lockfile.LOCK_DIR}/torch.txt"),
                   key=lambda p: (not p.parents[1].name.startswith("rocm"), p.parents[1].name))
    old = next(p for p in lockfile.pins_of(locks[0].read_text()) if p.name == "torch")
    new = _sha("new wheel", old.sha256)
    touched = []
    for path in locks:
        text = path.read_text()
        if f"--hash=sha256:{old.sha256}" in text:
            path.write_text(text.replace(old.sha256, new))
            touched.append(path.parents[1].name)
    return Change(f"torch {old.version} wheel ({locks[0].parents[1].name}'s): new sha256", tuple(sorted(touched)))


def copies(tree: Path, n: int) -> list[Path]:
    """n matrix files in tree, the production matrix under image names pytorch0 ... pytorch{n-1} (one lock tree:
    the combinations' names leave the image name out)."""
    text = (tree / "matrix.yaml").read_text()
    assert text.count("image: pytorch\n") == 1, "matrix.yaml names its image once"
    out = []
    for k in range(n):
        path = tree / f"matrix{k}.yaml"
        path.write_text(text.replace("image: pytorch\n", f"image: pytorch{k}\n"))
        out.append(path)
    return out
