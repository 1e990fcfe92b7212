"""The input limits of the matrix loader, each at its edge: file size and kind, aliases, nesting, node count,
the size of the expansion, and the tag policy for an include's own tag (issue 13 items 1 and 6, issue 15)."""

from __future__ import annotations

import inspect
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from builder.core.errors import InputError, Problem
from builder.core.tags import HASH_CHARS, MAX_TAG_CHARS
from builder.matrix import checks, expand, yamlsrc
from builder.matrix.checks import MAX_CELLS, MAX_EXCLUDE_CHECKS
from builder.matrix.expand import expand_matrix
from builder.matrix.yamlsrc import MAX_BYTES, MAX_DEPTH, MAX_NODES, dotted, load_located
from testkit.matrices import ONE_CPU
from tests.fakes import hangs

ROOT = Path(__file__).resolve().parents[2]
BASE = ONE_CPU


def write(tmp_path: Path, text: str, name: str = "matrix.yaml") -> Path:
    file = tmp_path / name
    file.write_text(text, encoding="utf-8")
    return file


def problems(file: Path) -> list[Problem]:
    with pytest.raises(InputError) as info:
        expand_matrix(file)
    return info.value.problems


def only_problem(file: Path) -> Problem:
    [problem] = problems(file)
    return problem


@pytest.fixture
def alarm() -> Iterator[None]:
    """Fail instead of hanging forever should a read block (a FIFO)."""
    with hangs.alarm(TimeoutError("blocked")):
        yield


# --- the file: size and kind -------------------------------------------------------------------------------

def test_limits_are_what_the_docs_say() -> None:
    assert (MAX_BYTES, MAX_DEPTH, MAX_NODES, MAX_CELLS, MAX_EXCLUDE_CHECKS) == (
        256 * 1024, 32, 10_000, 10_000, 100_000)


def test_file_of_exactly_the_size_limit_is_read(tmp_path: Path) -> None:
    file = write(tmp_path, BASE + "#" * (MAX_BYTES - len(BASE) - 1) + "\n")
    assert file.stat().st_size == MAX_BYTES
    assert load_located(file).data["matrix"]["os"] == ["debian-12"]


def test_file_one_byte_past_the_limit_is_refused_with_size_and_limit(tmp_path: Path) -> None:
    file = write(tmp_path, BASE + "#" * (MAX_BYTES - len(BASE)) + "\n")
    problem = only_problem(file)
    assert (problem.file, problem.line, problem.key) == (file, None, "(file)")
    assert problem.message == f"{MAX_BYTES + 1:,} bytes, over the limit of {MAX_BYTES:,} bytes for a matrix file"


def test_huge_sparse_file_is_refused_from_its_size_without_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    alarm: None) -> None:
    """Bounded by what it reads (nothing), not by the clock."""
    file = tmp_path / "sparse.yaml"
    with file.open("wb") as f:
        f.truncate(64 << 30)
    reads: list[int] = []

    class Counted:
        def __getattr__(self, name: str) -> object:
            return getattr(os, name)

        def read(self, fd: int, size: int) -> bytes:
            reads.append(size)
            return os.read(fd, size)

        def fdopen(self, fd: int, mode: str) -> BinaryIO:
            reads.append(-1)  # a stream opened to be read
            return os.fdopen(fd, mode)

    monkeypatch.setattr("builder.core.safefs.os", Counted())
    assert f"{64 << 30:,} bytes, over the limit" in only_problem(file).message
    assert reads in ([], [-1])  # refused from fstat's size: never a byte read


def test_a_file_larger_than_it_says_is_read_only_to_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose size stat cannot tell (procfs, one that grows) is still read only to MAX_BYTES + 1."""
    file = write(tmp_path, BASE + "#" * (2 * MAX_BYTES) + "\n")
    reads: list[int] = []

    class Spy:
        def __init__(self, stream: BinaryIO) -> None:
            self.stream = stream

        def __enter__(self) -> Spy:
            return self

        def __exit__(self, *exc: object) -> None:
            self.stream.close()

        def fileno(self) -> int:
            return self.stream.fileno()

        def read(self, size: int = -1) -> bytes:
            reads.append(size)
            return self.stream.read(size)

    class SizeUnknown:
        """The os module as core.safefs sees it: fstat says 0 bytes, and every read is recorded."""

        def __getattr__(self, name: str) -> object:
            return getattr(os, name)

        def fstat(self, fd: int) -> os.stat_result:
            info = os.fstat(fd)
            return os.stat_result((info.st_mode, *info[1:6], 0, *info[7:10]))

        def fdopen(self, fd: int, mode: str) -> Spy:
            return Spy(os.fdopen(fd, "rb"))

    monkeypatch.setattr("builder.core.safefs.os", SizeUnknown())
    problem = only_problem(file)
    assert problem.message == f"more than {MAX_BYTES:,} bytes, over the limit of {MAX_BYTES:,} bytes for a matrix file"
    assert reads == [MAX_BYTES + 1]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused_at_once(alarm: None) -> None:
    """The alarm is only a hang guard: the device is refused from fstat, before any read."""
    problem = only_problem(Path("/dev/zero"))
    assert str(problem) == "/dev/zero: (file): cannot read: a character device, not a regular file"


def test_fifo_is_refused_without_blocking(tmp_path: Path, alarm: None) -> None:
    fifo = tmp_path / "matrix.yaml"
    os.mkfifo(fifo)
    problem = only_problem(fifo)
    assert (problem.line, problem.key) == (None, "(file)")
    assert problem.message == "cannot read: a FIFO (named pipe), not a regular file"


def test_socket_is_refused() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # AF_UNIX paths are short: not under pytest's tmp
        path = Path(folder) / "m.sock"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
            assert only_problem(path).message == "cannot read: a socket, not a regular file"


def test_directory_is_refused(tmp_path: Path) -> None:
    assert only_problem(tmp_path).message == "cannot read: a directory, not a regular file"


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    file = tmp_path / "absent.yaml"
    assert str(only_problem(file)) == f"{file}: (file): cannot read: No such file or directory"


def test_symlink_to_a_regular_file_is_followed(tmp_path: Path) -> None:
    target = write(tmp_path, BASE, "real.yaml")
    link = tmp_path / "matrix.yaml"
    link.symlink_to(target)
    assert [c.os for c in expand_matrix(link).cells] == ["debian-12"]


def test_symlink_loop_is_refused(tmp_path: Path) -> None:
    loop = tmp_path / "matrix.yaml"
    loop.symlink_to(loop)
    assert only_problem(loop).message.startswith("cannot read: ")


def test_control_character_in_the_file_is_a_syntax_error_at_its_line(tmp_path: Path) -> None:
    file = tmp_path / "matrix.yaml"
    file.write_bytes(BASE.encode() + b"image: \x1b[2J\n")
    problem = only_problem(file)
    assert (problem.line, problem.key) == (5, "(syntax)")
    assert problem.message == "unacceptable character #x001b: special characters are not allowed"


# --- aliases ------------------------------------------------------------------------------------------------

def test_repo_matrices_use_no_anchors_or_aliases_and_all_load() -> None:
    files = [ROOT / "matrix.yaml", *sorted((ROOT / "examples").glob("*.yaml")),
             *sorted((ROOT / "tests" / "data").glob("*.yaml"))]
    assert len(files) >= 3
    for file in files:
        assert expand_matrix(file).cells, file


def test_alias_is_refused_at_its_line(tmp_path: Path) -> None:
    file = write(tmp_path, "os: &oses [debian-12]\nmatrix:\n  os: *oses\n  platform: [cpu]\n  torch: ['2.13.0']\n")
    problem = only_problem(file)
    assert (problem.line, problem.key) == (3, "(alias)")
    assert problem.message.startswith("alias *oses is not allowed in a matrix file")


def test_billion_laughs_is_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alarm: None) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    file = write(tmp_path, "\n".join(lines) + "\nmatrix: *a9\n")
    events: list[object] = []
    taken = yamlsrc._BoundedLoader.get_event

    def counted(self: yamlsrc._BoundedLoader) -> object:
        events.append(None)
        return taken(self)
    monkeypatch.setattr(yamlsrc._BoundedLoader, "get_event", counted)
    assert only_problem(file).line == 2
    assert len(events) < 50  # the first alias ends it: the work is a few events, never 9**9 of them


def test_merge_key_needs_an_alias_and_is_refused(tmp_path: Path) -> None:
    file = write(tmp_path, "base: &b {os: [debian-12]}\nmatrix:\n  <<: *b\n  platform: [cpu]\n  torch: ['2.1']\n")
    assert only_problem(file).key == "(alias)"


def test_anchor_without_alias_is_harmless_and_allowed(tmp_path: Path) -> None:
    file = write(tmp_path, "matrix: &m\n  os: &o [debian-12]\n  platform: [cpu]\n  torch: ['2.13.0']\n")
    assert [c.os for c in expand_matrix(file).cells] == ["debian-12"]


# --- nesting and node count ------------------------------------------------------------------------------

def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth + "\n"


def test_nesting_up_to_the_limit_is_parsed(tmp_path: Path) -> None:
    located = load_located(write(tmp_path, nested(MAX_DEPTH)))
    data = located.data
    for _ in range(MAX_DEPTH - 1):
        [data] = data
    assert data == []


@pytest.mark.parametrize("text", [
    "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
    "{a: " * (MAX_DEPTH + 1) + "x" + "}" * (MAX_DEPTH + 1),
    "[{a: " * (MAX_DEPTH // 2 + 1) + "x" + "}]" * (MAX_DEPTH // 2 + 1),
], ids=["sequences", "mappings", "mixed"])
def test_nesting_one_past_the_limit_is_refused(tmp_path: Path, text: str) -> None:
    problem = only_problem(write(tmp_path, f"\n{text}\n"))
    assert (problem.line, problem.key) == (2, "(nesting)")
    assert problem.message == f"nested more than {MAX_DEPTH} levels deep, over the limit for a matrix file"


def test_block_nesting_past_the_limit_is_refused_at_the_line_that_goes_too_deep(tmp_path: Path) -> None:
    text = "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 5)) + "  " * (MAX_DEPTH + 5) + "x\n"
    problem = only_problem(write(tmp_path, text))
    assert (problem.line, problem.key) == (MAX_DEPTH + 1, "(nesting)")


def test_hundred_thousand_brackets_are_refused_without_recursion(tmp_path: Path) -> None:
    """PyYAML's composer recurses per level: the old loader ended in a RecursionError traceback. Under a stack of
    only 300 frames more than the test's own, 100,000 levels are refused: no step recurses per level."""
    file = write(tmp_path, nested(100_000))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 300)
    try:
        assert only_problem(file).key == "(nesting)"
    finally:
        sys.setrecursionlimit(limit)


def test_node_count_up_to_the_limit_is_parsed(tmp_path: Path) -> None:
    # 1 top mapping + key + 1 list + items = MAX_NODES
    file = write(tmp_path, "a: [" + ", ".join(["x"] * (MAX_NODES - 3)) + "]\n")
    assert len(load_located(file).data["a"]) == MAX_NODES - 3


def test_node_count_past_the_limit_is_refused(tmp_path: Path) -> None:
    file = write(tmp_path, "a:\n  [" + ", ".join(["x"] * (MAX_NODES - 2)) + "]\n")
    problem = only_problem(file)
    assert (problem.line, problem.key) == (2, "(size)")
    assert problem.message == f"more than {MAX_NODES:,} values, over the limit for a matrix file"


# --- keys --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "text"), [
    (("\x1b[2J",), "['\\x1b[2J']"),
    (("matrix", "a\nb"), "matrix['a\\nb']"),
    (("index_urls", "\u202eevil"), "index_urls['\\u202eevil']"),
    (("index_urls", "cpu; id"), "index_urls.cpu; id"),
])
def test_dotted_escapes_keys_that_are_not_printable(path: tuple[str, ...], text: str) -> None:
    assert dotted(path) == text


def test_unknown_key_with_an_escape_sequence_is_reported_escaped(tmp_path: Path) -> None:
    problem = only_problem(write(tmp_path, BASE + '"\\e[2J": x\n'))
    assert "\x1b" not in str(problem)
    assert (problem.line, problem.key) == (5, "['\\x1b[2J']")
    assert problem.message.startswith("unknown key") and "\x1b" not in problem.message


def test_list_or_mapping_as_a_key_is_refused(tmp_path: Path) -> None:
    [first, second] = problems(write(tmp_path, BASE + "? [a, b]\n: x\nmatrix2:\n  ? {c: d}\n  : y\n"))
    assert (first.line, first.key, second.line, second.key) == (5, "(top level)", 8, "matrix2")
    assert first.message == "a key must be plain text, not a list or mapping"


# --- the expansion -----------------------------------------------------------------------------------------

def axes(os_n: int, torch_n: int, rocm: int = 0, gfx: int = 0, cpu: bool = True) -> str:
    oses = ["debian-12", "debian-13", "ubuntu-22.04", "ubuntu-24.04", "rocky-9"][:os_n]
    families = ["gfx94X-dcgpu", "gfx950-dcgpu", "gfx90X-dcgpu", "gfx1151"][:gfx]
    platforms = ["rocm7.2", "rocm7.1"][:rocm] + (["cpu"] if cpu else [])
    torches = ["'2.13.0'", "'2.12.0'", "'2.11.0'"][:torch_n]
    return (f"matrix:\n  os: [{', '.join(oses)}]\n  platform: [{', '.join(platforms)}]\n"
            f"  torch: [{', '.join(torches)}]\n" + (f"  gfx: [{', '.join(families)}]\n" if gfx else ""))


def test_product_at_the_limit_expands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "MAX_CELLS", 5 * 3 * (2 * 4 + 1))  # the cpu platform has no gfx
    assert expand_matrix(write(tmp_path, axes(5, 3, rocm=2, gfx=4))).cells


def test_product_past_the_limit_is_refused_before_expanding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "MAX_CELLS", 5 * 3 * (2 * 4 + 1) - 1)
    monkeypatch.setattr(expand, "_product", lambda model: pytest.fail("expanded"))
    problem = only_problem(write(tmp_path, axes(5, 3, rocm=2, gfx=4)))
    assert (problem.line, problem.key) == (1, "matrix")
    assert problem.message == (
        "expands to 135 cells (5 os x 3 torch x 1 flavor x 1 channel x (2 rocm platforms x 4 gfx + 1 cpu) = 135), "
        "over the limit of 134: shorten the longest axes or split the matrix into several files")


def test_includes_count_toward_the_cell_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "MAX_CELLS", 2)
    text = axes(1, 2) + "include:\n  - {os: debian-13, platform: cpu, torch: '2.12.0'}\n"
    message = only_problem(write(tmp_path, text)).message
    assert message.startswith("expands to 3 cells (1 os x 2 torch x 1 flavor x 1 channel x (0 rocm platforms x 0 gfx "
                              "+ 1 cpu) = 2, plus 1 includes), over the limit of 2")


def _no_cell(*args: object, **kwargs: object) -> None:
    raise AssertionError("a cell was made from a matrix past the size limit")


def test_forty_values_per_axis_is_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    platforms = ", ".join(f"rocm{6 + i // 10}.{i % 10}" for i in range(40))
    torches = ", ".join(f"'2.{i}.0'" for i in range(40))
    text = (f"matrix:\n  os: [debian-12, debian-13, ubuntu-22.04, ubuntu-24.04, rocky-9]\n  platform: [{platforms}]\n"
            "  gfx: [gfx94X-dcgpu, gfx950-dcgpu, gfx90X-dcgpu, gfx1150, gfx1151]\n"
            f"  torch: [{torches}]\n  flavor: [runtime, devel]\n  channel: [pytorch, therock, local]\n")
    monkeypatch.setattr(expand, "CellSpec", _no_cell)  # at once: refused from the axes, before any cell is made
    problem = only_problem(write(tmp_path, text))
    assert problem.message.startswith(f"expands to {5 * 40 * 5 * 40 * 2 * 3:,} cells (5 os x 40 torch x 2 flavor "
                                      "x 3 channel x (40 rocm platforms x 5 gfx + 0 cpu)")


def test_excludes_times_product_past_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "MAX_EXCLUDE_CHECKS", 2 * 3 * 2)
    text = axes(2, 3) + "exclude:\n  - {os: debian-12, torch: '2.13.0'}\n  - {os: debian-13, torch: '2.12.0'}\n"
    assert len(expand_matrix(write(tmp_path, text)).cells) == 4  # 6 cells x 2 excludes: at the limit
    text += "  - {os: debian-13, torch: '2.11.0'}\n"
    problem = only_problem(write(tmp_path, text))
    assert (problem.line, problem.key) == (5, "exclude")
    assert problem.message.startswith("3 excludes over 6 product cells (2 os x 3 torch x 1 flavor x 1 channel x "
                                      "(0 rocm platforms x 0 gfx + 1 cpu)) are 18 matches, over the limit of 12")


def test_production_matrix_is_far_below_the_limits() -> None:
    file = ROOT / "matrix.yaml"
    assert file.stat().st_size <= MAX_BYTES // 10
    assert len(expand_matrix(file).cells) <= MAX_CELLS // 10


# --- the tag policy on an include's own tag (issue 15) -----------------------------------------------------

def include_with_tag(tag: str) -> str:
    return BASE + f"include:\n  - os: debian-12\n    platform: cpu\n    torch: '2.12.0'\n    tag: {tag}\n"


@pytest.mark.parametrize(("tag", "message"), [
    ("latest", "'latest' is reserved: the factory moves it itself"),
    ("x-0123456789ab", "'x-0123456789ab' ends like an immutable tag (-<12 hex>) and could overwrite one"),
    ("cpu_torch2.13.0_runtime-deadbeef0123", "ends like an immutable tag"),
    ("t" * (MAX_TAG_CHARS - HASH_CHARS), f"is {MAX_TAG_CHARS - HASH_CHARS} characters: its immutable form would be "
     f"{MAX_TAG_CHARS + 1}, over the registry limit of {MAX_TAG_CHARS}; use at most {MAX_TAG_CHARS - 1 - HASH_CHARS}"),
])
def test_include_tag_breaking_the_policy_is_reported_at_its_line(tmp_path: Path, tag: str, message: str) -> None:
    file = write(tmp_path, include_with_tag(tag))
    problem = only_problem(file)
    assert (problem.file, problem.line, problem.key) == (file, 9, "include[0].tag")
    assert message in problem.message


@pytest.mark.parametrize("tag", ["mi300", "x-0123456789abc", "x-0123456789AB", "latest-build",
                                 "t" * (MAX_TAG_CHARS - 1 - HASH_CHARS)])
def test_include_tag_within_the_policy_is_kept(tmp_path: Path, tag: str) -> None:
    cells = expand_matrix(write(tmp_path, include_with_tag(tag))).cells
    assert cells[-1].tag == tag and cells[-1].explicit_tag


def test_every_include_tag_problem_is_reported_with_the_other_problems(tmp_path: Path) -> None:
    text = BASE + ("include:\n  - {os: debian-12, platform: cpu, torch: '2.12.0', tag: latest}\n"
                   "  - {os: debian-13, platform: cpu, torch: '2.12.0', tag: a-0123456789ab}\n"
                   "  - {os: debian-12, platform: cpu, torch: '2.11.0', gfx: gfx1151}\n")
    assert [(p.line, p.key) for p in problems(write(tmp_path, text))] == [
        (6, "include[0].tag"), (7, "include[1].tag"), (8, "include[2].gfx")]
