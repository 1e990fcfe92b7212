"""apt (Debian, Ubuntu): dpkg packages, apt-get steps with downloads in a cache mount, debootstrap bases, AMD's
apt repository for a pytorch.org devel image's SDK."""

from __future__ import annotations

from collections.abc import Callable

from builder.core import aptindex, aptwords, facts, ospins
from builder.core.osfamilies.base import AmdSdk, Fetch, PackageIndex

NAME = "apt"
RUNTIME_PACKAGES: tuple[str, ...] = ("python3", "ca-certificates")
# They ship pip and setuptools as wheels for ensurepip; purged once the venv exists.
VENV_PACKAGES: tuple[str, ...] = ("python3-venv", "python3-pip-whl", "python3-setuptools-whl")
DEVEL_PACKAGES: tuple[str, ...] = ("build-essential", "python3-dev", "git", "ninja-build")
FETCH_PACKAGES: tuple[str, ...] = ("curl", "gnupg")
PURL_TYPE = "deb"
INVENTORY: tuple[str, ...] = ("dpkg-query", "-W", "-f", "${Package} ${Version} ${Architecture}\n")
LISTS_DIR = "/var/lib/apt/lists"
BASE_TOOL: str | None = "debootstrap"


def cache_mounts(os_name: str) -> list[str]:
    """One cache per OS, one apt at a time (apt locks its cache)."""
    return [f"--mount=type=cache,id=rif-apt-{os_name},target=/var/cache/apt,sharing=locked"]


def install_commands(packages: list[str]) -> list[str]:
    return ["apt-get update", f"apt-get install -y --no-install-recommends {' '.join(packages)}"]


# A locked step reads only the snapshot: apt is pointed at a sources folder inside the cache mount (never in a
# layer), so the image keeps the base's own sources for whoever extends it.
_SNAPSHOT_DIR = "/var/cache/apt/rif-snapshot"
_SNAPSHOT_APT = f"apt-get -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts={_SNAPSHOT_DIR}"
# `Inst NAME[:ARCH] [OLD] (VERSION ...)` of a simulated install -> NAME=VERSION
_PLANNED = r"sed -n 's/^Inst \([^ :]*\)[^ ]* \(\[[^]]*\] \)\{0,1\}(\([^ ]*\) .*/\1=\3/p'"


def _source_line(source: ospins.Source, trusted: bool) -> str:
    """A vendor's source is checked with its own key (signed-by); the snapshot's with the OS's keys, or unsigned
    where the render was allowed to trust it (the lock and the person running the command both) and it is on this
    machine's loopback: never an archive elsewhere, whatever a lock says."""
    unsigned = trusted and aptwords.is_loopback_url(source.url)
    options = "check-valid-until=no" + (f" signed-by={source.signed_by}" if source.signed_by
                                        else " trusted=yes" if unsigned else "")
    return f"'deb [{options}] {source.url} {source.suite} {' '.join(source.components)}'"


def _pins(packages: tuple[ospins.Package, ...] | list[ospins.Package]) -> str:
    return " ".join(f"{p.name}={p.version}" for p in sorted(packages, key=lambda p: p.name))


def _checked_install(lock: ospins.OsLock, sources: list[ospins.Source], install: str) -> list[str]:
    """Install `install` (NAME=VERSION...) from the sources; first a simulated install, and the step fails, naming
    them, if apt would install anything the lock does not pin (a base that moved, an archive that differs)."""
    lines = " ".join(_source_line(s, lock.trusted) for s in sources)
    return [
        f"rm -rf {_SNAPSHOT_DIR} && mkdir -p {_SNAPSHOT_DIR}",
        f"printf '%s\\n' {lines} > {_SNAPSHOT_DIR}/snapshot.list",
        f"{_SNAPSHOT_APT} update",
        f"printf '%s\\n' {_pins(lock.packages)} > {_SNAPSHOT_DIR}/pinned",
        f"{_SNAPSHOT_APT} -s -y install --no-install-recommends {install} > {_SNAPSHOT_DIR}/plan",
        f"{_PLANNED} {_SNAPSHOT_DIR}/plan > {_SNAPSHOT_DIR}/planned",  # no pipe: a failing simulation fails the step
        f"sort -o {_SNAPSHOT_DIR}/pinned {_SNAPSHOT_DIR}/pinned",
        f"sort -o {_SNAPSHOT_DIR}/planned {_SNAPSHOT_DIR}/planned",
        f"comm -23 {_SNAPSHOT_DIR}/planned {_SNAPSHOT_DIR}/pinned > {_SNAPSHOT_DIR}/unpinned",
        f"if [ -s {_SNAPSHOT_DIR}/unpinned ]; then echo 'apt would install packages the lock does not pin "
        f"(snapshot {lock.snapshot}):' >&2; cat {_SNAPSHOT_DIR}/unpinned >&2; exit 1; fi",
        f"{_SNAPSHOT_APT} install -y --no-install-recommends {install}",
    ]


def pinned_install_commands(lock: ospins.OsLock) -> list[str]:
    """Install exactly the lock's packages from its snapshot, failing on anything else."""
    return _checked_install(lock, list(lock.sources), _pins(lock.packages))


def remove_command(packages: list[str]) -> str:
    return f"apt-get purge -y --auto-remove {' '.join(packages)}"


def cleanup_command() -> str:
    return (f"rm -rf {LISTS_DIR}/* /var/log/apt /var/log/dpkg.log /var/log/alternatives.log "
            "/var/cache/ldconfig/aux-cache")


KEYRING = "/etc/apt/keyrings/rocm.gpg"


def _key_commands() -> list[str]:
    apt = facts.compat().amd_apt
    return [
        "export GNUPGHOME=/tmp/rif-gnupg",
        "install -d -m 0700 /tmp/rif-gnupg",
        f"curl -fsSL --proto =https {apt.key_url} -o /tmp/rif-rocm.asc",
        "gpg --batch --show-keys --with-colons /tmp/rif-rocm.asc > /tmp/rif-rocm.keys",
        f"grep -qx 'fpr:::::::::{apt.key_fingerprint}:' /tmp/rif-rocm.keys",
        "install -d -m 0755 /etc/apt/keyrings",
        f"gpg --batch --yes --dearmor -o {KEYRING} /tmp/rif-rocm.asc",
    ]


def _repo_commands(url: str, suite: str) -> list[str]:
    """AMD's repository in the image's own sources, preferred over the OS's (AMD's own pin), for who extends it."""
    return [f'echo "deb [arch=amd64 signed-by={KEYRING}] {url} {suite} main" > /etc/apt/sources.list.d/rocm.list',
            "printf 'Package: *\\nPin: release o=repo.radeon.com\\nPin-Priority: 600\\n' "
            "> /etc/apt/preferences.d/rocm-pin-600"]


_SDK_DONE = "rm -rf /tmp/rif-gnupg /tmp/rif-rocm.asc /tmp/rif-rocm.keys"


def sdk_steps(release: str, os_name: str) -> list[str]:
    """The key is fetched over HTTPS and refused unless its fingerprint is the pinned one, and apt trusts the
    repository only through it (signed-by)."""
    apt = facts.compat().amd_apt
    return [*_key_commands(), *_repo_commands(apt.repo.format(rocm=release), apt.suites[os_name]), "apt-get update",
            f"apt-get install -y --no-install-recommends {' '.join(apt.packages)}",
            remove_command(list(FETCH_PACKAGES)), _SDK_DONE]


def sdk_source(release: str, os_name: str) -> ospins.Source | None:
    """AMD's repository of one ROCm release (no timestamp: it is one per release), checked with AMD's key."""
    apt = facts.compat().amd_apt
    if os_name not in apt.suites:
        return None
    return ospins.Source(apt.repo.format(rocm=release).rstrip("/") + "/", apt.suites[os_name], ("main",), KEYRING)


def sdk_packages() -> tuple[str, ...]:
    return FETCH_PACKAGES + facts.compat().amd_apt.packages


def pinned_sdk_commands(lock: ospins.OsLock) -> list[str]:
    """sdk_steps from a lock: curl and gnupg at their pinned versions from the snapshot alone, the key checked as
    unlocked, then exactly the lock's packages from the snapshot and AMD's repository (signed-by the key); only what
    the step asked for stays marked manual, so removing curl and gnupg takes what only they needed."""
    amd = [s for s in lock.sources if s.signed_by == KEYRING]
    fetch = [p for p in lock.packages if p.name in FETCH_PACKAGES]
    auto = sorted(p.name for p in lock.packages if p.name not in lock.wants)
    return [*_checked_install(lock, [s for s in lock.sources if not s.signed_by], _pins(fetch)), *_key_commands(),
            *[c for s in amd for c in _repo_commands(s.url.rstrip("/"), s.suite)],
            *_checked_install(lock, list(lock.sources), _pins(lock.packages)),
            *([f"apt-mark auto {' '.join(auto)}"] if auto else []), remove_command(list(FETCH_PACKAGES)), _SDK_DONE]


def install_fix(packages: list[str]) -> str:
    return f"apt-get install -y --no-install-recommends {' '.join(packages)}"


PACKAGE_INDEX: Callable[[tuple[ospins.Source, ...], Fetch], PackageIndex] | None = aptindex.load  # Packages indexes
PINNED_INSTALL: Callable[[ospins.OsLock], list[str]] | None = pinned_install_commands
SDK: AmdSdk | None = AmdSdk(steps=sdk_steps, source=sdk_source, packages=sdk_packages,
                            fetch_packages=FETCH_PACKAGES, pinned_commands=pinned_sdk_commands)
