"""Files read from trees and folders someone else may have prepared, and files written into --out.

Reading: only a regular file (a FIFO would block, /dev/zero never ends), never through a final symbolic
link (a Dockerfile linked to /proc/self/environ would publish the environment), at most a size cap, as the
matrix reader (builder.matrix.yamlsrc) does. Writing: every file is a new one, made beside its target
(O_EXCL, never through a link, never blocking), synced and renamed over it, so whatever stood there (a hard
link to a file elsewhere, a FIFO, a socket, a device, a symbolic link) is replaced as a name, never opened,
and the mode is the factory's own. Into --out, only paths relative to the folder: a folder that is a link (or
a marker naming `/etc/x` or `../x`) makes the write fail, and nothing outside the folder is touched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO, TextIO

FILE_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
              stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafePath(OSError):
    """Not a file this program reads or writes: its message says why (a link, a FIFO, too large, outside)."""


class OutputError(Exception):
    """A file an option names could not be written (a full disk, a read-only file system, a file where a folder
    should be): one line naming the option, the file and why."""


def read_regular(path: Path, limit: int, *, follow: bool = False, cut: bool = False) -> bytes:
    """The bytes of a regular file: not through a final link unless follow, at most limit (cut: the first
    limit, else an UnsafePath past it)."""
    try:
        fd = os.open(path, _READ | (0 if follow else os.O_NOFOLLOW))
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise UnsafePath(errno.ELOOP, "a symbolic link: not followed", str(path)) from None
        _refuse_kind(path, follow)  # a socket cannot be opened (ENXIO): say what it is
        raise
    info = os.fstat(fd)  # before fdopen, which refuses a directory with its own words
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = FILE_KINDS.get(stat.S_IFMT(info.st_mode), "something else")
        raise UnsafePath(errno.EINVAL, f"{kind}, not a regular file", str(path))
    with os.fdopen(fd, "rb") as f:
        if info.st_size > limit and not cut:  # before any read: a sparse 8 GiB file costs nothing
            raise UnsafePath(errno.EFBIG, f"{info.st_size:,} bytes, over the limit of {limit:,} bytes", str(path))
        data = f.read(limit + 1)  # /proc and sysfs files say 0 or 4096 whatever they hold
    if len(data) > limit and not cut:
        raise UnsafePath(errno.EFBIG, f"more than {limit:,} bytes, over the limit of {limit:,} bytes", str(path))
    return data[:limit]


def read_text(path: Path, limit: int, root: Path | None = None) -> str:
    """A regular file's strict UTF-8 text, at most limit bytes; a link is followed only while it stays inside
    root (default: the folder it was found in). Every refusal is an UnsafePath naming the file."""
    try:
        data = read_regular(resolve_inside(path, root), limit)
    except (UnsafePath, FileNotFoundError):
        raise
    except OSError as exc:
        raise UnsafePath(exc.errno or errno.EIO, f"cannot read: {exc.strerror or exc}", str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnsafePath(errno.EILSEQ, f"not UTF-8 text (byte {exc.start})", str(path)) from None


def resolve_inside(path: Path, root: Path | None = None) -> Path:
    """path, or where its links lead when that is still inside root (default: path's own folder); a link out
    of it is an UnsafePath (a wheelhouse entry linked to ~/.ssh/id_rsa is never read)."""
    if not path.is_symlink():
        return path
    folder = (root if root is not None else path.parent).resolve()
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise UnsafePath(errno.ELOOP, "a symbolic link that leads nowhere (or loops)", str(path)) from None
    if not target.is_relative_to(folder):
        raise UnsafePath(errno.EXDEV, f"a symbolic link out of {folder}: not followed", str(path))
    return target


def _refuse_kind(path: Path, follow: bool) -> None:
    try:
        mode = (os.stat(path) if follow else os.lstat(path)).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
        kind = FILE_KINDS.get(stat.S_IFMT(mode), "something else")
        raise UnsafePath(errno.EINVAL, f"{kind}, not a regular file", str(path))


def relative_parts(name: object) -> tuple[str, ...] | None:
    """The parts of a relative path that stays inside its folder (no `/x`, `..`, `.` or empty part), or None."""
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name:
        return None
    path = PurePosixPath(name)
    if path.is_absolute() or any(p in ("", ".", "..") for p in name.split("/")):
        return None
    return path.parts


def inside(root: Path, path: Path) -> bool:
    """path's folder, links resolved, is root or under it."""
    return path.parent.resolve().is_relative_to(root.resolve())


def _target(root: Path, name: str) -> Path:
    parts = relative_parts(name)
    if parts is None:
        raise UnsafePath(errno.EINVAL, "not a relative path inside the output folder", name)
    path = root.joinpath(*parts)
    if not inside(root, path):
        raise UnsafePath(errno.EXDEV, f"leads out of {root} (a symbolic link?): not touched", str(path))
    return path


def write_inside(root: Path, name: str, data: bytes, mode: int = 0o644) -> Path:
    """Write root/name (folders made as needed) by replace_file: the folder checked to be inside root."""
    parts = relative_parts(name)
    if parts is None:
        raise UnsafePath(errno.EINVAL, "not a relative path inside the output folder", name)
    root.mkdir(parents=True, exist_ok=True)
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            raise UnsafePath(errno.EXDEV, "a symbolic link where a folder should be: not written through",
                             str(folder))
        folder.mkdir(exist_ok=True)
    return replace_file(_target(root, name), data, mode)


def replace_file(path: Path, data: bytes, mode: int = 0o644) -> Path:
    """path holds data and mode, whole or not at all: written beside it, synced, renamed over it."""
    with _fresh(path, mode, keep_name=False) as f:
        f.write(data)
    return path


def write_named(path: Path, data: bytes, what: str, mode: int = 0o644) -> Path:
    """The file an option names (--record, --report, --data-errors; what: its role, for the error), written by
    replace_file (a link planted there is replaced, never followed), its folders made; any failure is one
    OutputError."""
    try:
        check_named(path, what)
        path.parent.mkdir(parents=True, exist_ok=True)
        return replace_file(path, data, mode)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write {what}: {exc.strerror or exc}") from None


def check_named(path: Path, what: str) -> None:
    """Before any work: path can become a file (not a folder, a device or a socket: those are never replaced, so
    `--record /dev/null` cannot turn /dev/null into a file; its nearest existing folder is one, writable, on a
    writable file system), else an OutputError; a full disk is only found when written. A link or a FIFO
    planted there is replaced (replace_file), never followed."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(f"{path}: cannot write {what}: {exc.strerror or exc}") from None
    kind = stat.S_IFMT(info.st_mode) if info is not None else None
    if kind in (stat.S_IFDIR, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFSOCK):
        raise OutputError(f"{path}: cannot write {what}: {FILE_KINDS[kind or 0]} is there (never replaced)")
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    why = ("not a directory" if not folder.is_dir() else
           "on a read-only file system" if os.statvfs(folder).f_flag & os.ST_RDONLY else
           "not writable" if not os.access(folder, os.W_OK | os.X_OK) else "")
    if why:
        raise OutputError(f"{path}: cannot write {what}: {folder} is {why}")


def copy_file(source: Path, path: Path, mode: int = 0o644) -> Path:
    """path holds a copy of source (a wheel where a hard link cannot be made), by replace_file's rules, with
    source's times (as shutil.copy2: an incremental build-context sync sees the same file). source is opened
    as read_regular opens: never through a final link, never a FIFO or device."""
    fd = os.open(source, _READ | os.O_NOFOLLOW)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(errno.EINVAL, "not a regular file", str(source))
    with os.fdopen(fd, "rb") as src, _fresh(path, mode, keep_name=False) as f:
        shutil.copyfileobj(src, f, 1 << 20)
        f.flush()  # before the times: a later write would move them
        info = os.fstat(src.fileno())
        os.utime(f.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))
    return path


def open_log(path: Path, append: bool = False) -> TextIO:
    """A log streamed as it grows: appended to when path is already a regular file of ours alone (not a link,
    no second hard link), else a new empty file renamed over whatever stood there before the first line."""
    if append:
        with contextlib.suppress(OSError):
            if _own_regular(os.lstat(path)):
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                if _own_regular(os.fstat(fd)):
                    return os.fdopen(fd, "a", encoding="utf-8")
                os.close(fd)
    with _fresh(path, 0o644, keep_name=True) as f:
        fd = os.dup(f.fileno())
    return os.fdopen(fd, "a", encoding="utf-8")


def _own_regular(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


@contextlib.contextmanager
def _fresh(path: Path, mode: int, keep_name: bool) -> Iterator[BinaryIO]:
    """A new file beside path (O_EXCL: never an existing one, never through a link, never blocking) renamed over
    path once the body is written and synced (keep_name: at once, before the body); on any error it is gone."""
    tmp = path.with_name(f".{path.name[:200]}.{secrets.token_hex(6)}.new")
    fd = os.open(tmp, _NEW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)  # the factory's mode, whatever the umask says
            if keep_name:
                os.replace(tmp, path)
            yield f
            f.flush()
            os.fsync(f.fileno())
        if not keep_name:
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """The rename itself survives a power cut (some file systems refuse a folder's fsync: then it is skipped)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_inside(root: Path, name: str) -> bool:
    """Remove root/name when it is a file or a link (the link, not what it names); False when it is not."""
    try:
        path = _target(root, name)
        info = path.lstat()
    except OSError:
        return False
    if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
        path.unlink()
        return True
    return False
