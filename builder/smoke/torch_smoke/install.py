"""Is the install what the image promises: torch imports cleanly, at the promised versions, for the promised GPUs."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import warnings

from .core import SECTION_FIX, Fail, Skip, first_line, major_minor
from .smoke import Check, Smoke


def import_torch(s: Smoke) -> str:
    """The first check: it imports torch for the others; a warning at import (NumPy ABI) is a failure."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch
        except Exception as exc:
            raise Fail(f"import torch failed: {first_line(exc)}", SECTION_FIX["install"]) from exc
    s.torch = torch
    # Deprecation warnings are for developers and hidden from users by default (a dependency of a healthy real
    # install may raise one at import); any other warning is what a user sees, and fails.
    caught = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    if caught:
        message = (str(caught[0].message).strip().splitlines() or [caught[0].category.__name__])[0]
        fix = ("install a NumPy that matches this torch build (pip install 'numpy<2' for torch < 2.3)"
               if "numpy" in message.lower() else SECTION_FIX["install"])
        raise Fail(f"torch {torch.__version__} imported with a warning: {message}", fix)
    return f"torch {torch.__version__} from {os.path.dirname(torch.__file__)}, no warnings"


def torch_version(s: Smoke) -> str:
    """The promised torch, and where the image pins a local version (+rocm7.14.0), exactly that wheel: one
    index can serve one torch for several ROCm lines, and only the local part tells them apart."""
    actual, wheel = str(s.need_torch().__version__), str(s.expect.get("torch_wheel") or "")
    if "+" in wheel and actual != wheel:
        raise Fail(f"torch {actual} is installed, the image promises the wheel {wheel}",
                   "the image was built from another ROCm line's wheels: rebuild it from its lock or index")
    return s.version("torch", actual)


def companion(s: Smoke, package: str) -> str:
    """torchvision/torchaudio: at the promised version, or absent when none is promised."""
    s.need_torch()
    installed = importlib.util.find_spec(package) is not None
    if not s.expect.get(package):
        if installed:
            raise Fail(f"{package} is installed but the image promises none", SECTION_FIX["install"])
        raise Skip(f"this image has no {package}")
    if not installed:
        raise Fail(f"{package} is not installed, the image promises {s.expect[package]}", SECTION_FIX["install"])
    module = importlib.import_module(package)
    return s.version(package, str(module.__version__))


def hip_version(s: Smoke) -> str:
    """A ROCm image's torch is built for its ROCm release; any other image's torch has no HIP at all."""
    hip, want = s.need_torch().version.hip, s.expect.get("hip")
    if want is None:
        if hip is not None:
            raise Fail(f"torch.version.hip is {hip} but this is a {s.expect.get('platform')} image",
                       SECTION_FIX["install"])
        return "torch.version.hip is None, as a non-ROCm build should be"
    if hip is None:
        raise Fail(f"torch.version.hip is None: this torch is not a ROCm build (want ROCm {want})",
                   "rebuild the image from a ROCm wheel index (download.pytorch.org/whl/rocmX.Y)")
    # A line may accept more than one value (cell.json hip_accept): TheRock 10.0 wheels report HIP 7.15, or 10.0
    # where torch took ROCM_VERSION_DEV (pytorch#166336); compat.yaml says which per line.
    accept = [str(v) for v in s.expect.get("hip_accept") or [want]]
    if major_minor(hip) not in {major_minor(v) for v in accept}:
        promise = " or ".join(accept)
        raise Fail(f"torch.version.hip is {hip}, the image promises HIP {promise} ({s.expect.get('platform')})",
                   f"rebuild the image from the wheels of its ROCm line ({s.expect.get('platform')})")
    # Newer torch also reports the ROCm release itself (10.0 where HIP says 7.15): held to the image's line.
    rocm, line = getattr(s.torch.version, "rocm", None), str(s.expect.get("platform") or "").removeprefix("rocm")
    if isinstance(rocm, str) and re.fullmatch(r"\d+\.\d+(\.\d+)?\S*", rocm) and line:
        if major_minor(rocm) != major_minor(line):
            raise Fail(f"torch.version.rocm is {rocm}, the image promises ROCm {line}",
                       f"rebuild the image from the wheels of its ROCm line (rocm{line})")
        return f"torch.version.hip {hip}, torch.version.rocm {rocm}"
    return f"torch.version.hip {hip}"


def cuda_version(s: Smoke) -> str:
    """A CUDA image's torch is built for its CUDA release; any other image's torch has no CUDA at all."""
    cuda, want = getattr(s.need_torch().version, "cuda", None), s.expect.get("cuda")
    if s.kind != "cuda":
        if cuda is not None:
            raise Fail(f"torch.version.cuda is {cuda} but this is a {s.expect.get('platform')} image",
                       SECTION_FIX["install"])
        return "torch.version.cuda is None, as a non-CUDA build should be"
    if cuda is None:
        raise Fail("torch.version.cuda is None: this torch is not a CUDA build",
                   "rebuild the image from a CUDA wheel index (download.pytorch.org/whl/cuXYZ)")
    if want and major_minor(cuda) != major_minor(want):
        raise Fail(f"torch.version.cuda is {cuda}, the image promises CUDA {want}",
                   f"rebuild the image from the CUDA {want} wheel index")
    return f"torch.version.cuda {cuda}"


def arch_list(s: Smoke) -> str:
    """torch carries kernels for every arch the image promises (found without a GPU, from its build flags)."""
    want = s.wanted_archs()
    have = s.arch_list()
    if not have:
        raise Fail("torch lists no GPU architectures: it has no GPU kernels",
                   f"rebuild the image from a {'ROCm' if s.kind == 'rocm' else 'CUDA'} wheel index")
    missing = [a for a in want if a not in have]
    if missing:
        raise Fail(f"this torch has no kernels for {', '.join(missing)} (it has {' '.join(have)})",
                   "build from wheels compiled for these targets (e.g. a TheRock per-family index), "
                   "or drop them from the image's family")
    return f"covers {' '.join(want)} (torch has {' '.join(have)})"


CHECKS: dict[str, Check] = {
    "import": import_torch,
    "torch_version": torch_version,
    "torchvision_version": lambda s: companion(s, "torchvision"),
    "torchaudio_version": lambda s: companion(s, "torchaudio"),
    "hip_version": hip_version,
    "cuda_version": cuda_version,
    "arch_list": arch_list,
}
