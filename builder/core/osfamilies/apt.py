"""apt (Debian, Ubuntu): dpkg packages, apt-get steps with downloads in a cache mount, debootstrap bases, AMD's
apt repository for a pytorch.org devel image's SDK."""

from __future__ import annotations

from builder.core import facts

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


def remove_command(packages: list[str]) -> str:
    return f"apt-get purge -y --auto-remove {' '.join(packages)}"


def cleanup_command() -> str:
    return (f"rm -rf {LISTS_DIR}/* /var/log/apt /var/log/dpkg.log /var/log/alternatives.log "
            "/var/cache/ldconfig/aux-cache")


def sdk_steps(release: str, os_name: str) -> list[str]:
    """The key is fetched over HTTPS and refused unless its fingerprint is the pinned one, and apt trusts the
    repository only through it (signed-by)."""
    apt = facts.compat().amd_apt
    repo = apt.repo.format(rocm=release)
    return [
        "export GNUPGHOME=/tmp/rif-gnupg",
        "install -d -m 0700 /tmp/rif-gnupg",
        f"curl -fsSL --proto =https {apt.key_url} -o /tmp/rif-rocm.asc",
        "gpg --batch --show-keys --with-colons /tmp/rif-rocm.asc > /tmp/rif-rocm.keys",
        f"grep -qx 'fpr:::::::::{apt.key_fingerprint}:' /tmp/rif-rocm.keys",
        "install -d -m 0755 /etc/apt/keyrings",
        "gpg --batch --yes --dearmor -o /etc/apt/keyrings/rocm.gpg /tmp/rif-rocm.asc",
        f'echo "deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg] {repo} {apt.suites[os_name]} main" '
        "> /etc/apt/sources.list.d/rocm.list",
        "printf 'Package: *\\nPin: release o=repo.radeon.com\\nPin-Priority: 600\\n' "
        "> /etc/apt/preferences.d/rocm-pin-600",
        "apt-get update",
        f"apt-get install -y --no-install-recommends {' '.join(apt.packages)}",
        remove_command(list(FETCH_PACKAGES)),
        "rm -rf /tmp/rif-gnupg /tmp/rif-rocm.asc /tmp/rif-rocm.keys",
    ]


def install_fix(packages: list[str]) -> str:
    return f"apt-get install -y --no-install-recommends {' '.join(packages)}"
