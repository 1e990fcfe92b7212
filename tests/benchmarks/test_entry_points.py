"""The benchmark entry points run as docs/benchmarks.md writes them: `python benchmarks/bench_x.py` from the
checkout. Python then puts benchmarks/ first on the path, not the checkout, so a script reaches its helpers
(benchmarks.support) and the fakes it shares with the tests (testkit) as packages through the editable install, never
by editing sys.path or importing a helper by its bare name; and nothing of tests/."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.fakes.checkout import ROOT

ENTRY_POINTS = sorted((ROOT / "benchmarks").glob("bench_*.py"))
# Script mode, then `python -m`: the script's folder first on the path, the working directory (a temporary one
# here) not on it; run_name keeps each script's main() from running.
AS_RUN = """
import importlib, runpy, sys
from pathlib import Path
for script in sys.argv[1:]:
    sys.path[0] = str(Path(script).parent)
    runpy.run_path(script, run_name="imported")
    importlib.import_module("benchmarks." + Path(script).stem)
"""


def test_the_documented_commands_are_the_entry_points() -> None:
    text = (ROOT / "README.md").read_text() + (ROOT / "docs" / "benchmarks.md").read_text()
    assert set(re.findall(r"python benchmarks/(bench_\w+\.py)", text)) == {p.name for p in ENTRY_POINTS}


def test_every_entry_point_imports_as_its_command_runs_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", AS_RUN, *map(str, ENTRY_POINTS)], check=False, cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_no_benchmark_edits_sys_path() -> None:
    edit = re.compile(r"sys\.path\s*(\.\w+\(|\[|\+?=)")  # insert/append, an item, an assignment
    edits = [str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("*.py") if edit.search(p.read_text())]
    assert edits == []


def test_benchmarks_import_nothing_from_tests() -> None:
    """The fakes both use live in testkit/ (issue 48): tests/ is the suite's, never a benchmark's dependency."""
    found = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n == "tests" or n.startswith("tests.")]
    assert not found
