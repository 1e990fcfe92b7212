#!/usr/bin/env python3
"""torch-smoke: proves PyTorch works in this image, and says how to fix it when it does not.

Runs inside the image: one file, stdlib + torch (numpy, torchvision and triton only where present),
Python 3.10+. Reads the image's expectations from /opt/rif/cell.json (or $RIF_CELL_FILE), written at
build time by rocm-image-factory. Every check runs under a time limit ($RIF_CHECK_TIMEOUT seconds
overrides it), so a hung GPU call fails its check instead of hanging the run.

Exit codes: 0 all required checks passed (WARN and INFO lines never change it), 1 a check failed,
3 --require-gpu was given but no GPU is visible.

For tests of this program only, not for users: --root DIR reads dev/ and sys/ under DIR instead of /,
and --simulate-gpu ARCH runs the GPU checks on the CPU device as if it were one GPU of that arch.
"""

from __future__ import annotations

import argparse
import grp
import importlib.util
import json
import math
import os
import shutil
import stat
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

CELL_FILE = os.environ.get("RIF_CELL_FILE", "/opt/rif/cell.json")
DEFAULT_TIMEOUT_S = 120.0
SLOW_TIMEOUT_S = {"gpu_conv": 300.0, "gpu_compile": 600.0}  # first calls compile kernels (MIOpen, Triton)
EXIT_OK, EXIT_FAILED, EXIT_NO_GPU = 0, 1, 3
EXIT_MEANING = {EXIT_OK: "all required checks passed", EXIT_FAILED: "a check failed",
                EXIT_NO_GPU: "--require-gpu was given and no GPU is visible"}
MARKS = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "info": "INFO"}
RANK = {"pass": 0, "info": 1, "warn": 2}
OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
VISIBILITY = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
RISKY = (f"{OVERRIDE} can make the GPU pose as a listed target, but that is a risky workaround "
         "(page faults, hangs)")
SECTION_FIX = {
    "install": "the image's /opt/venv is broken or was built from the wrong wheels: rebuild the image",
    "cpu": "torch computes wrong answers on the CPU: rebuild the image; report it if it persists",
}
HUNG_FIX = "the GPU or driver may be hung: check `dmesg` on the host"
# max |result - reference| / max |reference|, reference in float64 on the CPU from the same rounded inputs
MATMUL_TOL = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}
CONV_TOL, SDPA_TOL, COMPILE_TOL = 1e-3, 1e-2, 1e-5

T = TypeVar("T")


@dataclass
class Result:
    name: str
    status: str  # pass | fail | warn | skip | info
    detail: str = ""
    fix: str = ""
    seconds: float = 0.0
    section: str = ""
    timed_out: bool = False


@dataclass(frozen=True)
class Outcome:
    """A verdict other than a plain pass: warn (flagged, exit code unchanged) or info (reported only)."""

    status: str
    detail: str
    fix: str = ""


class Skip(Exception):
    """Raised by a check that does not apply to this image or host."""


class Fail(Exception):
    """Raised by a check that failed; fix is one line on what to do about it."""

    def __init__(self, detail: str, fix: str = "") -> None:
        super().__init__(detail)
        self.fix = fix


# -- names and versions ---------------------------------------------------------------------------
def public(version: str) -> str:
    """'2.13.0+cpu' -> '2.13.0': the local part names the build variant, not the release."""
    return version.split("+", 1)[0]


def major_minor(version: object) -> str:
    """'7.2.53211-e7e6d5b' -> '7.2': images promise a ROCm/CUDA release, not a build."""
    return ".".join(str(version).split(".")[:2])


def platform_kind(expect: Mapping[str, Any]) -> str:
    """rocm | cuda | cpu, from the cell's platform ('rocm7.2', 'cuda12.8', 'cpu')."""
    platform = str(expect.get("platform") or "cpu")
    return "rocm" if platform.startswith("rocm") else "cuda" if platform.startswith("cuda") else "cpu"


def gfx_name(major: int, minor: int, stepping: int) -> str:
    """9.0.10 -> gfx90a, 9.4.2 -> gfx942, 11.0.0 -> gfx1100: minor and stepping are one hex digit each."""
    return f"gfx{major}{minor:x}{stepping:x}"


def gfx_from_version(value: int) -> str | None:
    """kfd topology's gfx_target_version (110000, 90402, 90010) -> gfx name; 0 is a CPU node."""
    if value <= 0:
        return None
    return gfx_name(value // 10000, value // 100 % 100, value % 100)


def gfx_from_override(value: str) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION '11.0.0' -> gfx1100: the target the runtime pretends every GPU is."""
    parts = value.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return gfx_name(*(int(p) for p in parts))


def base_arch(name: str) -> str:
    """'gfx90a:sramecc+:xnack-' -> 'gfx90a': feature flags do not change which kernels apply."""
    return name.split(":", 1)[0].strip()


def sm_arch(value: str) -> str:
    """'9.0', '90' or 'sm_90' -> 'sm_90', the form torch.cuda.get_arch_list() uses."""
    value = value.strip().removeprefix("sm_")
    return "sm_" + value.replace(".", "")


def first_line(exc: BaseException, limit: int = 400) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:limit]


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


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

    @classmethod
    def current(cls, root: Path = Path("/")) -> HostView:
        return cls(dev=root / "dev", kfd_nodes=root / "sys/class/kfd/kfd/topology/nodes", uid=os.geteuid(),
                   gids=frozenset({os.getegid(), *os.getgroups()}),
                   groups={g.gr_gid: g.gr_name for g in grp.getgrall()}, env=dict(os.environ))

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


# -- diagnostics when no GPU is visible: pure functions of a HostView -----------------------------
@dataclass(frozen=True)
class Finding:
    result: Result
    flags: tuple[str, ...] = ()  # docker run flags that would fix it


def device_problem(view: HostView, path: Path) -> tuple[str, str, str]:
    """(problem, fix, docker flag) for one device file; ('', '', '') when the user can use it."""
    st = view.stat(path)
    if can_read_write(st, view.uid, view.gids):
        return "", "", ""
    group, mode = group_text(st.st_gid, view.groups), f"{stat.S_IMODE(st.st_mode):04o}"
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
    if view.uid != 0 and flags[0].startswith("--device"):
        flags += ("--group-add video", '--group-add "$(getent group render | cut -d: -f3)"')
    return Finding(Result(name, "warn", detail, f"add {' '.join(flags)} to docker run"), flags)


def dev_kfd(view: HostView) -> Finding:
    kfd = view.dev / "kfd"
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
        return Finding(Result("dev_nvidia", "warn", "no /dev/nvidiactl and /dev/nvidiaN in the container",
                              "add --gpus all to docker run (needs the NVIDIA Container Toolkit on the host)"),
                       ("--gpus all",))
    return devices_finding(view, "dev_nvidia", [ctl, *nodes])


def gpu_env(env: Mapping[str, str], gpu_visible: bool) -> Finding:
    """Flags HSA_OVERRIDE_GFX_VERSION always, and *_VISIBLE_DEVICES where they may hide the GPU."""
    notes, fixes, status = [], [], "pass"
    if OVERRIDE in env:
        value = env[OVERRIDE]
        notes.append(f"{OVERRIDE}={value} makes the runtime treat every GPU as {gfx_from_override(value) or value}")
        fixes.append(f"unset {OVERRIDE} and use an image whose family contains the GPU's real target (the "
                     "override is a risky workaround: page faults, hangs)")
        status = "warn"
    for var in VISIBILITY:
        if var not in env:
            continue
        hides_all = env[var].strip() in ("", "-1")
        notes.append(f"{var}={env[var]!r} " + ("hides every GPU" if hides_all else "limits which GPUs are visible"))
        if hides_all or not gpu_visible:
            fixes.append(f"unset {var} (drop -e {var} from docker run) or list device indices that exist")
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


def diagnose(view: HostView, expect: Mapping[str, Any]) -> list[Finding]:
    """Why torch sees no GPU: devices, permissions, the render GID, environment, the GPU's target."""
    if platform_kind(expect) == "cuda":
        return [dev_nvidia(view), gpu_env(view.env, gpu_visible=False)]
    return [dev_kfd(view), dev_dri(view), gpu_env(view.env, gpu_visible=False), gpu_target(view, expect)]


def docker_flags(findings: list[Finding]) -> list[str]:
    """The findings' flags once each, devices first, as one would write them."""
    return sorted(unique(flag for f in findings for flag in f.flags), key=lambda flag: not flag.startswith("--device"))


def no_gpu_fix(findings: list[Finding], kind: str) -> str:
    """One line for the gpu check's skip: the docker run flags that fix what the diagnostics found."""
    flags = docker_flags(findings)
    if flags:
        return f"run with: docker run {' '.join(flags)} IMAGE torch-smoke"
    if any(f.result.status == "warn" for f in findings):
        return "the devices are passed in: fix what the WARN lines below say"
    tool = "`nvidia-smi`" if kind == "cuda" else "`dmesg`, `rocminfo`"
    return f"the devices are passed in and usable, yet torch sees no GPU: check the host's driver ({tool} on the host)"


# -- GPU access: torch.cuda, the same API on ROCm and CUDA builds ---------------------------------
class Devices:
    """The torch.cuda calls the GPU checks need."""

    simulated = False

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.device = "cuda"

    def available(self) -> bool:
        return bool(self.torch.cuda.is_available())

    def count(self) -> int:
        return int(self.torch.cuda.device_count())

    def name(self, index: int) -> str:
        return str(self.torch.cuda.get_device_name(index))

    def arch(self, index: int) -> str:
        """gcnArchName on ROCm; CUDA builds have none (''), their arch is the compute capability."""
        return base_arch(str(getattr(self.torch.cuda.get_device_properties(index), "gcnArchName", "") or ""))

    def capability(self, index: int) -> str:
        major, minor = self.torch.cuda.get_device_capability(index)
        return f"sm_{major}{minor}"

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()


class CpuStandIn(Devices):
    """--simulate-gpu: the GPU checks on the CPU device, so their code is tested where no GPU exists."""

    simulated = True

    def __init__(self, torch: Any, arch: str) -> None:
        super().__init__(torch)
        self.device, self.fake_arch = "cpu", arch

    def available(self) -> bool:
        return True

    def count(self) -> int:
        return 1

    def name(self, index: int) -> str:
        return "CPU stand-in (--simulate-gpu, test mode)"

    def arch(self, index: int) -> str:
        return self.fake_arch

    def capability(self, index: int) -> str:
        return sm_arch(self.fake_arch)

    def synchronize(self) -> None:
        return None


def rel_error(got: Any, ref: Any) -> float:
    """max |got - ref| / max |ref|; NaN or inf in the result is an infinite error."""
    err = float((got.detach().double().cpu() - ref.double()).abs().max().item())
    scale = float(ref.double().abs().max().item()) or 1.0
    return err / scale if math.isfinite(err) else math.inf


# -- the checks ------------------------------------------------------------------------------------
class Smoke:
    def __init__(self, expect: Mapping[str, Any], view: HostView, torch: Any = None, simulate: str | None = None,
                 ) -> None:
        self.expect, self.view, self.simulate = expect, view, simulate
        self.kind = platform_kind(expect)
        self.torch = torch
        self.gpu: Devices | None = None

    # install ----------------------------------------------------------------------------------------
    def check_import(self) -> str:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                import torch
            except Exception as exc:
                raise Fail(f"import torch failed: {first_line(exc)}", SECTION_FIX["install"]) from exc
        self.torch = torch
        if caught:
            message = (str(caught[0].message).strip().splitlines() or [caught[0].category.__name__])[0]
            fix = ("install a NumPy that matches this torch build (pip install 'numpy<2' for torch < 2.3)"
                   if "numpy" in message.lower() else SECTION_FIX["install"])
            raise Fail(f"torch {torch.__version__} imported with a warning: {message}", fix)
        return f"torch {torch.__version__} from {os.path.dirname(torch.__file__)}, no warnings"

    def check_torch_version(self) -> str:
        return self._version("torch", str(self._torch().__version__))

    def check_torchvision_version(self) -> str:
        return self._companion("torchvision")

    def check_torchaudio_version(self) -> str:
        return self._companion("torchaudio")

    def check_hip_version(self) -> str:
        hip, want = self._torch().version.hip, self.expect.get("hip")
        if want is None:
            if hip is not None:
                raise Fail(f"torch.version.hip is {hip} but this is a {self.expect.get('platform')} image",
                           SECTION_FIX["install"])
            return "torch.version.hip is None, as a non-ROCm build should be"
        if hip is None:
            raise Fail(f"torch.version.hip is None: this torch is not a ROCm build (want ROCm {want})",
                       "rebuild the image from a ROCm wheel index (download.pytorch.org/whl/rocmX.Y)")
        if major_minor(hip) != major_minor(want):
            raise Fail(f"torch.version.hip is {hip}, the image promises ROCm {want}",
                       f"rebuild the image from the ROCm {want} wheel index")
        return f"torch.version.hip {hip}"

    def check_cuda_version(self) -> str:
        cuda, want = getattr(self._torch().version, "cuda", None), self.expect.get("cuda")
        if self.kind != "cuda":
            if cuda is not None:
                raise Fail(f"torch.version.cuda is {cuda} but this is a {self.expect.get('platform')} image",
                           SECTION_FIX["install"])
            return "torch.version.cuda is None, as a non-CUDA build should be"
        if cuda is None:
            raise Fail("torch.version.cuda is None: this torch is not a CUDA build",
                       "rebuild the image from a CUDA wheel index (download.pytorch.org/whl/cuXYZ)")
        if want and major_minor(cuda) != major_minor(want):
            raise Fail(f"torch.version.cuda is {cuda}, the image promises CUDA {want}",
                       f"rebuild the image from the CUDA {want} wheel index")
        return f"torch.version.cuda {cuda}"

    def check_arch_list(self) -> str:
        want = self._wanted_archs()
        have = self._arch_list()
        if not have:
            raise Fail("torch lists no GPU architectures: it has no GPU kernels",
                       f"rebuild the image from a {'ROCm' if self.kind == 'rocm' else 'CUDA'} wheel index")
        missing = [a for a in want if a not in have]
        if missing:
            raise Fail(f"this torch has no kernels for {', '.join(missing)} (it has {' '.join(have)})",
                       "build from wheels compiled for these targets (e.g. a TheRock per-family index), "
                       "or drop them from the image's family")
        return f"covers {' '.join(want)} (torch has {' '.join(have)})"

    # cpu --------------------------------------------------------------------------------------------
    def check_cpu_matmul(self) -> str:
        torch = self._torch()
        got = (torch.tensor([[1.0, 2.0], [3.0, 4.0]]) @ torch.tensor([[5.0, 6.0], [7.0, 8.0]])).tolist()
        if got != [[19.0, 22.0], [43.0, 50.0]]:
            raise Fail(f"2x2 matmul gave {got}")
        x = torch.randn(256, 128, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        y = torch.randn(128, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        out = x @ y
        corners = [(i, j) for i in (0, 255) for j in (0, 63)]
        err = max(abs(out[i, j].item() - math.fsum(x[i, k].item() * y[k, j].item() for k in range(128)))
                  for i, j in corners)
        if err > 1e-9:
            raise Fail(f"256x128 @ 128x64 float64 matmul is off by {err:g}")
        return "known-answer 2x2 and float64 256x128x64 matmul correct"

    def check_cpu_svd(self) -> str:
        torch = self._torch()
        a = torch.randn(64, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        err = (u @ torch.diag(s) @ vh - a).abs().max().item()
        if not err <= 1e-10:
            raise Fail(f"U S Vh does not reconstruct A (max error {err:g})")
        return f"linalg.svd reconstructs a 64x32 matrix (max error {err:.1e})"

    def check_numpy(self) -> str:
        torch = self._torch()
        if importlib.util.find_spec("numpy") is None:
            raise Fail("NumPy is not installed", "install numpy in /opt/venv (torch.from_numpy and friends need it)")
        import numpy

        back = (torch.from_numpy(numpy.arange(6, dtype=numpy.float32).reshape(2, 3)) * 2).numpy()
        if back.tolist() != [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]:
            raise Fail(f"NumPy round trip gave {back.tolist()}")
        return f"NumPy {numpy.__version__} round trip"

    def check_torchvision_nms(self) -> str:
        torch = self._torch()
        if importlib.util.find_spec("torchvision") is None:
            raise Skip("no torchvision in this image")
        import torchvision

        boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0]])
        keep = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
        if keep != [0, 2]:
            raise Fail(f"torchvision.ops.nms kept {keep}, want [0, 2]")
        return "torchvision.ops.nms keeps [0, 2] of 3 boxes"

    # gpu --------------------------------------------------------------------------------------------
    def check_gpu(self) -> str:
        gpu = self._gpu()
        if not gpu.available() or gpu.count() == 0:
            raise Skip("no GPU visible to torch: GPU checks not run")
        devices = "; ".join(f"{i}: {gpu.name(i)} ({self._arch_of(gpu, i)})" for i in range(gpu.count()))
        return f"{gpu.count()} device(s): {devices}"

    def check_gpu_arch(self) -> str | Outcome:
        gpu = self._gpu()
        want = self._wanted_archs(required=False)
        archs = {i: self._arch_of(gpu, i) for i in range(gpu.count())}
        if not want:
            return Outcome("info", f"device arch(s) {', '.join(unique(archs.values()))}; this image names none")
        outside = {i: a for i, a in archs.items() if a not in want}
        if outside:
            index, arch = next(iter(outside.items()))
            raise Fail(f"device {index} ({gpu.name(index)}) is {arch or 'of unknown arch'}, not in this image's "
                       f"{self._family_text()}: torch has no kernels for it",
                       f"use an image built for {arch}" + (f"; {RISKY}" if self.kind == "rocm" else ""))
        return self._override_verdict(f"{', '.join(unique(archs.values()))} in this image's {self._family_text()}")

    def check_gpu_matmul(self, dtype_name: str) -> str:
        torch, gpu = self._torch(), self._gpu()
        generator = torch.Generator().manual_seed(4)
        a = torch.randn(4, 96, 128, generator=generator).to(getattr(torch, dtype_name))
        b = torch.randn(4, 128, 80, generator=generator).to(getattr(torch, dtype_name))
        ops: dict[str, Callable[[Any, Any], Any]] = {
            "mm": lambda x, y: torch.mm(x[0], y[0]), "bmm": torch.bmm, "matmul": lambda x, y: torch.matmul(x, y[0])}
        errors = {op: rel_error(fn(a.to(gpu.device), b.to(gpu.device)), fn(a.double(), b.double()))
                  for op, fn in ops.items()}
        gpu.synchronize()
        tol, shown = MATMUL_TOL[dtype_name], ", ".join(f"{op} {e:.1e}" for op, e in errors.items())
        if any(e > tol for e in errors.values()):
            raise Fail(f"{dtype_name} differs from the CPU reference by more than {tol:g}: {shown}", self._gpu_fix())
        return f"mm, bmm, matmul within {tol:g} of a float64 CPU reference ({shown})"

    def check_gpu_conv(self) -> str:
        torch, gpu = self._torch(), self._gpu()
        functional = torch.nn.functional
        generator = torch.Generator().manual_seed(5)
        x, w, wt = (torch.randn(*shape, generator=generator) for shape in ((2, 3, 16, 16), (8, 3, 3, 3), (8, 4, 3, 3)))

        def run(device: str, dtype: Any) -> tuple[Any, Any]:
            y = functional.conv2d(x.to(device, dtype), w.to(device, dtype), padding=1)
            z = functional.conv_transpose2d(y, wt.to(device, dtype), stride=2, padding=1, output_padding=1)
            return y, z

        (gy, gz), (ry, rz) = run(gpu.device, torch.float32), run("cpu", torch.float64)
        gpu.synchronize()
        errors = {"conv2d": rel_error(gy, ry), "conv_transpose2d": rel_error(gz, rz)}
        shown = ", ".join(f"{op} {e:.1e}" for op, e in errors.items())
        if tuple(gz.shape) != (2, 4, 32, 32) or any(e > CONV_TOL for e in errors.values()):
            raise Fail(f"float32 convolution differs from the CPU reference by more than {CONV_TOL:g}: {shown}",
                       self._gpu_fix())
        return f"conv2d, conv_transpose2d float32 within {CONV_TOL:g} of the CPU reference ({shown})"

    def check_gpu_sdpa(self) -> str:
        torch, gpu = self._torch(), self._gpu()
        generator = torch.Generator().manual_seed(6)
        q, k, v = (torch.randn(2, 4, 64, 32, generator=generator).half() for _ in range(3))
        got = torch.nn.functional.scaled_dot_product_attention(
            q.to(gpu.device), k.to(gpu.device), v.to(gpu.device), is_causal=True)
        q64, k64, v64 = q.double(), k.double(), v.double()
        scores = q64 @ k64.transpose(-2, -1) / math.sqrt(32)
        scores = scores.masked_fill(torch.ones(64, 64, dtype=torch.bool).triu(1), float("-inf"))
        err = rel_error(got, torch.softmax(scores, dim=-1) @ v64)
        gpu.synchronize()
        if err > SDPA_TOL:
            raise Fail(f"float16 causal scaled_dot_product_attention is off by {err:.1e} (> {SDPA_TOL:g})",
                       self._gpu_fix())
        return f"float16 causal scaled_dot_product_attention within {SDPA_TOL:g} of the reference ({err:.1e})"

    def check_gpu_training(self) -> str:
        torch, gpu = self._torch(), self._gpu()
        generator = torch.Generator().manual_seed(7)
        x = torch.randn(256, 16, generator=generator)
        y = x[:, :4].sum(dim=1, keepdim=True)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(gpu.device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = x.to(gpu.device), y.to(gpu.device)
        losses = []
        for _ in range(30):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.item()))
        if not all(math.isfinite(v) for v in losses) or not losses[-1] < 0.5 * losses[0]:
            raise Fail(f"30 SGD steps took the loss from {losses[0]:.4g} to {losses[-1]:.4g} (want below half)",
                       self._gpu_fix())
        return f"forward, backward, 30 SGD steps of a 16-32-1 MLP: loss {losses[0]:.3f} -> {losses[-1]:.3f}"

    def check_gpu_synchronize(self) -> str:
        torch, gpu = self._torch(), self._gpu()
        x = torch.ones(256, 256, device=gpu.device)
        start = time.perf_counter()
        for _ in range(50):
            x = x * 1.01
        gpu.synchronize()
        elapsed = time.perf_counter() - start
        got, want = x[0, 0].item(), 1.01**50
        if abs(got - want) > 1e-4 * want:
            raise Fail(f"50 queued kernels gave {got}, want {want:.6f}", self._gpu_fix())
        return f"synchronize() returned after 50 queued kernels in {elapsed * 1e3:.1f} ms, result correct"

    def check_gpu_compile(self) -> str | Outcome:
        torch, gpu = self._torch(), self._gpu()
        if gpu.simulated and not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
            raise Skip("simulated GPU: torch.compile on the CPU needs a C++ compiler, and this image has none")
        if not gpu.simulated and importlib.util.find_spec("triton") is None:
            raise Skip("no Triton in this image (pytorch-triton-rocm or triton): torch.compile has no GPU backend")

        def f(x: Any) -> Any:
            return torch.sin(x) * torch.cos(x) + x * 2

        x = torch.randn(4096, device=gpu.device)
        try:
            got = torch.compile(f)(x)
            gpu.synchronize()
        except Exception as exc:
            if not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
                # Triton builds a small C launcher at run time; a runtime image without a compiler cannot,
                # which is a property of the flavor, not a broken install: flag it, do not fail the image.
                return Outcome("warn", f"torch.compile needs a C compiler for Triton and this image has none: "
                                       f"{first_line(exc)}", "use the devel image for torch.compile, or install gcc")
            raise Fail(f"torch.compile failed: {first_line(exc)}", self._compile_fix()) from exc
        err = float((got - f(x)).abs().max().item())
        if not err <= COMPILE_TOL:
            raise Fail(f"compiled function differs from eager by {err:g}", self._compile_fix())
        return f"torch.compile of an elementwise function matches eager ({err:.1e})"

    def check_gpu_tflops(self) -> Outcome:
        torch, gpu = self._torch(), self._gpu()
        n = 2048 if gpu.simulated else 8192
        a, b = (torch.randn(n, n, device=gpu.device, dtype=torch.bfloat16) for _ in range(2))
        a @ b
        gpu.synchronize()
        start = time.perf_counter()
        a @ b
        gpu.synchronize()
        reps = max(1, min(50, int(0.5 / max(time.perf_counter() - start, 1e-6))))
        start = time.perf_counter()
        for _ in range(reps):
            a @ b
        gpu.synchronize()
        each = (time.perf_counter() - start) / reps
        return Outcome("info", f"bf16 matmul {n}x{n}x{n} on device 0: {2 * n**3 / each / 1e12:.1f} TFLOP/s "
                               f"({each * 1e3:.2f} ms each, {reps} runs; information only)")

    # helpers ----------------------------------------------------------------------------------------
    def _torch(self) -> Any:
        if self.torch is None:
            raise Skip("torch did not import")
        return self.torch

    def _gpu(self) -> Devices:
        if self.gpu is None:
            torch = self._torch()
            self.gpu = CpuStandIn(torch, self.simulate) if self.simulate else Devices(torch)
        return self.gpu

    def _version(self, package: str, actual: str) -> str:
        want = self.expect.get(package)
        if public(actual) != want:
            raise Fail(f"{package} {actual} is installed, the image promises {want}",
                       "the image was built from the wrong wheels: rebuild it, or fix the matrix entry")
        return f"{package} {actual}"

    def _companion(self, package: str) -> str:
        """torchvision/torchaudio: at the promised version, or absent when none is promised."""
        self._torch()
        installed = importlib.util.find_spec(package) is not None
        if not self.expect.get(package):
            if installed:
                raise Fail(f"{package} is installed but the image promises none", SECTION_FIX["install"])
            raise Skip(f"this image has no {package}")
        if not installed:
            raise Fail(f"{package} is not installed, the image promises {self.expect[package]}",
                       SECTION_FIX["install"])
        module = importlib.import_module(package)
        return self._version(package, str(module.__version__))

    def _wanted_archs(self, required: bool = True) -> list[str]:
        """The archs the cell promises: its gfx targets (ROCm), or cuda_archs if a CUDA cell lists them."""
        if self.kind == "rocm":
            return list(self.expect.get("gfx_targets") or [])
        if self.kind == "cuda" and self.expect.get("cuda_archs"):
            return [sm_arch(str(a)) for a in self.expect["cuda_archs"]]
        if required:
            raise Skip("CPU image: torch has no GPU code" if self.kind == "cpu" else
                       "this CUDA image lists no expected archs (cuda_archs)")
        return []

    def _arch_list(self) -> list[str]:
        """torch.cuda.get_arch_list(), which is empty without a GPU: then the compiled-in flags."""
        torch = self._torch()
        archs = list(torch.cuda.get_arch_list())
        flags = getattr(torch._C, "_cuda_getArchFlags", None)
        if not archs and flags is not None:
            archs = (flags() or "").replace(";", " ").replace(",", " ").split()
        return unique(base_arch(a) for a in archs)

    def _arch_of(self, gpu: Devices, index: int) -> str:
        return gpu.capability(index) if self.kind == "cuda" else gpu.arch(index)

    def _family_text(self) -> str:
        want = self._wanted_archs(required=False)
        family = self.expect.get("gfx_family") if self.kind == "rocm" else "cuda_archs"
        return f"{family} ({', '.join(want)})"

    def _override_verdict(self, detail: str) -> str | Outcome:
        """Passes only under HSA_OVERRIDE_GFX_VERSION are flagged: the hardware may be another target."""
        value = self.view.env.get(OVERRIDE)
        if self.kind != "rocm" or value is None:
            return detail
        real = unique(g.target for g in kfd_gpus(self.view.kfd_nodes))
        detail += f", as reported under {OVERRIDE}={value}" + (f"; the hardware is {', '.join(real)}" if real else "")
        return Outcome("warn", detail, f"use an image whose family contains the real target; {RISKY}")

    def _gpu_fix(self) -> str:
        if self.kind == "cuda":
            return "check that the host's NVIDIA driver supports this image's CUDA (`nvidia-smi` on the host)"
        return ("check that the host's amdgpu driver supports this image's ROCm (`dmesg` on the host) and that "
                f"{OVERRIDE} is not set")

    def _compile_fix(self) -> str:
        if not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
            return "Triton builds its launcher with a C compiler at run time: use the devel image, or install gcc"
        return "rerun with TORCH_LOGS=+inductor for the compiler's log"

    # plans ------------------------------------------------------------------------------------------
    def base_checks(self) -> list[tuple[str, str, Callable[[], str | Outcome]]]:
        """(section, name, check) that run on every image."""
        install = ["import", "torch_version", "torchvision_version", "torchaudio_version", "hip_version",
                   "cuda_version", "arch_list"]
        cpu = ["cpu_matmul", "cpu_svd", "numpy", "torchvision_nms"]
        return [(section, name, getattr(self, f"check_{name}"))
                for section, names in (("install", install), ("cpu", cpu)) for name in names]

    def gpu_checks(self) -> list[tuple[str, Callable[[], str | Outcome]]]:
        """(name, check) that run once torch sees a GPU."""
        dtypes = [(f"gpu_matmul_{short}", dtype) for short, dtype in
                  (("fp32", "float32"), ("fp16", "float16"), ("bf16", "bfloat16"))]
        matmuls = [(name, partial(self.check_gpu_matmul, dtype)) for name, dtype in dtypes]
        rest = ["gpu_conv", "gpu_sdpa", "gpu_training", "gpu_synchronize", "gpu_compile", "gpu_tflops"]
        return [("gpu_arch", self.check_gpu_arch), *matmuls, *[(n, getattr(self, f"check_{n}")) for n in rest]]


# -- running and reporting ------------------------------------------------------------------------
def call_with_limit(fn: Callable[[], T], timeout: float) -> tuple[bool, T | None, BaseException | None]:
    """(finished, value, exception): fn runs in a daemon thread, so a hung call cannot hang the run."""
    box: list[tuple[T | None, BaseException | None]] = []

    def target() -> None:
        try:
            box.append((fn(), None))
        except BaseException as exc:
            box.append((None, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        return False, None, None
    return True, box[0][0], box[0][1]


def run_check(name: str, fn: Callable[[], str | Outcome], timeout: float, section: str = "",
              fix: str = "") -> Result:
    """One check -> one Result; an exception is a failure with a fix line, a hang fails at the limit."""
    start = time.monotonic()
    finished, value, exc = call_with_limit(fn, timeout)
    seconds = round(time.monotonic() - start, 3)
    if not finished:
        return Result(name, "fail", f"did not finish within {timeout:g} s", HUNG_FIX, seconds, section, True)
    fix = fix or SECTION_FIX.get(section, "")
    if isinstance(exc, Skip):
        result = Result(name, "skip", str(exc))
    elif isinstance(exc, Fail):
        result = Result(name, "fail", str(exc), exc.fix or fix)
    elif exc is not None:
        result = Result(name, "fail", first_line(exc), fix)
    elif isinstance(value, Outcome):
        result = Result(name, value.status, value.detail, value.fix)
    else:
        result = Result(name, "pass", str(value))
    result.seconds, result.section = seconds, section
    return result


def limit_for(name: str) -> float:
    override = os.environ.get("RIF_CHECK_TIMEOUT")
    return float(override) if override else SLOW_TIMEOUT_S.get(name, DEFAULT_TIMEOUT_S)


def run_gpu_checks(smoke: Smoke) -> list[Result]:
    """After one GPU check hangs the device is suspect: the rest are skipped, not each waited out."""
    results: list[Result] = []
    for name, fn in smoke.gpu_checks():
        if any(r.timed_out for r in results):
            results.append(Result(name, "skip", "not run: an earlier GPU check hung", section="gpu"))
        else:
            results.append(run_check(name, fn, limit_for(name), "gpu", smoke._gpu_fix()))
    return results


def run_diagnostics(smoke: Smoke) -> list[Finding]:
    finished, findings, exc = call_with_limit(lambda: diagnose(smoke.view, smoke.expect), DEFAULT_TIMEOUT_S)
    if finished and exc is None and findings is not None:
        for f in findings:
            f.result.section = "diagnostics"
        return findings
    why = first_line(exc) if exc else f"did not finish within {DEFAULT_TIMEOUT_S:g} s"
    return [Finding(Result("diagnostics", "warn", f"the diagnostics failed: {why}", section="diagnostics"))]


def run_all(smoke: Smoke) -> tuple[list[Result], list[str]]:
    """Every check in report order, and the docker run flags that would make a GPU visible."""
    results = [run_check(name, fn, limit_for(name), section) for section, name, fn in smoke.base_checks()]
    if smoke.kind == "cpu" and not smoke.simulate:
        results.append(Result("gpu", "skip", "CPU image: no GPU checks (its torch is a CPU build)", section="gpu"))
        return results, []
    gpu = run_check("gpu", smoke.check_gpu, limit_for("gpu"), "gpu", smoke._gpu_fix())
    results.append(gpu)
    if gpu.status == "pass":
        env = gpu_env(smoke.view.env, gpu_visible=True).result
        env.section = "gpu"
        return [*results, env, *run_gpu_checks(smoke)], []
    findings = run_diagnostics(smoke)
    if gpu.status == "skip" and smoke.torch is not None:
        gpu.fix = no_gpu_fix(findings, smoke.kind)
    return [*results, *(f.result for f in findings)], docker_flags(findings)


def gpu_visible(results: list[Result]) -> bool:
    return any(r.name == "gpu" and r.status == "pass" for r in results)


def exit_code(results: list[Result], require_gpu: bool) -> int:
    """1 if any check failed, else 3 if a GPU was required and none is visible, else 0."""
    if any(r.status == "fail" for r in results):
        return EXIT_FAILED
    if require_gpu and not gpu_visible(results):
        return EXIT_NO_GPU
    return EXIT_OK


def summary(results: list[Result]) -> dict[str, int]:
    return {status: sum(r.status == status for r in results) for status in MARKS}


def report(results: list[Result], expect: Mapping[str, Any], code: int) -> str:
    """The readable report: sections, one line a check, a fix line under each problem."""
    lines = [f"torch-smoke for {expect.get('tag', '?')} ({expect.get('platform', '?')}, torch {expect.get('torch')})"]
    section = None
    for r in results:
        if r.section != section:
            section = r.section
            lines.append(f"{section}:")
        lines.append(f"  {MARKS[r.status]}  {r.name:<20} {r.detail}")
        if r.fix and r.status in ("fail", "warn", "skip"):
            lines.append(f"        fix: {r.fix}")
    n = summary(results)
    lines.append(f"{n['pass']} passed, {n['fail']} failed, {n['warn']} warnings, {n['skip']} skipped, {n['info']} info"
                 f": exit {code} ({EXIT_MEANING[code]})")
    return "\n".join(lines)


def as_json(results: list[Result], expect: Mapping[str, Any], code: int, flags: list[str],
            simulated: bool) -> str:
    return json.dumps({
        "program": "torch-smoke", "cell": dict(expect), "platform": platform_kind(expect), "exit_code": code,
        "exit_meaning": EXIT_MEANING[code], "gpu_visible": gpu_visible(results), "simulated_gpu": simulated,
        "summary": summary(results), "docker_flags": flags, "results": [asdict(r) for r in results],
    }, indent=2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="torch-smoke", description=(__doc__ or "").splitlines()[0],
        epilog="Exit codes: 0 all required checks passed, 1 a check failed, 3 --require-gpu and no GPU visible.")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--require-gpu", action="store_true", help="exit 3 when no GPU is visible")
    parser.add_argument("--cell", default=CELL_FILE, help="expectations file (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)  # tests: a fake /dev, /sys
    parser.add_argument("--simulate-gpu", metavar="ARCH", help=argparse.SUPPRESS)  # tests: GPU checks on the CPU
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with open(args.cell, encoding="utf-8") as fh:
            expect = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"torch-smoke: cannot read the expectations {args.cell}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    smoke = Smoke(expect, HostView.current(args.root), simulate=args.simulate_gpu)
    results, flags = run_all(smoke)
    code = exit_code(results, args.require_gpu)
    simulated = bool(args.simulate_gpu)
    print(as_json(results, expect, code, flags, simulated) if args.json else report(results, expect, code))
    return code


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # a hung check's thread must not keep the process alive
