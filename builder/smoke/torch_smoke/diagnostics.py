"""Why torch sees no GPU: device files, permissions, the render GID, the environment, the host's GPU targets, WSL
and the host's amdgpu driver against the image's driver range.

Everything here is a pure function of a HostView, so tests feed a fake tree instead of the real /dev and /sys.
"""

from __future__ import annotations

import grp
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import apptainer, hostdriver, wsl
from .core import OVERRIDE, RANK, RISKY, VISIBILITY, Result, gfx_from_override, gfx_from_version, unique
from .platforms import Platform, select


# -- what the container sees: device files, kfd topology, ids, groups, environment ---------------
@dataclass(frozen=True)
class KfdGpu:
    node: str
    target: str
    device_id: int


def read_properties(path: Path) -> dict[str, int]:
    """A kfd topology properties file: one 'key value' pair a line, integer values."""
    values = {}
    for line in path.read_text(encoding="ascii", errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            values[parts[0]] = int(parts[1])
    return values


def kfd_gpus(nodes: Path) -> list[KfdGpu]:
    """GPUs the host's amdgpu driver knows, named by target even when torch sees no GPU."""
    found = []
    for props in sorted(nodes.glob("*/properties"), key=lambda p: (len(p.parent.name), p.parent.name)):
        try:
            values = read_properties(props)
        except OSError:
            continue
        target = gfx_from_version(values.get("gfx_target_version", 0))
        if target:
            found.append(KfdGpu(props.parent.name, target, values.get("device_id", 0)))
    return found


def _stat(path: Path) -> os.stat_result:
    return os.stat(path)


@dataclass(frozen=True)
class HostView:
    """Everything the diagnostics read, as parameters, so tests can feed a fake tree."""

    dev: Path
    kfd_nodes: Path
    uid: int
    gids: frozenset[int]
    groups: Mapping[int, str]  # gid -> name, this image's group table
    env: Mapping[str, str]
    stat: Callable[[Path], os.stat_result] = _stat
    apptainer: bool = False  # under Apptainer or Singularity: their fixes, not docker run's
    root: Path | None = None  # where proc/ and sys/module/ are read (the host's, in a container); None: not read

    @classmethod
    def current(cls, root: Path = Path("/")) -> HostView:
        env = dict(os.environ)
        return cls(dev=root / "dev", kfd_nodes=root / "sys/class/kfd/kfd/topology/nodes", uid=os.geteuid(),
                   gids=frozenset({os.getegid(), *os.getgroups()}),
                   groups={g.gr_gid: g.gr_name for g in grp.getgrall()}, env=env,
                   apptainer=apptainer.detect(env, root), root=root)

    def proc_version(self) -> str | None:
        return hostdriver.read_small(self.root / "proc/version") if self.root else None

    def shown(self, path: Path) -> str:
        """The path as the user knows it (/dev/kfd), even when it lies in a fake tree."""
        try:
            return "/dev/" + path.relative_to(self.dev).as_posix()
        except ValueError:
            return str(path)


def can_read_write(st: os.stat_result, uid: int, gids: frozenset[int]) -> bool:
    """The kernel's owner/group/other rule; root in a container bypasses it (CAP_DAC_OVERRIDE)."""
    if uid == 0:
        return True
    need = 0o600 if st.st_uid == uid else 0o060 if st.st_gid in gids else 0o006
    return st.st_mode & need == need


def group_text(gid: int, groups: Mapping[int, str]) -> str:
    """'group 110 (render in this image)': device files carry the host's GID, which names may not match."""
    name = groups.get(gid)
    if name:
        return f"group {gid} ({name} in this image)"
    render = [g for g, n in groups.items() if n == "render"]
    return f"group {gid} (unknown to this image" + (f", whose render group is {render[0]})" if render else ")")


# -- findings -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    result: Result
    flags: tuple[str, ...] = ()  # docker run (or apptainer exec) flags that would fix it


def device_problem(view: HostView, path: Path) -> tuple[str, str, str]:
    """(problem, fix, docker flag) for one device file; ('', '', '') when the user can use it."""
    st = view.stat(path)
    if can_read_write(st, view.uid, view.gids):
        return "", "", ""
    group, mode = group_text(st.st_gid, view.groups), f"{stat.S_IMODE(st.st_mode):04o}"
    if st.st_mode & 0o060 == 0o060 and st.st_gid not in view.gids and view.apptainer:
        return (f"uid {view.uid} is not in {group}, which owns {view.shown(path)} (mode {mode}): its groups are "
                f"{', '.join(map(str, sorted(view.gids)))}", apptainer.gid_fix(st.st_gid), "")
    if st.st_mode & 0o060 == 0o060 and st.st_gid not in view.gids:
        return (f"GID mismatch: uid {view.uid} cannot read/write {view.shown(path)}, mode {mode}, {group}: "
                f"the user's groups are {', '.join(map(str, sorted(view.gids)))}",
                f"add --group-add {st.st_gid} to docker run (the host's GID of the device; names differ "
                "between host and image)", f"--group-add {st.st_gid}")
    return (f"{view.shown(path)}, mode {mode}, {group}, is not read-write for uid {view.uid} or its group",
            'on the host, give the device group read-write access (udev rule MODE="0660")', "")


def devices_finding(view: HostView, name: str, paths: list[Path]) -> Finding:
    problems = [device_problem(view, p) for p in paths]
    bad = [p for p in problems if p[0]]
    if bad:
        return Finding(Result(name, "warn", "; ".join(p[0] for p in bad), "; ".join(unique(p[1] for p in bad))),
                       tuple(unique(p[2] for p in bad)))
    groups = ", ".join(unique(group_text(view.stat(p).st_gid, view.groups) for p in paths))
    who = ("root: no group needed" if view.uid == 0 else
           f"uid {view.uid}'s groups are {', '.join(map(str, sorted(view.gids)))}")
    return Finding(Result(name, "pass", f"{', '.join(view.shown(p) for p in paths)} read-write; {groups}, {who}"))


def missing_device(view: HostView, name: str, detail: str, flags: tuple[str, ...]) -> Finding:
    """A device not passed in; a non-root user also needs the host's groups, known only on the host."""
    if view.apptainer:
        nvidia = flags[0] == "--gpus all"
        return Finding(Result(name, "warn", detail, apptainer.NVIDIA_FIX if nvidia else apptainer.MISSING_FIX),
                       ("--nv",) if nvidia else apptainer.ROCM_FLAGS)
    if view.uid != 0 and flags[0].startswith("--device"):
        flags += ("--group-add video", '--group-add "$(getent group render | cut -d: -f3)"')
    return Finding(Result(name, "warn", detail, f"add {' '.join(flags)} to docker run"), flags)


def dev_kfd(view: HostView) -> Finding:
    kfd = view.dev / "kfd"
    if not kfd.exists() and wsl.detect(view.dev, view.proc_version()):
        return Finding(Result("dev_kfd", "warn", f"{wsl.DETAIL}; {wsl.WORKS}", wsl.FIX))
    if not kfd.exists():
        return missing_device(view, "dev_kfd", "/dev/kfd is not in the container: the GPU was not passed in",
                              ("--device=/dev/kfd",))
    return devices_finding(view, "dev_kfd", [kfd])


def dev_dri(view: HostView) -> Finding:
    nodes = sorted((view.dev / "dri").glob("renderD*"))
    if not nodes:
        return missing_device(view, "dev_dri", "no /dev/dri/renderD* in the container", ("--device=/dev/dri",))
    return devices_finding(view, "dev_dri", nodes)


def dev_nvidia(view: HostView) -> Finding:
    nodes = sorted(view.dev.glob("nvidia[0-9]*"))
    ctl = view.dev / "nvidiactl"
    if not ctl.exists() or not nodes:
        if view.apptainer:
            return missing_device(view, "dev_nvidia", "no /dev/nvidiactl and /dev/nvidiaN in the container",
                                  ("--gpus all",))
        return Finding(Result("dev_nvidia", "warn", "no /dev/nvidiactl and /dev/nvidiaN in the container",
                              "add --gpus all to docker run (needs the NVIDIA Container Toolkit on the host)"),
                       ("--gpus all",))
    return devices_finding(view, "dev_nvidia", [ctl, *nodes])


def native_targets(view: HostView, expect: Mapping[str, Any]) -> list[str]:
    """The host's GPU targets (kfd topology: the hardware, whatever an override says) this image's torch carries."""
    carried = set(expect.get("gfx_targets") or [])
    return unique(g.target for g in kfd_gpus(view.kfd_nodes) if g.target in carried) if view.kfd_nodes.is_dir() else []


def gpu_env(env: Mapping[str, str], gpu_visible: bool, under_apptainer: bool = False,
            native: Sequence[str] = ()) -> Finding:
    """Flags HSA_OVERRIDE_GFX_VERSION always (naming the GPU's own target where the image supports it: `native`),
    and *_VISIBLE_DEVICES where they may hide the GPU."""
    notes, fixes, status = [], [], "pass"
    if OVERRIDE in env:
        value = env[OVERRIDE]
        notes.append(f"{OVERRIDE}={value} makes the runtime treat every GPU as {gfx_from_override(value) or value}")
        if native:
            notes.append(f"the GPU's own target {', '.join(native)} is one this image's torch supports: the override "
                         "is not needed and can cost correctness or speed")
            fixes.append(f"unset {OVERRIDE} (drop -e {OVERRIDE} from docker run): this image runs "
                         f"{', '.join(native)} natively")
        else:
            fixes.append(f"unset {OVERRIDE} and use an image whose family contains the GPU's real target (the "
                         "override is a risky workaround: page faults, hangs)")
        status = "warn"
    for var in VISIBILITY:
        if var not in env:
            continue
        hides_all = env[var].strip() in ("", "-1")
        notes.append(f"{var}={env[var]!r} " + ("hides every GPU" if hides_all else "limits which GPUs are visible"))
        if hides_all or not gpu_visible:
            how = f"APPTAINERENV_{var} on the host" if under_apptainer else f"-e {var} from docker run"
            fixes.append(f"unset {var} (drop {how}) or list device indices that exist")
            status = "warn"
        elif RANK[status] < RANK["info"]:
            status = "info"
    if not notes:
        return Finding(Result("gpu_env", "pass", f"none of {OVERRIDE}, {', '.join(VISIBILITY)} is set"))
    return Finding(Result("gpu_env", status, "; ".join(notes), "; ".join(fixes)))


def gpu_target(view: HostView, expect: Mapping[str, Any]) -> Finding:
    """The host's GPU targets (kfd topology, visible without /dev/kfd) against the image's family."""
    if not view.kfd_nodes.is_dir():
        return Finding(Result("gpu_target", "info", "no /sys/class/kfd: the host has no amdgpu driver loaded "
                              "(or no AMD GPU)", "on a GPU host, install and load the amdgpu driver"))
    gpus = kfd_gpus(view.kfd_nodes)
    if not gpus:
        return Finding(Result("gpu_target", "info", "the kfd topology lists no GPU"))
    family, targets = expect.get("gfx_family"), list(expect.get("gfx_targets") or [])
    found = ", ".join(f"{g.target} (node {g.node}, device 0x{g.device_id:04x})" for g in gpus)
    outside = unique(g.target for g in gpus if targets and g.target not in targets)
    if outside:
        return Finding(Result(
            "gpu_target", "warn", f"the host has {found}; {', '.join(outside)} is not in this image's family "
            f"{family} ({', '.join(targets)})",
            f"use an image built for a family that contains {', '.join(outside)}; {RISKY}"))
    return Finding(Result("gpu_target", "pass", f"the host has {found}" + (f", in family {family}" if family else "")))


DRIVER_STATUS = {"fits": "pass", "below": "warn", "above": "warn", "no-driver": "warn"}


def host_driver(view: HostView, expect: Mapping[str, Any]) -> Finding:
    """The host's amdgpu (read from the host's /sys/module and /proc, which a container shares) against the
    driver range of the image's ROCm line (cell.json amdgpu_driver)."""
    if view.root is None:
        return Finding(Result("host_driver", "info", "the host's driver was not read"))
    host = hostdriver.read_host_driver(view.root)
    if host.kind == "none" and wsl.detect(view.dev, view.proc_version()):
        return Finding(Result("host_driver", "info", "WSL: no amdgpu module; the GPU is behind /dev/dxg"))
    verdict = hostdriver.verdict(host, expect.get("amdgpu_driver"))
    return Finding(Result("host_driver", DRIVER_STATUS.get(verdict.status, "info"), verdict.detail, verdict.fix))


def env_finding(view: HostView, expect: Mapping[str, Any], gpu_visible: bool) -> Finding:
    return gpu_env(view.env, gpu_visible, view.apptainer, native_targets(view, expect))


# The diagnostics by the names platforms.py uses; each takes the view and the cell's expectations.
FINDINGS: dict[str, Callable[[HostView, Mapping[str, Any]], Finding]] = {
    "dev_kfd": lambda view, expect: dev_kfd(view),
    "dev_dri": lambda view, expect: dev_dri(view),
    "dev_nvidia": lambda view, expect: dev_nvidia(view),
    "gpu_env": lambda view, expect: env_finding(view, expect, gpu_visible=False),
    "gpu_target": gpu_target,
    "host_driver": host_driver,
}


def diagnose(view: HostView, expect: Mapping[str, Any], names: Sequence[str] | None = None) -> list[Finding]:
    """The named diagnostics (by default the cell's platform's), in order."""
    return [FINDINGS[name](view, expect) for name in (select(expect).diagnostics if names is None else names)]


def docker_flags(findings: list[Finding]) -> list[str]:
    """The findings' flags once each, devices first, as one would write them."""
    return sorted(unique(flag for f in findings for flag in f.flags), key=lambda flag: not flag.startswith("--device"))


def no_gpu_fix(findings: list[Finding], platform: Platform, under_apptainer: bool = False) -> str:
    """One line for the gpu check's skip: the docker run (or apptainer exec) flags that fix what was found."""
    flags = docker_flags(findings)
    if flags and under_apptainer:
        return apptainer.no_gpu_fix(flags)
    if flags:
        return f"run with: docker run {' '.join(flags)} IMAGE torch-smoke"
    if any(f.result.status == "warn" for f in findings):
        return "the devices are passed in: fix what the WARN lines below say"
    return (f"the devices are passed in and usable, yet torch sees no GPU: check the host's driver "
            f"({platform.host_tools} on the host)")
