"""`--apt-snapshot`, `--apt-snapshot-time` and the values of an OS lock are parsed, not pattern-matched: a URL by a
URL parser with its port checked, a time as a real UTC time not after now, every lock value capped, and a refused
value echoed cut (never a megabyte of stderr). Limits are the documented ones (builder/core/aptwords.py:
128-character names and versions; builder/core/ospins.py: 4096-character lines), written as literals."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core import ospins
from builder.core.errors import InputError
from builder.render import aptfetch
from testkit.matrices import write_matrix
from tests.render.test_oslock import MATRIX

T1 = "20261101T000000Z"
HUGE = "9" * 1_900_000  # 1.9 MB


def lock(tmp_path: Path, *options: str) -> tuple[int, str]:
    run = CliRunner().invoke(app, ["lock", "--matrix", str(write_matrix(tmp_path, MATRIX)), "--out",
                                   str(tmp_path / "tree"), *options])
    return run.exit_code, run.output


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc/", "http://[::1/", "http://127.0.0.1:99999/",
                                 "http://127.0.0.1:65536/", "http://127.0.0.1:0/", "", "http://u:p@127.0.0.1:1/",
                                 "http://127.0.0.1:1/x?y=1", "http://127.0.0.1:1/x#f", "http://127.0.0.1:1/$(id)",
                                 "http://a..b/", "http://-a/", "file:///etc", "http://127.0.0.1:1/\x1b[2J",
                                 "http://127.0.0.1:1/" + "a" * 1_900_000], ids=lambda v: ascii(v)[:40])
def test_a_bad_snapshot_url_is_a_usage_error_before_anything_is_read(tmp_path: Path, url: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aptfetch, "fetch", lambda folder: pytest.fail(f"read {folder}"))
    code, output = lock(tmp_path, "--apt-snapshot", url)
    assert code == 2, output
    assert "--apt-snapshot" in output and len(output) < 2_000 and "\x1b" not in output
    assert not (tmp_path / "tree").exists()


@pytest.mark.parametrize("url", ["http://127.0.0.1:65535/debian", "https://mirror.example/snapshots/",
                                 "http://[::1]:8127", "http://localhost:1"])
def test_a_good_snapshot_url_is_taken(url: str) -> None:
    from builder.render import oslock
    snapshot = oslock.Snapshot.from_options(url, None, None)
    assert snapshot is not None and snapshot.url == url.rstrip("/")


@pytest.mark.parametrize("time", ["99999999T999999Z", "20261301T000000Z", "20261101T250000Z", "20261101T006000Z",
                                  "20260230T000000Z", "99991231T235959Z", "2026-11-01", "20261101T000000", "",
                                  HUGE], ids=lambda v: ascii(v)[:40])
def test_a_bad_snapshot_time_is_a_usage_error(tmp_path: Path, time: str) -> None:
    code, output = lock(tmp_path, "--apt-snapshot", "http://127.0.0.1:9", "--apt-snapshot-time", time)
    assert code == 2, output
    assert "--apt-snapshot-time" in output and len(output) < 2_000
    assert not (tmp_path / "tree").exists()


def test_a_past_snapshot_time_is_taken() -> None:
    from builder.render import oslock
    snapshot = oslock.Snapshot.from_options("http://127.0.0.1:9", "20240229T235959Z", None)
    assert snapshot is not None and snapshot.time == "20240229T235959Z"


GOOD = (f"# rif-os-lock 1\nos: debian-12\nfor: python3\nsnapshot: {T1}\ntrusted: no\n"
        f"source: http://127.0.0.1:9/{T1}/ bookworm main\npin: python3:all=3.11.2-1 {'a' * 64}\n")


@pytest.mark.parametrize(("old", "new", "line", "key"), [
    ("=3.11.2-1 ", f"=1.{HUGE} ", 7, "line"),  # a 1.9 MB version: the line is over 4096 characters
    ("=3.11.2-1 ", f"=1.{'9' * 127} ", 7, "pin"),  # 129 characters: the documented cap is 128
    (f"/{T1}/ bookworm", f"/{'a' * 1_900_000}/ bookworm", 6, "line"),  # a 1.9 MB source path
    (f"/{T1}/ bookworm", f"/{'a' * 2_050}/ bookworm", 6, "source"),  # an URL over 2048 characters
    ("bookworm main", f"bookworm {'m' * 65}", 6, "source"),  # a component of 65: the cap is 64
    ("python3:all=", f"{'p' * 129}:all=", 7, "pin"),  # a name of 129 characters
    ("a" * 64, "a" * 63, 7, "pin"),  # a sha256 of 63 hex digits
    ("a" * 64, "a" * 65, 7, "pin"),  # and of 65
    ("os: debian-12", f"os: {'d' * 65}", 2, "os"),
    ("os: debian-12", "os: debian-12$(id)", 2, "os"),
    (f"snapshot: {T1}", "snapshot: 20261301T000000Z", 4, "snapshot"),  # month 13
    ("127.0.0.1:9", "127.0.0.1:99999", 6, "source"),
    ("127.0.0.1:9", "[::1", 6, "source"),
    ("trusted: no", f"trusted: {HUGE}", 5, "line"),
    ("trusted: no", "trusted: no\n" + "k" * 5000 + ": v", 6, "line"),
], ids=lambda v: ascii(v)[:30])
def test_a_lock_value_over_its_cap_or_out_of_grammar_is_refused_echoed_cut(old: str, new: str, line: int,
                                                                          key: str) -> None:
    assert ospins.parse(GOOD, Path("os-base.txt")).packages  # the good lock parses
    with pytest.raises(InputError) as caught:
        ospins.parse(GOOD.replace(old, new), Path("os-base.txt"))
    [problem] = caught.value.problems
    assert (problem.line, problem.key) == (line, key), problem
    assert len(str(problem)) < 1_000


def test_a_version_of_exactly_128_characters_is_taken() -> None:
    lock = ospins.parse(GOOD.replace("=3.11.2-1 ", f"=1.{'9' * 126} "), Path("os-base.txt"))
    assert len(lock.packages[0].version) == 128
