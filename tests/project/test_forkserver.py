"""builder_cli's forked runs (tests/fakes/forkserver.py) give what `subprocess.run([python, "-m", "builder", ...])`
gives: the same exit code, stdout and stderr for a run that succeeds, one that fails on bad input and one that prints
help under the run's own COLUMNS and NO_COLOR; the run's working directory is its own;
what a run changes dies with it; and the runs it cannot stand in for go to a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import forkserver
from tests.fakes.checkout import DATA, ROOT

REAL = [sys.executable, "-m", "builder"]


def real(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REAL, *args], capture_output=True, text=True, cwd=cwd, env=env, check=False)


def forked(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    server = forkserver.server()
    assert server is not None and server.stands_in(cwd, dict(os.environ if env is None else env))
    return forkserver.builder(args, cwd=cwd, env=env, check=False, timeout=120)


def same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> None:
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


@pytest.fixture(autouse=True)
def fork_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIF_TEST_FORK", raising=False)


def test_a_run_a_run_that_fails_and_help_are_what_a_real_process_prints(tmp_path: Path) -> None:
    same(forked("matrix", "--matrix", str(DATA / "e2e.yaml")), real("matrix", "--matrix", str(DATA / "e2e.yaml")))
    bad = tmp_path / "bad.yaml"
    bad.write_text("images:\n  - os: [debian-12]\n    nonsense: 1\n")
    failed = forked("matrix", "--matrix", str(bad))
    assert failed.returncode == 2 and "bad.yaml:1" in failed.stderr
    same(failed, real("matrix", "--matrix", str(bad)))
    for columns in ("60", "150"):
        env = {**os.environ, "COLUMNS": columns, "NO_COLOR": "1", "TERM": "dumb"}
        help_text = forked("render", "--help", env=env)
        assert help_text.returncode == 0 and max(map(len, help_text.stdout.splitlines())) <= int(columns)
        same(help_text, real("render", "--help", env=env))


def test_the_run_s_directory_is_its_own(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text((DATA / "e2e.yaml").read_text())
    same(forked("matrix", "--matrix", "m.yaml", cwd=tmp_path), real("matrix", "--matrix", "m.yaml", cwd=tmp_path))
    missing = forked("matrix", "--matrix", "m.yaml")  # the server's own directory is the checkout: not there
    assert missing.returncode == 2 and "m.yaml" in missing.stderr
    rendered = forked("render", "--matrix", "m.yaml", "--out", "tree", cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert list((tmp_path / "tree").rglob("Dockerfile")) and not (ROOT / "tree").exists()


def test_what_a_run_changes_dies_with_it(tmp_path: Path) -> None:
    before = set(sys.modules)
    first = forked("--version")
    assert set(sys.modules) == before  # nothing of the run was imported here
    env = {**os.environ, "RIF_REGISTRY_USER": "someone"}
    forked("matrix", "--matrix", str(DATA / "e2e.yaml"), env=env)
    again = forked("--version")  # a server whose state a run changed would answer otherwise
    same(again, first)
    assert again.returncode == 0 and again.stdout.startswith("builder")


def test_a_copy_of_the_package_or_another_interpreter_setting_gets_a_real_process(tmp_path: Path) -> None:
    server = forkserver.server()
    assert server is not None
    (tmp_path / "builder").mkdir()
    assert not server.stands_in(tmp_path, dict(os.environ))  # `python -m builder` would import this copy
    assert not server.stands_in(ROOT, {**os.environ, "PYTHONHASHSEED": "7"})
    assert not server.stands_in(ROOT, {**os.environ, "LC_ALL": "C"} if os.environ.get("LC_ALL") != "C" else {})
    assert server.stands_in(ROOT, {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"})
