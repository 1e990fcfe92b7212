"""dnf (Rocky Linux, RHEL's UBI): rpm packages, dnf steps with downloads in a cache mount. Rendered and linted;
no RPM archive is reachable where the factory is tested, so no dnf image is built there, and `builder base`
cannot make its base (pull or import it)."""

from __future__ import annotations

from builder.core import ospins

NAME = "dnf"
RUNTIME_PACKAGES: tuple[str, ...] = ("python3", "ca-certificates")
# python3-libs itself requires the pip and setuptools wheels ensurepip uses: nothing to add, nothing to remove.
VENV_PACKAGES: tuple[str, ...] = ()
# ninja is in CodeReady Builder, not BaseOS/AppStream: extensions get it from PyPI (`pip install ninja`).
DEVEL_PACKAGES: tuple[str, ...] = ("gcc", "gcc-c++", "make", "python3-devel", "git")
FETCH_PACKAGES: tuple[str, ...] = ()  # curl and gpg are in the base image
PURL_TYPE = "rpm"
INVENTORY: tuple[str, ...] = ("rpm", "-qa", "--queryformat", "%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE} %{ARCH}\n")
LISTS_DIR = "/var/lib/dnf/repos"
BASE_TOOL: str | None = None

_OPTIONS = "--setopt=install_weak_deps=False --setopt=keepcache=True --nodocs"


def cache_mounts(os_name: str) -> list[str]:
    return [f"--mount=type=cache,id=rif-dnf-{os_name},target=/var/cache/dnf,sharing=locked"]


def install_commands(packages: list[str]) -> list[str]:
    return [f"dnf install -y {_OPTIONS} {' '.join(packages)}"]


def pinned_install_commands(lock: ospins.OsLock) -> list[str]:
    raise NotImplementedError("dnf: installing OS packages pinned from a dated snapshot is not supported yet "
                              "(no snapshot archive for rpm distributions in builder/data/os.yaml)")


def remove_command(packages: list[str]) -> str:
    return f"dnf remove -y {' '.join(packages)}"


def cleanup_command() -> str:
    return f"rm -rf {LISTS_DIR} /var/log/dnf* /var/log/hawkey.log /var/lib/dnf/history* /var/cache/ldconfig/aux-cache"


def sdk_steps(release: str, os_name: str) -> list[str]:
    """AMD's rpm repository is not in the data yet: no SDK step (a pytorch.org devel image on dnf has none)."""
    return []


def sdk_source(release: str, os_name: str) -> ospins.Source | None:
    return None


def sdk_packages() -> tuple[str, ...]:
    return ()


def pinned_sdk_commands(lock: ospins.OsLock) -> list[str]:
    raise NotImplementedError("dnf: AMD's rpm repository is not in the data yet (no SDK step to pin)")


def install_fix(packages: list[str]) -> str:
    return f"dnf install -y {' '.join(packages)}"
