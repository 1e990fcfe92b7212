"""Images for a target: the cells that carry it, ranked, their `docker run` line, and the option checks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from builder.core import facts, tags
from builder.core.errors import usage_error
from builder.core.facts import ALL_TARGETS
from builder.core.spec import CellSpec
from builder.which.host import Gpu
from builder.which.pcitable import FLAVORS, ROCM_RE, TARGET_RE, families_of, pci_table

# -- images ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Filters:
    rocm: str | None = None
    os: str | None = None
    flavor: str | None = None

    def keeps(self, cell: CellSpec) -> bool:
        rocm = (cell.rocm or "").split(".")
        return ((self.rocm is None or rocm[:len(self.rocm.split("."))] == self.rocm.split("."))
                and self.os in (None, cell.os) and self.flavor in (None, cell.flavor))

    def __str__(self) -> str:
        given = [("--rocm", self.rocm), ("--os", self.os), ("--flavor", self.flavor)]
        return " ".join(f"{opt} {value}" for opt, value in given if value is not None)


def carrying(cells: Iterable[CellSpec], target: str) -> list[CellSpec]:
    """ROCm cells whose image has kernels for target: its family holds it, or `all` whose wheels carry it."""
    return [c for c in cells if c.rocm is not None and target in c.gfx_targets]


def ranked(cells: list[CellSpec], default_os: str) -> list[CellSpec]:
    """Best first: the per-family image, then newest ROCm, newest torch, the family with fewest targets (an RX 6800 gets
    gfx103X-dgpu before gfx103X-all: fewer kernels to pull), the matrix's first OS, runtime."""
    order = {id(c): i for i, c in enumerate(cells)}
    return sorted(cells, reverse=True, key=lambda c: (
        c.gfx != ALL_TARGETS, Version(c.rocm or "0"), Version(c.torch), -len(c.gfx_targets), c.os == default_os,
        c.flavor == "runtime", -order[id(c)]))


def image_ref(cell: CellSpec, registry: str | None) -> str:
    """REGISTRY/NAMESPACE/image:tag, or the local name `builder build` gives the image."""
    return f"{registry}/{cell.image}:{cell.tag}" if registry else tags.local_ref(cell.image, cell.tag)


def docker_run(ref: str, gids: tuple[int, ...], env: list[tuple[str, str]]) -> str:
    """The line that runs the image with the host's GPUs (README, "Using a published image")."""
    groups = [str(g) for g in gids] or ['"$(getent group render | cut -d: -f3)"']
    parts = ["docker run -it --device=/dev/kfd --device=/dev/dri --group-add video",
             *(f"--group-add {g}" for g in groups), "--security-opt seccomp=unconfined",
             *(f"-e {k}={v}" for k, v in env), ref]
    return " ".join(parts)


def apptainer_lines(ref: str, env: list[tuple[str, str]], registry: str | None, gpu: bool = True) -> dict[str, str]:
    """The HPC way (docs/hpc.md): pull a SIF once, then run it as yourself; --rocm gives the GPUs, and your own
    render/video groups open them (no --group-add). A local image converts from the engine (docker-daemon://)."""
    sif = ref.rsplit("/", 1)[-1].replace(":", "_") + ".sif"
    pull = f"apptainer pull {sif} docker://{ref}" if registry else f"apptainer build {sif} docker-daemon://{ref}"
    parts = ["apptainer exec", *(["--rocm"] if gpu else []), *(f"--env {k}={v}" for k, v in env), sif, "python"]
    return {"apptainer_pull": pull, "apptainer_exec": " ".join(parts)}


def choices_of(cells: list[CellSpec]) -> dict[str, list[str]]:
    """What --rocm, --os and --flavor can pick among these cells."""
    def unique(values: Iterable[str]) -> list[str]:
        return list(dict.fromkeys(values))
    return {"rocm": sorted(unique(c.rocm or "" for c in cells), key=Version, reverse=True),
            "torch": sorted(unique(c.torch for c in cells), key=Version, reverse=True),
            "os": unique(c.os for c in cells), "flavor": [f for f in FLAVORS if any(c.flavor == f for c in cells)]}


def image_json(cell: CellSpec, registry: str | None) -> dict[str, Any]:
    return {"tag": cell.tag, "ref": image_ref(cell, registry), "gfx": cell.gfx, "gfx_targets": list(cell.gfx_targets),
            "rocm": cell.rocm, "torch": cell.torch, "python": cell.python, "os": cell.os, "flavor": cell.flavor,
            "channel": cell.channel}


def hexs(value: int | None, digits: int) -> str | None:
    return f"0x{value:0{digits}x}" if value is not None else None


def gpu_json(gpu: Gpu, supported: bool) -> dict[str, Any]:
    families = families_of(gpu.target)
    return {"index": gpu.index, "kfd_node": gpu.node, "pci": gpu.pci, "device_id": hexs(gpu.device_id, 4),
            "revision": hexs(gpu.revision, 2), "name": gpu.name, "target": gpu.target,
            "family": families[0] if families else None, "igpu": gpu.igpu,
            "render_node": f"/dev/dri/renderD{gpu.render_minor}" if gpu.render_minor else None, "supported": supported}


# -- options ---------------------------------------------------------------------------------------------

def _squash(name: str) -> str:
    text = "".join(ch for ch in name.lower() if ch.isalnum())
    for word in ("amd", "radeon", "instinct", "graphics"):
        text = text.replace(word, "")
    return text


def check_target(value: str) -> str:
    """A --gfx value: a target (rocminfo's `Name: gfx1100`); a family or a GPU name says which target to give."""
    if TARGET_RE.fullmatch(value):
        return value
    families = facts.gfx_families()
    if value in families:
        listed = ", ".join(families[value].targets)
        raise usage_error("--gfx", f"{value!r} is a family, not a target: give the GPU's target ({listed}), as "
                                   "rocminfo prints it (Name: gfx...)")
    if value == ALL_TARGETS:
        raise usage_error("--gfx", "'all' is not a target: give the GPU's target, e.g. gfx1100 (rocminfo's Name:)")
    key = _squash(value)
    names = [(n, e.target) for e in pci_table().devices.values() for n in (e.name, *e.revisions.values())]
    names += [(g, fam.targets[0]) for fam in families.values() if len(fam.targets) == 1 for g in fam.gpus]
    hits = sorted({t for n, t in names if key and any(_squash(part) == key for part in n.split(" / "))})
    if hits:
        raise usage_error("--gfx", f"{value!r} is a GPU, not a target: use --gfx {hits[0]}"
                                   + (f" (or {', '.join(hits[1:])})" if len(hits) > 1 else ""))
    raise usage_error("--gfx", f"{value!r} is not a gfx target (gfx and 3 or 4 digits, e.g. gfx1100, gfx942, "
                               "gfx90a): rocminfo's `Name: gfx...` line gives it")


def check_filters(rocm: str | None, os_name: str | None, flavor: str | None) -> Filters:
    if rocm is not None:
        match = ROCM_RE.fullmatch(rocm)
        if not match:
            raise usage_error("--rocm", f"{rocm!r} is not a ROCm version X.Y (e.g. 7.2)")
        rocm = match.group(1)
    if os_name is not None and os_name not in facts.os_releases():
        raise usage_error("--os", f"unknown os {os_name!r}; known: {', '.join(sorted(facts.os_releases()))}")
    if flavor is not None and flavor not in FLAVORS:
        raise usage_error("--flavor", f"{flavor!r} is not runtime or devel")
    return Filters(rocm, os_name, flavor)
