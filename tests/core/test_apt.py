"""apt (builder/core/osfamilies/apt.py): its steps are the ones Debian and Ubuntu images have always run."""

from __future__ import annotations

from builder.core import facts, ospins
from builder.core.osfamilies import apt


def test_apt_install_and_cleanup() -> None:
    assert apt.install_commands(["python3", "git"]) == [
        "apt-get update", "apt-get install -y --no-install-recommends python3 git"]
    assert apt.remove_command(["curl"]) == "apt-get purge -y --auto-remove curl"
    assert apt.cleanup_command().startswith("rm -rf /var/lib/apt/lists/* ")
    assert apt.cache_mounts("debian-12") == [
        "--mount=type=cache,id=rif-apt-debian-12,target=/var/cache/apt,sharing=locked"]
    assert apt.BASE_TOOL == "debootstrap" and apt.PURL_TYPE == "deb"


def test_amd_sdk_steps_refuse_a_key_without_the_pinned_fingerprint() -> None:
    data = facts.compat().amd_apt
    os_name = sorted(data.suites)[0]
    steps = apt.sdk_steps("7.2.1", os_name)
    assert f"grep -qx 'fpr:::::::::{data.key_fingerprint}:' /tmp/rif-rocm.keys" in steps
    assert any(data.repo.format(rocm="7.2.1") in s and data.suites[os_name] in s for s in steps)
    assert steps.index("gpg --batch --show-keys --with-colons /tmp/rif-rocm.asc > /tmp/rif-rocm.keys") < \
        next(i for i, s in enumerate(steps) if s.startswith("apt-get install"))
    assert "apt-get purge -y --auto-remove curl gnupg" in steps


def test_every_apt_get_install_of_a_locked_step_names_each_pinned_version() -> None:
    """The simulation and the install both name NAME=VERSION for every pin, and nothing else (a reader, or a linter
    such as hadolint's DL3008, sees the pins on the command itself)."""
    lock = ospins.OsLock(
        "debian-12", ("python3",), "20261101T000000Z",
        (ospins.Source("http://127.0.0.1:8127/20261101T000000Z/", "bookworm", ("main",)),),
        (ospins.Package("python3", "amd64", "3.11.2-1+b1", "a" * 64),
         ospins.Package("libc6", "amd64", "2.36-9+deb12u14", "b" * 64)), True)
    installs = [c for c in apt.pinned_install_commands(lock) if "apt-get" in c and " install " in c]
    assert len(installs) == 2  # the simulation, then the install
    for command in installs:
        words = command.split(" install ", 1)[1].split(" > ", 1)[0].split()
        assert sorted(w for w in words if not w.startswith("-")) == ["libc6=2.36-9+deb12u14", "python3=3.11.2-1+b1"]
    assert any("20261101T000000Z" in c and "trusted=yes" in c for c in apt.pinned_install_commands(lock))


def test_amds_repository_is_a_lock_source_of_one_release_signed_by_its_keyring() -> None:
    assert apt.sdk_source("7.2.1", "ubuntu-24.04") == ospins.Source(
        "https://repo.radeon.com/rocm/apt/7.2.1/", "noble", ("main",), "/etc/apt/keyrings/rocm.gpg")
    assert apt.sdk_source("7.2.1", "debian-12") is None  # AMD documents no Debian suite
    assert apt.sdk_packages() == ("curl", "gnupg", "rocm-hip-sdk")
