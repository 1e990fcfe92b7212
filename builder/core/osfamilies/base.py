"""The one interface every OS family module implements: what differs between package managers.

An OS family (apt: Debian, Ubuntu; dnf: Rocky Linux, RHEL's UBI) owns its package names, its install and clean-up
steps, how its base image is made, how an SBOM lists its packages, the check that an image kept no package
lists, and the words of its fixes, so nothing else branches on a family's name.
"""

from __future__ import annotations

from typing import Protocol

from builder.core import ospins


class OsFamily(Protocol):
    """One OS family: a module (apt.py, dnf.py) with these names."""

    NAME: str
    RUNTIME_PACKAGES: tuple[str, ...]  # every image: its Python and CA certificates
    VENV_PACKAGES: tuple[str, ...]  # what `python3 -m venv` needs, removed once the venv exists
    DEVEL_PACKAGES: tuple[str, ...]  # a toolchain for extensions, over the runtime image
    FETCH_PACKAGES: tuple[str, ...]  # what fetching and checking a vendor's key needs, removed afterwards
    PURL_TYPE: str  # the package URL type of its packages (github.com/package-url/purl-spec)
    INVENTORY: tuple[str, ...]  # argv printing `NAME VERSION ARCH` per installed package
    LISTS_DIR: str  # where its package index lives: no file of it may stay in an image
    BASE_TOOL: str | None  # the host program that makes its base image (`builder base`), None: none here

    def cache_mounts(self, os_name: str) -> list[str]:
        """BuildKit cache mounts of its downloads: no package file ever lands in a layer."""
        ...

    def install_commands(self, packages: list[str]) -> list[str]:
        """The shell commands that install packages (without recommends)."""
        ...

    def pinned_install_commands(self, lock: ospins.OsLock) -> list[str]:
        """The shell commands that install exactly a lock's packages from its snapshot, failing on anything else."""
        ...

    def remove_command(self, packages: list[str]) -> str:
        """The shell command that removes packages and what only they needed."""
        ...

    def cleanup_command(self) -> str:
        """The last command of every install step: drops its index and logs from the layer."""
        ...

    def sdk_steps(self, release: str, os_name: str) -> list[str]:
        """Shell steps adding AMD's ROCm SDK at release from AMD's repository for this family (pinned key)."""
        ...

    def sdk_source(self, release: str, os_name: str) -> ospins.Source | None:
        """AMD's repository of that release for the OS as a lock source (with the key's keyring), None: none."""
        ...

    def sdk_packages(self) -> tuple[str, ...]:
        """What the SDK step installs: the fetch packages and AMD's SDK packages (its lock's `for`)."""
        ...

    def pinned_sdk_commands(self, lock: ospins.OsLock) -> list[str]:
        """sdk_steps installing exactly the lock's packages from its snapshot and AMD's repository."""
        ...

    def install_fix(self, packages: list[str]) -> str:
        """The words a user reads to add packages in a derived image."""
        ...
