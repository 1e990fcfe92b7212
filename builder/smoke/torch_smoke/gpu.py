"""Does torch compute right on the GPU: each result against a float64 CPU reference, plus a speed figure.

Under --simulate-gpu these run on the CPU: workloads stay tiny there, so a run's length does not depend on
how fast the CPU is (a 2048^3 bf16 matmul takes minutes on a CPU without AVX-512).
"""

from __future__ import annotations

import importlib.util
import math
import shutil
import time
from collections.abc import Callable
from typing import Any

from .core import RISKY, Fail, Outcome, Skip, first_line, unique
from .devices import rel_error
from .smoke import Check, Smoke

# max |result - reference| / max |reference|, reference in float64 on the CPU from the same rounded inputs
MATMUL_TOL = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}
CONV_TOL, SDPA_TOL, COMPILE_TOL = 1e-3, 1e-2, 1e-5
TFLOPS_N, SIMULATED_TFLOPS_N = 8192, 64  # the speed figure's matmul size, on a GPU and on the CPU stand-in


def has_compiler(*names: str) -> bool:
    return any(shutil.which(c) for c in names)


def gpu(s: Smoke) -> str:
    """Does torch see a GPU; a skip here sends the run to the diagnostics instead of the GPU checks."""
    devices = s.devices()
    if not devices.available() or devices.count() == 0:
        raise Skip("no GPU visible to torch: GPU checks not run")
    shown = "; ".join(f"{i}: {devices.name(i)} ({s.arch_of(devices, i)})" for i in range(devices.count()))
    return f"{devices.count()} device(s): {shown}"


def gpu_arch(s: Smoke) -> str | Outcome:
    """Every device is an arch the image's torch has kernels for."""
    devices = s.devices()
    want = s.wanted_archs(required=False)
    archs = {i: s.arch_of(devices, i) for i in range(devices.count())}
    if not want:
        return Outcome("info", f"device arch(s) {', '.join(unique(archs.values()))}; this image names none")
    outside = {i: a for i, a in archs.items() if a not in want}
    if outside:
        index, arch = next(iter(outside.items()))
        raise Fail(f"device {index} ({devices.name(index)}) is {arch or 'of unknown arch'}, not in this image's "
                   f"{s.family_text()}: torch has no kernels for it",
                   f"use an image built for {arch}" + (f"; {RISKY}" if s.kind == "rocm" else ""))
    return s.override_verdict(f"{', '.join(unique(archs.values()))} in this image's {s.family_text()}")


def gpu_matmul(s: Smoke, dtype_name: str) -> str:
    torch, devices = s.need_torch(), s.devices()
    generator = torch.Generator().manual_seed(4)
    a = torch.randn(4, 96, 128, generator=generator).to(getattr(torch, dtype_name))
    b = torch.randn(4, 128, 80, generator=generator).to(getattr(torch, dtype_name))
    ops: dict[str, Callable[[Any, Any], Any]] = {
        "mm": lambda x, y: torch.mm(x[0], y[0]), "bmm": torch.bmm, "matmul": lambda x, y: torch.matmul(x, y[0])}
    errors = {op: rel_error(fn(a.to(devices.device), b.to(devices.device)), fn(a.double(), b.double()))
              for op, fn in ops.items()}
    devices.synchronize()
    tol, shown = MATMUL_TOL[dtype_name], ", ".join(f"{op} {e:.1e}" for op, e in errors.items())
    if any(e > tol for e in errors.values()):
        raise Fail(f"{dtype_name} differs from the CPU reference by more than {tol:g}: {shown}", s.gpu_fix())
    return f"mm, bmm, matmul within {tol:g} of a float64 CPU reference ({shown})"


def gpu_conv(s: Smoke) -> str:
    torch, devices = s.need_torch(), s.devices()
    functional = torch.nn.functional
    generator = torch.Generator().manual_seed(5)
    x, w, wt = (torch.randn(*shape, generator=generator) for shape in ((2, 3, 16, 16), (8, 3, 3, 3), (8, 4, 3, 3)))

    def run(device: str, dtype: Any) -> tuple[Any, Any]:
        y = functional.conv2d(x.to(device, dtype), w.to(device, dtype), padding=1)
        z = functional.conv_transpose2d(y, wt.to(device, dtype), stride=2, padding=1, output_padding=1)
        return y, z

    (gy, gz), (ry, rz) = run(devices.device, torch.float32), run("cpu", torch.float64)
    devices.synchronize()
    errors = {"conv2d": rel_error(gy, ry), "conv_transpose2d": rel_error(gz, rz)}
    shown = ", ".join(f"{op} {e:.1e}" for op, e in errors.items())
    if tuple(gz.shape) != (2, 4, 32, 32) or any(e > CONV_TOL for e in errors.values()):
        raise Fail(f"float32 convolution differs from the CPU reference by more than {CONV_TOL:g}: {shown}",
                   s.gpu_fix())
    return f"conv2d, conv_transpose2d float32 within {CONV_TOL:g} of the CPU reference ({shown})"


def gpu_sdpa(s: Smoke) -> str:
    torch, devices = s.need_torch(), s.devices()
    generator = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 4, 64, 32, generator=generator).half() for _ in range(3))
    got = torch.nn.functional.scaled_dot_product_attention(
        q.to(devices.device), k.to(devices.device), v.to(devices.device), is_causal=True)
    q64, k64, v64 = q.double(), k.double(), v.double()
    scores = q64 @ k64.transpose(-2, -1) / math.sqrt(32)
    scores = scores.masked_fill(torch.ones(64, 64, dtype=torch.bool).triu(1), float("-inf"))
    err = rel_error(got, torch.softmax(scores, dim=-1) @ v64)
    devices.synchronize()
    if err > SDPA_TOL:
        raise Fail(f"float16 causal scaled_dot_product_attention is off by {err:.1e} (> {SDPA_TOL:g})", s.gpu_fix())
    return f"float16 causal scaled_dot_product_attention within {SDPA_TOL:g} of the reference ({err:.1e})"


def gpu_training(s: Smoke) -> str:
    torch, devices = s.need_torch(), s.devices()
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(256, 16, generator=generator)
    y = x[:, :4].sum(dim=1, keepdim=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(devices.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = x.to(devices.device), y.to(devices.device)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
    if not all(math.isfinite(v) for v in losses) or not losses[-1] < 0.5 * losses[0]:
        raise Fail(f"30 SGD steps took the loss from {losses[0]:.4g} to {losses[-1]:.4g} (want below half)",
                   s.gpu_fix())
    return f"forward, backward, 30 SGD steps of a 16-32-1 MLP: loss {losses[0]:.3f} -> {losses[-1]:.3f}"


def gpu_synchronize(s: Smoke) -> str:
    torch, devices = s.need_torch(), s.devices()
    x = torch.ones(256, 256, device=devices.device)
    start = time.perf_counter()
    for _ in range(50):
        x = x * 1.01
    devices.synchronize()
    elapsed = time.perf_counter() - start
    got, want = x[0, 0].item(), 1.01**50
    if abs(got - want) > 1e-4 * want:
        raise Fail(f"50 queued kernels gave {got}, want {want:.6f}", s.gpu_fix())
    return f"synchronize() returned after 50 queued kernels in {elapsed * 1e3:.1f} ms, result correct"


def compile_fix() -> str:
    if not has_compiler("cc", "gcc", "clang"):
        return "Triton builds its launcher with a C compiler at run time: use the devel image, or install gcc"
    return "rerun with TORCH_LOGS=+inductor for the compiler's log"


def gpu_compile(s: Smoke) -> str | Outcome:
    torch, devices = s.need_torch(), s.devices()
    if devices.simulated and not has_compiler("c++", "g++", "clang++"):
        raise Skip("simulated GPU: torch.compile on the CPU needs a C++ compiler, and this image has none")
    if not devices.simulated and importlib.util.find_spec("triton") is None:
        raise Skip("no Triton in this image (pytorch-triton-rocm or triton): torch.compile has no GPU backend")

    def f(x: Any) -> Any:
        return torch.sin(x) * torch.cos(x) + x * 2

    x = torch.randn(4096, device=devices.device)
    try:
        got = torch.compile(f)(x)
        devices.synchronize()
    except Exception as exc:
        if not has_compiler("cc", "gcc", "clang"):
            # Triton builds a small C launcher at run time; a runtime image without a compiler cannot,
            # which is a property of the flavor, not a broken install: flag it, do not fail the image.
            return Outcome("warn", f"torch.compile needs a C compiler for Triton and this image has none: "
                                   f"{first_line(exc)}", "use the devel image for torch.compile, or install gcc")
        raise Fail(f"torch.compile failed: {first_line(exc)}", compile_fix()) from exc
    err = float((got - f(x)).abs().max().item())
    if not err <= COMPILE_TOL:
        raise Fail(f"compiled function differs from eager by {err:g}", compile_fix())
    return f"torch.compile of an elementwise function matches eager ({err:.1e})"


def gpu_tflops(s: Smoke) -> Outcome:
    """Information only: bf16 matmul throughput on device 0 (tiny on the CPU stand-in: it proves the code)."""
    torch, devices = s.need_torch(), s.devices()
    n = SIMULATED_TFLOPS_N if devices.simulated else TFLOPS_N
    a, b = (torch.randn(n, n, device=devices.device, dtype=torch.bfloat16) for _ in range(2))
    a @ b
    devices.synchronize()
    start = time.perf_counter()
    a @ b
    devices.synchronize()
    reps = max(1, min(50, int(0.5 / max(time.perf_counter() - start, 1e-6))))
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    devices.synchronize()
    each = (time.perf_counter() - start) / reps
    return Outcome("info", f"bf16 matmul {n}x{n}x{n} on device 0: {2 * n**3 / each / 1e12:.1f} TFLOP/s "
                           f"({each * 1e3:.2f} ms each, {reps} runs; information only)")


def _matmul(dtype_name: str) -> Check:
    return lambda s: gpu_matmul(s, dtype_name)


CHECKS: dict[str, Check] = {
    "gpu": gpu,
    "gpu_arch": gpu_arch,
    "gpu_matmul_fp32": _matmul("float32"),
    "gpu_matmul_fp16": _matmul("float16"),
    "gpu_matmul_bf16": _matmul("bfloat16"),
    "gpu_conv": gpu_conv,
    "gpu_sdpa": gpu_sdpa,
    "gpu_training": gpu_training,
    "gpu_synchronize": gpu_synchronize,
    "gpu_compile": gpu_compile,
    "gpu_tflops": gpu_tflops,
}
