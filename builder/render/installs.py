"""What each image installs: the pip requirements of its steps, its OS packages, and a devel image's ROCm SDK
(TheRock's pip wheels, or AMD's repository for the OS behind a pinned key).

Pure functions of a CellSpec; render puts them into Dockerfile steps, the wheelhouse fetches them and the locks
pin them.
"""

from __future__ import annotations

from builder.core import ospins
from builder.core.spec import CellSpec


def device_extras(cell: CellSpec) -> str:
    """`[device-gfx942,...]` where the wheels split per target (TheRock's multi-arch indexes, whl-multi-arch and
    whl-next; local mirrors of them), else '': a per-family line (7.9-7.12) serves the family's own wheel."""
    if cell.wheels.splits_per_target(cell) and cell.gfx_targets:
        return "[" + ",".join(f"device-{t}" for t in cell.gfx_targets) + "]"
    return ""


def device_requirements(cell: CellSpec) -> list[str]:
    """The family's own packages, installed over the shared torch stage (empty: nothing per family)."""
    extras = device_extras(cell)
    if not extras:
        return []
    return [f"torch{extras}=={cell.torch_wheel}",
            *([f"torchvision{extras}=={cell.torchvision}{cell.local_version}"] if cell.torchvision else [])]


def small_requirements(cell: CellSpec) -> list[str]:
    """The companions and numpy, torch pinned again so pip never moves it."""
    reqs = [f"torch=={cell.torch_wheel}"]
    if cell.torchvision:
        reqs.append(f"torchvision=={cell.torchvision}{cell.local_version}")
    if cell.torchaudio:
        reqs.append(f"torchaudio=={cell.torchaudio}{cell.local_version}")
    return [*reqs, "numpy"]


def sdk_requirements(cell: CellSpec) -> list[str]:
    """The ROCm SDK of the wheels' own release that a devel image adds (TheRock: `rocm[devel]`, same version)."""
    release = cell.therock_release if cell.has_rocm_sdk else None
    return [f"rocm[devel]=={release.version}"] if release else []


def os_sdk_steps(cell: CellSpec) -> list[str]:
    """A devel image's ROCm SDK from AMD's repository for the OS's package manager (pytorch.org's wheels), else
    nothing: the OS family writes the steps, the channel says which release."""
    release, sdk = cell.wheels.os_sdk_release(cell), cell.os_family.SDK
    return [] if release is None or sdk is None else sdk.steps(release, cell.os)


def os_sdk_source(cell: CellSpec) -> ospins.Source | None:
    """AMD's repository that os_sdk_steps read, as an OS lock's source (None: the image has no such step)."""
    release, sdk = cell.wheels.os_sdk_release(cell), cell.os_family.SDK
    return None if release is None or sdk is None else sdk.source(release, cell.os)


def requirements(cell: CellSpec) -> list[str]:
    """Every requirement of the image (the wheelhouse fetches these), a devel image's SDK included."""
    device = device_requirements(cell)
    names = {r.split("[")[0].split("=")[0] for r in device}
    return [*device, *(r for r in small_requirements(cell) if r.split("=")[0] not in names), *sdk_requirements(cell)]


def runtime_packages(cell: CellSpec) -> list[str]:
    return list(cell.os_family.RUNTIME_PACKAGES)


def venv_packages(cell: CellSpec) -> list[str]:
    """What `python3 -m venv` needs, removed once the venv exists."""
    return list(cell.os_family.VENV_PACKAGES)


def devel_packages(cell: CellSpec) -> list[str]:
    """A toolchain for extensions, over the runtime image."""
    return list(cell.os_family.DEVEL_PACKAGES)
