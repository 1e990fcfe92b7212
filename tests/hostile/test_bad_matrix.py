"""Hostile matrix files: every command that reads a matrix refuses each one with exit 2, naming the file.

Each run is a real `builder` process under a 512 MiB address-space limit and a 20 s timeout (generous: a
refusal takes well under a second beyond the interpreter's start). The committed files are tests/data/bad/*;
what cannot or should not be committed (a file past the size limit, a FIFO, /dev/zero, a directory, a
missing file, a symlink loop) is made at test time. Every file goes through `builder matrix`; a
representative subset goes through every other command that reads a matrix. Runs go in parallel, one per
core, so the whole file stays well under a minute on two cores.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.matrix.yamlsrc import MAX_BYTES, MAX_NODES
from testkit.matrices import ONE_CPU
from tests.fakes import forkserver
from tests.fakes.checkout import builder_cli

ROOT = Path(__file__).resolve().parents[2]
BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
MEMORY_LIMIT = 512 * 1024 * 1024
TIMEOUT_S = 20
BASE = ONE_CPU

# The real entry point, under an address-space limit set before it runs (tests/fakes/forkserver.py).
LIMITS = {"RLIMIT_AS": MEMORY_LIMIT}
# Control characters (C0 but tab and newline, DEL, C1) and bidi/zero-width marks: none may come out raw.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u202a-\u202e\u2066-\u2069\ufeff]")


@dataclass(frozen=True)
class Case:
    make: Callable[[Path], Path]  # given a fresh folder, the matrix path to pass
    line: int | None  # the line the first problem names, None for a problem of the whole file
    text: str  # what stderr must say
    committed: str | None = None  # the file's name under tests/data/bad


def committed(name: str, line: int | None, text: str) -> Case:
    return Case(lambda tmp: BAD / name, line, text, name)


def _too_big(tmp: Path) -> Path:
    file = tmp / "too-big.yaml"
    file.write_text(BASE + "#" * (MAX_BYTES - len(BASE)) + "\n")  # a valid matrix, one byte past the limit
    return file


def _sparse(tmp: Path) -> Path:
    file = tmp / "sparse.yaml"
    with file.open("wb") as f:
        f.truncate(8 << 30)  # 8 GiB of zeros that take no disk
    return file


def _fifo(tmp: Path) -> Path:
    file = tmp / "fifo.yaml"
    os.mkfifo(file)  # no writer ever comes: opening it for reading would block forever
    return file


def _directory(tmp: Path) -> Path:
    (tmp / "dir.yaml").mkdir()
    return tmp / "dir.yaml"


def _symlink_loop(tmp: Path) -> Path:
    (tmp / "loop.yaml").symlink_to(tmp / "loop.yaml")
    return tmp / "loop.yaml"


def _many_nodes(tmp: Path) -> Path:
    file = tmp / "many-nodes.yaml"
    file.write_text("matrix:\n  os: [" + ", ".join(["debian-12"] * MAX_NODES) + "]\n")
    return file


def _long_strings(tmp: Path) -> Path:
    long = "a" * 50_000
    file = tmp / "long-strings.yaml"
    file.write_text(f"image: {long}\n{BASE}include:\n  - {{os: debian-12, platform: cpu, torch: '2.1', tag: {long}, "
                    f"override: {{reason: {long}}}}}\n? {long}\n: x\n")  # a key past YAML's 1024 for a simple key
    return file


CASES: dict[str, Case] = {
    # YAML aliases: the billion laughs (3.5 GB and past 60 s before), a merge key, a self-reference.
    "alias_bomb": committed("alias_bomb.yaml", 3, "(alias): alias *a is not allowed"),
    "alias_merge": committed("alias_merge.yaml", 3, "(alias): alias *d is not allowed"),
    "alias_recursive": committed("alias_recursive.yaml", 5, "(alias): alias *m is not allowed"),
    "alias_undefined": committed("alias_undefined.yaml", 5, "(alias): alias *nowhere is not allowed"),
    # Nesting thousands deep (a RecursionError traceback before).
    "deep_flow_seq": committed("deep_flow_seq.yaml", 1, "(nesting): nested more than 32 levels deep"),
    "deep_flow_map": committed("deep_flow_map.yaml", 1, "(nesting): nested more than 32 levels deep"),
    "deep_mixed": committed("deep_mixed.yaml", 2, "(nesting): nested more than 32 levels deep"),
    "deep_block": committed("deep_block.yaml", 33, "(nesting): nested more than 32 levels deep"),
    # Structure and types.
    "wrong_types": committed("wrong_types.yaml", 1, "image: Input should be a valid string"),
    "wrong_types_items": committed("wrong_types_items.yaml", 5, "matrix.gfx[0]: Input should be a valid string"),
    "wrong_types_torch": committed("wrong_types_torch.yaml", 5, "matrix.torch[0].version: Input should be a valid"),
    "nulls": committed("nulls.yaml", 1, "image: Input should be a valid string"),
    "top_level_list": committed("top_level_list.yaml", 1, "the matrix file must be a mapping"),
    "top_level_scalar": committed("top_level_scalar.yaml", 1, "the matrix file must be a mapping"),
    "empty": committed("empty.yaml", None, "matrix: Field required"),
    "python_tag": committed("python_tag.yaml", 5, "image: Input should be a valid string"),
    "complex_key": committed("complex_key.yaml", 5, "a key must be plain text, not a list or mapping"),
    "duplicate_keys": committed("duplicate_keys.yaml", 6, "image: duplicate key (first at line 1)"),
    # Syntax and bytes.
    "syntax_tab": committed("syntax_tab.yaml", 5, "(syntax): found character '\\t' that cannot start any token"),
    "syntax_unclosed": committed("syntax_unclosed.yaml", 3, "(syntax): expected ',' or ']'"),
    "two_documents": committed("two_documents.yaml", 5, "(syntax): but found another document"),
    "nonutf8": committed("nonutf8.yaml", None, "(file): not UTF-8 text"),
    "utf16": committed("utf16.yaml", None, "(file): not UTF-8 text"),
    "raw_escape": committed("raw_escape.yaml", 5, "(syntax): unacceptable character #x001b"),
    "raw_nul": committed("raw_nul.yaml", 5, "(syntax): unacceptable character #x0000"),
    # The same payload in every string field and as keys.
    **{f"inject_{kind}": committed(f"inject_{kind}.yaml", 2, "image: ") for kind in (
        "subshell", "backtick", "semicolon", "newline", "escape", "jinja", "traversal", "unicode", "quotes",
        "dockerfile")},
    # Tag policy (issue 15).
    "tag_latest": committed("tag_latest.yaml", 6, "include[0].tag: 'latest' is reserved"),
    "tag_immutable": committed("tag_immutable.yaml", 6, "include[0].tag: 'x-0123456789ab' ends like an immutable"),
    "tag_too_long": committed("tag_too_long.yaml", 9, "its immutable form would be 133"),
    # The size of the expansion, from the axis lengths (2.5 min and 5 GB for 30 values per axis before).
    "product_huge": committed("product_huge.yaml", 2, "matrix: expands to 576,000 cells"),
    "product_excludes": committed("product_excludes.yaml", 8, "exclude: 100 excludes over 5,000 product cells"),
    # Made at test time.
    "too_big": Case(_too_big, None, f"(file): {MAX_BYTES + 1:,} bytes, over the limit of {MAX_BYTES:,} bytes"),
    "sparse_8gib": Case(_sparse, None, f"(file): {8 << 30:,} bytes, over the limit of {MAX_BYTES:,} bytes"),
    "fifo": Case(_fifo, None, "(file): cannot read: a FIFO (named pipe), not a regular file"),
    "dev_zero": Case(lambda tmp: Path("/dev/zero"), None, "(file): cannot read: a character device"),
    "directory": Case(_directory, None, "(file): cannot read: a directory, not a regular file"),
    "missing": Case(lambda tmp: tmp / "absent.yaml", None, "(file): cannot read: No such file or directory"),
    "symlink_loop": Case(_symlink_loop, None, "(file): cannot read: Too many levels of symbolic links"),
    "many_nodes": Case(_many_nodes, 2, f"(size): more than {MAX_NODES:,} values"),
    "long_strings": Case(_long_strings, 1, "image: String should have at most 200 characters"),
}

# Every command that reads a matrix; a bad matrix must be refused before Docker, a registry or pip is asked.
COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "matrix": lambda f, tmp: ["matrix", "-m", str(f)],
    "matrix-json": lambda f, tmp: ["matrix", "-m", str(f), "--format", "json"],
    "render": lambda f, tmp: ["render", "-m", str(f), "--out", str(tmp / "out")],
    "render-check": lambda f, tmp: ["render", "-m", str(f), "--check", "--out", str(tmp / "out")],
    "build": lambda f, tmp: ["build", "-m", str(f), "--no-validate"],
    "plan": lambda f, tmp: ["plan", "-m", str(f), "--registry", "127.0.0.1:1/x", "--record", str(tmp / "record.json")],
    "stages": lambda f, tmp: ["stages", "-m", str(f), "--cache-registry", "127.0.0.1:1/x"],
    "publish": lambda f, tmp: ["publish", "-m", str(f), "--registry", "127.0.0.1:1/x", "--record",
                               str(tmp / "record.json")],
    "wheelhouse": lambda f, tmp: ["wheelhouse", "-m", str(f), "--dest", str(tmp / "wheels")],
    "test": lambda f, tmp: ["test", "rocm-image-factory/none:none", "-m", str(f)],
}
EVERY_COMMAND = ["alias_bomb", "deep_flow_seq", "too_big", "fifo", "wrong_types", "inject_escape"]
RUNS = [(case, command) for case in CASES for command in COMMANDS
        if command == "matrix" or case in EVERY_COMMAND]

# Known bugs outside the matrix loader, as (case, command): reason. Empty: every run is refused cleanly.
XFAIL: dict[tuple[str, str], str] = {}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR_FORCE", "RIF_REGISTRY"}}
    # No color codes of rich's own (any escape in the output came from the file), and no engine to reach:
    # a command that asked Docker before reading the matrix would fail on this, not on the matrix.
    env.update(NO_COLOR="1", TERM="dumb", DOCKER_HOST="unix:///nonexistent/rif-test/docker.sock")
    return env


@dataclass
class Result:
    file: Path
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    leftovers: list[str]  # what the command wrote into its folder


def _run(case: str, command: str, tmp: Path) -> Result:
    file = CASES[case].make(tmp)
    args = COMMANDS[command](file, tmp)
    try:
        proc = forkserver.builder_bytes(args, cwd=ROOT, env=_env(), timeout=TIMEOUT_S, limits=LIMITS,
                                        stdin=forkserver.devnull())
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, stdout, stderr = None, exc.stdout or b"", exc.stderr or b""
    leftovers = sorted(p.name for p in tmp.iterdir() if p != file)
    return Result(file, code, stdout.decode("utf-8", "backslashreplace"), stderr.decode("utf-8", "backslashreplace"),
                  leftovers)


# The results fixture starts every selected run of this module at once: under xdist, one worker takes them all
# (--dist loadgroup, pyproject.toml), or each worker would start every run.
pytestmark = pytest.mark.xdist_group("bad_matrix")


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[Result]]]:
    """Starts every selected run at once, one worker per core; each test waits for its own."""
    selected = {(item.callspec.params["case"], item.callspec.params["command"]) for item in request.session.items
                if isinstance(item, pytest.Function) and item.module is request.module and hasattr(item, "callspec")}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {key: pool.submit(_run, key[0], key[1], tmp_path_factory.mktemp(f"{key[0]}-{key[1]}"))
                   for key in RUNS if key in selected}
        yield futures
        for future in futures.values():
            future.cancel()


def _param(case: str, command: str) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[(case, command)])] if (case, command) in XFAIL else []
    return pytest.param(case, command, id=f"{case}-{command}", marks=marks)


@pytest.mark.parametrize(("case", "command"), [_param(c, m) for c, m in RUNS])
def test_bad_matrix_is_refused(case: str, command: str, results: dict[tuple[str, str], Future[Result]]) -> None:
    run = results[(case, command)].result()
    expected = CASES[case]
    output = run.stdout + run.stderr
    assert run.returncode is not None, f"still running after {TIMEOUT_S} s:\n{output[-3000:]}"
    assert run.returncode == 2, output[-3000:]
    assert "Traceback" not in output and "error: unexpected " not in output, output[-3000:]
    where = f"{run.file}:{expected.line}: " if expected.line is not None else f"{run.file}: "
    assert f"error: {where}" in run.stderr, run.stderr[-3000:]
    assert expected.text in run.stderr, run.stderr[-3000:]
    raw = RAW_CONTROL.search(output)
    assert raw is None, f"raw {raw.group()!r} in the output:\n{output[-3000:]}"
    assert run.leftovers == [], "a refused matrix wrote files"


def test_every_committed_bad_file_has_a_case() -> None:
    committed_files = {p.name for p in BAD.iterdir()}
    assert committed_files == {case.committed for case in CASES.values() if case.committed}


def test_committed_bad_files_stay_small() -> None:
    assert sum(p.stat().st_size for p in BAD.iterdir()) < 64 * 1024


def test_a_good_matrix_passes_under_the_same_limits(tmp_path: Path) -> None:
    """The harness itself: the memory limit and environment leave a valid matrix working."""
    proc = builder_cli("matrix", "-m", str(ROOT / "matrix.yaml"), "--format", "json", env=_env(),
                       timeout=TIMEOUT_S, limits=LIMITS)
    assert proc.returncode == 0, proc.stderr
    assert '"tag"' in proc.stdout
