"""Does torch compute right on the CPU: known answers, so a broken BLAS or a NumPy mismatch shows at once."""

from __future__ import annotations

import importlib.util
import math

from .core import Fail, Skip
from .smoke import Check, Smoke


def cpu_matmul(s: Smoke) -> str:
    torch = s.need_torch()
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


def cpu_svd(s: Smoke) -> str:
    torch = s.need_torch()
    a = torch.randn(64, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    u, sv, vh = torch.linalg.svd(a, full_matrices=False)
    err = (u @ torch.diag(sv) @ vh - a).abs().max().item()
    if not err <= 1e-10:
        raise Fail(f"U S Vh does not reconstruct A (max error {err:g})")
    return f"linalg.svd reconstructs a 64x32 matrix (max error {err:.1e})"


def numpy_round_trip(s: Smoke) -> str:
    torch = s.need_torch()
    if importlib.util.find_spec("numpy") is None:
        raise Fail("NumPy is not installed", "install numpy in /opt/venv (torch.from_numpy and friends need it)")
    import numpy

    back = (torch.from_numpy(numpy.arange(6, dtype=numpy.float32).reshape(2, 3)) * 2).numpy()
    if back.tolist() != [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]:
        raise Fail(f"NumPy round trip gave {back.tolist()}")
    return f"NumPy {numpy.__version__} round trip"


def torchvision_nms(s: Smoke) -> str:
    torch = s.need_torch()
    if importlib.util.find_spec("torchvision") is None:
        raise Skip("no torchvision in this image")
    import torchvision

    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0]])
    keep = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
    if keep != [0, 2]:
        raise Fail(f"torchvision.ops.nms kept {keep}, want [0, 2]")
    return "torchvision.ops.nms keeps [0, 2] of 3 boxes"


CHECKS: dict[str, Check] = {
    "cpu_matmul": cpu_matmul,
    "cpu_svd": cpu_svd,
    "numpy": numpy_round_trip,
    "torchvision_nms": torchvision_nms,
}
