"""dnf (Rocky Linux, RHEL's UBI): rpm packages, dnf steps with downloads in a cache mount. Rendered and linted;
no RPM archive is reachable where the factory is tested, so no dnf image is built there. What it does not support
is said once, in the interface's optional parts below (None)."""

from __future__ import annotations

from collections.abc import Callable

from builder.core import ospins
from builder.core.osfamilies.base import AmdSdk, Fetch, PackageIndex

NAME = "dnf"
RUNTIME_PACKAGES: tuple[str, ...] = ("python3", "ca-certificates")
# python3-libs itself requires the pip and setuptools wheels ensurepip uses: nothing to add, nothing to remove.
VENV_PACKAGES: tuple[str, ...] = ()
# ninja is in CodeReady Builder, not BaseOS/AppStream: extensions get it from PyPI (`pip install ninja`).
DEVEL_PACKAGES: tuple[str, ...] = ("gcc", "gcc-c++", "make", "python3-devel", "git")
PURL_TYPE = "rpm"
INVENTORY: tuple[str, ...] = ("rpm", "-qa", "--queryformat", "%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE} %{ARCH}\n")
LISTS_DIR = "/var/lib/dnf/repos"

# What dnf does not support here:
BASE_TOOL: str | None = None  # no host program makes its base: `builder base` refuses it (pull or import it)
# No snapshot archive for rpm distributions in builder/data/os.yaml, and no reader of rpm repository metadata: its
# OS packages are not pinned by a lock (`builder lock` has no OS step for it) nor installed from one.
PACKAGE_INDEX: Callable[[tuple[ospins.Source, ...], Fetch], PackageIndex] | None = None
PINNED_INSTALL: Callable[[ospins.OsLock], list[str]] | None = None
SDK: AmdSdk | None = None  # AMD's rpm repository is not in the data: a pytorch.org devel image on dnf has no SDK step

_OPTIONS = "--setopt=install_weak_deps=False --setopt=keepcache=True --nodocs"


def cache_mounts(os_name: str) -> list[str]:
    return [f"--mount=type=cache,id=rif-dnf-{os_name},target=/var/cache/dnf,sharing=locked"]


def install_commands(packages: list[str]) -> list[str]:
    return [f"dnf install -y {_OPTIONS} {' '.join(packages)}"]


def remove_command(packages: list[str]) -> str:
    return f"dnf remove -y {' '.join(packages)}"


def cleanup_command() -> str:
    return f"rm -rf {LISTS_DIR} /var/log/dnf* /var/log/hawkey.log /var/lib/dnf/history* /var/cache/ldconfig/aux-cache"


def install_fix(packages: list[str]) -> str:
    return f"dnf install -y {' '.join(packages)}"
