#!/usr/bin/env python3
"""torch-smoke: proves PyTorch works in this image, and says how to fix it when it does not.

Runs inside the image (stdlib + torch only). Reads the image's expectations from /opt/rif/cell.json,
written at build time by rocm-image-factory. Exit codes: 0 all required checks passed, 1 a check
failed, 3 --require-gpu was given but no GPU is visible.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

CELL_FILE = os.environ.get("RIF_CELL_FILE", "/opt/rif/cell.json")
CHECK_TIMEOUT_S = float(os.environ.get("RIF_CHECK_TIMEOUT", "120"))
EXIT_OK, EXIT_FAILED, EXIT_NO_GPU = 0, 1, 3


@dataclass
class Result:
    name: str
    status: str  # pass | fail | skip
    detail: str = ""
    fix: str = ""
    seconds: float = 0.0


class Skip(Exception):
    """Raised by a check that does not apply to this image or host."""


class Fail(Exception):
    """Raised by a check that failed; fix is one line on what to do about it."""

    def __init__(self, detail: str, fix: str = "") -> None:
        super().__init__(detail)
        self.fix = fix


def public(version: str) -> str:
    """'2.13.0+cpu' -> '2.13.0': the local part names the build variant, not the release."""
    return version.split("+", 1)[0]


class Smoke:
    def __init__(self, expect: dict[str, Any]) -> None:
        self.expect = expect
        self.torch: Any = None

    # -- checks that run everywhere -------------------------------------------------------------
    def check_import(self) -> str:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        self.torch = torch
        bad = [str(w.message) for w in caught if "numpy" in str(w.message).lower()]
        if bad:
            raise Fail(f"torch imported with a NumPy warning: {bad[0]}",
                       "install a NumPy that matches this torch build (pip install 'numpy<2' for old torch)")
        return f"torch {torch.__version__} from {os.path.dirname(torch.__file__)}"

    def check_torch_version(self) -> str:
        return self._version("torch", self._torch().__version__)

    def check_torchvision_version(self) -> str:
        if not self.expect.get("torchvision"):
            raise Skip("this image has no torchvision")
        import torchvision
        return self._version("torchvision", torchvision.__version__)

    def check_torchaudio_version(self) -> str:
        if not self.expect.get("torchaudio"):
            raise Skip("this image has no torchaudio")
        import torchaudio
        return self._version("torchaudio", torchaudio.__version__)

    def check_hip_version(self) -> str:
        hip = self._torch().version.hip
        want = self.expect.get("hip")
        if want is None:
            if hip is not None:
                raise Fail(f"torch.version.hip is {hip} but this is a {self.expect.get('platform')} image")
            return "torch.version.hip is None, as a non-ROCm build should be"
        if hip is None:
            raise Fail(f"torch.version.hip is None: this torch is not a ROCm build (want ROCm {want})",
                       "rebuild the image from a ROCm wheel index (download.pytorch.org/whl/rocmX.Y)")
        if ".".join(str(hip).split(".")[:2]) != want:
            raise Fail(f"torch.version.hip is {hip}, the image promises ROCm {want}")
        return f"torch.version.hip {hip}"

    def check_cpu_matmul(self) -> str:
        torch = self._torch()
        a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        b = torch.tensor([[5.0, 6.0], [7.0, 8.0]])
        got = (a @ b).tolist()
        if got != [[19.0, 22.0], [43.0, 50.0]]:
            raise Fail(f"2x2 matmul gave {got}")
        x = torch.randn(256, 128, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        y = torch.randn(128, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        ref = [[sum(x[i, k].item() * y[k, j].item() for k in range(128)) for j in (0, 63)] for i in (0, 255)]
        out = x @ y
        err = max(abs(out[i, j].item() - ref[r][c]) for r, i in enumerate((0, 255)) for c, j in enumerate((0, 63)))
        if err > 1e-9:
            raise Fail(f"256x128 @ 128x64 float64 matmul is off by {err:g}")
        return "known-answer 2x2 and float64 256x128x64 matmul correct"

    def check_cpu_svd(self) -> str:
        torch = self._torch()
        a = torch.randn(64, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        err = (u @ torch.diag(s) @ vh - a).abs().max().item()
        if err > 1e-10:
            raise Fail(f"U S Vh does not reconstruct A (max error {err:g})")
        return f"linalg.svd reconstructs a 64x32 matrix (max error {err:.1e})"

    def check_numpy(self) -> str:
        torch = self._torch()
        import numpy
        arr = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
        t = torch.from_numpy(arr)
        back = (t * 2).numpy()
        if back.tolist() != [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]:
            raise Fail(f"NumPy round trip gave {back.tolist()}")
        return f"NumPy {numpy.__version__} round trip"

    def check_gpu(self) -> str:
        torch = self._torch()
        if not torch.cuda.is_available():
            raise Skip("no GPU visible (run with --device=/dev/kfd --device=/dev/dri --group-add video "
                       "--group-add render for the GPU checks)")
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        a = torch.randn(512, 512, generator=torch.Generator().manual_seed(3))
        got = (a.cuda() @ a.cuda()).cpu()
        err = (got - a @ a).abs().max().item()
        torch.cuda.synchronize()
        if err > 1e-2:
            raise Fail(f"GPU fp32 matmul differs from CPU by {err:g}")
        return f"{len(names)} device(s): {', '.join(names)}; fp32 matmul matches CPU (max error {err:.1e})"

    # -- helpers ----------------------------------------------------------------------------------
    def _torch(self) -> Any:
        if self.torch is None:
            raise Skip("torch did not import")
        return self.torch

    def _version(self, package: str, actual: str) -> str:
        want = self.expect.get(package)
        if public(actual) != want:
            raise Fail(f"{package} {actual} is installed, the image promises {want}",
                       "the image was built from the wrong wheels: rebuild it, or fix the matrix entry")
        return f"{package} {actual}"

    def checks(self) -> list[tuple[str, Callable[[], str]]]:
        return [(name.removeprefix("check_"), getattr(self, name)) for name in (
            "check_import", "check_torch_version", "check_torchvision_version", "check_torchaudio_version",
            "check_hip_version", "check_cpu_matmul", "check_cpu_svd", "check_numpy", "check_gpu")]


def run_check(name: str, fn: Callable[[], str], timeout: float) -> Result:
    """Runs fn in a thread so a hung call fails its check instead of hanging the whole run."""
    box: list[Result] = []

    def target() -> None:
        start = time.monotonic()
        try:
            box.append(Result(name, "pass", fn()))
        except Skip as exc:
            box.append(Result(name, "skip", str(exc)))
        except Fail as exc:
            box.append(Result(name, "fail", str(exc), exc.fix))
        except Exception as exc:
            box.append(Result(name, "fail", f"{type(exc).__name__}: {exc}"))
        box[-1].seconds = round(time.monotonic() - start, 3)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        return Result(name, "fail", f"did not finish within {timeout:g} s",
                      "the GPU or driver may be hung: check `dmesg` on the host", timeout)
    return box[0]


def report(results: list[Result], expect: dict[str, Any]) -> str:
    marks = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}
    lines = [f"torch-smoke for {expect.get('tag', '?')}"]
    for r in results:
        lines.append(f"  {marks[r.status]}  {r.name:<20} {r.detail}")
        if r.status == "fail" and r.fix:
            lines.append(f"        fix: {r.fix}")
    counts = {s: sum(r.status == s for r in results) for s in marks}
    lines.append(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torch-smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--require-gpu", action="store_true", help="exit 3 when no GPU is visible")
    parser.add_argument("--cell", default=CELL_FILE, help="expectations file (default: %(default)s)")
    args = parser.parse_args(argv)
    with open(args.cell, encoding="utf-8") as fh:
        expect = json.load(fh)
    smoke = Smoke(expect)
    results = [run_check(name, fn, CHECK_TIMEOUT_S) for name, fn in smoke.checks()]
    failed = any(r.status == "fail" for r in results)
    gpu = next(r for r in results if r.name == "gpu")
    code = EXIT_FAILED if failed else (EXIT_NO_GPU if args.require_gpu and gpu.status == "skip" else EXIT_OK)
    if args.json:
        print(json.dumps({"cell": expect, "exit_code": code, "results": [asdict(r) for r in results]}, indent=2))
    else:
        print(report(results, expect))
    sys.stdout.flush()
    os._exit(code)  # a hung check's thread must not keep the process alive


if __name__ == "__main__":
    main()
