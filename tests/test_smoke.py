"""torch-smoke's logic on the host, which has no torch: fake device trees, group tables and torch modules.

The program is one self-contained file baked into images, so it is loaded from its path, not imported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from builder.validate import gpu_run_options, parse_smoke

PROGRAM = Path(__file__).resolve().parent.parent / "builder" / "smoke" / "torch_smoke.py"
GFX110X = ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]
ROCM_CELL = {"tag": "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx110X-all_runtime", "platform": "rocm7.2",
             "torch": "2.13.0", "torchvision": None, "torchaudio": None, "hip": "7.2",
             "gfx_family": "gfx110X-all", "gfx_targets": GFX110X}
CPU_CELL = {"tag": "cpu_debian12_py3.11_torch2.13.0_runtime", "platform": "cpu", "torch": "2.13.0",
            "torchvision": None, "torchaudio": None, "hip": None, "gfx_family": None, "gfx_targets": []}
CUDA_CELL = {"tag": "cuda12.8_x_runtime", "platform": "cuda12.8", "torch": "2.13.0", "torchvision": None,
             "torchaudio": None, "hip": None, "cuda": "12.8", "gfx_family": None, "gfx_targets": []}
GROUPS = {0: "root", 44: "video", 992: "render", 1000: "me"}


@pytest.fixture(scope="module")
def ts() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("torch_smoke", PROGRAM)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["torch_smoke"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    yield module
    del sys.modules["torch_smoke"]


# -- fake trees ----------------------------------------------------------------------------------------
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

    def view(self, ts: ModuleType, uid: int = 1000, gids: frozenset[int] = frozenset({1000, 44}),
             env: dict[str, str] | None = None) -> Any:
        return ts.HostView(dev=self.root / "dev", kfd_nodes=self.root / "sys/class/kfd/kfd/topology/nodes",
                           uid=uid, gids=gids, groups=GROUPS, env=env or {}, stat=self.stat)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def by_name(findings: list[Any]) -> dict[str, Any]:
    return {f.result.name: f for f in findings}


# -- names and versions -----------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "gfx"), [
    (110000, "gfx1100"), (90402, "gfx942"), (90010, "gfx90a"), (120001, "gfx1201"), (100300, "gfx1030"),
    (90012, "gfx90c"), (110003, "gfx1103"), (90500, "gfx950"), (0, None)])
def test_gfx_target_version_names_the_target(ts: ModuleType, value: int, gfx: str | None) -> None:
    assert ts.gfx_from_version(value) == gfx


@pytest.mark.parametrize(("value", "gfx"), [("11.0.0", "gfx1100"), ("10.3.0", "gfx1030"), ("9.0.10", "gfx90a"),
                                            ("9.4.2", "gfx942"), ("eleven", None), ("11.0", None)])
def test_override_names_the_target_it_pretends(ts: ModuleType, value: str, gfx: str | None) -> None:
    assert ts.gfx_from_override(value) == gfx


def test_small_helpers(ts: ModuleType) -> None:
    assert ts.base_arch("gfx90a:sramecc+:xnack-") == "gfx90a"
    assert [ts.sm_arch(a) for a in ("9.0", "90", "sm_90")] == ["sm_90"] * 3
    assert ts.major_minor("7.2.53211-e7e6d5b") == "7.2"
    assert [ts.platform_kind(c) for c in (ROCM_CELL, CPU_CELL, CUDA_CELL)] == ["rocm", "cpu", "cuda"]


def test_kfd_topology_lists_gpu_nodes_only(ts: ModuleType, tree: Tree) -> None:
    tree.kfd_node(0, 0).kfd_node(1, 110000).kfd_node(2, 90402, 0x74A1).kfd_node(10, 90010)
    gpus = ts.kfd_gpus(tree.root / "sys/class/kfd/kfd/topology/nodes")
    assert [(g.node, g.target) for g in gpus] == [("1", "gfx1100"), ("2", "gfx942"), ("10", "gfx90a")]
    assert gpus[1].device_id == 0x74A1


# -- diagnostics ------------------------------------------------------------------------------------
def test_missing_kfd_names_the_device_flags(ts: ModuleType, tree: Tree) -> None:
    findings = ts.diagnose(tree.view(ts, uid=0, gids=frozenset({0})), ROCM_CELL)
    found = by_name(findings)
    assert found["dev_kfd"].result.status == "warn"
    assert "/dev/kfd is not in the container" in found["dev_kfd"].result.detail
    assert found["dev_dri"].result.status == "warn"
    flags = ts.docker_flags(findings)
    assert flags == ["--device=/dev/kfd", "--device=/dev/dri"]  # root needs no group
    fix = "run with: docker run --device=/dev/kfd --device=/dev/dri IMAGE torch-smoke"
    assert ts.no_gpu_fix(findings, "rocm") == fix


def test_missing_kfd_for_a_user_also_names_the_groups(ts: ModuleType, tree: Tree) -> None:
    flags = ts.docker_flags(ts.diagnose(tree.view(ts), ROCM_CELL))
    assert flags[:2] == ["--device=/dev/kfd", "--device=/dev/dri"]
    assert "--group-add video" in flags and any("getent group render" in f for f in flags)


def test_gid_mismatch_names_the_numeric_group(ts: ModuleType, tree: Tree) -> None:
    tree.rocm_devices(gid=110).kfd_node(1, 110000)
    findings = ts.diagnose(tree.view(ts), ROCM_CELL)
    kfd = by_name(findings)["dev_kfd"].result
    assert kfd.status == "warn"
    assert "GID mismatch" in kfd.detail and "group 110" in kfd.detail
    assert "whose render group is 992" in kfd.detail and "44, 1000" in kfd.detail
    assert "--group-add 110" in kfd.fix
    assert ts.docker_flags(findings) == ["--group-add 110"]
    assert ts.no_gpu_fix(findings, "rocm") == "run with: docker run --group-add 110 IMAGE torch-smoke"


def test_no_permission_even_for_the_group_points_at_the_host(ts: ModuleType, tree: Tree) -> None:
    tree.device("kfd", gid=110, mode=0o600).device("dri/renderD128", gid=110, mode=0o600)
    findings = ts.diagnose(tree.view(ts, gids=frozenset({1000, 110})), ROCM_CELL)
    kfd = by_name(findings)["dev_kfd"].result
    assert kfd.status == "warn" and "mode 0600" in kfd.detail and "udev" in kfd.fix
    assert ts.docker_flags(findings) == []
    assert ts.no_gpu_fix(findings, "rocm") == "the devices are passed in: fix what the WARN lines below say"


def test_root_needs_no_group(ts: ModuleType, tree: Tree) -> None:
    tree.rocm_devices(gid=110)
    kfd = by_name(ts.diagnose(tree.view(ts, uid=0, gids=frozenset({0})), ROCM_CELL))["dev_kfd"].result
    assert kfd.status == "pass" and "root: no group needed" in kfd.detail


def test_overrides_and_visibility_variables_are_flagged(ts: ModuleType, tree: Tree) -> None:
    tree.rocm_devices(gid=44)
    env = {"HSA_OVERRIDE_GFX_VERSION": "10.3.0", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": "1",
           "CUDA_VISIBLE_DEVICES": "-1"}
    env_result = by_name(ts.diagnose(tree.view(ts, env=env), ROCM_CELL))["gpu_env"].result
    assert env_result.status == "warn"
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in env_result.detail and "gfx1030" in env_result.detail
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        assert var in env_result.detail and f"unset {var}" in env_result.fix
    assert "risky" in env_result.fix


def test_with_a_gpu_visible_a_device_list_is_information_and_the_override_a_warning(ts: ModuleType) -> None:
    assert ts.gpu_env({"HIP_VISIBLE_DEVICES": "0,1"}, gpu_visible=True).result.status == "info"
    assert ts.gpu_env({"HIP_VISIBLE_DEVICES": ""}, gpu_visible=True).result.status == "warn"
    assert ts.gpu_env({"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}, gpu_visible=True).result.status == "warn"
    assert ts.gpu_env({}, gpu_visible=True).result.status == "pass"


def test_everything_fine(ts: ModuleType, tree: Tree) -> None:
    tree.rocm_devices(gid=110).kfd_node(0, 0).kfd_node(1, 110000)
    findings = ts.diagnose(tree.view(ts, gids=frozenset({1000, 44, 110})), ROCM_CELL)
    assert {f.result.name: f.result.status for f in findings} == {
        "dev_kfd": "pass", "dev_dri": "pass", "gpu_env": "pass", "gpu_target": "pass"}
    assert "gfx1100 (node 1, device 0x744c), in family gfx110X-all" in by_name(findings)["gpu_target"].result.detail
    assert ts.docker_flags(findings) == []
    assert "yet torch sees no GPU: check the host's driver (`dmesg`, `rocminfo`" in ts.no_gpu_fix(findings, "rocm")


def test_host_gpu_outside_the_family_is_named_even_without_torch_seeing_it(ts: ModuleType, tree: Tree) -> None:
    tree.kfd_node(1, 100301)  # gfx1031, RX 6700 XT
    target = by_name(ts.diagnose(tree.view(ts), ROCM_CELL))["gpu_target"].result
    assert target.status == "warn"
    assert "gfx1031 is not in this image's family gfx110X-all" in target.detail
    assert "HSA_OVERRIDE_GFX_VERSION" in target.fix and "risky" in target.fix


def test_no_kfd_driver_is_information(ts: ModuleType, tree: Tree) -> None:
    target = by_name(ts.diagnose(tree.view(ts), ROCM_CELL))["gpu_target"].result
    assert target.status == "info" and "no /sys/class/kfd" in target.detail


def test_cuda_cells_look_for_nvidia_devices(ts: ModuleType, tree: Tree) -> None:
    findings = ts.diagnose(tree.view(ts), CUDA_CELL)
    assert [f.result.name for f in findings] == ["dev_nvidia", "gpu_env"]
    assert ts.docker_flags(findings) == ["--gpus all"]
    tree.device("nvidiactl", gid=0, mode=0o666).device("nvidia0", gid=0, mode=0o666)
    assert by_name(ts.diagnose(tree.view(ts), CUDA_CELL))["dev_nvidia"].result.status == "pass"


# -- checks against fake torch modules ------------------------------------------------------------------
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


def smoke(ts: ModuleType, cell: dict[str, Any], torch: Any, tree: Tree | None = None,
          env: dict[str, str] | None = None) -> Any:
    view = tree.view(ts, env=env) if tree else ts.HostView(Path("/nonexistent/dev"), Path("/nonexistent/nodes"),
                                                           1000, frozenset({1000}), GROUPS, env or {})
    return ts.Smoke(cell, view, torch=torch)


def outcome(ts: ModuleType, fn: Any) -> Any:
    return ts.run_check("check", fn, 5, "install")


def test_hip_version(ts: ModuleType) -> None:
    assert outcome(ts, smoke(ts, ROCM_CELL, fake_torch()).check_hip_version).status == "pass"
    wrong = outcome(ts, smoke(ts, ROCM_CELL, fake_torch(hip="6.4.43482")).check_hip_version)
    assert wrong.status == "fail" and "promises ROCm 7.2" in wrong.detail and "7.2 wheel index" in wrong.fix
    cpu_build = outcome(ts, smoke(ts, ROCM_CELL, fake_torch(hip=None)).check_hip_version)
    assert cpu_build.status == "fail" and "not a ROCm build" in cpu_build.detail
    assert outcome(ts, smoke(ts, CPU_CELL, fake_torch(hip=None)).check_hip_version).status == "pass"
    assert outcome(ts, smoke(ts, CPU_CELL, fake_torch()).check_hip_version).status == "fail"


def test_cuda_version(ts: ModuleType) -> None:
    assert outcome(ts, smoke(ts, CUDA_CELL, fake_torch(hip=None, cuda="12.8")).check_cuda_version).status == "pass"
    wrong = outcome(ts, smoke(ts, CUDA_CELL, fake_torch(hip=None, cuda="12.6")).check_cuda_version)
    assert wrong.status == "fail" and "promises CUDA 12.8" in wrong.detail
    assert outcome(ts, smoke(ts, ROCM_CELL, fake_torch(cuda="12.8")).check_cuda_version).status == "fail"
    assert outcome(ts, smoke(ts, CUDA_CELL, fake_torch(hip=None)).check_cuda_version).status == "fail"


def test_arch_list_covers_the_family(ts: ModuleType) -> None:
    wheel = ("gfx900", "gfx942", "gfx1100", "gfx1101", "gfx1102", "gfx1103")
    assert outcome(ts, smoke(ts, ROCM_CELL, fake_torch(archs=wheel)).check_arch_list).status == "pass"
    short = outcome(ts, smoke(ts, ROCM_CELL, fake_torch(archs=wheel[:-1])).check_arch_list)
    assert short.status == "fail" and "no kernels for gfx1103" in short.detail and short.fix
    # Without a GPU, get_arch_list() is empty: the compiled-in flags still tell.
    flags = outcome(ts, smoke(ts, ROCM_CELL, fake_torch(flags="gfx1100;gfx1101;gfx1102;gfx1103")).check_arch_list)
    assert flags.status == "pass"
    assert outcome(ts, smoke(ts, CPU_CELL, fake_torch(hip=None)).check_arch_list).status == "skip"
    assert outcome(ts, smoke(ts, CUDA_CELL, fake_torch(hip=None)).check_arch_list).status == "skip"
    listed = smoke(ts, {**CUDA_CELL, "cuda_archs": ["9.0"]}, fake_torch(hip=None, archs=("sm_80", "sm_90")))
    assert outcome(ts, listed.check_arch_list).status == "pass"


def test_gpu_devices_are_named(ts: ModuleType) -> None:
    devices = (("AMD Radeon RX 7900 XTX", "gfx1100"), ("AMD Radeon RX 7900 XTX", "gfx1100"))
    result = outcome(ts, smoke(ts, ROCM_CELL, fake_torch(devices=devices)).check_gpu)
    assert result.status == "pass" and result.detail.startswith("2 device(s): 0: AMD Radeon RX 7900 XTX (gfx1100)")
    assert outcome(ts, smoke(ts, ROCM_CELL, fake_torch()).check_gpu).status == "skip"


def test_gpu_outside_the_family_fails_and_calls_the_override_risky(ts: ModuleType) -> None:
    devices = (("AMD Radeon RX 6700 XT", "gfx1031:xnack-"),)
    result = outcome(ts, smoke(ts, ROCM_CELL, fake_torch(devices=devices)).check_gpu_arch)
    assert result.status == "fail"
    assert "device 0 (AMD Radeon RX 6700 XT) is gfx1031, not in this image's gfx110X-all" in result.detail
    assert "HSA_OVERRIDE_GFX_VERSION" in result.fix and "risky" in result.fix
    inside = outcome(ts, smoke(ts, ROCM_CELL, fake_torch(devices=(("RX 7900", "gfx1100"),))).check_gpu_arch)
    assert inside.status == "pass"


def test_a_pass_under_the_override_is_flagged_with_the_real_target(ts: ModuleType, tree: Tree) -> None:
    tree.kfd_node(1, 110003)  # a 780M iGPU (gfx1103) posing as gfx1100
    torch = fake_torch(devices=(("AMD Radeon 780M", "gfx1100"),))
    result = outcome(ts, smoke(ts, ROCM_CELL, torch, tree, env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}).check_gpu_arch)
    assert result.status == "warn"
    assert "HSA_OVERRIDE_GFX_VERSION=11.0.0" in result.detail and "the hardware is gfx1103" in result.detail


def test_cuda_devices_check_compute_capability_only_when_listed(ts: ModuleType) -> None:
    torch = fake_torch(hip=None, cuda="12.8", devices=(("NVIDIA H100", ""),), capability=(9, 0))
    unlisted = outcome(ts, smoke(ts, CUDA_CELL, torch).check_gpu_arch)
    assert unlisted.status == "info" and "sm_90" in unlisted.detail
    assert outcome(ts, smoke(ts, {**CUDA_CELL, "cuda_archs": ["sm_90"]}, torch).check_gpu_arch).status == "pass"
    other = outcome(ts, smoke(ts, {**CUDA_CELL, "cuda_archs": ["8.0"]}, torch).check_gpu_arch)
    assert other.status == "fail" and "sm_90" in other.detail and "HSA" not in other.fix


def test_a_numpy_warning_at_import_fails(ts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import warnings\n__version__ = '2.13.0'\n"
        "warnings.warn('Failed to initialize NumPy: _ARRAY_API not found', UserWarning)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    result = outcome(ts, smoke(ts, CPU_CELL, None).check_import)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert result.status == "fail"
    assert "Failed to initialize NumPy" in result.detail and "numpy" in result.fix.lower()


def test_companions_promised_or_not(ts: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ts.importlib.util, "find_spec", lambda name: None)
    cell = {**CPU_CELL, "torchvision": "0.28.0"}
    missing = outcome(ts, smoke(ts, cell, fake_torch()).check_torchvision_version)
    assert missing.status == "fail" and "torchvision is not installed, the image promises 0.28.0" in missing.detail
    assert outcome(ts, smoke(ts, CPU_CELL, fake_torch()).check_torchaudio_version).status == "skip"
    assert outcome(ts, smoke(ts, CPU_CELL, fake_torch()).check_torchvision_nms).status == "skip"


# -- running, exit codes, report and JSON ----------------------------------------------------------
def test_run_check_outcomes(ts: ModuleType) -> None:
    def skip() -> str:
        raise ts.Skip("not here")

    def boom() -> str:
        raise ZeroDivisionError("division by zero\nsecond line")

    assert ts.run_check("a", lambda: "fine", 5, "cpu").status == "pass"
    assert ts.run_check("b", skip, 5, "cpu").status == "skip"
    crash = ts.run_check("c", boom, 5, "cpu")
    assert (crash.status, crash.detail) == ("fail", "ZeroDivisionError: division by zero") and crash.fix
    info = ts.run_check("d", lambda: ts.Outcome("info", "12.3 TFLOP/s"), 5, "gpu")
    assert (info.status, info.section) == ("info", "gpu")


def test_a_check_that_hangs_fails_at_its_limit(ts: ModuleType) -> None:
    start = time.monotonic()
    result = ts.run_check("hangs", lambda: time.sleep(2) or "late", 0.05, "gpu")
    assert time.monotonic() - start < 1
    assert result.status == "fail" and result.timed_out
    assert result.detail == "did not finish within 0.05 s" and "dmesg" in result.fix


def test_after_a_gpu_check_hangs_the_rest_are_skipped(ts: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIF_CHECK_TIMEOUT", "0.05")
    s = smoke(ts, ROCM_CELL, fake_torch())
    monkeypatch.setattr(s, "gpu_checks", lambda: [("first", lambda: time.sleep(2) or "late"), ("second", lambda: "ok")])
    first, second = ts.run_gpu_checks(s)
    assert first.timed_out and (second.status, second.detail) == ("skip", "not run: an earlier GPU check hung")


@pytest.mark.parametrize(("statuses", "require_gpu", "code"), [
    (["pass", "pass"], False, 0),
    (["pass", "warn", "info", "skip"], False, 0),
    (["pass", "fail"], False, 1),
    (["pass", "skip"], True, 3),
    (["fail", "skip"], True, 1),
    (["pass", "pass"], True, 0),
])
def test_exit_code(ts: ModuleType, statuses: list[str], require_gpu: bool, code: int) -> None:
    results = [ts.Result(f"c{i}", s) for i, s in enumerate(statuses[:-1])]
    results.append(ts.Result("gpu", statuses[-1]))
    assert ts.exit_code(results, require_gpu) == code


def test_report_lists_every_check_with_a_fix_under_each_problem(ts: ModuleType) -> None:
    results = [ts.Result("import", "pass", "torch 2.13.0", section="install"),
               ts.Result("torch_version", "fail", "torch 2.13.0 is installed, the image promises 2.12.0",
                         "rebuild it", section="install"),
               ts.Result("gpu", "skip", "no GPU visible", "run with: docker run --device=/dev/kfd", section="gpu"),
               ts.Result("gpu_env", "warn", "HSA_OVERRIDE_GFX_VERSION=11.0.0", "unset it", section="diagnostics"),
               ts.Result("gpu_tflops", "info", "123.4 TFLOP/s", section="gpu")]
    text = ts.report(results, ROCM_CELL, 1).splitlines()
    assert text[0] == f"torch-smoke for {ROCM_CELL['tag']} (rocm7.2, torch 2.13.0)"
    assert text[1] == "install:"
    assert text[3].split() == ["FAIL", "torch_version", "torch", "2.13.0", "is", "installed,", "the", "image",
                               "promises", "2.12.0"]
    assert text[4].strip() == "fix: rebuild it"
    assert text[5] == "gpu:" and text[7].strip() == "fix: run with: docker run --device=/dev/kfd"
    assert text[8] == "diagnostics:" and text[10].strip() == "fix: unset it"
    assert text[11] == "gpu:" and text[12].split()[:2] == ["INFO", "gpu_tflops"]
    assert text[-1] == "1 passed, 1 failed, 1 warnings, 1 skipped, 1 info: exit 1 (a check failed)"


def run_main(ts: ModuleType, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = ts.main(argv)
    return code, capsys.readouterr().out


def test_json_is_complete(ts: ModuleType, tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    """A ROCm cell on a host without GPU, with a fake torch that cannot compute: every check is reported."""
    tree.rocm_devices(gid=110).kfd_node(1, 110000)
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(ROCM_CELL))
    monkeypatch.setitem(sys.modules, "torch", fake_torch(archs=tuple(GFX110X)))
    monkeypatch.setattr(ts.HostView, "current", classmethod(lambda cls, root: tree.view(ts)))  # uid 1000
    code, out = run_main(ts, ["--json", "--cell", str(cell), "--root", str(tree.root)], capsys)
    report = json.loads(out)
    names = [r["name"] for r in report["results"]]
    assert names == ["import", "torch_version", "torchvision_version", "torchaudio_version", "hip_version",
                     "cuda_version", "arch_list", "cpu_matmul", "cpu_svd", "numpy", "torchvision_nms", "gpu",
                     "dev_kfd", "dev_dri", "gpu_env", "gpu_target"]
    fields = {"name", "status", "detail", "fix", "seconds", "section", "timed_out"}
    assert all(set(r) == fields for r in report["results"])
    assert {k: report[k] for k in ("platform", "exit_code", "gpu_visible", "simulated_gpu")} == {
        "platform": "rocm", "exit_code": 1, "gpu_visible": False, "simulated_gpu": False}
    assert report["cell"] == ROCM_CELL and code == 1
    assert sum(report["summary"].values()) == len(names)
    assert all(r["fix"] for r in report["results"] if r["status"] == "fail")
    assert report["docker_flags"] == ["--group-add 110"]
    gpu = next(r for r in report["results"] if r["name"] == "gpu")
    assert gpu["fix"] == "run with: docker run --group-add 110 IMAGE torch-smoke"
    # The text report carries the same checks.
    _, text = run_main(ts, ["--cell", str(cell), "--root", str(tree.root)], capsys)
    assert all(f"  {name} " in text for name in names)


def test_cpu_cell_skips_the_gpu_section_plainly_and_require_gpu_exits_3(
        ts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(CPU_CELL))
    s = ts.Smoke(CPU_CELL, ts.HostView.current(tmp_path), torch=fake_torch(hip=None))
    monkeypatch.setattr(s, "base_checks", lambda: [("install", "torch_version", s.check_torch_version)])
    s.torch.__version__ = "2.13.0+cpu"
    results, flags = ts.run_all(s)
    assert [(r.name, r.status) for r in results] == [("torch_version", "pass"), ("gpu", "skip")]
    assert results[-1].detail.startswith("CPU image") and flags == []
    assert ts.exit_code(results, require_gpu=True) == 3 and ts.exit_code(results, require_gpu=False) == 0


def test_unreadable_cell_file_exits_1(ts: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ts.main(["--cell", str(tmp_path / "missing.json")]) == 1
    assert "cannot read the expectations" in capsys.readouterr().err


# -- the builder side: builder test --gpu ---------------------------------------------------------------
def test_gpu_run_options_pass_the_hosts_numeric_gids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builder.validate.grp.getgrnam", lambda name: SimpleNamespace(gr_gid=110))
    (tmp_path / "dri").mkdir()
    (tmp_path / "kfd").touch()
    (tmp_path / "dri" / "renderD128").touch()
    if os.geteuid() == 0:
        os.chown(tmp_path / "dri" / "renderD128", 0, 123)
    options = gpu_run_options("rocm7.2", tmp_path)
    assert options["devices"] == [f"{tmp_path}/kfd:/dev/kfd:rwm", f"{tmp_path}/dri:/dev/dri:rwm"]
    assert options["group_add"][0] == "video" and "110" in options["group_add"] and "render" not in options["group_add"]
    if os.geteuid() == 0:
        assert "123" in options["group_add"]
    assert gpu_run_options("rocm7.2", tmp_path / "nothing")["devices"] == []
    assert "device_requests" in gpu_run_options("cuda12.8")


def test_exit_3_is_reported_with_the_fix() -> None:
    report = {"results": [{"name": "gpu", "status": "skip", "detail": "no GPU visible to torch",
                           "fix": "run with: docker run --device=/dev/kfd IMAGE torch-smoke"},
                          {"name": "gpu_env", "status": "warn", "detail": "x", "fix": "y"}]}
    checks = parse_smoke(json.dumps(report), "", 3)
    assert checks[-1].status == "fail" and "a GPU was required" in checks[-1].detail
    assert checks[-1].fix == "run with: docker run --device=/dev/kfd IMAGE torch-smoke"
    assert checks[1].status == "warn"


def test_compile_without_a_c_compiler_is_a_warning_not_a_failure(ts: ModuleType,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton builds a C launcher at run time: a runtime image (no gcc) cannot, and says so without failing."""
    def broken_compile(fn: Any) -> Any:
        def run(x: Any) -> Any:
            raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")
        return run

    torch = fake_torch(devices=(("AMD Instinct MI300X", "gfx942"),))
    torch.compile, torch.randn = broken_compile, lambda *a, **k: 0.0
    check = smoke(ts, ROCM_CELL, torch)
    check.gpu = SimpleNamespace(simulated=False, device="cuda", synchronize=lambda: None)
    monkeypatch.setattr(ts.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(ts.shutil, "which", lambda name: None)
    result = outcome(ts, check.check_gpu_compile)
    assert result.status == "warn" and "needs a C compiler" in result.detail and "devel image" in result.fix
    monkeypatch.setattr(ts.shutil, "which", lambda name: "/usr/bin/" + name)
    assert outcome(ts, check.check_gpu_compile).status == "fail"  # with a compiler, a failure is a failure
