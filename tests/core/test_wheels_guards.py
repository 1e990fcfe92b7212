"""builder.core.wheels's guards, each held by a test that fails without it (issue 53, "Reading files"): a wheel is
never opened through a link, and its size cap is the documented 8 GiB (the largest torch wheels are near 5 GB)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from builder.core import safefs, wheels

NAME = "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
CAP = 8_589_934_592  # 8 GiB, the cap builder/core/wheels.py documents, written out (not read from the module)


def sparse(path: Path, size: int) -> Path:
    """A file of `size` bytes that takes no disk (the cap is checked on the size, before a byte is read)."""
    with path.open("wb") as f:
        f.truncate(size)
    return path


def test_a_wheel_of_exactly_the_cap_is_a_wheel_and_one_byte_more_is_refused_by_name(tmp_path: Path) -> None:
    sparse(tmp_path / NAME, CAP)
    [wheel] = wheels.wheels(tmp_path)
    assert wheel.file == tmp_path / NAME
    sparse(tmp_path / NAME, CAP + 1)
    with pytest.raises(wheels.WheelhouseError) as info:
        wheels.wheels(tmp_path)
    assert info.value.problems == [f"{tmp_path / NAME}: not a wheel: 8,589,934,593 bytes, over 8,589,934,592"]


def test_ten_times_the_cap_is_refused(tmp_path: Path) -> None:
    sparse(tmp_path / NAME, 10 * CAP)
    with pytest.raises(safefs.UnsafePath, match="85,899,345,920 bytes, over 8,589,934,592") as info:
        wheels.check(tmp_path / NAME, tmp_path)
    assert info.value.errno == errno.EFBIG


def test_a_wheel_swapped_for_a_link_after_its_check_is_not_opened(tmp_path: Path) -> None:
    """Checked, then replaced by a link to a private file: open_wheel refuses it (ELOOP) and reads nothing."""
    secret = tmp_path / "id_rsa"
    secret.write_bytes(b"PRIVATE KEY")
    house = tmp_path / "house"
    house.mkdir()
    (house / NAME).write_bytes(b"wheel")
    [wheel] = wheels.wheels(house)
    (house / NAME).unlink()
    (house / NAME).symlink_to(secret)
    with pytest.raises(OSError) as info:
        os.close(wheels.open_wheel(wheel))
    assert info.value.errno == errno.ELOOP


def test_an_unswapped_wheel_opens_as_the_file_it_was(tmp_path: Path) -> None:
    (tmp_path / NAME).write_bytes(b"wheel bytes")
    [wheel] = wheels.wheels(tmp_path)
    fd = wheels.open_wheel(wheel)
    with os.fdopen(fd, "rb") as f:
        assert f.read() == b"wheel bytes"


def test_a_link_inside_the_wheelhouse_opens_the_file_it_names_and_one_out_is_refused(tmp_path: Path) -> None:
    house = tmp_path / "house"
    (house / "store").mkdir(parents=True)
    (house / "store" / "t.bin").write_bytes(b"inside")
    (house / NAME).symlink_to(house / "store" / "t.bin")
    [wheel] = wheels.wheels(house)
    assert wheel.file == house / "store" / "t.bin"
    with os.fdopen(wheels.open_wheel(wheel), "rb") as f:
        assert f.read() == b"inside"
    (tmp_path / "out.bin").write_bytes(b"outside")
    (house / NAME).unlink()
    (house / NAME).symlink_to(tmp_path / "out.bin")
    with pytest.raises(wheels.WheelhouseError) as info:
        wheels.wheels(house)
    assert info.value.problems == [f"{house / NAME}: not a wheel: a symbolic link out of {house}: not followed"]


@pytest.mark.parametrize("swap", ["folder", "fifo"])
def test_a_wheel_swapped_after_its_check_is_refused_when_opened(tmp_path: Path, swap: str) -> None:
    """Between the wheelhouse's check and the open, the file can be replaced: the open checks again (O_NONBLOCK,
    so a FIFO answers at once) and refuses what is no longer a regular file, closing it."""
    sparse(tmp_path / NAME, 10)
    [wheel] = wheels.wheels(tmp_path)
    os.unlink(tmp_path / NAME)
    if swap == "folder":
        (tmp_path / NAME).mkdir()
    else:
        os.mkfifo(tmp_path / NAME)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(safefs.UnsafePath, match="no longer a regular file") as info:
        wheels.open_wheel(wheel)
    assert info.value.errno == errno.EINVAL and str(wheel.path) in str(info.value)
    assert len(os.listdir("/proc/self/fd")) == before, "the descriptor is closed"


def test_a_wheelhouse_error_reads_one_line_per_bad_entry(tmp_path: Path) -> None:
    """What a command prints is the error's text: one line per entry, each naming it and why."""
    (tmp_path / "a.whl").write_bytes(b"x")
    (tmp_path / "b.whl").mkdir()
    with pytest.raises(wheels.WheelhouseError) as info:
        wheels.wheels(tmp_path)
    assert str(info.value) == (f"{tmp_path / 'a.whl'}: not a wheel: Invalid wheel filename (wrong number of parts): "
                               f"'a'\n{tmp_path / 'b.whl'}: not a wheel: Invalid wheel filename (wrong number of "
                               "parts): 'b'")
    assert str(info.value).splitlines() == info.value.problems
    problems = (tmp_path / "missing", f"{tmp_path / 'missing'}: cannot list the wheelhouse: No such file or directory")
    with pytest.raises(wheels.WheelhouseError) as info:
        wheels.wheels(problems[0])
    assert str(info.value) == problems[1]
