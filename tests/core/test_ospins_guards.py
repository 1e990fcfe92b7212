"""The OS lock's documented limits on both sides, written as literals (builder/core/ospins.py: a lock file of at
most 2 MiB, at most 5000 pins, lines of at most 4096 characters; builder/core/aptwords.py: a suite or component
of at most 64 characters): at the limit the lock reads, one over it is an InputError naming the file, the line
and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core import ospins
from builder.core.errors import InputError
from tests.core.test_ospins import LOCK

HEAD = LOCK.text()  # the magic line, os, for, snapshot, trusted, a source and two pins


def problem(text: str) -> str:
    with pytest.raises(InputError) as caught:
        ospins.parse(text, Path("os-base.txt"))
    return str(caught.value)


def test_a_lock_file_of_exactly_2_mib_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    pad = 2_097_152 - len(HEAD.encode())
    body = HEAD + "".join("#" + "x" * 1022 + "\n" for _ in range(pad // 1024)) + "#" * (pad % 1024 - 1) + "\n"
    assert len(body.encode()) == 2_097_152
    (tmp_path / "os-base.txt").write_text(body)
    assert set(ospins.read(tmp_path / "os-base.txt").packages) == set(LOCK.packages)
    (tmp_path / "os-base.txt").write_text(body + "\n")
    with pytest.raises(InputError) as caught:
        ospins.read(tmp_path / "os-base.txt")
    assert str(caught.value) == (f"{tmp_path / 'os-base.txt'}: file: cannot read: 2,097,153 bytes, over the limit of "
                                 "2,097,152 bytes")


def pins(count: int) -> str:
    return "".join(f"pin: p{k:05d}:all=1 -\n" for k in range(count))


def test_5000_pins_are_read_and_the_5001st_is_refused_by_its_line() -> None:
    head = HEAD.split("pin: ")[0]  # the lock without its pins
    assert len(ospins.parse(head + pins(5000), Path("os-base.txt")).packages) == 5000
    first_pin = head.count("\n") + 1
    assert problem(head + pins(5001)) == f"os-base.txt:{first_pin + 5000}: pin: more than 5000 pins"


def test_a_line_of_4096_characters_is_read_and_one_of_4097_is_refused_by_its_line() -> None:
    line = HEAD.count("\n") + 1
    assert ospins.parse(HEAD + "#" * 4096 + "\n", Path("os-base.txt")).snapshot == LOCK.snapshot
    assert problem(HEAD + "#" * 4097 + "\n").startswith(
        f"os-base.txt:{line}: line: 4,097 characters, over the 4096 a lock line may have")


def test_a_component_of_64_characters_is_read_and_one_of_65_is_refused() -> None:
    url = "https://snapshot.debian.org/archive/debian/20261101T000000Z/"
    head = HEAD.split("source: ")[0]
    tail = "pin: python3:amd64=3.11.2-1+b1 " + "a" * 64 + "\n"
    lock = ospins.parse(f"{head}source: {url} bookworm main {'c' * 64}\n{tail}", Path("os-base.txt"))
    assert lock.sources[0].components == ("main", "c" * 64)
    line = head.count("\n") + 1
    assert problem(f"{head}source: {url} bookworm main {'c' * 65}\n{tail}").startswith(
        f"os-base.txt:{line}: source: a suite or component over 64 characters")
    assert problem(f"{head}source: {url} {'s' * 65} main\n{tail}").startswith(
        f"os-base.txt:{line}: source: a suite or component over 64 characters")


def test_a_line_with_no_key_is_refused_by_its_line() -> None:
    line = HEAD.count("\n") + 1
    assert problem(HEAD + "pin python3\n") == f"os-base.txt:{line}: line: expected `KEY: VALUE`, not 'pin python3'"
