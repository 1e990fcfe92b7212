"""Which of this checkout's matrices a published image's cell comes from: what `builder reproduce` suggests as
--matrix when the matrix it was given (the production one by default) has no cell of the image's tag; and the
combination it is rendered in alone (where the lock recorded with it goes)."""

from __future__ import annotations

from pathlib import Path

from builder.core.errors import InputError
from builder.matrix.expand import expand_matrix, load_matrix
from builder.matrix.selection import plan_images, select
from builder.render.dockerfile import group_name


def not_in_matrix(ref: str, tag: str, matrix: Path, default: bool, root: Path = Path(".")) -> str:
    """What to say when the matrix given (or the default) has no cell for the published image's tag: which of
    this checkout's matrices (matrix.yaml, examples/*.yaml) does, to pass as --matrix."""
    candidates = [root / "matrix.yaml", *sorted((root / "examples").glob("*.y*ml"))]
    found = [str(path) for path in candidates if path.resolve() != matrix.resolve() and _holds(path, tag)]
    which = (f"; it is a cell of {' and '.join(found)}: pass --matrix {found[0]}" if found
             else ": pass --matrix with the matrix it was published from")
    given = f"{matrix}{' (the default)' if default else ''}"
    return f"{ref} is the image of cell {tag!r}, and {given} has no such cell{which}"


def _holds(matrix: Path, tag: str) -> bool:
    try:
        return any(tag in (cell.tag, cell.content_cell().tag) for cell in load_matrix(matrix))
    except (InputError, OSError, ValueError):
        return False


def combination(matrix: Path, tag: str) -> str | None:
    """The combination (its folder in a lock tree) of the image of tag, rendered alone as `builder reproduce`
    renders it; None when the matrix has no such cell (the render that follows says so, naming the matrix)."""
    try:
        plans = plan_images(select(expand_matrix(matrix).cells, [tag], matrix))
    except (InputError, OSError, ValueError):
        return None
    return group_name(plans[0].content) if plans else None
