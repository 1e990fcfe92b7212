"""Cells -> images: cells whose content is the same share one image, built once, tagged for each cell.

pytorch.org wheels carry every gfx target, so the pytorch-channel cells of several families (and the
`all` cell) are one image; building it once per family would push identical bytes under new digests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from builder.spec import CellSpec


@dataclass
class ImagePlan:
    content: CellSpec  # what the image is built from, labelled with and validated against
    cells: list[CellSpec] = field(default_factory=list)

    @property
    def tags(self) -> list[str]:
        return [c.tag for c in self.cells]


def plan_images(cells: list[CellSpec]) -> list[ImagePlan]:
    """Group cells by content cell, in matrix order."""
    plans: dict[str, ImagePlan] = {}
    for cell in cells:
        content = cell.content_cell()
        key = content.model_dump_json(exclude={"line"})
        plans.setdefault(key, ImagePlan(content)).cells.append(cell)
    return list(plans.values())
