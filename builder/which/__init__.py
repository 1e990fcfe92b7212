"""`builder which`: this host's AMD GPUs -> gfx target, family and name -> the best image of a matrix, and its
`docker run` line.

Reads files only, runs nothing, needs no Docker:
- the KFD topology, /sys/class/kfd/kfd/topology/nodes/*/properties: `gfx_target_version` is the kernel's word on
  each GPU's target (major*10000 + minor*100 + stepping, minor and stepping one hex digit each: 110000 gfx1100,
  90402 gfx942, 90012 gfx90c); CPU nodes have 0. Its GPU nodes, in node order, are HIP's devices 0, 1, ...
- PCI IDs, /sys/bus/pci/devices/*/{vendor,device,class,revision}, looked up in builder/data/pci_ids.yaml: product
  names for the KFD's GPUs, and the GPUs themselves when amdgpu is not loaded (no KFD topology).
- /dev/kfd and /dev/dri/renderD* (their group: the numeric GID a non-root user in the container needs), else the
  `render` line of /etc/group.
- /sys/module/amdgpu/version (AMD's packaged driver) or, without it, /proc/sys/kernel/osrelease (the in-kernel
  driver): checked against the recommended image's driver range (builder/which/driver.py).

Everything is read under a root directory (default /), so a recorded tree (tests/data/sysfs/<machine>/) stands in
for a host. Exit code (see README, "Which image for my GPU?"): 0 an image of the matrix runs one of the host's AMD
GPUs; 1 no AMD GPU, or none the matrix's images support (the reason, and what HSA_OVERRIDE_GFX_VERSION would do);
2 bad input.
"""


from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import Version

from builder.core import tags
from builder.core.spec import CellSpec
from builder.matrix.expand import expand_matrix
from builder.registry.address import check_registry
from builder.which import driver
from builder.which.host import Gpu, Groups, Host, detect, device_groups
from builder.which.images import (
    Filters,
    apptainer_lines,
    carrying,
    check_filters,
    check_target,
    choices_of,
    docker_run,
    gpu_json,
    hexs,
    image_json,
    image_ref,
    ranked,
)
from builder.which.pcitable import (
    MAX_ALTERNATIVES,
    OTHER_VENDORS,
    OVERRIDE,
    RISK,
    families_of,
    gfx_from_override,
    gfx_from_version,
    pci_table,
)

__all__ = ["gfx_from_override", "gfx_from_version", "pci_table", "recommend", "span"]


# -- the recommendation ----------------------------------------------------------------------------------

def recommend(matrix: Path, root: Path = Path("/"), gfx: list[str] | None = None, rocm: str | None = None,
              os_name: str | None = None, flavor: str | None = None, registry: str | None = None,
              stat_fn: Callable[[Path], os.stat_result] = os.stat) -> dict[str, Any]:
    """The host's GPUs, the best image for them and its docker run line, as the JSON `--json` prints.

    exit_code is 0 when an image runs one of the host's AMD GPUs, 1 otherwise (no AMD GPU, none supported).
    """
    targets = [check_target(t) for t in gfx or []]
    filters = check_filters(rocm, os_name, flavor)
    if registry is not None:
        check_registry(registry)
    expansion = expand_matrix(matrix)
    cells, default_os = expansion.cells, expansion.default_os
    if targets:
        table = pci_table()
        host = Host("--gfx", [Gpu(f"a {t} GPU (--gfx)", t, t in table.igpu_targets) for t in targets], [], [])
    else:
        host = detect(root)
    groups = device_groups(root, stat_fn)
    notes = list(host.notes)
    everything = {t: carrying(cells, t) for t in dict.fromkeys(g.target for g in host.gpus if g.target)}
    usable = {t: [c for c in found if filters.keeps(c)] for t, found in everything.items()}
    gpus = host.gpus
    supported = [g for g in gpus if g.target and usable[g.target]]

    recommended = None
    best, options = None, []
    if supported:
        recommended = _recommendation(gpus, supported, usable, everything, cells, default_os, registry, groups,
                                      filters, notes)
        options = ranked(usable[recommended["target"]], default_os)
        best = options[0]
    host_driver = driver.check(root, best, options, registry, loaded=host.source == "kfd")
    if driver.note(host_driver):
        notes.append(str(driver.note(host_driver)))
    unmatched = [_unmatched(target, [g for g in gpus if g.target == target], gpus, everything, cells, default_os,
                            registry, groups, filters, matrix)
                 for target in dict.fromkeys(g.target for g in gpus if not (g.target and usable[g.target]))]
    if host.source == "kfd" and not groups.kfd:
        notes.append("there is no /dev/kfd here (inside a container?): run `builder which` on the host; the docker run "
                     "line passes /dev/kfd from the host")
    if gpus and groups.source:
        notes.append(f"--group-add {' '.join(map(str, groups.gids))}: {groups.source} on this host; a non-root user in "
                     "the container needs it to open the devices, and numbers differ between host and image")
    elif gpus:
        notes.append("no /dev/kfd group and no render group in /etc/group: the docker run line asks getent on the host")
    if recommended:
        notes.append("apptainer exec runs as you, with your own groups: your user needs render and video on the host "
                     "(`id -nG`); --rocm gives the GPUs (docs/hpc.md)")
    if recommended and not registry:
        notes.append(f"{tags.LOCAL_NAMESPACE}/... is the name `builder build` gives an image on this host; pass "
                     "--registry HOST/NAMESPACE (or set RIF_REGISTRY) for the published images")
    cpu_image = None
    if not gpus:
        notes.insert(0, "no AMD GPU found: no GPU in the KFD topology (/sys/class/kfd) and no AMD (PCI vendor 0x1002) "
                        "display or accelerator device on the PCI bus")
        cpu = [c for c in cells if c.rocm is None and filters.keeps(c)]
        best_cpu = max(cpu, key=lambda c: (Version(c.torch), c.os == default_os, c.flavor == "runtime"), default=None)
        if best_cpu is not None:
            cpu_image = {**image_json(best_cpu, registry),
                         "docker_run": f"docker run -it {image_ref(best_cpu, registry)}",
                         **apptainer_lines(image_ref(best_cpu, registry), [], registry, gpu=False)}
    return {
        "matrix": str(matrix),
        "source": host.source,
        "gpus": [gpu_json(g, bool(g.target and usable[g.target])) for g in gpus],
        "other_gpus": [{"pci": d.address, "vendor": OTHER_VENDORS.get(d.vendor, f"vendor 0x{d.vendor:04x}"),
                        "vendor_id": hexs(d.vendor, 4), "device_id": hexs(d.device, 4)} for d in host.others],
        "recommended": recommended,
        "unmatched": unmatched,
        "cpu_image": cpu_image,
        "host_driver": host_driver,
        "render_gids": list(groups.gids),
        "gid_source": groups.source,
        "notes": notes,
        "exit_code": 0 if recommended else 1,
    }


def _visible(chosen: list[Gpu], gpus: list[Gpu]) -> list[tuple[str, str]]:
    """-e HIP_VISIBLE_DEVICES=... when the container would also see GPUs the choice leaves out."""
    if len(chosen) == len(gpus) or any(g.index is None for g in chosen):
        return []
    return [("HIP_VISIBLE_DEVICES", ",".join(str(g.index) for g in chosen if g.index is not None))]


def span(indices: list[int]) -> str:
    """[0, 1, 2, 3, 5] -> '0-3,5'."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)


def _who(gpus: list[Gpu]) -> str:
    """'8 x AMD Instinct MI300X (HIP 0-7)', 'AMD Radeon RX 6800 (PCI 0000:03:00.0)'."""
    names = list(dict.fromkeys(g.name for g in gpus))
    count = f"{len(gpus)} x " if len(gpus) > 1 and len(names) == 1 else ""
    indices = [g.index for g in gpus if g.index is not None]
    if len(indices) == len(gpus):
        where = f" (HIP {span(indices)})"
    else:
        where = f" (PCI {', '.join(g.pci for g in gpus if g.pci)})" if any(g.pci for g in gpus) else ""
    return f"{count}{' + '.join(names)}{where}"


def _recommendation(gpus: list[Gpu], supported: list[Gpu], usable: dict[str, list[CellSpec]],
                    everything: dict[str, list[CellSpec]], cells: list[CellSpec], default_os: str,
                    registry: str | None, groups: Groups, filters: Filters, notes: list[str]) -> dict[str, Any]:
    pool = [g for g in supported if not g.igpu] or supported  # a dGPU before an iGPU
    counts = Counter(g.target for g in pool)
    primary = max(dict.fromkeys(g.target for g in pool), key=lambda t: counts[t])
    assert primary is not None
    options = ranked(usable[primary], default_os)
    best = options[0]
    chosen = [g for g in pool if g.target in best.gfx_targets]
    env = _visible(chosen, gpus)
    left = [g for g in gpus if g not in chosen]
    if left and env:
        notes.append(f"-e {env[0][0]}={env[0][1]}: torch sees only {_who(chosen)}, not {_who(left)}; "
                     "HIP numbers the GPUs in KFD topology order (rocminfo's order), from 0")
    elif left:
        notes.append(f"the container sees every GPU ({_who(gpus)}): add -e HIP_VISIBLE_DEVICES=N to keep torch on "
                     f"{_who(chosen)} (N counts the GPUs in rocminfo's order, from 0)")
    others = [g for g in supported if g.target not in best.gfx_targets]
    if others:
        wanted = {g.target for g in supported if g.target}
        both = [c for c in cells if c.rocm and wanted <= set(c.gfx_targets) and filters.keeps(c)]
        if both:
            notes.append(f"{ranked(both, default_os)[0].tag} carries kernels for every AMD GPU here "
                         f"({', '.join(sorted(wanted))})")
    seen = {(best.gfx, best.flavor)}
    alternatives: list[dict[str, Any]] = []
    for cell in options[1:]:
        if (cell.gfx, cell.flavor) not in seen and len(alternatives) < MAX_ALTERNATIVES:
            seen.add((cell.gfx, cell.flavor))
            alternatives.append(image_json(cell, registry))
    families = families_of(primary)
    return {"target": primary, "family": families[0] if families else None, "gpus": [gpus.index(g) for g in chosen],
            "for": _who(chosen), "image": image_json(best, registry),
            "docker_run": docker_run(image_ref(best, registry), groups.gids, env),
            **apptainer_lines(image_ref(best, registry), env, registry), "alternatives": alternatives,
            "choices": choices_of(everything[primary])}


def _unmatched(target: str | None, mine: list[Gpu], gpus: list[Gpu], everything: dict[str, list[CellSpec]],
               cells: list[CellSpec], default_os: str, registry: str | None, groups: Groups, filters: Filters,
               matrix: Path) -> dict[str, Any]:
    """Why no image runs these GPUs, and (for an unsupported target) what HSA_OVERRIDE_GFX_VERSION would do."""
    who = _who(mine)
    families = families_of(target)
    entry: dict[str, Any] = {"target": target, "family": families[0] if families else None,
                             "gpus": [gpus.index(g) for g in mine], "for": who, "override": None}
    if target is None:
        entry["why"] = "unknown-device"
        entry["message"] = (f"{who}: its PCI device ID is not in builder/data/pci_ids.yaml; load amdgpu and run "
                            "again (the KFD topology names the target), or pass --gfx TARGET (rocminfo's Name: line)")
        return entry
    if everything[target]:
        entry["why"] = "filtered"
        entry["choices"] = choices_of(everything[target])
        choices = entry["choices"]
        entry["message"] = (f"{who}: no image for {target} with {filters}; {matrix} has ROCm "
                            f"{', '.join(choices['rocm'])} on {', '.join(choices['os'])}, flavors "
                            f"{', '.join(choices['flavor'])}")
        return entry
    entry["why"] = "unsupported"
    where = (f"its family {families[0]} has no image there" if families else
             f"{target} is in none of the factory's gfx families (builder/data/gfx.yaml)")
    entry["message"] = f"{who}: no image of {matrix} carries kernels for {target}; {where}"
    value = pci_table().overrides.get(target)
    poses = gfx_from_override(value) if value else None
    if value and poses:
        images = ranked([c for c in carrying(cells, poses) if filters.keeps(c)], default_os)
        env = [*_visible(mine, gpus), (OVERRIDE, value)]
        entry["override"] = {
            "value": value, "poses_as": poses, "risk": RISK,
            "image": image_json(images[0], registry) if images else None,
            "docker_run": docker_run(image_ref(images[0], registry), groups.gids, env) if images else None,
            **(apptainer_lines(image_ref(images[0], registry), env, registry) if images else
               {"apptainer_pull": None, "apptainer_exec": None})}
    return entry
