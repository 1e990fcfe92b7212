"""A combination's stages: the runtime and devel stages of its Dockerfile, their names, and the steps its locks pin.

Every family's runtime starts from the one `torch` stage; a devel image is built on its readable runtime
sibling, brought in as a stage of its own where the combination holds no such runtime image.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from builder.core.spec import CellSpec
from builder.core.tags import readable_tag
from builder.render import labels, lockfile
from builder.render.installs import device_requirements, os_sdk_steps, sdk_requirements, small_requirements


class NameClash(ValueError):
    """Two images of one render would share a name BuildKit needs unique (a stage or a bake target)."""


@dataclass(frozen=True)
class Stage:
    """One runtime or devel stage of a combination's Dockerfile: what the template renders it from."""

    cell: CellSpec
    stage: str
    parent: str = "torch"
    device: list[str] = field(default_factory=list)
    small: list[str] = field(default_factory=list)
    sdk: list[str] = field(default_factory=list)  # a devel stage's ROCm SDK (pip), over its runtime
    os_sdk: list[str] = field(default_factory=list)  # or the shell steps that add it from AMD's OS repository


def stage_name(cell: CellSpec) -> str:
    readable = readable_tag(cell.platform, cell.os, cell.python, cell.torch, cell.gfx, cell.flavor, cell.channel)
    if cell.tag != readable:
        return "tag-" + cell.tag.lower()
    return "-".join([cell.flavor, *([cell.gfx.lower()] if cell.gfx else [])])


def runtime_parent(cell: CellSpec) -> CellSpec:
    """The runtime image a devel image is built on: its readable runtime sibling."""
    tag = readable_tag(cell.platform, cell.os, cell.python, cell.torch, cell.gfx, "runtime", cell.channel)
    return cell.model_copy(update={"flavor": "runtime", "tag": tag, "explicit_tag": False, "line": None})


def _runtime(cell: CellSpec) -> Stage:
    return Stage(cell, stage_name(cell), device=device_requirements(cell), small=small_requirements(cell))


def _same(a: Stage, b: Stage) -> bool:
    """Two runtime stages that build the same layers (the cells may differ in where they came from)."""
    return (labels.cell_json(a.cell), a.device, a.small) == (labels.cell_json(b.cell), b.device, b.small)


def stages_of(members: list[CellSpec]) -> tuple[dict[str, Stage], dict[str, Stage]]:
    """A combination's runtime and devel stages by name (a devel image brings its runtime parent)."""
    runtimes: dict[str, Stage] = {}
    develops: dict[str, Stage] = {}
    names = [stage_name(c) for c in members]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        tags = [c.tag for c in members if stage_name(c) in clash]
        raise NameClash(f"images {', '.join(tags)} would share the Dockerfile stage {clash[0]!r} (tags that differ "
                        "only in letter case): give them tags that differ otherwise")
    for cell in members:
        if cell.flavor == "runtime":
            runtimes[stage_name(cell)] = _runtime(cell)
    for cell in members:
        if cell.flavor == "devel":
            parent = _runtime(runtime_parent(cell))
            if _same(runtimes.get(parent.stage, parent), parent) is False:  # an image of that name differs
                parent = Stage(parent.cell, f"{stage_name(cell)}-runtime", device=parent.device, small=parent.small)
            runtimes.setdefault(parent.stage, parent)
            develops[stage_name(cell)] = Stage(cell, stage_name(cell), parent=parent.stage,
                                                sdk=sdk_requirements(cell), os_sdk=os_sdk_steps(cell))
    return runtimes, develops


def lock_steps(members: list[CellSpec]) -> list[lockfile.Step]:
    """The installing steps of a combination's Dockerfile, in build order: what its locks pin."""
    first = members[0]
    torch = (f"torch=={first.torch_wheel}",)
    steps = [lockfile.Step(lockfile.BASE_FILE, (first.os_release.base,)),
             lockfile.Step("torch.txt", torch, first.python, no_deps=True),
             lockfile.Step("torch-deps.txt", torch, first.python, after=("torch.txt",))]
    shared = ("torch.txt", "torch-deps.txt")
    runtimes, develops = stages_of(members)
    below: dict[str, tuple[str, ...]] = {}  # runtime stage -> the lock files of its layers
    for stage in runtimes.values():
        device: tuple[str, ...] = (f"{stage.stage}-device.txt",) if stage.device else ()
        if stage.device:
            steps.append(lockfile.Step(device[0], tuple(stage.device), first.python, after=shared))
        small = (*stage.device, *(r for r in stage.small if r not in stage.device))
        steps.append(lockfile.Step(f"{stage.stage}.txt", small, first.python, after=shared + device))
        below[stage.stage] = shared + device + (f"{stage.stage}.txt",)
    for stage in develops.values():
        if stage.sdk:
            steps.append(lockfile.Step(f"{stage.stage}.txt", tuple(stage.sdk), first.python, after=below[stage.parent]))
    return steps
