"""Fakes for torch-smoke's tests on the host, which has no torch: cells, device trees, group tables, torch.

No tests here; test_smoke_*.py import these. (A test_ name, so it sits with the smoke tests it serves.)
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from builder.smoke.torch_smoke.core import Outcome, Result
from builder.smoke.torch_smoke.diagnostics import Finding, HostView
from builder.smoke.torch_smoke.runner import run_check
from builder.smoke.torch_smoke.smoke import Check, Smoke

GFX110X = ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]
ROCM_CELL = {"tag": "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx110X-all_runtime", "platform": "rocm7.2",
             "torch": "2.13.0", "torchvision": None, "torchaudio": None, "hip": "7.2",
             "gfx_family": "gfx110X-all", "gfx_targets": GFX110X}
CPU_CELL = {"tag": "cpu_debian12_py3.11_torch2.13.0_runtime", "platform": "cpu", "torch": "2.13.0",
            "torchvision": None, "torchaudio": None, "hip": None, "gfx_family": None, "gfx_targets": []}
CUDA_CELL = {"tag": "cuda12.8_x_runtime", "platform": "cuda12.8", "torch": "2.13.0", "torchvision": None,
             "torchaudio": None, "hip": None, "cuda": "12.8", "gfx_family": None, "gfx_targets": []}
GROUPS = {0: "root", 44: "video", 992: "render", 1000: "me"}


class Tree:
    """A fake / in tmp_path: device files with the owner, group and mode a test says (by a stat shim)."""

    def __init__(self, root: Path) -> None:
        self.root, self.owners = root, {}  # type: dict[Path, tuple[int, int, int]]
        (root / "dev").mkdir()

    def device(self, name: str, uid: int = 0, gid: int = 110, mode: int = 0o660) -> Tree:
        path = self.root / "dev" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        self.owners[path] = (uid, gid, mode)
        return self

    def rocm_devices(self, gid: int = 110, mode: int = 0o660) -> Tree:
        return self.device("kfd", gid=gid, mode=mode).device("dri/renderD128", gid=gid, mode=mode)

    def kfd_node(self, node: int, gfx_target_version: int, device_id: int = 0x744C) -> Tree:
        props = self.root / f"sys/class/kfd/kfd/topology/nodes/{node}/properties"
        props.parent.mkdir(parents=True, exist_ok=True)
        props.write_text(f"cpu_cores_count 0\nsimd_count 192\ngfx_target_version {gfx_target_version}\n"
                         f"vendor_id 4098\ndevice_id {device_id}\n")
        return self

    def stat(self, path: Path) -> os.stat_result:
        real = os.stat(path)
        uid, gid, mode = self.owners.get(Path(path), (real.st_uid, real.st_gid, real.st_mode))
        return os.stat_result((0o020000 | mode, *real[1:4], uid, gid, *real[6:]))

    def view(self, uid: int = 1000, gids: frozenset[int] = frozenset({1000, 44}),
             env: dict[str, str] | None = None, apptainer: bool = False, root: bool = False) -> HostView:
        """root: read proc/ and sys/module/ under the tree too (the host driver and WSL diagnostics)."""
        return HostView(dev=self.root / "dev", kfd_nodes=self.root / "sys/class/kfd/kfd/topology/nodes",
                        uid=uid, gids=gids, groups=GROUPS, env=env or {}, stat=self.stat, apptainer=apptainer,
                        root=self.root if root else None)


def by_name(findings: list[Finding]) -> dict[str, Finding]:
    return {f.result.name: f for f in findings}


def fake_torch(hip: str | None = "7.2.53211", cuda: str | None = None, archs: tuple[str, ...] = (),
               flags: str | None = None, devices: tuple[tuple[str, str], ...] = (),
               capability: tuple[int, int] = (9, 0)) -> SimpleNamespace:
    """Just enough of torch for the install and GPU-identity checks; devices are (name, gcnArchName)."""
    cuda_api = SimpleNamespace(
        is_available=lambda: bool(devices), device_count=lambda: len(devices), get_arch_list=lambda: list(archs),
        get_device_name=lambda i: devices[i][0],
        get_device_properties=lambda i: SimpleNamespace(gcnArchName=devices[i][1]),
        get_device_capability=lambda i: capability)
    c_api = SimpleNamespace(**({"_cuda_getArchFlags": lambda: flags} if flags is not None else {}))
    return SimpleNamespace(__version__="2.13.0+rocm7.2", __file__="/opt/venv/torch/__init__.py",
                           version=SimpleNamespace(hip=hip, cuda=cuda), cuda=cuda_api, _C=c_api)


def smoke(cell: dict[str, Any], torch: Any, tree: Tree | None = None, env: dict[str, str] | None = None,
          simulate: str | None = None) -> Smoke:
    view = tree.view(env=env) if tree else HostView(Path("/nonexistent/dev"), Path("/nonexistent/nodes"), 1000,
                                                    frozenset({1000}), GROUPS, env or {})
    return Smoke(cell, view, torch=torch, simulate=simulate)


def outcome(check: Check, s: Smoke, section: str = "install") -> Result:
    """One check's Result, run as the runner runs it (exceptions become fail/skip lines)."""
    return run_check("check", lambda: check(s), 5, section)


def verdict(value: str | Outcome) -> str:
    return value.status if isinstance(value, Outcome) else "pass"
