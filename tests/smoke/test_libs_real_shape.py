"""`libs` on installs linked the way the real wheels are (tests/fakes/wheel_shapes.py, built with cc here).

The companions name libc10.so with no RUNPATH and the ROCm runtime lives in _rocm_sdk_core/lib, preloaded by
torch's __init__: the loader alone cannot resolve them (the first test shows it), a process that imported torch
does. Each broken variant changes one thing and must FAIL naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.smoke.torch_smoke import elf, libs, loaded
from builder.smoke.torch_smoke.core import Result
from tests.fakes import wheel_shapes as shapes
from tests.fakes.smoke import outcome, smoke

pytestmark = pytest.mark.skipif(not shapes.have_cc() or not sys.platform.startswith("linux"),
                                reason="needs cc and the Linux dynamic loader")
REPO = Path(__file__).resolve().parents[2]
CELL = {"tag": "rocm7.10_x_runtime", "platform": "rocm7.10", "torch": "2.9.1", "torchvision": "0.24.1",
        "torchaudio": "2.9.1", "hip": "7.1", "gfx_family": "gfx110X-all", "gfx_targets": ["gfx1100"]}
NOWHERE = "librifnowhere.so.1"


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: shapes.Install | None = None) -> Path:
    """Build the install and make it the one this process and its children see."""
    site = shapes.build(tmp_path, variant)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setattr(libs, "package_folders",
                        lambda: {n: site / n for n in libs.PACKAGES if (site / n / "__init__.py").is_file()})
    return site


def check(**kwargs: object) -> Callable[[object], object]:
    return lambda s: libs.libs(s, **kwargs)  # type: ignore[arg-type]


def run_libs(**kwargs: object) -> Result:
    return outcome(check(**kwargs), smoke(CELL, None))  # type: ignore[arg-type]


def test_a_healthy_install_passes_where_the_loader_alone_would_fail(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = install(tmp_path, monkeypatch)
    command = libs.list_command()
    assert command is not None
    alone = libs.scan([site / "torchvision/_C.so", site / "torch/lib/libtorch_hip.so"], command,
                      lambda argv, timeout: libs.run_tool(argv, timeout, loaded.loader_env([], os.environ, True)))
    assert {"libc10.so", "libtorch.so", shapes.HIP} <= set(alone.missing)  # the issue: a healthy install failed
    result = run_libs()
    assert result.status == "pass", result.detail
    assert result.detail.startswith("11 shared objects (torch, torchvision, torchaudio) resolve every dependency "
                                    "after import torch, torchvision, torchaudio (")


def test_a_soname_no_one_ships_fails_naming_it_and_its_needer(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    variant = shapes.Install(extra_needed={"torchaudio/lib/_torchaudio.abi3.so": (NOWHERE,)})
    install(tmp_path, monkeypatch, variant)
    result = run_libs()
    assert result.status == "fail"
    assert result.detail.startswith(f"1 soname(s) not found by the loader: {NOWHERE} (needed by "
                                    "torchaudio/lib/_torchaudio.abi3.so; package unknown)")
    assert "import torch failed" not in result.detail  # torch imports; only the companion is broken
    assert f"find the package that ships {NOWHERE}" in result.fix


def test_a_rocm_library_nothing_preloads_fails_and_explains_the_failed_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """_rocm_init preloads amdhip64 only: libtorch_hip.so cannot find libroctx64.so.4, so `import torch` fails
    (the import check says so) and libs names the soname, its needer, and where it lies unloaded."""
    site = install(tmp_path, monkeypatch, shapes.Install(preloads=("amdhip64",)))
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(CELL))
    proc = subprocess.run([sys.executable, "-m", "builder.smoke.torch_smoke", "--json", "--only", "import,libs",
                           "--cell", str(cell)], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}, check=False)
    results = {r["name"]: r for r in json.loads(proc.stdout)["results"]}
    assert proc.returncode == 1
    assert results["import"]["status"] == "fail" and shapes.ROCTX in results["import"]["detail"]
    detail = results["libs"]["detail"]
    assert results["libs"]["status"] == "fail"
    assert detail.startswith(f"1 soname(s) not found by the loader: {shapes.ROCTX} (needed by "
                             f"torch/lib/libtorch_hip.so; shipped in _rocm_sdk_core/lib/{shapes.ROCTX} but not "
                             "loaded: nothing preloads it and no RUNPATH leads there)")
    assert f"import torch failed (OSError: {shapes.ROCTX}: cannot open shared object file" in detail
    assert "torch/_rocm_init.py" in results["libs"]["fix"]


def test_a_companion_needing_a_rocm_library_nothing_preloads_fails(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    jpeg = "librifjpeg.so.1"
    variant = shapes.Install(extra_needed={"torchvision/_C.so": (jpeg,)})
    variant.libraries.append(shapes.Library(f"_rocm_sdk_core/lib/{jpeg}", runpath=None))
    install(tmp_path, monkeypatch, variant)
    result = run_libs()
    assert result.status == "fail"
    assert result.detail.startswith(f"1 soname(s) not found by the loader: {jpeg} (needed by torchvision/_C.so; "
                                    f"shipped in _rocm_sdk_core/lib/{jpeg} but not loaded")


def test_without_the_bundled_libgomp_libs_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = install(tmp_path, monkeypatch)
    (site / "torch" / "lib" / shapes.GOMP).unlink()
    monkeypatch.setitem(libs.SONAME_PACKAGES, shapes.GOMP, "libgomp1")
    result = run_libs()
    assert result.status == "fail"
    assert result.detail.startswith(f"1 soname(s) not found by the loader: {shapes.GOMP} (needed by "
                                    "torch/lib/libtorch_cpu.so, torch/lib/libtorch_global_deps.so; package libgomp1)")
    assert result.fix.startswith("apt-get install -y --no-install-recommends libgomp1 in a derived image")


def test_a_library_the_loader_refuses_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a shared object for this machine: an ELF file cut short, and (where cc can) a 32-bit library."""
    site = install(tmp_path, monkeypatch)
    (site / "torchvision" / "image.so").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9)
    names = ["torchvision/image.so"]
    m32 = subprocess.run(["cc", "-m32", "-shared", "-fPIC", "-nostdlib", "-o", str(site / "torchaudio/lib/x86.so"),
                          "-x", "c", "-"], input="int f(void) { return 0; }\n", capture_output=True, text=True,
                         check=False)
    if m32.returncode == 0:
        names.insert(0, "torchaudio/lib/x86.so")
    result = run_libs()
    assert result.status == "fail"
    assert result.detail.startswith(f"{len(names)} librar{'y' if len(names) == 1 else 'ies'} the loader will not "
                                    f"load: {names[0]} (")
    assert all(n in result.detail for n in names)
    assert result.fix.startswith("reinstall the wheels")


def test_a_spent_time_budget_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, monkeypatch)
    spent = run_libs(budget=0.0, context=lambda timeout: loaded.Context(imported=["torch"]))
    assert spent.status == "fail" and spent.detail.startswith("only 0 of 11 shared objects were checked within 0 s")
    hung = run_libs(context=lambda timeout: loaded.Context(timed_out=True))
    assert hung.status == "fail" and hung.detail.startswith("importing torch in a child process did not finish")


def test_the_child_reports_what_it_imported_and_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = install(tmp_path, monkeypatch)
    ctx = loaded.load_context(60)
    assert (ctx.imported, ctx.errors) == (["torch", "torchvision", "torchaudio"], {})
    assert str(site / "_rocm_sdk_core" / "lib" / shapes.HIP) in ctx.mapped
    assert str(site / "torch" / "lib" / "libtorch_hip.so") in ctx.mapped
    # Only libraries with a soname are preloaded: extension modules (torchvision/_C.so) match no NEEDED.
    assert str(site / "torchvision" / "_C.so") not in libs.preloads(ctx.mapped)
    dead = loaded.load_context(60, python=str(tmp_path / "no-python"))
    assert dead.failure().startswith("could not start")


# -- the fixtures' dynamic sections against the real wheels' ----------------------------------------------------
@dataclass(frozen=True)
class RealWheel:
    """A published wheel, pinned by sha256, and which of its files each fixture library is shaped after."""

    name: str
    version: str
    sha256: str
    url: str
    members: dict[str, str]  # fixture path under site-packages -> member in the wheel


REAL_WHEELS = (
    RealWheel("torchvision-0.26.0-cp311-cp311-manylinux_2_28_x86_64.whl", "0.26.0",
              "fd10b5f994c210f4f6d6761cf686f82d748554adf486cb0979770c3252868c8f",
              "https://files.pythonhosted.org/packages/9a/45/57bbf9e216850d065e66dd31a50f57424b607f1d878ab8956e56a1f4e"
              "36b/torchvision-0.26.0-cp311-cp311-manylinux_2_28_x86_64.whl",
              {"torchvision/_C.so": "torchvision/_C.so"}),
    RealWheel("torchaudio-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl", "2.11.0",
              "1a07ec72fd6f26a588c39b5f029e0130d16bb40bc4221635580bf8fb18fcbc80",
              "https://files.pythonhosted.org/packages/ac/70/17408e0d154d0c894537a88dcbadc48e8ad3b6e1ef4a1dabda5d4024"
              "5ee0/torchaudio-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl",
              {"torchaudio/lib/libtorchaudio.abi3.so": "torchaudio/lib/libtorchaudio.abi3.so",
               "torchaudio/lib/_torchaudio.abi3.so": "torchaudio/lib/_torchaudio.abi3.so"}),
    RealWheel("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "2.13.0+cpu",
              "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b",
              "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl",
              {"torch/lib/libc10.so": "torch/lib/libc10.so", "torch/lib/libtorch.so": "torch/lib/libtorch.so",
               "torch/lib/libtorch_cpu.so": "torch/lib/libtorch_cpu.so",
               "torch/lib/libtorch_global_deps.so": "torch/lib/libtorch_global_deps.so",
               f"torch/_C{shapes.EXT}": "torch/_C.cpython-311-x86_64-linux-gnu.so"}),
)
# The sonames a wheel takes from torch (or bundles beside it): the part of NEEDED the shapes must agree on.
TORCH_OWN = {"libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so", "libgomp.so.1"}


def shape(found: elf.Dynamic | None) -> tuple[bool, str, str, frozenset[str]]:
    """(has a soname, RUNPATH, RPATH (an absolute one is the build machine's: 'absolute'), torch's NEEDED)."""
    assert found is not None

    def kind(value: str | None) -> str:
        return "none" if not value else "absolute" if value.startswith("/") else value

    needed = {"libgomp.so.1" if n == shapes.GOMP else n for n in found.needed}
    return bool(found.soname), kind(found.runpath), kind(found.rpath), frozenset(needed & TORCH_OWN)


def real_wheel(wheel: RealWheel) -> Path:
    """A local copy checked by sha256: RIF_REAL_WHEELS (folders), or pip's find-links. The suite's traffic stays
    on loopback (tests/fakes/loopback.py), so it does not fetch the index itself: without a copy it skips this
    comparison only, saying how to get one."""
    folders = [*os.environ.get("RIF_REAL_WHEELS", "").split(os.pathsep), *os.environ.get("PIP_FIND_LINKS", "").split()]
    for folder in filter(None, folders):
        path = Path(folder) / wheel.name
        if path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            assert digest == wheel.sha256, f"{path} is not the published {wheel.name} (sha256 {digest})"
            return path
    pytest.skip(f"{wheel.name} is not at hand, so the fixture's shape was not compared with the real file: fetch "
                f"{wheel.url} (pip download --no-deps) into a folder named by RIF_REAL_WHEELS")


@pytest.mark.parametrize("wheel", REAL_WHEELS, ids=lambda w: w.name.split("-cp")[0])
def test_each_fixture_library_has_the_real_wheels_dynamic_section(
        wheel: RealWheel, tmp_path: Path) -> None:
    site = shapes.build(tmp_path)
    path = real_wheel(wheel)
    with zipfile.ZipFile(path) as archive:
        for fixture, member in wheel.members.items():
            with archive.open(member) as fh:
                real = shape(elf.read_dynamic(fh))  # type: ignore[arg-type]
            assert shape(elf.dynamic(site / fixture)) == real, f"{fixture} against {wheel.name}:{member}"
