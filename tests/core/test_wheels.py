"""builder.core.wheels: a wheelhouse's `*.whl` entries, each a regular file named as a wheel inside it, or refused
by name (the CLI-level cases, links out, devices and 0644 copies, are in tests/hostile/test_wheelhouse.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder.core import wheels


def test_wheels_are_listed_by_name_with_their_parsed_name_and_version(tmp_path: Path) -> None:
    (tmp_path / "Torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl").write_bytes(b"x")
    (tmp_path / "notes.txt").write_bytes(b"never looked at")
    (tmp_path / "twin-1.0-py3-none-any.whl").symlink_to("Torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl")
    found = wheels.wheels(tmp_path)
    assert [(w.name, str(w.version)) for w in found] == [("torch", "2.13.0+cpu"), ("twin", "1.0")]
    assert found[1].file == (tmp_path / "Torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl").resolve()


def test_every_bad_entry_is_named_at_once(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-secret"
    outside.write_bytes(b"secret")
    house = tmp_path / "house"
    house.mkdir()
    (house / "a.whl").write_bytes(b"x")
    os.mkfifo(house / "b-1.0-py3-none-any.whl")
    (house / "c-1.0-py3-none-any.whl").symlink_to(outside)
    with pytest.raises(wheels.WheelhouseError) as info:
        wheels.wheels(house)
    assert [p.split(":")[0] for p in info.value.problems] == [str(house / n) for n in (
        "a.whl", "b-1.0-py3-none-any.whl", "c-1.0-py3-none-any.whl")]
    assert "FIFO" in info.value.problems[1] and "out of" in info.value.problems[2]


def test_a_wheelhouse_that_cannot_be_listed_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(wheels.WheelhouseError, match="cannot list the wheelhouse"):
        wheels.wheels(tmp_path / "missing")


def test_open_wheel_refuses_an_entry_swapped_for_a_fifo(tmp_path: Path) -> None:
    path = tmp_path / "a-1.0-py3-none-any.whl"
    path.write_bytes(b"x")
    [wheel] = wheels.wheels(tmp_path)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(OSError):
        os.close(wheels.open_wheel(wheel))
