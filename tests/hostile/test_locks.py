"""Lock files as hostile input: a pin and its hash per entry, nothing pip would take for an option, read only as
a regular file inside its folder. A lock that breaks this renders nothing and names its file and line.

Every CLI run is a subprocess with a timeout (a FIFO would hang it) and a bounded address space (/dev/zero read
whole would blow it).
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from builder.core.errors import InputError
from builder.render import lockfile
from builder.render.dockerfile import render_all
from builder.render.sources import WheelSource
from testkit.matrices import ONE_CPU, load_cells
from tests.fakes.checkout import builder_cli
from tests.render.test_lockfile import write_locks

HEX = "ab" * 32
AS_LIMIT = 1 << 31  # 2 GiB of address space: reading /dev/zero whole would die here


def render_cli(tmp_path: Path, tree: Path) -> subprocess.CompletedProcess[str]:
    return builder_cli("render", "--matrix", str(tmp_path / "matrix.yaml"), "--out", str(tree), "--locked",
                       timeout=60, limits={"RLIMIT_AS": AS_LIMIT})


@pytest.fixture
def locked(tmp_path: Path) -> Path:
    """A tree with good locks for the one-cell CPU matrix; tests spoil one of them."""
    tree = tmp_path / "tree"
    write_locks(tree, load_cells(tmp_path, ONE_CPU))
    return tree


def a_pip_lock(tree: Path) -> Path:
    return next(p for p in sorted(tree.glob("*/lock/*.txt")) if p.name != lockfile.BASE_FILE)


def spoil(path: Path, line: str, after: int = 2) -> None:
    lines = path.read_text().split("\n")
    lines.insert(after, line)
    path.write_text("\n".join(lines))


def test_good_locks_render(tmp_path: Path, locked: Path) -> None:
    cells = load_cells(tmp_path, ONE_CPU)
    assert render_all(cells, WheelSource(locks=locked))
    for path in locked.glob("*/lock/*.txt"):
        assert lockfile.grammar_problems(path, path.read_text()) == []


BAD_LINES = [
    "--extra-index-url https://evil.example/simple",
    "--index-url=https://evil.example/simple",
    "--trusted-host evil.example",
    "-r /etc/passwd",
    "--requirement other.txt",
    "-c constraints.txt",
    "-e git+https://evil.example/x.git#egg=x",
    "--find-links /tmp",
    "evil @ https://evil.example/evil-1.0-py3-none-any.whl",
    "https://evil.example/evil-1.0-py3-none-any.whl",
    "evil==1.0 ; python_version > '3'",
    "evil[extra]==1.0 \\",
    "evil>=1.0 \\",
    "# a comment \\",
    "# a comment\x0c--extra-index-url https://evil.example/simple",  # pip splits lines at a form feed
    "\r--trusted-host evil.example",
    "evil==1.0 --hash=sha256:" + HEX,  # one line: not the shape `builder lock` writes
    "   --pre",
]


@pytest.mark.parametrize("line", BAD_LINES)
def test_a_line_that_is_no_pin_renders_nothing_and_is_named(tmp_path: Path, locked: Path, line: str) -> None:
    lock = a_pip_lock(locked)
    spoil(lock, line)
    with pytest.raises(InputError) as info:
        render_all(load_cells(tmp_path, ONE_CPU), WheelSource(locks=locked))
    assert [(p.file, p.line) for p in info.value.problems] == [(lock, 3)]


BAD_HASHES = ["    --hash=sha256:" + HEX[:-1], "    --hash=sha256:" + HEX + "0", "    --hash=sha256:" + HEX.upper(),
              "    --hash=sha256:" + "g" * 64, "    --hash=md5:" + HEX[:32], "    --hash=sha256:" + HEX + " \\",
              "    --hash=sha256:\uff10" + HEX[1:], "", "--hash=sha256:" + HEX]


@pytest.mark.parametrize("hash_line", BAD_HASHES)
def test_a_malformed_hash_renders_nothing_and_is_named(tmp_path: Path, locked: Path, hash_line: str) -> None:
    lock = a_pip_lock(locked)
    lines = lock.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("    --hash="))
    lines[at] = hash_line
    lock.write_text("\n".join(lines))
    with pytest.raises(InputError) as info:
        render_all(load_cells(tmp_path, ONE_CPU), WheelSource(locks=locked))
    assert [p.file for p in info.value.problems] == [lock]
    assert info.value.problems[0].line in (at, at + 1)


@pytest.mark.parametrize("text", [
    "debian:12\n",  # no digest
    "debian:12@sha256:" + HEX[:10] + "\n",
    "debian:12@sha256:" + HEX + "\n" + "debian:13@sha256:" + HEX + "\n",  # two references
    "--platform=linux/amd64 debian:12@sha256:" + HEX + "\n",
])
def test_a_base_lock_holds_exactly_one_reference_by_digest(tmp_path: Path, locked: Path, text: str) -> None:
    base = next(locked.glob(f"*/lock/{lockfile.BASE_FILE}"))
    head = base.read_text().split("\n")[:2]
    base.write_text("\n".join(head) + "\n" + text)
    with pytest.raises(InputError) as info:
        render_all(load_cells(tmp_path, ONE_CPU), WheelSource(locks=locked))
    assert {p.file for p in info.value.problems} == {base}


def test_a_header_that_is_no_header_is_line_one(tmp_path: Path, locked: Path) -> None:
    lock = a_pip_lock(locked)
    lock.write_text("--extra-index-url https://evil.example\n" + lock.read_text())
    with pytest.raises(InputError) as info:
        render_all(load_cells(tmp_path, ONE_CPU), WheelSource(locks=locked))
    assert [(p.file, p.line) for p in info.value.problems] == [(lock, 1)]


@pytest.mark.parametrize("header", ["# rif-lock " + "[" * 100_000 + "]" * 100_000, "# rif-lock [1]", "# rif-lock",
                                    "# rif-lock {}\x0c--extra-index-url https://evil.example", "\ufeff# rif-lock {}"])
def test_a_header_that_is_no_header_is_named_too(tmp_path: Path, locked: Path, header: str) -> None:
    lock = a_pip_lock(locked)
    lock.write_text(header + "\n" + lock.read_text().split("\n", 1)[1])
    with pytest.raises(InputError) as info:
        render_all(load_cells(tmp_path, ONE_CPU), WheelSource(locks=locked))
    assert [(p.file, p.line) for p in info.value.problems] == [(lock, 1)]


def test_the_cli_names_file_and_line_and_writes_no_dockerfile(tmp_path: Path, locked: Path) -> None:
    lock = a_pip_lock(locked)
    spoil(lock, "--extra-index-url https://evil.example/simple")
    proc = render_cli(tmp_path, locked)
    assert proc.returncode == 2, proc.stderr
    assert f"{lock}:3" in proc.stderr.replace("\n", "")
    assert "unexpected" not in proc.stderr
    assert not list(locked.glob("*/Dockerfile"))


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _socket(path: Path) -> None:
    path.unlink()
    bind_socket(path)


def bind_socket(path: Path) -> None:
    """A unix socket at path (bound from its folder: a socket's path is limited to ~108 bytes)."""
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        socket.socket(socket.AF_UNIX).bind(path.name)
    finally:
        os.chdir(here)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _outside(path: Path) -> None:
    secret = path.parent.parent.parent.parent / "secret.txt"
    secret.write_text(path.read_text())
    path.unlink()
    path.symlink_to(secret)


def _not_utf8(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"# \xff\xfe\n")


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _too_big(path: Path) -> None:
    with path.open("ab") as f:
        f.truncate(lockfile.MAX_LOCK_BYTES + 1)


@pytest.mark.parametrize("make", [_fifo, _socket, _dev_zero, _outside, _not_utf8, _directory, _too_big])
def test_a_lock_that_is_no_regular_file_inside_its_folder_is_one_clear_error(tmp_path: Path, locked: Path,
                                                                             make: object) -> None:
    lock = a_pip_lock(locked)
    make(lock)  # type: ignore[operator]
    proc = render_cli(tmp_path, locked)
    assert proc.returncode == 2, proc.stderr
    assert str(lock) in proc.stderr.replace("\n", "") and "unexpected" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_link_inside_the_lock_folder_is_followed(tmp_path: Path, locked: Path) -> None:
    lock = a_pip_lock(locked)
    twin = lock.with_name("twin.txt")
    lock.rename(twin)
    lock.symlink_to(twin.name)
    assert render_all(load_cells(tmp_path, ONE_CPU), WheelSource(locks=locked))
