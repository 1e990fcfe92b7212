"""torch-smoke's `libs` check: the loader's output parsed, missing sonames named with their package and fix.

The loader is a fake `ldd` script here (its answers are the test's), and where the host has a C compiler, a
real one: a library linked against another that is then deleted, asked with the host's own dynamic loader.
The process context is a stub in which torch imported (test_libs_real_shape.py runs the real child).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from builder.smoke.torch_smoke import elf, libs, loaded
from builder.smoke.torch_smoke.platforms import PLATFORMS
from builder.smoke.torch_smoke.runner import run_named
from tests.fakes.smoke import CPU_CELL, ROCM_CELL, fake_torch, outcome, smoke

LDD_OUTPUT = """\tlinux-vdso.so.1 (0x00007ffd1c3f5000)
\tlibc10.so => /opt/venv/lib/python3.12/site-packages/torch/lib/libc10.so (0x00007f0c2a000000)
\tlibgomp.so.1 => not found
\tlibnuma.so.1 => not found
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c29c00000)
\tlibgomp.so.1 => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0c2b000000)
"""
# Answers by file name: libtorch_cpu.so lacks libgomp.so.1, libtorch_hip.so lacks an unknown library too.
FAKE_LDD = """#!/bin/sh
case "$1" in
  *libtorch_cpu.so) printf '\\tlibgomp.so.1 => not found\\n\\tlibc.so.6 => /lib/libc.so.6 (0x1)\\n' ;;
  *libtorch_hip.so) printf '\\tlibgomp.so.1 => not found\\n\\tlibrocprofiler-sdk.so.1 => not found\\n' ;;
  *) printf '\\tlibc.so.6 => /lib/libc.so.6 (0x1)\\n' ;;
esac
"""
IMPORTED = loaded.Context(imported=["torch"])


def test_not_found_lines_are_parsed_once_each_in_order() -> None:
    assert loaded.missing_sonames(LDD_OUTPUT) == ["libgomp.so.1", "libnuma.so.1"]
    assert loaded.missing_sonames("\tstatically linked\n") == []
    assert loaded.missing_sonames("\tnot a dynamic executable\n") == []


def test_the_loader_is_the_one_this_python_runs_under_never_ldd() -> None:
    """ldd is a shell script: the preloads would load into the shell for real. `ld.so --list` stops at the first
    missing soname; the loader in trace mode (LD_TRACE_LOADED_OBJECTS, what ldd sets) lists them all."""
    assert libs.list_command("/opt/ld.so", lambda p: True) == ["/opt/ld.so"]
    loader = libs.list_command("/gone/ld.so", lambda p: p == "/lib64/ld-linux-x86-64.so.2")
    assert loader == ["/lib64/ld-linux-x86-64.so.2"]
    assert libs.list_command("", lambda p: False) is None
    if elf.interpreter(Path(sys.executable).resolve()):
        assert libs.list_command() == [elf.interpreter(Path(sys.executable).resolve())]
    stopped = "x.so: error while loading shared libraries: libgomp.so.1: cannot open shared object file: No such"
    assert loaded.missing_sonames(stopped, Path("x.so")) == ["libgomp.so.1"]


def fake_torch_tree(root: Path, *names: str) -> Path:
    """site-packages/torch with lib/NAME files that start like ELF files (and a non-ELF text file)."""
    lib = root / "site-packages" / "torch" / "lib"
    lib.mkdir(parents=True)
    for name in names:
        (lib / name).write_bytes(b"\x7fELF" + b"\0" * 60)
    (lib / "notes.so.txt").write_text("not a library")
    return lib.parent


@pytest.fixture
def ldd(tmp_path: Path) -> list[str]:
    script = tmp_path / "ldd"
    script.write_text(FAKE_LDD)
    script.chmod(0o755)
    return [str(script)]


def test_a_missing_soname_fails_naming_it_the_library_and_the_package(
        tmp_path: Path, ldd: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    torch_dir = fake_torch_tree(tmp_path, "libc10.so", "libtorch_cpu.so", "libtorch_hip.so")
    monkeypatch.setattr(libs, "package_folders", lambda: {"torch": torch_dir})
    result = outcome(lambda s: libs.libs(s, command=ldd, context=lambda t: IMPORTED), smoke(ROCM_CELL, fake_torch()))
    assert result.status == "fail"
    assert result.detail == (
        "2 soname(s) not found by the loader: libgomp.so.1 (needed by torch/lib/libtorch_cpu.so, "
        "torch/lib/libtorch_hip.so; package libgomp1); librocprofiler-sdk.so.1 (needed by torch/lib/libtorch_hip.so;"
        " package unknown)")
    assert result.fix == (
        "apt-get install -y --no-install-recommends libgomp1 in a derived image; find the package that ships "
        "librocprofiler-sdk.so.1 (`apt-file search SONAME`) and install it in a derived image; or report the "
        "image: its wheels should bundle what they need")


def test_every_library_resolving_passes_with_the_count(tmp_path: Path, ldd: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    torch_dir = fake_torch_tree(tmp_path, "libc10.so", "libshm.so.1")
    vision = tmp_path / "site-packages" / "torchvision"
    vision.mkdir()
    (vision / "_C.so").write_bytes(b"\x7fELF")
    monkeypatch.setattr(libs, "package_folders", lambda: {"torch": torch_dir, "torchvision": vision})
    result = outcome(lambda s: libs.libs(s, command=ldd, context=lambda t: IMPORTED), smoke(CPU_CELL, None))
    assert (result.status, result.detail) == (
        "pass", "3 shared objects (torch, torchvision) resolve every dependency after import torch (ldd)")


def test_a_spent_budget_is_a_warning_not_a_pass(tmp_path: Path) -> None:
    files = [tmp_path / "a.so", tmp_path / "b.so"]
    scan = libs.scan(files, ["ldd"], run=lambda argv, timeout: (0, ""), budget=0)
    assert (scan.checked, scan.timed_out) == (0, True)


def test_no_torch_or_no_lib_folder_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libs, "package_folders", lambda: {})
    assert "torch is not installed" in outcome(libs.libs, smoke(CPU_CELL, None)).detail
    monkeypatch.setattr(libs, "package_folders", lambda: {"torch": tmp_path})
    gone = outcome(libs.libs, smoke(CPU_CELL, None))
    assert gone.status == "fail" and gone.detail == f"torch at {tmp_path} has no lib/ folder"


def test_the_blame_goes_to_the_library_whose_own_needed_list_names_it() -> None:
    own = Path(sys.executable).resolve()
    needed = libs.elf_needed(own)
    if needed is None:
        pytest.skip("this interpreter is not a 64-bit little-endian ELF file")
    assert any(n.startswith("libc.so") for n in needed)
    assert libs.elf_needed(Path(__file__)) is None


@pytest.mark.skipif(shutil.which("cc") is None or libs.list_command() is None, reason="needs cc and ld.so")
def test_the_real_loader_reports_a_deleted_dependency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """libtorch_cpu.so needs librifgomp.so.1 (a stand-in built here: the host may have the real libgomp), which is
    then deleted: the host's own loader reports it."""
    lib = tmp_path / "torch" / "lib"
    lib.mkdir(parents=True)

    def cc(*args: str) -> None:
        subprocess.run(["cc", "-shared", "-fPIC", *args], check=True, capture_output=True, cwd=lib)

    (lib / "a.c").write_text("int gomp_standin(void) { return 1; }\n")
    (lib / "b.c").write_text("int gomp_standin(void);\nint torch_standin(void) { return gomp_standin(); }\n")
    (lib / "c.c").write_text("int torch_standin(void);\nint user(void) { return torch_standin(); }\n")
    cc("-Wl,-soname,librifgomp.so.1", "-o", "librifgomp.so.1", "a.c")
    cc("-o", "libtorch_cpu.so", "b.c", "-L.", "-l:librifgomp.so.1", "-Wl,-rpath,$ORIGIN")
    cc("-o", "libtorch.so", "c.c", "-L.", "-l:libtorch_cpu.so", "-Wl,-rpath,$ORIGIN")
    assert "librifgomp.so.1" in (libs.elf_needed(lib / "libtorch_cpu.so") or [])
    assert "librifgomp.so.1" not in (libs.elf_needed(lib / "libtorch.so") or [])
    monkeypatch.setattr(libs, "package_folders", lambda: {"torch": lib.parent})
    monkeypatch.setitem(libs.SONAME_PACKAGES, "librifgomp.so.1", "librifgomp1")
    check, loader = partial(libs.libs, context=lambda t: IMPORTED), (libs.list_command() or [""])[0]
    assert outcome(check, smoke(CPU_CELL, None)).detail == (
        f"3 shared objects (torch) resolve every dependency after import torch ({loader} in trace mode)")
    (lib / "librifgomp.so.1").unlink()
    result = outcome(check, smoke(CPU_CELL, None))
    # libtorch.so lacks it too, through libtorch_cpu.so; only the library that names it is blamed.
    assert result.status == "fail" and result.detail == (
        "1 soname(s) not found by the loader: librifgomp.so.1 (needed by torch/lib/libtorch_cpu.so; "
        "package librifgomp1)")
    assert result.fix.startswith("apt-get install -y --no-install-recommends librifgomp1 in a derived image")


def test_every_platform_runs_libs_in_the_install_section() -> None:
    for platform in PLATFORMS.values():
        assert "libs" in dict(platform.base)["install"] and "libs" not in platform.not_applicable
    fixed = run_named(smoke(CPU_CELL, None), "libs", "install")
    assert fixed.section == "install"
