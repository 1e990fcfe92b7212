"""apt (builder/core/osfamilies/apt.py) and the registry of OS families: every family module has every name of the
interface, and apt's steps are the ones Debian and Ubuntu images have always run."""

from __future__ import annotations

import inspect

import pytest

from builder.core import facts, osfamilies
from builder.core.osfamilies import apt
from builder.core.osfamilies.base import OsFamily


@pytest.mark.parametrize("name", sorted(osfamilies.FAMILIES))
def test_every_family_module_has_every_name_of_the_interface(name: str) -> None:
    module = osfamilies.of(name)
    wanted = {n for n in vars(OsFamily) if not n.startswith("_")} | set(OsFamily.__annotations__)
    missing = sorted(n for n in wanted if not hasattr(module, n))
    assert not missing, f"{name}: {missing}"
    assert name == module.NAME
    for fn in ("cache_mounts", "install_commands", "remove_command", "cleanup_command", "sdk_steps", "install_fix"):
        assert inspect.isfunction(getattr(module, fn)), fn


def test_every_os_release_names_a_known_family() -> None:
    assert {release.family for release in facts.os_releases().values()} <= set(osfamilies.FAMILIES)


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
