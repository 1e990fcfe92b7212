"""The OS package lock's strict grammar: what it writes it reads back, and anything else is refused by file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.core import ospins
from builder.core.errors import InputError

LOCK = ospins.OsLock(
    "debian-12", ("python3", "ca-certificates"), "20261101T000000Z",
    (ospins.Source("https://snapshot.debian.org/archive/debian/20261101T000000Z/", "bookworm", ("main",)),),
    (ospins.Package("python3", "amd64", "3.11.2-1+b1", "a" * 64),
     ospins.Package("ca-certificates", "all", "20230311", "")))


def test_a_lock_reads_back_as_written() -> None:
    text = LOCK.text()
    assert "pin: ca-certificates:all=20230311 -\n" in text and "snapshot: 20261101T000000Z\n" in text
    read = ospins.parse(text, Path("os-base.txt"))
    assert read.wants == LOCK.wants and read.sources == LOCK.sources and read.snapshot == LOCK.snapshot
    assert set(read.packages) == set(LOCK.packages)


AMD = ospins.Source("https://repo.radeon.com/rocm/apt/7.2.1/", "noble", ("main",), "/etc/apt/keyrings/rocm.gpg")


def test_a_source_signed_by_a_keyring_reads_back_and_one_without_is_read_as_before() -> None:
    lock = ospins.OsLock(LOCK.os, LOCK.wants, LOCK.snapshot, (*LOCK.sources, AMD), LOCK.packages)
    text = lock.text()
    assert "source: https://repo.radeon.com/rocm/apt/7.2.1/ noble main signed-by=/etc/apt/keyrings/rocm.gpg\n" in text
    assert ospins.parse(text, Path("os-sdk.txt")).sources == lock.sources
    assert ospins.parse(text, Path("os-sdk.txt")).sources[0].signed_by == ""  # a lock written before signed-by


@pytest.mark.parametrize("tail", ["signed-by=rocm.gpg", "signed-by=/k'ey", "signed-by=", "signed-by=/a signed-by=/b"])
def test_a_signed_by_that_is_no_absolute_path_is_named_by_line(tail: str) -> None:
    text = LOCK.text().replace(" bookworm main\n", f" bookworm main {tail}\n")
    with pytest.raises(InputError) as caught:
        ospins.parse(text, Path("os-sdk.txt"))
    [problem] = caught.value.problems
    assert (problem.line, problem.key) == (7, "source"), str(problem)


@pytest.mark.parametrize("url", ["https://snapshot.debian.org/archive/debian/x'$(id)'/",
                                 "https://snapshot.debian.org/archive/`id`/", "https://a b/",
                                 "https://snapshot.debian.org/archive/\"x\"/", "https://host/a;b/",
                                 "https://h\u00e9st/"])
def test_a_source_url_that_could_leave_its_shell_word_is_refused_by_line(url: str) -> None:
    """A source's URL is written into the Dockerfile's apt sources: a lock record read from a registry must not
    carry a quote, a space or a command substitution into it."""
    text = LOCK.text().replace("https://snapshot.debian.org/archive/debian/20261101T000000Z/", url)
    with pytest.raises(InputError) as caught:
        ospins.parse(text, Path("os-base.txt"))
    [problem] = caught.value.problems
    assert (problem.line, problem.key) == (7, "source"), str(problem)


@pytest.mark.parametrize(("change", "line", "key"), [
    (("pin: python3:amd64=3.11.2-1+b1 " + "a" * 64, "pin: python3=3.11.2-1+b1 " + "a" * 64), 9, "pin"),
    (("pin: python3:amd64=3.11.2-1+b1 " + "a" * 64, "pin: python3:amd64=3.11.2 $(reboot)"), 9, "pin"),
    (("pin: ca-certificates:all=20230311 -", "pin: python3:amd64=3 -"), 9, "pin"),  # pinned twice
    (("trusted: no", "trusted: no\ncolour: blue"), 7, "colour"),
    (("trusted: no", "trusted: no\nos: debian-13"), 7, "os"),  # repeated
    (("source: https://", "source: ftp://"), 7, "source"),
    (("# rif-os-lock 1", "# rif-os-lock 2"), 1, "header"),
])
def test_a_line_that_does_not_fit_is_named_by_file_and_line(change: tuple[str, str], line: int, key: str) -> None:
    text = LOCK.text().replace(*change)
    with pytest.raises(InputError) as caught:
        ospins.parse(text, Path("x/os-base.txt"))
    [problem] = caught.value.problems
    assert (problem.file, problem.line, problem.key) == (Path("x/os-base.txt"), line, key), str(problem)


@pytest.mark.parametrize(("change", "key"), [(("snapshot: 20261101T000000Z", "snapshot: yesterday"), "snapshot"),
                                             (("for: python3 ca-certificates\n", ""), "for")])
def test_a_bad_or_missing_field_is_named(change: tuple[str, str], key: str) -> None:
    with pytest.raises(InputError) as caught:
        ospins.parse(LOCK.text().replace(*change), Path("os-base.txt"))
    assert caught.value.problems[0].key == key


def test_a_link_or_an_oversized_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text(LOCK.text())
    (tmp_path / "os-base.txt").symlink_to(tmp_path / "real.txt")
    with pytest.raises(InputError, match=r"os-base\.txt: file: cannot read"):
        ospins.read(tmp_path / "os-base.txt")
    (tmp_path / "big.txt").write_text(LOCK.text() + "# x\n" * ospins.MAX_BYTES)
    with pytest.raises(InputError, match=r"big\.txt: file"):
        ospins.read(tmp_path / "big.txt")
    assert ospins.read(tmp_path / "real.txt").snapshot == LOCK.snapshot


LINES = st.sampled_from(["os: debian-12", "for: python3", "snapshot: 20261101T000000Z", "trusted: no",
                         "source: http://127.0.0.1:1/20261101T000000Z/ bookworm main", "pin: a:all=1 -",
                         "pin: a:amd64=1:2.0~rc1+b1 " + "f" * 64, "pin: b:all=1", "# note", ""]) | st.text(max_size=30)


@settings(max_examples=200, deadline=None, database=None)
@given(lines=st.lists(LINES, max_size=12))
def test_any_text_is_a_lock_or_an_error_naming_the_file(lines: list[str]) -> None:
    try:
        lock = ospins.parse("\n".join([ospins.MAGIC, *lines]) + "\n", Path("os-base.txt"))
    except InputError as exc:
        assert exc.problems and all(p.file == Path("os-base.txt") for p in exc.problems)
        return
    again = ospins.parse(lock.text(), Path("again.txt"))  # what it writes it reads back
    assert (again.wants, again.snapshot, again.sources, set(again.packages)) == (
        lock.wants, lock.snapshot, lock.sources, set(lock.packages))
