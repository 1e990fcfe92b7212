"""The one interface every OS family module implements: what differs between package managers.

An OS family (apt: Debian, Ubuntu; dnf: Rocky Linux, RHEL's UBI) owns its package names, its install and clean-up
steps, how its base image is made, how an SBOM lists its packages, the index an OS lock resolves against, the check
that an image kept no package lists, and the words of its fixes, so nothing else branches on a family's name.

The interface holds only what every family answers. What a family may lack is one optional part each (BASE_TOOL,
PACKAGE_INDEX, PINNED_INSTALL, SDK), None where it does not support it: a family states what it does not support in
one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from builder.core import ospins


@dataclass(frozen=True)
class AmdSdk:
    """AMD's ROCm SDK from AMD's repository for the family's package manager (a pytorch.org devel image's SDK)."""

    steps: Callable[[str, str], list[str]]  # (release, os name) -> shell steps adding the SDK (pinned key)
    source: Callable[[str, str], ospins.Source | None]  # (release, os name) -> the repository as a lock source
    packages: Callable[[], tuple[str, ...]]  # what the SDK step installs (its lock's `for`)
    fetch_packages: tuple[str, ...]  # what fetching and checking AMD's key needs, removed afterwards
    pinned_commands: Callable[[ospins.OsLock], list[str]]  # the steps installing exactly a lock's packages


Fetch = Callable[[str], str]  # an index folder's URL -> the text of its index, read bounded (the caller's reader)


class PackageIndex(Protocol):
    """A snapshot's package index, as an OS lock resolves a step's packages against it."""

    def base_set(self) -> set[str]:
        """The packages every base image of the OS already holds."""
        ...

    def closure(self, wants: Iterable[str], present: set[str]) -> list[ospins.Package]:
        """What installing wants over present installs: each package once, at the version the index gives."""
        ...


class OsFamily(Protocol):
    """One OS family: a module (apt.py, dnf.py) with these names."""

    NAME: str
    RUNTIME_PACKAGES: tuple[str, ...]  # every image: its Python and CA certificates
    VENV_PACKAGES: tuple[str, ...]  # what `python3 -m venv` needs, removed once the venv exists
    DEVEL_PACKAGES: tuple[str, ...]  # a toolchain for extensions, over the runtime image
    PURL_TYPE: str  # the package URL type of its packages (github.com/package-url/purl-spec)
    INVENTORY: tuple[str, ...]  # argv printing `NAME VERSION ARCH` per installed package
    LISTS_DIR: str  # where its package index lives: no file of it may stay in an image
    # What a family may not support, None where it does not:
    BASE_TOOL: str | None  # the host program that makes its base image (`builder base`)
    # (snapshot sources, the fetch that reads an index folder) -> the package index an OS lock resolves against
    PACKAGE_INDEX: Callable[[tuple[ospins.Source, ...], Fetch], PackageIndex] | None
    # The shell commands that install exactly a lock's packages from its snapshot, failing on anything else
    PINNED_INSTALL: Callable[[ospins.OsLock], list[str]] | None
    SDK: AmdSdk | None  # AMD's ROCm SDK from AMD's repository for this package manager

    def cache_mounts(self, os_name: str) -> list[str]:
        """BuildKit cache mounts of its downloads: no package file ever lands in a layer."""
        ...

    def install_commands(self, packages: list[str]) -> list[str]:
        """The shell commands that install packages (without recommends)."""
        ...

    def remove_command(self, packages: list[str]) -> str:
        """The shell command that removes packages and what only they needed."""
        ...

    def cleanup_command(self) -> str:
        """The last command of every install step: drops its index and logs from the layer."""
        ...

    def install_fix(self, packages: list[str]) -> str:
        """The words a user reads to add packages in a derived image."""
        ...
