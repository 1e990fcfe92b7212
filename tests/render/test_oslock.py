"""OS package locks against a loopback snapshot archive (two dated snapshots, two suites), without an engine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core import ospins
from builder.core.errors import InputError
from builder.core.osfamilies import apt
from builder.core.osfamilies.base import Fetch, PackageIndex
from builder.core.spec import CellSpec
from builder.render import aptfetch, lockfile, oslock, resolve
from builder.render.dockerfile import render_all
from builder.render.sources import WheelSource
from builder.render.stages import lock_steps
from testkit.matrices import load_cells, write_matrix
from tests.fakes import checkout
from tests.fakes.aptarchive import T1, T2, served

__all__ = ["served"]  # the archive fixture, used by name

MATRIX = "matrix:\n  os: [debian-12, debian-13]\n  platform: [cpu]\n  torch: ['2.14.1']\n  flavor: [runtime, devel]\n"


def groups(cells: list[CellSpec]) -> dict[str, list[CellSpec]]:
    found: dict[str, list[CellSpec]] = {}
    for rendered in render_all(cells):
        found.setdefault(rendered.group, []).append(rendered.cell)
    return found


def lock_all(tree: Path, cells: list[CellSpec], snapshot: oslock.Snapshot, update: bool) -> set[str]:
    """Lock every combination; the lock files whose text changed."""
    changed = set()
    for group, members in groups(cells).items():
        for file, text in oslock.lock_group(members, tree / group / "lock", snapshot, update).items():
            if oslock.write(tree, f"{group}/lock/{file}", text):
                changed.add(f"{group}/{file}")
    return changed


def test_a_lock_pins_each_steps_closure_at_its_snapshot(tmp_path: Path, served: str) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    assert len(lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)) == 4
    base = ospins.read(tree / "cpu_debian13_py3.13_torch2.14.1" / "lock" / "os-base.txt")
    assert base.snapshot == T1 and base.sources == (ospins.Source(f"{served}/{T1}/", "trixie", ("main",)),)
    assert {f"{p.name}={p.version}" for p in base.packages} == {
        "python3=3.11.2-1", "libpython3-stdlib=3.11.2-1", "ca-certificates=20230311", "openssl=3.5.1-1",
        "python3-venv=3.11.2-1", "python3-pip-whl=23.0.1", "python3-setuptools-whl=66.1.1"}
    assert all(len(p.sha256) == 64 for p in base.packages)
    devel = ospins.read(tree / "cpu_debian13_py3.13_torch2.14.1" / "lock" / "os-devel.txt")
    assert {p.name for p in devel.packages} == {"build-essential", "gcc", "python3-dev", "git", "ninja-build"}


def test_the_lock_asks_the_os_family_for_its_index_and_hands_it_the_bounded_fetch(
        tmp_path: Path, served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """oslock reads no archive itself: each combination asks its OS family (PACKAGE_INDEX) once for the index of its
    snapshot's sources, with aptfetch's bounded fetch, and its locks hold what that index resolved."""
    asked: list[tuple[tuple[ospins.Source, ...], Fetch]] = []
    real = apt.PACKAGE_INDEX
    assert real is not None

    def index(sources: tuple[ospins.Source, ...], fetch: Fetch) -> PackageIndex:
        asked.append((sources, fetch))
        return real(sources, fetch)

    monkeypatch.setattr(apt, "PACKAGE_INDEX", index)
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    assert len(lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)) == 4
    assert len(asked) == 2 and {s for s, _ in asked} == {(ospins.Source(f"{served}/{T1}/", suite, ("main",)),)
                                                         for suite in ("bookworm", "trixie")}
    assert all(fetch is aptfetch.fetch for _, fetch in asked)
    base = ospins.read(tree / "cpu_debian12_py3.11_torch2.14.1" / "lock" / "os-base.txt")
    assert "openssl=3.0.11-1" in {f"{p.name}={p.version}" for p in base.packages}


def test_a_family_without_a_package_index_has_no_os_step_and_reads_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    assert all(oslock.steps(members) for members in groups(cells).values())  # the apt family has steps to lock
    monkeypatch.setattr(apt, "PACKAGE_INDEX", None)
    monkeypatch.setattr(aptfetch, "fetch", lambda folder: pytest.fail(f"read {folder}"))
    assert all(oslock.steps(members) == [] for members in groups(cells).values())
    assert lock_all(tree, cells, oslock.Snapshot("http://127.0.0.1:9", T1, trusted=True), update=False) == set()
    assert not tree.exists()


def test_update_changes_exactly_the_locks_whose_closure_moved(tmp_path: Path, served: str) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    assert lock_all(tree, cells, oslock.Snapshot(served, None, trusted=True), update=False) == set()  # kept
    changed = lock_all(tree, cells, oslock.Snapshot(served, T2, trusted=True), update=True)
    assert changed == {"cpu_debian13_py3.13_torch2.14.1/os-base.txt"}
    moved = ospins.read(tree / "cpu_debian13_py3.13_torch2.14.1" / "lock" / "os-base.txt")
    assert moved.snapshot == T2 and "openssl:all=3.5.4-1" in moved.text()
    kept = ospins.read(tree / "cpu_debian12_py3.11_torch2.14.1" / "lock" / "os-base.txt")
    assert kept.snapshot == T1


def fake_wheel_locks(tree: Path, cells: list[CellSpec]) -> None:
    """Wheel and base locks a render accepts (no wheels): what this test does not look at."""
    for group, members in groups(cells).items():
        for step in lock_steps(members):
            text = (lockfile.base_text(step, "debian:12@sha256:" + "0" * 64) if step.file == lockfile.BASE_FILE
                    else lockfile.pip_text(step, []))
            (tree / group / "lock").mkdir(parents=True, exist_ok=True)
            (tree / group / "lock" / step.file).write_text(text)


def test_a_locked_render_installs_exactly_the_pins_from_the_snapshot(tmp_path: Path, served: str) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    fake_wheel_locks(tree, cells)
    assert not any(r.os_pinned for r in render_all(cells, WheelSource(locks=tree)))
    lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    rendered = render_all(cells, WheelSource(locks=tree, apt_trusted=True))  # RIF_APT_SNAPSHOT_TRUSTED=yes
    assert all(r.os_pinned for r in rendered)
    text = next(r.dockerfile for r in rendered if r.cell.os == "debian-13")
    assert f"'deb [check-valid-until=no trusted=yes] {served}/{T1}/ trixie main'" in text
    # the lock says trusted, the person rendering did not: apt checks signatures (a lock narrows, never widens)
    untrusted = next(r.dockerfile for r in render_all(cells, WheelSource(locks=tree)) if r.cell.os == "debian-13")
    assert "trusted=yes" not in untrusted and f"'deb [check-valid-until=no] {served}/{T1}/ trixie main'" in untrusted
    installs = [line for line in text.splitlines() if " install -y " in line]
    assert len(installs) == 2 and all("openssl=3.5.1-1" in line or "gcc=12.2.0" in line for line in installs)
    assert "comm -23" in text and "apt would install packages the lock does not pin" in text
    (tmp_path / "Dockerfile").write_text(text)  # every apt-get install names its versions: DL3008 (not ignored) holds
    config = (checkout.ROOT / ".hadolint.yaml").read_text().replace("  - DL3008\n", "")
    (tmp_path / "hadolint.yaml").write_text(config)
    lint = subprocess.run([checkout.hadolint(), "--config", str(tmp_path / "hadolint.yaml"), "--no-color",
                           str(tmp_path / "Dockerfile")], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout


def test_a_stale_or_broken_os_lock_is_an_error_naming_it(tmp_path: Path, served: str) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    fake_wheel_locks(tree, cells)
    lock_all(tree, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    path = tree / "cpu_debian12_py3.11_torch2.14.1" / "lock" / "os-base.txt"
    good = path.read_text()
    path.write_text(good.replace("for: python3 ", "for: python2 "))
    with pytest.raises(InputError, match=r"os-base\.txt: for: resolved for debian-12: python2"):
        render_all(cells, WheelSource(locks=tree))
    path.write_text(good.replace("pin: python3:all=", "pin: python3:all "))
    with pytest.raises(InputError, match=r"os-base\.txt:\d+: pin:"):
        render_all(cells, WheelSource(locks=tree))


def test_an_unlocked_render_warns_that_its_os_layer_is_unpinned(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path, MATRIX)
    run = CliRunner().invoke(app, ["render", "--matrix", str(matrix), "--out", str(tmp_path / "tree")])
    assert run.exit_code == 0, run.output
    assert "OS layer of 2 combinations is unpinned" in run.output


def test_builder_lock_writes_the_os_locks_and_an_unreachable_archive_is_a_data_error(tmp_path: Path,
                                                                                       served: str) -> None:
    cells, tree, wheels = load_cells(tmp_path, MATRIX)[:1], tmp_path / "tree", tmp_path / "wheels"
    wheels.mkdir()  # no wheel: those steps are data errors, the OS locks are written all the same
    [group] = groups(cells)
    base = lock_steps(cells)[0]
    (tree / group / "lock").mkdir(parents=True)
    (tree / group / "lock" / base.file).write_text(lockfile.base_text(base, "debian:12@sha256:" + "0" * 64))
    report = resolve.lock_tree(cells, tree, wheels, snapshot=oslock.Snapshot(served, T1, trusted=True))
    assert {p.name for p in report.written} == {"os-base.txt"}
    assert ospins.read(report.written[0]).snapshot == T1
    nowhere = "http://127.0.0.1:9"  # nothing listens there
    again = resolve.lock_tree(cells, tree, wheels, snapshot=oslock.Snapshot(nowhere, T2, trusted=True))
    [error] = [e for e in again.errors if e.step == "os-*.txt"]
    assert error.cells == (cells[0].tag,) and error.index == nowhere


def test_a_bad_snapshot_time_is_a_usage_error(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path, MATRIX)
    run = CliRunner().invoke(app, ["lock", "--matrix", str(matrix), "--out", str(tmp_path / "tree"),
                                   "--apt-snapshot", "http://127.0.0.1:9", "--apt-snapshot-time", "2026-11-01"])
    assert run.exit_code == 2, run.output
    assert "--apt-snapshot-time" in run.output and "20261101T000000Z" in run.output


@pytest.mark.parametrize("url", ["zero", "ftp://x/y", "http://h/a b", "https://h/\u00e9", "http://h/x'y"])
def test_a_snapshot_archive_that_is_no_http_url_is_a_usage_error(url: str) -> None:
    with pytest.raises(InputError) as caught:
        oslock.Snapshot.from_options(url, None, None)
    [problem] = caught.value.problems
    assert problem.key == "--apt-snapshot" and "URL" in problem.message
