"""builder.core.safefs's guards, each held by a test that fails without it (issue 53, "Reading files").

A link out of the folder a file was found in is never followed; every new file is opened O_EXCL, O_NOFOLLOW and
O_NONBLOCK (O_EXCL alone already refuses whatever is planted at the name: a link, a FIFO, a hard link to a file
elsewhere; the other two are asserted as the flags the open gets); and the folder is fsynced after the rename, so
the rename itself survives a power cut.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from builder.core import safefs


def test_a_link_out_of_its_folder_is_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_text("private key")
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "lock.txt").symlink_to(outside)
    with pytest.raises(safefs.UnsafePath) as info:
        safefs.read_text(folder / "lock.txt", 100)
    assert info.value.errno == errno.EXDEV
    assert str(info.value) == f"[Errno {errno.EXDEV}] a symbolic link out of {folder}: not followed: " \
                              f"'{folder / 'lock.txt'}'"


def test_a_link_that_stays_inside_root_is_followed_and_one_just_outside_is_not(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "b.txt").write_text("inside")
    (root / "a" / "up.txt").symlink_to(root / "b.txt")  # out of its own folder, inside root
    assert safefs.read_text(root / "a" / "up.txt", 100, root=root) == "inside"
    with pytest.raises(safefs.UnsafePath, match="a symbolic link out of"):
        safefs.read_text(root / "a" / "up.txt", 100)  # root defaults to the link's own folder
    (tmp_path / "root-sibling.txt").write_text("outside")  # a name that starts like root's, beside it
    (root / "sib.txt").symlink_to(tmp_path / "root-sibling.txt")
    with pytest.raises(safefs.UnsafePath, match="a symbolic link out of"):
        safefs.read_text(root / "sib.txt", 100, root=root)


def test_a_dangling_or_looping_link_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "gone").symlink_to(tmp_path / "missing")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for name in ("gone", "loop"):
        with pytest.raises(safefs.UnsafePath, match="a symbolic link that leads nowhere") as info:
            safefs.read_text(tmp_path / name, 100)
        assert info.value.errno == errno.ELOOP


def _fixed_temporary(monkeypatch: pytest.MonkeyPatch, path: Path) -> Path:
    """The name replace_file writes beside path, made predictable (as an attacker racing the write would need)."""
    monkeypatch.setattr(safefs.secrets, "token_hex", lambda n: "f" * (2 * n))
    return path.with_name(f".{path.name}.{'f' * 12}.new")


def test_a_hard_link_planted_at_the_temporary_name_is_never_written_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"someone else's file")
    out = tmp_path / "out"
    out.mkdir()
    os.link(outside, _fixed_temporary(monkeypatch, out / "record.json"))
    with pytest.raises(FileExistsError):
        safefs.replace_file(out / "record.json", b"the factory's bytes")
    assert outside.read_bytes() == b"someone else's file"
    assert not (out / "record.json").exists()


def test_a_link_or_fifo_planted_at_the_temporary_name_is_neither_followed_nor_waited_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    temporary = _fixed_temporary(monkeypatch, tmp_path / "a.json")
    temporary.symlink_to(outside)
    with pytest.raises(FileExistsError):
        safefs.replace_file(tmp_path / "a.json", b"x")
    assert outside.read_bytes() == b"keep" and temporary.is_symlink()
    temporary.unlink()
    os.mkfifo(temporary)
    with pytest.raises(FileExistsError):
        safefs.replace_file(tmp_path / "a.json", b"x")  # returns at once: no reader is waited for
    assert stat.S_ISFIFO(os.lstat(temporary).st_mode)


def test_every_new_file_is_opened_exclusive_without_following_a_link_or_blocking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[tuple[str, int]] = []
    real_open = os.open

    def spy(path: str | os.PathLike[str], flags: int, mode: int = 0o777, **kwargs: object) -> int:
        opened.append((os.fspath(path), flags))
        return real_open(path, flags, mode)

    monkeypatch.setattr(safefs.os, "open", spy)
    safefs.replace_file(tmp_path / "a.json", b"x")
    (tmp_path / "w.whl").write_bytes(b"wheel")
    safefs.copy_file(tmp_path / "w.whl", tmp_path / "copy.whl")
    safefs.open_log(tmp_path / "run.log").close()
    new = [(Path(p).name, flags) for p, flags in opened if flags & os.O_CREAT]
    assert [name.rsplit(".", 2)[0] for name, _ in new] == [".a.json", ".copy.whl", ".run.log"]
    for name, flags in new:
        assert flags & os.O_EXCL, name
        assert flags & os.O_NOFOLLOW, name
        assert flags & os.O_NONBLOCK, name


def test_the_folder_is_fsynced_after_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    folder_inode = tmp_path.stat().st_ino
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        events.append("fsync folder" if stat.S_ISDIR(info.st_mode) and info.st_ino == folder_inode else "fsync file")
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(safefs.os, "fsync", fsync)
    monkeypatch.setattr(safefs.os, "replace", replace)
    safefs.replace_file(tmp_path / "record.json", b"whole")
    assert events == ["fsync file", "rename", "fsync folder"]
    events.clear()
    safefs.open_log(tmp_path / "run.log").close()  # renamed before its first line: the folder synced too
    assert events == ["rename", "fsync file", "fsync folder"]


def test_a_folder_that_refuses_fsync_still_gets_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")  # some file systems refuse a folder's fsync
        real_fsync(fd)

    monkeypatch.setattr(safefs.os, "fsync", fsync)
    assert safefs.replace_file(tmp_path / "r.json", b"x").read_bytes() == b"x"


def test_a_named_output_gets_every_missing_folder_and_a_file_where_a_folder_should_be_is_one_error(
        tmp_path: Path) -> None:
    path = safefs.write_named(tmp_path / "a" / "b" / "record.json", b"{}", "the run record")
    assert path.read_bytes() == b"{}" and path.stat().st_mode & 0o777 == 0o644
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(safefs.OutputError) as info:
        safefs.write_named(tmp_path / "file" / "record.json", b"{}", "the run record")
    where = tmp_path / "file"
    assert str(info.value) == f"{where / 'record.json'}: cannot write the run record: Not a directory"


def test_the_whole_body_is_written_before_the_file_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A body smaller than the write buffer is still in Python's buffer until flushed: an fsync before the flush
    syncs an empty file, and a power cut after the rename leaves a record of 0 bytes."""
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            synced.append(info.st_size)
        real_fsync(fd)

    monkeypatch.setattr(safefs.os, "fsync", fsync)
    safefs.replace_file(tmp_path / "record.json", b"x" * 100)
    safefs.write_inside(tmp_path, "lock.txt", b"y" * 10)
    (tmp_path / "src.whl").write_bytes(b"z" * 1000)
    safefs.copy_file(tmp_path / "src.whl", tmp_path / "copy.whl")
    assert synced == [100, 10, 1000]


def test_a_copy_keeps_its_source_s_times(tmp_path: Path) -> None:
    """The times are set after the body is flushed: a body still buffered would be written on close, moving the
    modification time a build-context sync compares."""
    source = tmp_path / "torch.whl"
    source.write_bytes(b"w" * 100)  # under any write buffer: held until flushed
    os.utime(source, ns=(1_600_000_000_000_000_000, 1_600_000_000_123_456_789))
    (tmp_path / "copy").mkdir()
    copy = safefs.copy_file(source, tmp_path / "copy" / "torch.whl")
    assert copy.read_bytes() == b"w" * 100
    assert copy.stat().st_mtime_ns == 1_600_000_000_123_456_789


@pytest.mark.parametrize("follow", [False, True])
def test_a_missing_file_is_the_os_s_own_not_found_error(tmp_path: Path, follow: bool) -> None:
    """Saying what a path is (a socket, a FIFO) looks again at a path that cannot be opened; a path that is not
    there at all is FileNotFoundError, which every reader's caller handles as an OSError."""
    with pytest.raises(FileNotFoundError):
        safefs.read_regular(tmp_path / "missing.json", 100, follow=follow)
    (tmp_path / "dangling").symlink_to(tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError if follow else safefs.UnsafePath):
        safefs.read_regular(tmp_path / "dangling", 100, follow=follow)


def test_a_file_written_inside_a_folder_that_is_not_there_yet_makes_every_folder(tmp_path: Path) -> None:
    root = tmp_path / "site" / "v1" / "out"  # none of these exists yet
    path = safefs.write_inside(root, "images/a/index.html", b"page")
    assert path == root / "images" / "a" / "index.html" and path.read_bytes() == b"page"


def test_a_file_behind_a_link_out_of_the_folder_is_never_removed(tmp_path: Path) -> None:
    """remove_inside deletes only what lies inside its folder: a name through a planted link to another folder is
    refused (EXDEV, 'leads out of'), and the file there stays."""
    root, elsewhere = tmp_path / "site", tmp_path / "home"
    root.mkdir()
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_bytes(b"not ours")
    (root / "images").symlink_to(elsewhere)
    assert safefs.remove_inside(root, "images/notes.txt") is False
    assert (elsewhere / "notes.txt").read_bytes() == b"not ours"
    with pytest.raises(safefs.UnsafePath) as info:  # writing refuses the link itself, before this check
        safefs.write_inside(root, "images/notes.txt", b"ours")
    assert info.value.errno == errno.EXDEV and (elsewhere / "notes.txt").read_bytes() == b"not ours"


@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_a_new_file_is_0644_by_default_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        written = [safefs.replace_file(tmp_path / "a.json", b"a"), safefs.write_inside(tmp_path, "b/c.txt", b"c"),
                   safefs.write_named(tmp_path / "d" / "e.json", b"e", "the record")]
    finally:
        os.umask(old)
    assert [stat.S_IMODE(p.stat().st_mode) for p in written] == [0o644, 0o644, 0o644]
