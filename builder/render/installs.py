"""What each image installs: the pip requirements of its steps, and a devel image's ROCm SDK (TheRock's pip
wheels, or AMD's apt repository behind a pinned key).

Pure functions of a CellSpec; render puts them into Dockerfile steps, the wheelhouse fetches them and the locks
pin them.
"""

from __future__ import annotations

from builder.core import facts
from builder.core.spec import ALL_TARGETS, CellSpec


def device_extras(cell: CellSpec) -> str:
    """`[device-gfx942,...]` where the wheels split per target (TheRock's multi-arch indexes, whl-multi-arch and
    whl-next; local mirrors of them), else '': a per-family line (7.9-7.12) serves the family's own wheel."""
    release = cell.therock_release
    therock = cell.channel == "therock" and (release is None or release.device_extras)
    per_target = therock or (cell.channel == "local" and cell.gfx != ALL_TARGETS)
    if per_target and cell.gfx_targets:
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


def apt_sdk_steps(cell: CellSpec) -> list[str]:
    """A pytorch.org devel image's ROCm SDK from AMD's apt repository: the key is fetched over HTTPS and refused
    unless its fingerprint is the pinned one, and apt trusts the repository only through it (signed-by)."""
    if not cell.has_rocm_sdk or cell.channel != "pytorch" or cell.sdk_rocm is None:
        return []
    apt = facts.compat().amd_apt
    repo = apt.repo.format(rocm=cell.sdk_rocm)  # the patch release the wheels were built on (7.2 -> 7.2.1)
    return [
        "export GNUPGHOME=/tmp/rif-gnupg",
        "install -d -m 0700 /tmp/rif-gnupg",
        f"curl -fsSL --proto =https {apt.key_url} -o /tmp/rif-rocm.asc",
        "gpg --batch --show-keys --with-colons /tmp/rif-rocm.asc > /tmp/rif-rocm.keys",
        f"grep -qx 'fpr:::::::::{apt.key_fingerprint}:' /tmp/rif-rocm.keys",
        "install -d -m 0755 /etc/apt/keyrings",
        "gpg --batch --yes --dearmor -o /etc/apt/keyrings/rocm.gpg /tmp/rif-rocm.asc",
        f'echo "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] {repo} {apt.suites[cell.os]} main" '
        "> /etc/apt/sources.list.d/rocm.list",
        "printf 'Package: *\\nPin: release o=repo.radeon.com\\nPin-Priority: 600\\n' "
        "> /etc/apt/preferences.d/rocm-pin-600",
        "apt-get update",
        f"apt-get install -y --no-install-recommends {' '.join(apt.packages)}",
        "apt-get purge -y --auto-remove curl gnupg",
        "rm -rf /tmp/rif-gnupg /tmp/rif-rocm.asc /tmp/rif-rocm.keys",
    ]


def requirements(cell: CellSpec) -> list[str]:
    """Every requirement of the image (the wheelhouse fetches these), a devel image's SDK included."""
    device = device_requirements(cell)
    names = {r.split("[")[0].split("=")[0] for r in device}
    return [*device, *(r for r in small_requirements(cell) if r.split("=")[0] not in names), *sdk_requirements(cell)]


def runtime_packages() -> list[str]:
    return ["python3", "ca-certificates"]


def venv_packages() -> list[str]:
    """What `python3 -m venv` needs, purged once the venv exists: they ship pip and setuptools as wheels."""
    return ["python3-venv", "python3-pip-whl", "python3-setuptools-whl"]


def devel_packages() -> list[str]:
    """A toolchain for extensions, over the runtime image."""
    return ["build-essential", "python3-dev", "git", "ninja-build"]
