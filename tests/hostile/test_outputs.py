"""Files an option names (--record, --report, --data-errors): written by atomic replace, never through a planted
link; a folder that is a file, a directory in the way, a read-only file system or a full disk is one clear error
naming the file (exit 2), and the rest of the run's output is kept.

Full disks and read-only file systems are made by making the os-level call fail as the kernel would (no mounts).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core import safefs
from builder.publish import record
from testkit.scripted_registry import Reply, Scripted, Seen
from testkit.stored_registry import Store
from tests.cli.test_planning import EXAMPLE

Start = Callable[[Callable[[Seen], Reply]], Scripted]


def fail_with(code: int) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise OSError(code, os.strerror(code))
    return call


def test_a_record_under_a_regular_file_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(safefs.OutputError, match=r"(?i)record.json: cannot write the run record: .*not a directory"):
        record.write(tmp_path / "file" / "record.json", [])


def test_a_directory_where_the_record_goes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "record.json").mkdir()
    with pytest.raises(safefs.OutputError, match="a directory is there"):
        record.write(tmp_path / "record.json", [])


@pytest.mark.parametrize(("kind", "said"), [(stat.S_IFCHR, "a character device"), (stat.S_IFBLK, "a block device")])
def test_a_device_named_as_the_record_is_never_replaced(tmp_path: Path, kind: int, said: str) -> None:
    """As root, replacing /dev/null by a file would break every program on the machine (a node made here stands
    in for it: the test never touches /dev)."""
    node = tmp_path / "null"
    try:
        os.mknod(node, kind | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    before = os.lstat(node)
    with pytest.raises(safefs.OutputError, match=f"{said} is there"):
        record.write(node, [])
    after = os.lstat(node)
    assert (after.st_mode, after.st_rdev, after.st_ino) == (before.st_mode, before.st_rdev, before.st_ino)


def test_a_socket_named_as_the_record_is_never_replaced(tmp_path: Path) -> None:
    from tests.hostile.test_locks import bind_socket

    bind_socket(tmp_path / "sock")
    with pytest.raises(safefs.OutputError, match="a socket is there"):
        record.write(tmp_path / "sock", [])


def test_a_planted_link_is_replaced_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "record.json").symlink_to(victim)
    record.write(tmp_path / "record.json", [])
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "record.json").is_symlink() and json.loads((tmp_path / "record.json").read_text())


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_a_full_disk_is_one_error_and_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            code: int) -> None:
    (tmp_path / "record.json").write_text("the old record")
    monkeypatch.setattr(os, "fsync", fail_with(code))
    with pytest.raises(safefs.OutputError, match=os.strerror(code)):
        record.write(tmp_path / "record.json", [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]  # no half-written temporary file
    assert (tmp_path / "record.json").read_text() == "the old record"


def test_a_read_only_file_system_is_named_before_any_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.statvfs

    def read_only(path: Any) -> Any:
        found = real(path)
        return os.statvfs_result((*found[:8], found.f_flag | os.ST_RDONLY, found.f_namemax))
    monkeypatch.setattr(os, "statvfs", read_only)
    with pytest.raises(safefs.OutputError, match="read-only file system"):
        safefs.check_named(tmp_path / "new" / "record.json", "the run record")


@pytest.mark.parametrize("code", [errno.EROFS, errno.EEXIST, errno.ENOTDIR, errno.EACCES, errno.ENAMETOOLONG])
def test_whatever_the_create_says_is_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    real = os.open

    def refuse_new(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT:
            raise OSError(code, os.strerror(code), str(path))
        return real(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", refuse_new)
    with pytest.raises(safefs.OutputError, match=os.strerror(code)):
        record.write(tmp_path / "record.json", [])


def test_a_real_read_only_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("this user writes into any folder (root): the file-system cases above cover it")
        with pytest.raises(safefs.OutputError, match="not writable"):
            safefs.check_named(folder / "record.json", "the run record")
    finally:
        folder.chmod(0o755)


# -- through the command line: exit 2, the plan (the rest of the output) kept ----------------------------------

@pytest.fixture
def planned(server: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str]]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/rif-plan/docker.sock")
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    scripted = server(Store().answer)

    def run(*extra: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["plan", "-m", str(EXAMPLE), "--registry",
                                          f"{scripted.address}/rocm", *extra], env={"COLUMNS": "300"})
        return result.exit_code, " ".join(result.output.split())
    return run


def test_plan_refuses_a_record_under_a_file_before_asking_the_registry(planned: Callable[..., tuple[int, str]],
                                                                       tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    code, output = planned("--record", str(tmp_path / "file" / "r.json"))
    assert code == 2 and "cannot write the run record" in output and "unexpected" not in output
    assert "plan:" not in output


def test_plan_on_a_full_disk_prints_the_plan_then_the_error(planned: Callable[..., tuple[int, str]], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", fail_with(errno.ENOSPC))
    code, output = planned("--record", str(tmp_path / "r.json"))
    assert code == 2, output
    assert "plan: 2 to build" in output and "No space left on device" in output and "unexpected" not in output


def test_build_refuses_a_report_under_a_file_before_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/rif/docker.sock")
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(app, ["build", "-m", str(EXAMPLE), "--report", str(tmp_path / "file" / "r.json")],
                                env={"COLUMNS": "300"})
    output = " ".join(result.output.split())
    assert result.exit_code == 2 and "cannot write the run record" in output and "engine" not in output.lower()


def test_lock_refuses_data_errors_under_a_file_before_resolving(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(app, ["lock", "-m", str(EXAMPLE), "--out", str(tmp_path / "tree"), "--data-errors",
                                      str(tmp_path / "file" / "errors.md")], env={"COLUMNS": "300"})
    output = " ".join(result.output.split())
    assert result.exit_code == 2 and "cannot write the data errors" in output
    assert not (tmp_path / "tree").exists()


def test_render_check_reads_the_tree_as_hostile_input(tmp_path: Path) -> None:
    """A FIFO, a link or a directory where a rendered file goes is drift, named; never a hang."""
    import signal

    from builder.render import imagetree
    from builder.render.dockerfile import render_all
    from testkit.matrices import ONE_CPU, load_cells

    rendered = render_all(load_cells(tmp_path, ONE_CPU))
    out = tmp_path / "tree"
    imagetree.write(out, rendered, prune=False)
    dockerfile = next(out.glob("*/Dockerfile"))
    dockerfile.unlink()
    os.mkfifo(dockerfile)
    def hung(signum: int, frame: object) -> None:
        raise TimeoutError("the check waited on a FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)  # a hang guard only
    try:
        problems = imagetree.drift(out, rendered)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert [p for p in problems if str(dockerfile) in p] == [f"{dockerfile}: a FIFO (named pipe), not a regular file"]


@pytest.mark.parametrize("dest", ["file/wheels", "x" * 5000, "file"])
def test_a_folder_an_option_names_that_cannot_be_made_is_one_error(tmp_path: Path, dest: str) -> None:
    """Any path a command is given (here wheelhouse --dest) that the file system refuses: exit 2, named."""
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(app, ["wheelhouse", "-m", str(EXAMPLE), "--dest", str(tmp_path / dest)],
                                env={"COLUMNS": "300"})
    output = " ".join(result.output.split())
    assert result.exit_code == 2, output
    assert "unexpected" not in output and str(tmp_path) in output
