"""apt (builder/core/osfamilies/apt.py): its steps are the ones Debian and Ubuntu images have always run."""

from __future__ import annotations

from builder.core import facts
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
