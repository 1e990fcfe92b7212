"""`builder lock --apt-snapshot off` (issue 53, "Plans and rows"): off means OS packages stay unpinned, whatever
RIF_APT_SNAPSHOT or the OS's snapshot service (builder/data/os.yaml) would say: the lock is given no snapshot, so
no archive is asked and no OS lock written (what the render of an unpinned OS layer then says is
tests/render/test_lockcache.py's, which locks with off for real). A URL is the archive every OS pins from.

The lock itself (resolve.lock_tree) is a stand-in that records the snapshot it was given and stops the command, so
the test reads exactly what the command passed down."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from builder.cli.app import app
from builder.render import oslock, resolve
from testkit.matrices import ONE_CPU, write_matrix


@pytest.fixture
def given(monkeypatch: pytest.MonkeyPatch) -> list[oslock.Snapshot | None]:
    seen: list[oslock.Snapshot | None] = []

    def lock_tree(*args: object, snapshot: oslock.Snapshot | None = None, **kwargs: object) -> resolve.LockReport:
        seen.append(snapshot)
        raise typer.Exit(0)

    monkeypatch.setattr(resolve, "lock_tree", lock_tree)
    for name in (oslock.URL_ENV, oslock.TIME_ENV):
        monkeypatch.delenv(name, raising=False)
    return seen


def lock(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    matrix = write_matrix(tmp_path, ONE_CPU)
    result = CliRunner().invoke(app, ["lock", "--matrix", str(matrix), "--out", str(tmp_path / "tree"), *args],
                                env={"COLUMNS": "300", "NO_COLOR": "1", **(env or {})})
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize(("args", "env"), [
    (["--apt-snapshot", "off"], {}),
    ([], {"RIF_APT_SNAPSHOT": "off"}),
    (["--apt-snapshot", "off"], {"RIF_APT_SNAPSHOT": "http://127.0.0.1:9/debian"}),  # the option wins
])
def test_off_gives_the_lock_no_snapshot(args: list[str], env: dict[str, str], tmp_path: Path,
                                                       given: list[oslock.Snapshot | None]) -> None:
    code, output = lock(tmp_path, *args, env=env)
    assert code == 0, output
    assert given == [None]


def test_a_url_is_the_archive_every_os_pins_from(tmp_path: Path, given: list[oslock.Snapshot | None]) -> None:
    code, output = lock(tmp_path, "--apt-snapshot", "http://127.0.0.1:9/debian", "--apt-snapshot-time",
                        "20261101T000000Z")
    assert code == 0, output
    [snapshot] = given
    assert snapshot is not None and (snapshot.url, snapshot.time) == ("http://127.0.0.1:9/debian", "20261101T000000Z")


def test_a_value_that_is_neither_off_nor_a_url_is_a_usage_error(tmp_path: Path,
                                                               given: list[oslock.Snapshot | None]) -> None:
    code, output = lock(tmp_path, "--apt-snapshot", "Off")
    assert code == 2 and "--apt-snapshot" in output and "is not an http(s) URL" in output, output
    assert given == []
