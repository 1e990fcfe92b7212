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

Everything is read under a root directory (default /), so a recorded tree (tests/data/sysfs/<machine>/) stands in
for a host. Exit code (see README, "Which image for my GPU?"): 0 an image of the matrix runs one of the host's AMD
GPUs; 1 no AMD GPU, or none the matrix's images support (the reason, and what HSA_OVERRIDE_GFX_VERSION would do);
2 bad input.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, field_validator

from builder import catalog, tags
from builder.matrix import expand_matrix
from builder.plan import check_registry, usage_error
from builder.spec import ALL_TARGETS, CellSpec

AMD = 0x1002
KFD_NODES = Path("sys/class/kfd/kfd/topology/nodes")
PCI_DEVICES = Path("sys/bus/pci/devices")
DISPLAY, ACCELERATOR = 0x03, 0x12  # PCI base classes: display controller; processing accelerator (MI300 and later)
TARGET_RE = re.compile(r"gfx[0-9]{1,2}[0-9a-f]{2}")
ROCM_RE = re.compile(r"(?:rocm)?([0-9]+\.[0-9]+(?:\.[0-9]+)?)")
OTHER_VENDORS = {0x10DE: "NVIDIA", 0x8086: "Intel", 0x1A03: "ASPEED (a server's BMC)", 0x102B: "Matrox",
                 0x1AF4: "virtio", 0x1234: "QEMU", 0x15AD: "VMware"}
OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
RISK = ("unsupported by AMD (a debugging aid): kernels built for another target can fault (memory access fault, "
        "GPU page fault) or hang the GPU, and it applies to every GPU the container sees")
MAX_ALTERNATIVES = 4
FLAVORS = ("runtime", "devel")


# -- the PCI table (builder/data/pci_ids.yaml) -------------------------------------------------------------

class PciGpu(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str
    name: str
    kind: Literal["dgpu", "igpu"]
    revisions: dict[str, str] = {}

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        if not TARGET_RE.fullmatch(value):
            raise ValueError(f"not a gfx target: {value!r}")
        return value

    @field_validator("revisions")
    @classmethod
    def _revisions(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not re.fullmatch(r"[0-9a-f]{2}", k)]
        if bad:
            raise ValueError(f"revisions are two lower-case hex digits, quoted: {bad}")
        return value


class PciTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    vendor: str
    devices: dict[str, PciGpu]
    igpu_targets: tuple[str, ...]
    overrides: dict[str, str]

    @field_validator("devices")
    @classmethod
    def _devices(cls, value: dict[str, PciGpu]) -> dict[str, PciGpu]:
        bad = [k for k in value if not re.fullmatch(r"[0-9a-f]{4}", k)]
        if bad:
            raise ValueError(f"device IDs are four lower-case hex digits, quoted: {bad}")
        return value

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [f"{k}: {v}" for k, v in value.items() if not (TARGET_RE.fullmatch(k) and gfx_from_override(v))]
        if bad:
            raise ValueError(f"overrides map a target to X.Y.Z: {bad}")
        return value

    def lookup(self, device_id: int | None) -> PciGpu | None:
        return self.devices.get(f"{device_id:04x}") if device_id is not None else None


@cache
def pci_table() -> PciTable:
    text = resources.files("builder").joinpath("data", "pci_ids.yaml").read_text(encoding="utf-8")
    return PciTable.model_validate(yaml.safe_load(text))


# -- gfx names -------------------------------------------------------------------------------------------

def gfx_name(major: int, minor: int, stepping: int) -> str | None:
    """9.0.12 -> gfx90c, 9.4.2 -> gfx942, 11.5.1 -> gfx1151: minor and stepping are one hex digit each."""
    if major <= 0 or not (0 <= minor < 16 and 0 <= stepping < 16):
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def gfx_from_version(value: int) -> str | None:
    """KFD's gfx_target_version (110000, 90402, 90012) -> gfx1100, gfx942, gfx90c; 0 (a CPU node) -> None."""
    return gfx_name(value // 10000, value // 100 % 100, value % 100) if value > 0 else None


def gfx_from_override(value: str) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION's X.Y.Z (10.3.0) -> the target every GPU then poses as (gfx1030)."""
    parts = value.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return gfx_name(*(int(p) for p in parts))


def families_of(target: str | None) -> list[str]:
    """The gfx families (builder/data/gfx.yaml) that hold a target."""
    return [name for name, fam in catalog.gfx_families().items() if target in fam.targets]


# -- what the host has -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PciDevice:
    address: str  # 0000:03:00.0
    vendor: int
    device: int
    cls: int  # 0x030000
    revision: int | None

    @property
    def is_amd_gpu(self) -> bool:
        return self.vendor == AMD and self.cls >> 16 in (DISPLAY, ACCELERATOR)

    @property
    def is_display(self) -> bool:
        return self.cls >> 16 == DISPLAY


@dataclass(frozen=True)
class KfdNode:
    node: int
    props: dict[str, int]


@dataclass(frozen=True)
class Gpu:
    name: str
    target: str | None  # None: a PCI device the table does not know
    igpu: bool
    index: int | None = None  # HIP device index (position among the KFD topology's GPU nodes)
    node: int | None = None  # KFD topology node
    pci: str | None = None
    device_id: int | None = None
    revision: int | None = None
    render_minor: int | None = None


@dataclass
class Host:
    source: Literal["kfd", "pci", "--gfx", "none"]
    gpus: list[Gpu]
    others: list[PciDevice]  # display devices of other vendors
    notes: list[str]


def _read(path: Path) -> str:
    with path.open("rb") as f:
        return f.read(65536).decode("ascii", errors="replace")


def _hex(path: Path) -> int:
    return int(_read(path).strip(), 16)


def read_pci(root: Path) -> list[PciDevice]:
    """Every PCI device with readable vendor, device and class files, by address."""
    base = root / PCI_DEVICES
    if not base.is_dir():
        return []
    found = []
    for d in sorted(base.iterdir()):
        try:
            vendor, device, cls = _hex(d / "vendor"), _hex(d / "device"), _hex(d / "class")
        except (OSError, ValueError):
            continue
        try:
            revision: int | None = _hex(d / "revision")
        except (OSError, ValueError):
            revision = None
        found.append(PciDevice(d.name, vendor, device, cls, revision))
    return found


def parse_properties(text: str) -> dict[str, int]:
    """A KFD properties file: one `key value` pair a line, integer values."""
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            values[parts[0]] = int(parts[1])
    return values


def read_kfd(root: Path) -> list[KfdNode] | None:
    """The KFD topology's nodes in node order; None when there is no topology (amdgpu not loaded)."""
    base = root / KFD_NODES
    if not base.is_dir():
        return None
    nodes = []
    for d in base.iterdir():
        if not d.name.isdigit():
            continue
        try:
            nodes.append(KfdNode(int(d.name), parse_properties(_read(d / "properties"))))
        except OSError:  # a node hidden by the device cgroup answers EPERM
            continue
    return sorted(nodes, key=lambda n: n.node)


def _bdf(domain: int, location: int) -> str:
    """KFD's domain and location_id (bus << 8 | device << 3 | function) -> a PCI address."""
    return f"{domain:04x}:{location >> 8 & 0xff:02x}:{location >> 3 & 0x1f:02x}.{location & 7}"


def _name(entry: PciGpu | None, device_id: int | None, revision: int | None) -> str:
    if entry is None:
        return f"AMD GPU 0x{device_id:04x}" if device_id is not None else "AMD GPU"
    return entry.revisions.get(f"{revision:02x}", entry.name) if revision is not None else entry.name


def _kfd_gpu(index: int, node: KfdNode, pci: dict[str, PciDevice], notes: list[str]) -> Gpu:
    props, table = node.props, pci_table()
    target = gfx_from_version(props["gfx_target_version"])
    address = _bdf(props.get("domain", 0), props["location_id"]) if "location_id" in props else None
    device = pci.get(address) if address else None
    device_id = props.get("device_id") or (device.device if device else None)
    revision = device.revision if device else None
    entry = table.lookup(device_id)
    if entry is not None and entry.target != target:
        notes.append(f"builder/data/pci_ids.yaml has {entry.target} for device 0x{device_id:04x}; the kernel says "
                     f"{target}: the kernel's target is used")
    igpu = entry.kind == "igpu" if entry else target in table.igpu_targets or props.get("cpu_cores_count", 0) > 0
    minor = props.get("drm_render_minor") or None
    return Gpu(_name(entry, device_id, revision), target, igpu, index, node.node, address, device_id, revision, minor)


def _pci_gpu(device: PciDevice) -> Gpu:
    entry = pci_table().lookup(device.device)
    return Gpu(_name(entry, device.device, device.revision), entry.target if entry else None,
               entry.kind == "igpu" if entry else False, pci=device.address, device_id=device.device,
               revision=device.revision)


def detect(root: Path) -> Host:
    """The host's AMD GPUs: from the KFD topology when it lists any, else from PCI IDs."""
    pci = read_pci(root)
    by_address = {d.address: d for d in pci}
    amd = [d for d in pci if d.is_amd_gpu]
    others = [d for d in pci if d.vendor != AMD and d.is_display]
    nodes = read_kfd(root)
    gpu_nodes = [n for n in nodes or [] if n.props.get("gfx_target_version", 0) > 0]
    notes: list[str] = []
    if gpu_nodes:
        gpus = [_kfd_gpu(i, n, by_address, notes) for i, n in enumerate(gpu_nodes)]
        missed = [d.address for d in amd if d.address not in {g.pci for g in gpus}]
        if missed:
            notes.append(f"PCI lists AMD GPUs the KFD topology does not ({', '.join(missed)}): the driver did not set "
                         "them up for compute (see `dmesg | grep -i kfd` on the host)")
        return Host("kfd", gpus, others, notes)
    if amd:
        why = "no KFD topology (/sys/class/kfd)" if nodes is None else "the KFD topology lists no GPU"
        notes.append(f"{why}: the amdgpu driver is not loaded, so GPUs are named from their PCI IDs and no "
                     "container can use them yet; install or load amdgpu (`sudo modprobe amdgpu`), then run "
                     "`builder which` again")
        return Host("pci", [_pci_gpu(d) for d in amd], others, notes)
    return Host("none", [], others, notes)


@dataclass(frozen=True)
class Groups:
    gids: tuple[int, ...]  # what --group-add needs, numeric
    source: str | None
    kfd: bool  # /dev/kfd exists


def _group_gid(path: Path, name: str) -> int | None:
    try:
        text = _read(path)
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[0] == name and fields[2].isdigit():
            return int(fields[2])
    return None


def device_groups(root: Path, stat_fn: Callable[[Path], os.stat_result] = os.stat) -> Groups:
    """The numeric groups of /dev/kfd and /dev/dri/renderD*, else /etc/group's `render` (names differ between
    host and image, numbers are what the device files carry). A regular file in a recorded tree stands for a
    device node: it says the device exists, and the GID then comes from etc/group."""
    dev = root / "dev"
    paths = [dev / "kfd", *sorted((dev / "dri").glob("renderD*"))]
    gids: list[int] = []
    seen = []
    for path in paths:
        try:
            st = stat_fn(path)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode) and st.st_gid != 0:
            seen.append("/" + path.relative_to(root).as_posix())
            if st.st_gid not in gids:
                gids.append(st.st_gid)
    kfd = (dev / "kfd").exists()
    if gids:
        return Groups(tuple(gids), f"the group of {', '.join(seen)}", kfd)
    render = _group_gid(root / "etc/group", "render")
    if render is not None:
        return Groups((render,), "the render group in /etc/group", kfd)
    return Groups((), None, kfd)


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
    """Best first: the per-family image, then newest ROCm, newest torch, the matrix's first OS, runtime."""
    order = {id(c): i for i, c in enumerate(cells)}
    return sorted(cells, reverse=True, key=lambda c: (
        c.gfx != ALL_TARGETS, Version(c.rocm or "0"), Version(c.torch), c.os == default_os, c.flavor == "runtime",
        -order[id(c)]))


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


def _choices(cells: list[CellSpec]) -> dict[str, list[str]]:
    """What --rocm, --os and --flavor can pick among these cells."""
    def unique(values: Iterable[str]) -> list[str]:
        return list(dict.fromkeys(values))
    return {"rocm": sorted(unique(c.rocm or "" for c in cells), key=Version, reverse=True),
            "torch": sorted(unique(c.torch for c in cells), key=Version, reverse=True),
            "os": unique(c.os for c in cells), "flavor": [f for f in FLAVORS if any(c.flavor == f for c in cells)]}


def _image_json(cell: CellSpec, registry: str | None) -> dict[str, Any]:
    return {"tag": cell.tag, "ref": image_ref(cell, registry), "gfx": cell.gfx, "gfx_targets": list(cell.gfx_targets),
            "rocm": cell.rocm, "torch": cell.torch, "python": cell.python, "os": cell.os, "flavor": cell.flavor,
            "channel": cell.channel}


def _hexs(value: int | None, digits: int) -> str | None:
    return f"0x{value:0{digits}x}" if value is not None else None


def _gpu_json(gpu: Gpu, supported: bool) -> dict[str, Any]:
    families = families_of(gpu.target)
    return {"index": gpu.index, "kfd_node": gpu.node, "pci": gpu.pci, "device_id": _hexs(gpu.device_id, 4),
            "revision": _hexs(gpu.revision, 2), "name": gpu.name, "target": gpu.target,
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
    families = catalog.gfx_families()
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
    if os_name is not None and os_name not in catalog.os_releases():
        raise usage_error("--os", f"unknown os {os_name!r}; known: {', '.join(sorted(catalog.os_releases()))}")
    if flavor is not None and flavor not in FLAVORS:
        raise usage_error("--flavor", f"{flavor!r} is not runtime or devel")
    return Filters(rocm, os_name, flavor)


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
    if supported:
        recommended = _recommendation(gpus, supported, usable, everything, cells, default_os, registry, groups,
                                      filters, notes)
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
            cpu_image = {**_image_json(best_cpu, registry),
                         "docker_run": f"docker run -it {image_ref(best_cpu, registry)}"}
    return {
        "matrix": str(matrix),
        "source": host.source,
        "gpus": [_gpu_json(g, bool(g.target and usable[g.target])) for g in gpus],
        "other_gpus": [{"pci": d.address, "vendor": OTHER_VENDORS.get(d.vendor, f"vendor 0x{d.vendor:04x}"),
                        "vendor_id": _hexs(d.vendor, 4), "device_id": _hexs(d.device, 4)} for d in host.others],
        "recommended": recommended,
        "unmatched": unmatched,
        "cpu_image": cpu_image,
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
            alternatives.append(_image_json(cell, registry))
    families = families_of(primary)
    return {"target": primary, "family": families[0] if families else None, "gpus": [gpus.index(g) for g in chosen],
            "for": _who(chosen), "image": _image_json(best, registry),
            "docker_run": docker_run(image_ref(best, registry), groups.gids, env), "alternatives": alternatives,
            "choices": _choices(everything[primary])}


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
        entry["choices"] = _choices(everything[target])
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
            "image": _image_json(images[0], registry) if images else None,
            "docker_run": docker_run(image_ref(images[0], registry), groups.gids, env) if images else None}
    return entry
