"""`builder lock` and `builder render --check` around the OS locks: the snapshot an --update moves to, an offline
snapshot service (the three ways on), `--apt-snapshot off`, and a stale or dangling OS lock under --check."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core import aptindex, ospins
from builder.render import aptfetch, oslock
from testkit.matrices import load_cells, write_matrix
from tests.fakes.aptarchive import T1, T2, RawIndex, served
from tests.render.test_oslock import MATRIX, fake_wheel_locks, groups, lock_all

__all__ = ["served"]  # the archive fixture, used by name

GROUP = "cpu_debian12_py3.11_torch2.14.1"


def test_update_without_a_time_moves_the_snapshot_to_now(tmp_path: Path, served: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    monkeypatch.setattr(oslock, "now", lambda: T2)  # the archive has T1 and T2: "now" is T2
    assert lock_all(tree, cells, oslock.Snapshot(served, None, trusted=True), update=False) == set()  # kept
    assert ospins.read(tree / GROUP / "lock" / "os-base.txt").snapshot == T1
    lock_all(tree, cells, oslock.Snapshot(served, None, trusted=True), update=True)
    # every lock is read at the new snapshot; the ones whose closure moved carry it (debian-13's openssl)
    moved = ospins.read(tree / "cpu_debian13_py3.13_torch2.14.1" / "lock" / "os-base.txt")
    assert moved.snapshot == T2 and any(p.version == "3.5.4-1" for p in moved.packages)


def test_a_lock_made_trusted_is_locked_again_when_the_command_no_longer_trusts(tmp_path: Path, served: str) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    changed = lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=False), update=False)
    assert f"{GROUP}/os-base.txt" in changed
    assert not ospins.read(tree / GROUP / "lock" / "os-base.txt").trusted


def run_lock(tmp_path: Path, *options: str) -> tuple[int, str]:
    run = CliRunner().invoke(app, ["lock", "--matrix", str(write_matrix(tmp_path, MATRIX)), "--out",
                                   str(tmp_path / "tree"), *options])
    return run.exit_code, run.output


def locked_tree(tmp_path: Path) -> tuple[Path, dict[Path, str]]:
    """Fresh base and wheel locks (kept by a lock without --update): what the OS step comes after."""
    tree = tmp_path / "tree"
    fake_wheel_locks(tree, load_cells(tmp_path, MATRIX))
    return tree, {p: p.read_text() for p in tree.glob("*/lock/*.txt")}


def test_an_unreachable_snapshot_service_says_the_three_ways_on_and_keeps_the_other_locks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(folder: str) -> str:
        raise aptindex.Unreachable(f"{folder}Packages.xz: [Errno -2] Name or service not known")

    monkeypatch.setattr(aptfetch, "fetch", offline)
    monkeypatch.delenv("RIF_APT_SNAPSHOT", raising=False)
    tree, before = locked_tree(tmp_path)
    code, output = run_lock(tmp_path)
    assert code == 1, output
    flat = " ".join(output.split())
    assert "https://snapshot.debian.org/archive/debian" in flat and "cannot be reached" in flat
    assert "debian-12" in flat and "debian-13" in flat
    assert "--apt-snapshot URL" in flat and "scripts/apt_snapshot_archive.py" in flat
    assert "--apt-snapshot off" in flat
    assert {p: p.read_text() for p in tree.glob("*/lock/*.txt")} == before  # base and wheel locks stay
    assert not list(tree.glob("*/lock/os-*.txt"))


@pytest.mark.parametrize("code", [503, 429, 502])
def test_a_snapshot_service_that_will_not_serve_says_the_three_ways_on_too(tmp_path: Path, code: int) -> None:
    """Over HTTP, end to end: a service that answers (an overloaded or rate-limiting one's 503 and 429, a gateway's
    502 in front of a service it cannot reach) but serves no index is a way on to be told, not a broken archive."""
    tree, before = locked_tree(tmp_path)
    service = RawIndex({}, refuse_all=code)
    try:
        run = CliRunner().invoke(app, ["lock", "--matrix", str(write_matrix(tmp_path, MATRIX)), "--out", str(tree),
                                       "--apt-snapshot", service.url], env={"RIF_APT_SNAPSHOT_TRUSTED": "yes"})
    finally:
        service.close()
    assert run.exit_code == 1, run.output
    flat = " ".join(run.output.split())
    assert f"HTTP {code}" in flat and service.url.rstrip("/") in flat and "cannot be reached" in flat
    assert "--apt-snapshot URL" in flat and "scripts/apt_snapshot_archive.py" in flat and "--apt-snapshot off" in flat
    assert {p: p.read_text() for p in tree.glob("*/lock/*.txt")} == before  # base and wheel locks stay
    assert not list(tree.glob("*/lock/os-*.txt"))


def test_apt_snapshot_off_reads_no_archive_and_renders_every_image(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aptfetch, "fetch", lambda folder: pytest.fail(f"read {folder}"))
    monkeypatch.delenv("RIF_APT_SNAPSHOT", raising=False)
    tree, _ = locked_tree(tmp_path)
    code, output = run_lock(tmp_path, "--apt-snapshot", "off")
    assert code == 0, output
    assert "rendered 4 images" in " ".join(output.split())
    assert all((tree / group / "Dockerfile").exists() for group in groups(load_cells(tmp_path, MATRIX)))
    assert not list(tree.glob("*/lock/os-*.txt"))


def render_check(tmp_path: Path, tree: Path) -> tuple[int, str]:
    run = CliRunner().invoke(app, ["render", "--matrix", str(write_matrix(tmp_path, MATRIX)), "--out", str(tree),
                                   "--check"], env={"RIF_APT_SNAPSHOT_TRUSTED": "yes"})
    return run.exit_code, run.output


@pytest.mark.parametrize("break_it", ["stale", "dangling"])
def test_render_check_refuses_a_stale_or_dangling_os_lock(tmp_path: Path, served: str, break_it: str) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    fake_wheel_locks(tree, cells)
    lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    run = CliRunner().invoke(app, ["render", "--matrix", str(write_matrix(tmp_path, MATRIX)), "--out", str(tree)],
                             env={"RIF_APT_SNAPSHOT_TRUSTED": "yes"})
    assert run.exit_code == 0, run.output
    assert render_check(tmp_path, tree)[0] == 0
    path = tree / GROUP / "lock" / "os-base.txt"
    if break_it == "stale":
        path.write_text(path.read_text().replace("for: python3 ", "for: python2 "))
    else:
        path.unlink()
        path.symlink_to(tmp_path / "nowhere.txt")
    code, output = render_check(tmp_path, tree)
    assert code == 2, output
    assert "os-base.txt" in output
