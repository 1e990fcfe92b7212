"""`libs` on installs linked the way the real wheels are (tests/fakes/wheel_shapes.py, built with cc here).

The companions name libc10.so with no RUNPATH and the ROCm runtime lives in _rocm_sdk_core/lib, preloaded by
torch's __init__: the loader alone cannot resolve them (the first test shows it), a process that imported torch
does. Each broken variant changes one thing and must FAIL naming it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.smoke.torch_smoke import libs, loaded
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
