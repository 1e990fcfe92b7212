"""torch-smoke's hip_compile and gpu_hip_kernel against a fake hipcc: finding it, parsing what it says, verdicts.

A real compiler is in tests/smoke/test_hip_image.py (Debian trixie's hipcc, in a container).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from builder.smoke.torch_smoke import hip
from builder.smoke.torch_smoke.__main__ import main
from builder.smoke.torch_smoke.core import Fail, Skip
from tests.fakes.smoke import CPU_CELL, ROCM_CELL, fake_torch, outcome, smoke

# What trixie's hipcc prints (tried in a container: tests/smoke/test_hip_image.py).
VERSION = ("HIP version: 5.7.31921-0\nDebian clang version 17.0.6 (22+b2)\nTarget: x86_64-pc-linux-gnu\n"
           "Thread model: posix\nInstalledDir: /usr/bin\n")
UNKNOWN = ("clang++-17: error: invalid target ID 'gfx950'; format is a processor name followed by an optional "
           "colon-delimited list of features followed by an enable/disable sign (e.g., 'gfx908:sramecc+:xnack-')\n")
MISSING_HEADER = ("/tmp/rif/rif_axpy.hip:1:10: fatal error: 'hip/hip_runtime.h' file not found\n"
                  "    1 | #include <hip/hip_runtime.h>\n1 error generated when compiling for gfx942.\n")
DEVEL = {**ROCM_CELL, "flavor": "devel", "channel": "pytorch", "os": "debian-13", "gfx_targets": ["gfx942", "gfx950"],
         "rocm_sdk": True}


def test_compiler_output_is_parsed() -> None:
    assert hip.compiler_version(VERSION) == "HIP 5.7.31921-0, clang 17.0.6"
    assert hip.compiler_version("") == "version unknown"
    assert hip.unknown_target(UNKNOWN) == "gfx950"
    assert hip.unknown_target("clang: error: unsupported HIP gpu architecture: gfx1250\n") == "gfx1250"
    assert hip.unknown_target(MISSING_HEADER) is None
    assert hip.first_error(MISSING_HEADER) == ("/tmp/rif/rif_axpy.hip:1:10: fatal error: 'hip/hip_runtime.h' "
                                               "file not found")
    build_log = ("Error building extension 'rif_hip_check': [1/2] c++ -MMD -I/opt/rocm/include -c main.cpp\n"
                 "main.cpp:2:10: fatal error: rocblas/rocblas.h: No such file or directory\n")
    assert hip.first_error(build_log) == "main.cpp:2:10: fatal error: rocblas/rocblas.h: No such file or directory"


def test_hipcc_is_found_on_path_then_under_the_rocm_folders() -> None:
    assert hip.find_hipcc({}, lambda n: "/usr/bin/hipcc", lambda p: False) == "/usr/bin/hipcc"
    env = {"ROCM_HOME": "/venv/rocm", "ROCM_PATH": "/opt/rocm-7.2.0"}
    found = hip.find_hipcc(env, lambda n: None, lambda p: p == "/opt/rocm-7.2.0/bin/hipcc")
    assert found == "/opt/rocm-7.2.0/bin/hipcc"
    assert hip.find_hipcc({}, lambda n: None, lambda p: p == "/opt/rocm/bin/hipcc") == "/opt/rocm/bin/hipcc"
    assert hip.find_hipcc({}, lambda n: None, lambda p: False) is None
    assert hip.sdk_root("/usr/bin/hipcc", {}) == Path("/usr")
    assert hip.sdk_root("/usr/bin/hipcc", {"ROCM_PATH": "/opt/rocm"}) == Path("/opt/rocm")


class FakeHipcc:
    """Answers like trixie's hipcc: --version, and a compile that fails for targets clang 17 lacks."""

    def __init__(self, unknown: Sequence[str] = ("gfx950",), error: str = "") -> None:
        self.unknown, self.error, self.calls = set(unknown), error, []  # type: set[str], str, list[list[str]]

    def __call__(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        self.calls.append(list(argv))
        if "--version" in argv:
            return 0, VERSION
        target = next(a.split("=", 1)[1] for a in argv if a.startswith("--offload-arch="))
        if self.error:
            return 1, self.error
        if target in self.unknown:
            return 1, UNKNOWN.replace("gfx950", target)
        return 0, ""


@pytest.fixture
def sdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ROCm folder with hipBLAS's header, and hipcc 'found' in it."""
    (tmp_path / "include" / "hipblas").mkdir(parents=True)
    (tmp_path / "include" / "hipblas" / "hipblas.h").write_text("")
    monkeypatch.setattr(hip, "find_hipcc", lambda env: str(tmp_path / "bin" / "hipcc"))
    return tmp_path


def run(cell: dict[str, object], sdk: Path, fake: FakeHipcc, ext: str | Exception = "extension ok") -> tuple[str, ...]:
    def build(math: str, include: Path, build: Path) -> str:
        assert include == sdk / "include"
        if isinstance(ext, Exception):
            raise ext
        return ext

    s = smoke(cell, None, env={"ROCM_HOME": str(sdk)})
    result = outcome(lambda s: hip.hip_compile(s, run=fake, build_extension=build), s, "sdk")
    return result.status, result.detail, result.fix


def test_every_target_compiles_and_the_extension_builds(sdk: Path) -> None:
    fake = FakeHipcc()
    status, detail, _ = run({**DEVEL, "gfx_targets": ["gfx942", "gfx1100"]}, sdk, fake)
    assert (status, detail) == ("pass", "hipcc (HIP 5.7.31921-0, clang 17.0.6) compiled a kernel for gfx942, gfx1100 "
                                        "with hip/hip_runtime.h and hipblas/hipblas.h; extension ok")
    assert [c[1] for c in fake.calls] == ["--version", "--offload-arch=gfx942", "--offload-arch=gfx1100"]
    assert all(c[2] == "-c" for c in fake.calls[1:])


def test_without_torch_the_extension_part_says_so_and_the_kernels_decide(sdk: Path) -> None:
    status, detail, _ = run({**DEVEL, "gfx_targets": ["gfx942"]}, sdk, FakeHipcc(),
                            Skip("torch not importable (ModuleNotFoundError: No module named 'torch')"))
    assert status == "pass" and detail.endswith("; load_inline extension not built: torch not importable "
                                                "(ModuleNotFoundError: No module named 'torch')")
    failed = run({**DEVEL, "gfx_targets": ["gfx942"]}, sdk, FakeHipcc(), Fail("load_inline failed: boom"))
    assert failed[0] == "fail" and failed[1].endswith("; load_inline failed: boom") and "rocm-dev" in failed[2]


def test_a_target_the_compiler_does_not_know_fails_naming_it_not_a_crash(sdk: Path) -> None:
    status, detail, fix = run(DEVEL, sdk, FakeHipcc())
    assert status == "fail"
    assert detail == ("hipcc (HIP 5.7.31921-0, clang 17.0.6) compiled a kernel for gfx942; gfx950: the compiler "
                      f"(HIP 5.7.31921-0, clang 17.0.6) does not know this target ({UNKNOWN.strip()[:300]})")
    assert fix.startswith("install a ROCm SDK whose compiler knows every target of the image's family for ROCm 7.2")


def test_other_compile_errors_and_a_missing_math_header_are_named(sdk: Path) -> None:
    status, detail, _ = run(DEVEL, sdk, FakeHipcc(error=MISSING_HEADER))
    assert status == "fail" and "compiled no kernel; gfx942: /tmp/rif/rif_axpy.hip:1:10: fatal error:" in detail
    (sdk / "include" / "hipblas" / "hipblas.h").unlink()
    status, detail, _ = run({**DEVEL, "gfx_targets": ["gfx942"]}, sdk, FakeHipcc())
    assert status == "fail" and detail.endswith(
        f"; no ROCm math-library header under {sdk / 'include'} (looked for hipblas/hipblas.h, rocblas/rocblas.h, "
        "hipblas.h, rocblas.h)")


def test_no_compiler_fails_a_devel_image_with_its_channels_fix_and_skips_a_runtime_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hip, "find_hipcc", lambda env: None)
    devel = outcome(hip.hip_compile, smoke(DEVEL, None), "sdk")
    assert devel.status == "fail" and devel.detail.startswith("no HIP compiler in this image, which promises a ROCm "
                                                              "SDK: hipcc is not")
    assert devel.fix == ("install the ROCm SDK for ROCm 7.2 from AMD's apt repository: deb "
                         "https://repo.radeon.com/rocm/apt/7.2 trixie main, then apt-get install -y rocm-dev "
                         "(hipcc, HIP and math-library headers)")
    therock = outcome(hip.hip_compile, smoke({**DEVEL, "channel": "therock", "hip": "7.14"}, None), "sdk")
    assert therock.fix == ('install the ROCm SDK that matches the wheels: pip install "rocm[devel]", then '
                           "`rocm-sdk init` and export ROCM_HOME=$(rocm-sdk path --root) (TheRock RELEASES.md)")
    runtime = outcome(hip.hip_compile, smoke({**DEVEL, "flavor": "runtime", "rocm_sdk": False}, None), "sdk")
    assert runtime.status == "skip" and "HIP compiling is checked on images that carry one" in runtime.detail
    today = outcome(hip.hip_compile, smoke({**DEVEL, "rocm_sdk": False}, None), "sdk")  # a devel image, no SDK yet
    assert today.status == "skip" and "promises no ROCm SDK" in today.detail


def test_the_gpu_kernel_is_built_for_device_0_and_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hip, "find_hipcc", lambda env: "/usr/bin/hipcc")
    calls: list[list[str]] = []

    def fake(argv: Sequence[str], timeout: float) -> tuple[int, str]:
        calls.append(list(argv))
        return (0, f"{hip.OK_LINE}\n") if argv[0].endswith("rif_axpy") else (0, "")

    s = smoke(DEVEL, fake_torch(devices=(("AMD Instinct MI300X", "gfx942:sramecc+:xnack-"),)))
    result = outcome(lambda s: hip.gpu_hip_kernel(s, run=fake), s, "gpu")
    assert (result.status, result.detail) == (
        "pass", "a HIP kernel built for gfx942 ran on device 0 and computed y = 2x + 1 for 1000 elements")
    assert calls[0][:3] == ["/usr/bin/hipcc", "--offload-arch=gfx942", "-DRIF_MAIN"]
    wrong = outcome(lambda s: hip.gpu_hip_kernel(s, run=lambda a, t: (1, "wrong result at 3: 0 (no error)")), s, "gpu")
    assert wrong.status == "fail" and "hipcc could not build" in wrong.detail


def test_the_gpu_kernel_skips_on_a_simulated_gpu_or_without_a_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    simulated = outcome(hip.gpu_hip_kernel, smoke(CPU_CELL, fake_torch(hip=None), simulate="gfx1100"), "gpu")
    assert (simulated.status, simulated.detail) == ("skip", "simulated GPU: a HIP kernel needs a real AMD GPU")
    monkeypatch.setattr(hip, "find_hipcc", lambda env: None)
    s = smoke(DEVEL, fake_torch(devices=(("AMD Instinct MI300X", "gfx942"),)))
    assert outcome(hip.gpu_hip_kernel, s, "gpu").status == "skip"


def test_only_runs_the_named_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(hip, "find_hipcc", lambda env: None)
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(DEVEL))
    assert main(["--json", "--cell", str(cell), "--only", "hip_compile"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(r["section"], r["name"], r["status"]) for r in report["results"]] == [("sdk", "hip_compile", "fail")]
    with pytest.raises(SystemExit):
        main(["--cell", str(cell), "--only", "hip_compile,nope"])
    assert "unknown check(s) nope" in capsys.readouterr().err
