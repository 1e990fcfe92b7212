"""Can this image compile HIP: a kernel for every gfx target of its family, and a torch C++ extension.

Compiling needs no GPU, so `hip_compile` runs on every ROCm image: one whose cell.json promises a ROCm SDK
(`rocm_sdk`) fails it without a compiler; one that promises none skips it, unless it has a compiler anyway.
Running the kernel needs one: `gpu_hip_kernel` in the GPU section.
The compiler is `hipcc` from PATH, $ROCM_HOME/bin, $ROCM_PATH/bin or /opt/rocm/bin.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core import Fail, Skip, first_line
from .smoke import Check, Smoke

COMPILE_TIMEOUT_S = 120.0  # one hipcc call
RUN_TIMEOUT_S = 60.0  # the kernel program on a GPU
ROCM_DIRS = ("ROCM_HOME", "ROCM_PATH")
DEFAULT_ROCM = "/opt/rocm"
# Headers of the ROCm math libraries, first found wins (hipBLAS, then rocBLAS; the older flat layout too).
MATH_HEADERS = ("hipblas/hipblas.h", "rocblas/rocblas.h", "hipblas.h", "rocblas.h")
# The OS codenames of AMD's apt repository suites (https://repo.radeon.com/rocm/apt/<X.Y>/dists/).
CODENAMES = {"debian-12": "bookworm", "debian-13": "trixie", "ubuntu-22.04": "jammy", "ubuntu-24.04": "noble"}
# How clang says it does not know an offload target (clang 17: "invalid target ID 'gfx950'; format is ...").
UNKNOWN_TARGET = re.compile(r"invalid target ID '([^']+)'|unsupported (?:CUDA|HIP) gpu architecture: (\S+)|"
                            r"unknown target CPU '([^']+)'", re.IGNORECASE)
OK_LINE = "rif_axpy ok"
KERNEL = """#include <hip/hip_runtime.h>
{math}
extern "C" __global__ void rif_axpy(float a, const float* x, float* y, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}}
#ifdef RIF_MAIN
#include <cstdio>
int main() {{
  const int n = 1000;
  float hx[n], hy[n];
  for (int i = 0; i < n; ++i) {{ hx[i] = float(i); hy[i] = 1.0f; }}
  float *x = nullptr, *y = nullptr;
  if (hipMalloc(&x, n * sizeof(float)) != hipSuccess || hipMalloc(&y, n * sizeof(float)) != hipSuccess) {{
    std::printf("hipMalloc failed: %s\\n", hipGetErrorString(hipGetLastError()));
    return 1;
  }}
  hipMemcpy(x, hx, n * sizeof(float), hipMemcpyHostToDevice);
  hipMemcpy(y, hy, n * sizeof(float), hipMemcpyHostToDevice);
  hipLaunchKernelGGL(rif_axpy, dim3((n + 255) / 256), dim3(256), 0, 0, 2.0f, x, y, n);
  hipError_t err = hipDeviceSynchronize();
  hipMemcpy(hy, y, n * sizeof(float), hipMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {{
    if (hy[i] != 2.0f * float(i) + 1.0f) {{
      std::printf("wrong result at %d: %g (%s)\\n", i, hy[i], hipGetErrorString(err));
      return 1;
    }}
  }}
  std::printf("{ok}\\n");
  return 0;
}}
#endif
"""
EXTENSION = """#include <hip/hip_runtime.h>
#include <{math}>
int rif_hip_version() {{ return HIP_VERSION; }}
"""

Runner = Callable[[Sequence[str], float], tuple[int, str]]  # (argv, timeout) -> (exit code, stdout + stderr)


def run_tool(argv: Sequence[str], timeout: float) -> tuple[int, str]:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"did not finish within {timeout:g} s"
    return proc.returncode, proc.stdout + proc.stderr


def find_hipcc(env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which,
               exists: Callable[[str], bool] = os.path.isfile) -> str | None:
    """hipcc on PATH, else under $ROCM_HOME/bin, $ROCM_PATH/bin, /opt/rocm/bin."""
    found = which("hipcc")
    if found:
        return found
    roots = [env[k] for k in ROCM_DIRS if env.get(k)] + [DEFAULT_ROCM]
    return next((p for p in (os.path.join(r, "bin", "hipcc") for r in roots) if exists(p)), None)


def sdk_root(hipcc: str, env: Mapping[str, str]) -> Path:
    """$ROCM_HOME or $ROCM_PATH where set, else the folder above hipcc's bin/ (/opt/rocm, or /usr on Debian)."""
    named = next((env[k] for k in ROCM_DIRS if env.get(k)), None)
    return Path(named) if named else Path(os.path.realpath(hipcc)).parent.parent


def math_header(include: Path) -> str | None:
    return next((h for h in MATH_HEADERS if (include / h).is_file()), None)


def unknown_target(output: str) -> str | None:
    """The target the compiler says it does not know, from its error output."""
    match = UNKNOWN_TARGET.search(output)
    return next((g for g in match.groups() if g), None) if match else None


def first_error(output: str) -> str:
    """The compiler's first error line (or its first line), for a report line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    marked = [line for line in lines if "error:" in line.lower()] or [line for line in lines if "error" in line.lower()]
    return (marked or lines or ["no output"])[0][:300]


def compiler_version(output: str) -> str:
    """`hipcc --version` -> 'HIP 5.7.31921, clang 17.0.6'."""
    hip = re.search(r"HIP version:\s*(\S+)", output)
    clang = re.search(r"clang version\s+(\S+)", output)
    parts = ([f"HIP {hip.group(1)}"] if hip else []) + ([f"clang {clang.group(1)}"] if clang else [])
    return ", ".join(parts) or "version unknown"


def sdk_fix(expect: Mapping[str, Any], what: str = "the ROCm SDK") -> str:
    """What to install, for the channel the image's wheels come from (rocm-facts.md section 3)."""
    rocm, channel = expect.get("hip") or "X.Y", expect.get("channel") or "pytorch"
    if channel == "therock":
        return (f'install {what} that matches the wheels: pip install "rocm[devel]", then `rocm-sdk init` and '
                "export ROCM_HOME=$(rocm-sdk path --root) (TheRock RELEASES.md)")
    codename = CODENAMES.get(str(expect.get("os")), "<codename>")
    return (f"install {what} for ROCm {rocm} from AMD's apt repository: deb https://repo.radeon.com/rocm/apt/"
            f"{rocm} {codename} main, then apt-get install -y rocm-dev (hipcc, HIP and math-library headers)")


@dataclass
class Compiled:
    """What hipcc said per target."""

    built: list[str] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)  # target -> the compiler's words
    failed: dict[str, str] = field(default_factory=dict)  # target -> its first error line


def compile_targets(hipcc: str, source: Path, targets: Sequence[str], out: Path,
                    run: Runner = run_tool) -> Compiled:
    result = Compiled()
    for target in targets:
        code, output = run([hipcc, f"--offload-arch={target}", "-c", str(source), "-o",
                            str(out / f"rif_axpy-{target}.o")], COMPILE_TIMEOUT_S)
        if code == 0:
            result.built.append(target)
        elif unknown_target(output):
            result.unknown[target] = first_error(output)
        else:
            result.failed[target] = first_error(output)
    return result


def extension(math: str, include: Path, build: Path) -> str:
    """A torch C++ extension (load_inline) that includes the HIP runtime and a math-library header."""
    try:
        torch = importlib.import_module("torch")
        cpp_extension = importlib.import_module("torch.utils.cpp_extension")
    except Exception as exc:
        raise Skip(f"torch not importable ({first_line(exc)})") from exc
    build.mkdir(parents=True, exist_ok=True)  # load_inline writes its sources there, and does not make it
    try:
        module = cpp_extension.load_inline(
            name="rif_hip_check", cpp_sources=EXTENSION.format(math=math), functions=["rif_hip_version"],
            extra_cflags=["-D__HIP_PLATFORM_AMD__"], extra_include_paths=[str(include)],
            build_directory=str(build), verbose=False)
        version = int(module.rif_hip_version())
    except Exception as exc:
        raise Fail(f"torch {torch.__version__} load_inline with hip/hip_runtime.h and {math} failed: "
                   f"{first_error(str(exc))}") from exc
    return f"load_inline extension with hip/hip_runtime.h and {math} built and ran (HIP_VERSION {version})"


def hip_compile(s: Smoke, run: Runner = run_tool, build_extension: Callable[[str, Path, Path], str] = extension,
                ) -> str:
    """A kernel for every target of the image's family, with hipcc, and a load_inline extension (no GPU)."""
    env = s.view.env
    hipcc = find_hipcc(env)
    if hipcc is None:
        where = f"not on PATH, in $ROCM_HOME/bin, $ROCM_PATH/bin or {DEFAULT_ROCM}/bin"
        if not s.expect.get("rocm_sdk"):
            raise Skip(f"this image promises no ROCm SDK (cell.json rocm_sdk) and has none (hipcc {where}): "
                       "HIP compiling is checked on images that carry one")
        raise Fail(f"no HIP compiler in this image, which promises a ROCm SDK: hipcc is {where}", sdk_fix(s.expect))
    targets = s.wanted_archs(required=False)
    if not targets:
        raise Fail("the image names no gfx targets (cell.json gfx_targets) to compile for",
                   "rebuild the image: its cell.json is incomplete")
    version = compiler_version(run([hipcc, "--version"], COMPILE_TIMEOUT_S)[1])
    include = sdk_root(hipcc, env) / "include"
    math = math_header(include)
    with tempfile.TemporaryDirectory(prefix="rif-hip-") as tmp:
        source = Path(tmp) / "rif_axpy.hip"
        source.write_text(KERNEL.format(math=f"#include <{math}>" if math else "", ok=OK_LINE))
        compiled = compile_targets(hipcc, source, targets, Path(tmp), run)
        problems = [f"{t}: the compiler ({version}) does not know this target ({why})"
                    for t, why in compiled.unknown.items()]
        problems += [f"{t}: {why}" for t, why in compiled.failed.items()]
        if math is None:
            problems.append(f"no ROCm math-library header under {include} (looked for {', '.join(MATH_HEADERS)})")
        done = (f"hipcc ({version}) compiled a kernel for {', '.join(compiled.built)}" if compiled.built
                else f"hipcc ({version}) compiled no kernel")
        if problems:
            fix = sdk_fix(s.expect, "a ROCm SDK whose compiler knows every target of the image's family"
                          if compiled.unknown else "the ROCm SDK")
            raise Fail(f"{done}; " + "; ".join(problems), fix)
        try:
            ext = build_extension(str(math), include, Path(tmp) / "extension")
        except Skip as why:
            ext = f"load_inline extension not built: {why}"
        except Fail as exc:
            raise Fail(f"{done} with hip/hip_runtime.h and {math}; {exc}", sdk_fix(s.expect)) from exc
    return f"{done} with hip/hip_runtime.h and {math}; {ext}"


def gpu_hip_kernel(s: Smoke, run: Runner = run_tool) -> str:
    """The kernel, built for device 0's arch, launched on it: y = 2x + 1 for 1000 elements."""
    devices = s.devices()
    if devices.simulated:
        raise Skip("simulated GPU: a HIP kernel needs a real AMD GPU")
    hipcc = find_hipcc(s.view.env)
    if hipcc is None:
        raise Skip("no HIP compiler in this image (hip_compile runs on devel images)")
    arch = devices.arch(0)
    with tempfile.TemporaryDirectory(prefix="rif-hip-") as tmp:
        source, program = Path(tmp) / "rif_axpy.hip", Path(tmp) / "rif_axpy"
        source.write_text(KERNEL.format(math="", ok=OK_LINE))
        code, output = run([hipcc, f"--offload-arch={arch}", "-DRIF_MAIN", str(source), "-o", str(program)],
                           COMPILE_TIMEOUT_S)
        if code != 0:
            raise Fail(f"hipcc could not build the kernel program for {arch}: {first_error(output)}",
                       sdk_fix(s.expect))
        code, output = run([str(program)], RUN_TIMEOUT_S)
    if code != 0 or OK_LINE not in output:
        raise Fail(f"the HIP kernel on device 0 ({arch}) exited {code}: {first_error(output)}", s.gpu_fix())
    return f"a HIP kernel built for {arch} ran on device 0 and computed y = 2x + 1 for 1000 elements"


CHECKS: dict[str, Check] = {"hip_compile": hip_compile, "gpu_hip_kernel": gpu_hip_kernel}
