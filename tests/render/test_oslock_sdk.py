"""The SDK step's OS lock (os-sdk.txt): a pytorch.org devel image's ROCm SDK from AMD's apt repository of its
release, pinned with its closure from the OS snapshot and a loopback fake of AMD's repository, without an engine."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.core import facts, ospins
from builder.core.errors import InputError
from builder.core.osfamilies import apt
from builder.core.spec import CellSpec
from builder.render import oslock
from builder.render.dockerfile import render_all
from builder.render.sources import WheelSource
from testkit.matrices import load_cells
from tests.fakes import checkout
from tests.fakes.aptarchive import COMMON, T1, Deb, Served, write_snapshot
from tests.render.test_oslock import fake_wheel_locks, lock_all

MATRIX = ("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2]\n  torch: ['2.13.0']\n  gfx: [all]\n"
          "  flavor: [runtime, devel]\n")
GROUP = "rocm7.2_ubuntu24.04_py3.12_torch2.13.0"
OS_DEBS = [*COMMON, Deb("openssl", "3.0.13-0ubuntu3"), Deb("curl", "8.5.0-2ubuntu10", "libcurl4"),
           Deb("libcurl4", "8.5.0-2ubuntu10"), Deb("gnupg", "2.4.4-2ubuntu17", "gpg"), Deb("gpg", "2.4.4-2ubuntu17"),
           Deb("libgfortran5", "14-20240412")]
AMD_DEBS = [Deb("rocm-hip-sdk", "7.2.1.70201-81~24.04", "hipcc, rocblas-dev, libcurl4"),
            Deb("hipcc", "1.1.1.70201-81~24.04", "gcc, python3"), Deb("rocblas-dev", "5.2.0.70201-81~24.04", "rocblas"),
            Deb("rocblas", "5.2.0.70201-81~24.04", "libgfortran5")]


@pytest.fixture
def archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """The OS snapshot (noble at T1) and AMD's repository of 7.2.1 (the release the rocm7.2 wheels were built on),
    each on its own loopback server; AMD's address in the data points at the second."""
    write_snapshot(tmp_path / "os", T1, "noble", OS_DEBS)
    write_snapshot(tmp_path / "amd" / "rocm" / "apt", "7.2.1", "noble", AMD_DEBS)
    os_server, amd_server = Served(tmp_path / "os"), Served(tmp_path / "amd")
    real = facts.compat()
    fake = real.model_copy(update={"amd_apt": real.amd_apt.model_copy(
        update={"repo": amd_server.url + "/rocm/apt/{rocm}"})})
    monkeypatch.setattr(facts, "compat", lambda: fake)
    yield os_server.url, amd_server.url
    os_server.close()
    amd_server.close()


def locked(tmp_path: Path, os_url: str) -> tuple[list[CellSpec], Path]:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    fake_wheel_locks(tree, cells)
    lock_all(tree, cells, oslock.Snapshot(os_url, T1, trusted=True), update=False)
    return cells, tree


def test_the_sdk_lock_pins_the_closure_from_the_snapshot_and_amds_repository(tmp_path: Path,
                                                                              archives: tuple[str, str]) -> None:
    os_url, amd_url = archives
    _, tree = locked(tmp_path, os_url)
    lock = ospins.read(tree / GROUP / "lock" / oslock.SDK_STEP)
    assert lock.wants == ("curl", "gnupg", "rocm-hip-sdk") and lock.snapshot == T1
    assert lock.sources == (ospins.Source(f"{os_url}/{T1}/", "noble", ("main",)),
                            ospins.Source(f"{amd_url}/rocm/apt/7.2.1/", "noble", ("main",), apt.KEYRING))
    # over what the base and devel steps keep: python3 and gcc are not installed again
    assert {f"{p.name}={p.version}" for p in lock.packages} == {
        "curl=8.5.0-2ubuntu10", "libcurl4=8.5.0-2ubuntu10", "gnupg=2.4.4-2ubuntu17", "gpg=2.4.4-2ubuntu17",
        "libgfortran5=14-20240412", "rocm-hip-sdk=7.2.1.70201-81~24.04", "hipcc=1.1.1.70201-81~24.04",
        "rocblas-dev=5.2.0.70201-81~24.04", "rocblas=5.2.0.70201-81~24.04"}
    assert f"source: {amd_url}/rocm/apt/7.2.1/ noble main signed-by=/etc/apt/keyrings/rocm.gpg\n" in lock.text()


def sdk_step(dockerfile: str) -> str:
    """The RUN that adds the SDK (from the comment above it to the next instruction)."""
    return dockerfile.split("# its key must have the pinned fingerprint")[1].split("\nENV ")[0]


def test_the_locked_sdk_step_installs_exactly_the_pins_with_amds_source_signed_by_its_key(
        tmp_path: Path, archives: tuple[str, str]) -> None:
    os_url, amd_url = archives
    cells, tree = locked(tmp_path, os_url)
    rendered = render_all(cells, WheelSource(locks=tree))
    assert all(r.os_pinned for r in rendered)
    devel = next(r for r in rendered if r.cell.flavor == "devel")
    step = sdk_step(devel.dockerfile)
    amd_line = f"'deb [check-valid-until=no signed-by=/etc/apt/keyrings/rocm.gpg] {amd_url}/rocm/apt/7.2.1/ noble main'"
    assert amd_line in step and f"trusted=yes] {amd_url}" not in step
    installs = [line for line in step.splitlines() if re.search(r"apt-get .*install ", line)]
    named = [line.split("--no-install-recommends ")[1].split(" >")[0].removesuffix(" \\").split() for line in installs]
    assert len(named) == 4 and all(re.fullmatch(r"[a-z0-9.+-]+=[0-9][^ =]*", word) for words in named for word in words)
    assert named[0] == ["curl=8.5.0-2ubuntu10", "gnupg=2.4.4-2ubuntu17"] and len(named[3]) == 9
    key = step.index("gpg --batch --yes --dearmor")  # curl and gnupg from the snapshot alone, AMD's source after
    assert step.index(" install -y ") < key < step.index(amd_line)
    assert step.count("apt would install packages the lock does not pin") == 2
    assert "apt-mark auto gpg hipcc libcurl4 libgfortran5 rocblas rocblas-dev" in step
    (tmp_path / "Dockerfile").write_text(devel.dockerfile)  # DL3008 (unpinned apt), not ignored, holds
    config = (checkout.ROOT / ".hadolint.yaml").read_text().replace("  - DL3008\n", "")
    (tmp_path / "hadolint.yaml").write_text(config)
    lint = subprocess.run([checkout.hadolint(), "--config", str(tmp_path / "hadolint.yaml"), "--no-color",
                           str(tmp_path / "Dockerfile")], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout


def test_without_its_lock_the_sdk_step_is_as_unlocked_and_the_image_unpinned(tmp_path: Path,
                                                                              archives: tuple[str, str]) -> None:
    cells, tree = locked(tmp_path, archives[0])
    (tree / GROUP / "lock" / oslock.SDK_STEP).unlink()
    rendered = render_all(cells, WheelSource(locks=tree))
    assert not any(r.os_pinned for r in rendered)
    devel = next(r for r in rendered if r.cell.flavor == "devel")
    assert sdk_step(devel.dockerfile) == sdk_step(next(r for r in render_all(cells) if r.cell.flavor == "devel")
                                                  .dockerfile)


def test_a_stale_sdk_lock_is_an_error_naming_it(tmp_path: Path, archives: tuple[str, str]) -> None:
    cells, tree = locked(tmp_path, archives[0])
    path = tree / GROUP / "lock" / oslock.SDK_STEP
    good = path.read_text()
    path.write_text(good.replace("for: curl gnupg rocm-hip-sdk", "for: curl gnupg rocm-dev"))
    with pytest.raises(InputError, match=r"os-sdk\.txt: for: resolved for ubuntu-24\.04: curl gnupg rocm-dev"):
        render_all(cells, WheelSource(locks=tree))
    path.write_text(good.replace("/rocm/apt/7.2.1/", "/rocm/apt/7.2.0/"))  # another release's repository
    with pytest.raises(InputError, match=r"os-sdk\.txt: for: resolved without .*/rocm/apt/7\.2\.1/ noble"):
        render_all(cells, WheelSource(locks=tree))


def test_a_changed_release_resolves_the_sdk_lock_again(tmp_path: Path, archives: tuple[str, str]) -> None:
    cells, tree = locked(tmp_path, archives[0])
    path = tree / GROUP / "lock" / oslock.SDK_STEP
    good = path.read_text()
    path.write_text(good.replace("/rocm/apt/7.2.1/", "/rocm/apt/7.2.0/"))
    assert lock_all(tree, cells, oslock.Snapshot(archives[0], T1, trusted=True), update=False) == {
        f"{GROUP}/{oslock.SDK_STEP}"}
    assert path.read_text() == good
