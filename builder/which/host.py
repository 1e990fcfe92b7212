"""What the host has: GPUs from the KFD topology or the PCI bus, and the groups owning the GPU devices."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from builder.core import safefs
from builder.which.pcitable import (
    ACCELERATOR,
    AMD,
    DISPLAY,
    KFD_NODES,
    PCI_DEVICES,
    PciGpu,
    gfx_from_version,
    pci_table,
)

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
    """The first 64 KiB of a regular file: a FIFO or a device under --root is refused, not waited on. Links
    are followed (sysfs is made of them); the values read are only ever parsed as numbers."""
    return safefs.read_regular(path, 65536, follow=True, cut=True).decode("ascii", errors="replace")


def _number(text: str) -> bool:
    """Decimal ASCII digits that make an int of sane size ('²'.isdigit() is True, and int('²') fails)."""
    return text.isascii() and text.isdigit() and len(text) <= 18


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
        if len(parts) == 2 and _number(parts[1]):
            values[parts[0]] = int(parts[1])
    return values


def read_kfd(root: Path) -> list[KfdNode] | None:
    """The KFD topology's nodes in node order; None when there is no topology (amdgpu not loaded)."""
    base = root / KFD_NODES
    if not base.is_dir():
        return None
    nodes = []
    for d in base.iterdir():
        if not _number(d.name):
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
        if len(fields) >= 3 and fields[0] == name and _number(fields[2]):
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
