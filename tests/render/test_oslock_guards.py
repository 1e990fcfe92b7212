"""An OS lock is resolved again only where something changed (issue 53, "Trust and pins"; cost grows with what
changed): a lock current for its inputs is kept without reading the archive at all, while `lock --update`
resolves every lock against the archive again, even at the snapshot time the lock already has.

The archive is tests/render/test_oslock.py's loopback snapshot archive (two dated snapshots, two suites)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core import ospins
from builder.core.osfamilies import apt
from builder.core.osfamilies.base import Fetch, PackageIndex
from builder.render import oslock
from testkit.matrices import load_cells
from tests.fakes.aptarchive import T1, served
from tests.render.test_oslock import MATRIX, lock_all

__all__ = ["served"]  # the archive fixture, used by name


def counted(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every archive index the lock asks the OS family for from now on."""
    loads: list[object] = []
    real = apt.PACKAGE_INDEX
    assert real is not None

    def load(sources: tuple[ospins.Source, ...], fetch: Fetch) -> PackageIndex:
        loads.append(sources)
        return real(sources, fetch)

    monkeypatch.setattr(apt, "PACKAGE_INDEX", load)
    return loads


def test_a_current_lock_is_kept_without_reading_the_archive(tmp_path: Path, served: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    loads = counted(monkeypatch)
    assert lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False) == set()
    assert lock_all(tree, cells, oslock.Snapshot(served, None, trusted=True), update=False) == set()
    assert loads == []


def test_update_reads_the_archive_again_even_at_the_lock_s_own_snapshot_time(tmp_path: Path, served: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    loads = counted(monkeypatch)
    assert lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=True) == set(), "same closure"
    assert len(loads) == 2, "one index per suite (bookworm, trixie), each read again"


@pytest.mark.parametrize("url", [None, "https://snapshot.debian.org/archive/debian", "http://10.0.0.1:8127",
                                 "http://127.0.0.1.example:8127"])
def test_a_snapshot_trusts_no_unsigned_archive_off_the_loopback_however_it_is_made(url: str | None) -> None:
    """The command line refuses RIF_APT_SNAPSHOT_TRUSTED=yes off the loopback (tests/hostile/test_apt_trust.py);
    the Snapshot itself refuses it too, so no other caller can make apt install unsigned packages from afar."""
    with pytest.raises(ValueError, match="an unsigned archive is trusted only on this machine's loopback"):
        oslock.Snapshot(url, T1, trusted=True)
    assert oslock.Snapshot(url, T1, trusted=False).trusted is False


def test_a_loopback_snapshot_may_be_trusted() -> None:
    assert oslock.Snapshot("http://127.0.0.1:8127", T1, trusted=True).trusted is True


def test_an_os_with_no_snapshot_archive_has_no_os_package_step_to_lock(tmp_path: Path) -> None:
    """Rocky Linux 9 installs with dnf and the data names no snapshot archive for it: its images have no apt step
    to pin (an apt lock for it would name packages no dnf installs), while Debian's have the base and devel steps."""
    rocky = load_cells(tmp_path, "matrix:\n  os: [rocky-9]\n  platform: [cpu]\n  torch: ['2.8.0']\n"
                                 "  flavor: [runtime, devel]\n")
    assert len(rocky) == 2 and not rocky[0].os_release.snapshot
    assert oslock.steps(rocky) == []
    debian = [c for c in load_cells(tmp_path, MATRIX) if c.os == "debian-12"]
    assert [s.file for s in oslock.steps(debian)] == ["os-base.txt", "os-devel.txt"]
