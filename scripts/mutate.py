#!/usr/bin/env python3
"""One-line mutations of builder/, each run against its module's fast-tier tests in a copy of the checkout.

A guard no test breaks without is a guard the next refactor can drop unseen. This runner copies the checkout (the
files git lists, untracked ones included) into a temporary folder once, then for each mutation changes one line of
one module there, runs the module's tests (tests/<package>/test_<module>*.py, every test module that imports it,
and the tests the mutation names) with `-m "not docker and not registry" -x`, and puts the line back. A mutation
is caught when those tests fail (or time out), survived when they pass. The working tree is never written.

Mutations come from YAML lists (tests/mutations/*.yaml: `file`, the exact `old` text of one line, its `new` text,
the `guard` it breaks, optional `tests`) or are generated from modules by operators (comparison flips, constant
changes, a raise/return/call made dead, boolean flips, an early return): `--generate MODULE` (with `--sample N
--seed S` for a random subset, a set the tests were not written against). Not run in CI: each mutation runs
tests (seconds to minutes). Usage is in docs/development.md ("Mutation runs").
"""

from __future__ import annotations

import argparse
import ast
import functools
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FAST = "not docker and not registry"
FLIPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
BOOLS = {"True": "False", "False": "True", "and": "or", "or": "and"}


@dataclass(frozen=True)
class Mutation:
    file: str  # relative to the checkout: builder/pkg/module.py
    old: str  # one line's exact text (a substring that occurs once in the file)
    new: str
    guard: str = ""
    tests: tuple[str, ...] = field(default_factory=tuple)

    def label(self) -> str:
        return f"{self.file}: {self.old.strip()[:70]!r} -> {self.new.strip()[:70]!r}"


def load_lists(paths: list[Path]) -> list[Mutation]:
    out = []
    for path in paths:
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            out.append(Mutation(entry["file"], entry["old"], entry["new"], entry.get("guard", ""),
                                tuple(entry.get("tests") or ())))
    return out


# -- operators ----------------------------------------------------------------------------------------------------

def generate(file: str, root: Path = ROOT) -> list[Mutation]:
    """Every operator's one-line mutation of the module, each as (the whole line, the line changed)."""
    source = (root / file).read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    skip = _docstring_lines(source)
    found: list[tuple[int, str]] = []  # (line number, new line)

    def swap(tok: tokenize.TokenInfo, text: str) -> None:
        (row, start), (end_row, end) = tok.start, tok.end
        if row == end_row and row not in skip:
            line = lines[row - 1]
            found.append((row, line[:start] + text + line[end:]))

    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for i, tok in enumerate(tokens):
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.type == tokenize.OP and tok.string in FLIPS:
            swap(tok, FLIPS[tok.string])
        elif tok.type == tokenize.NAME and tok.string in BOOLS:
            swap(tok, BOOLS[tok.string])
        elif tok.type == tokenize.NAME and tok.string == "not" and after is not None and after.string != "in" \
                and tokens[i - 1].string != "is":
            swap(tok, "")  # `not x` -> ` x`
        elif tok.type == tokenize.NAME and tok.string == "is" and after is not None and after.string != "not":
            swap(tok, "is not")
        elif tok.type == tokenize.NAME and tok.string == "not" and tokens[i - 1].string == "is":
            found.append((tok.start[0], lines[tok.start[0] - 1].replace(" is not ", " is ", 1)))
        elif tok.type == tokenize.NUMBER:
            swap(tok, _number(tok.string))
    for node in ast.walk(ast.parse(source)):
        found += _statements(node, lines, skip)
    out, seen = [], set()
    for row, new in found:
        old = lines[row - 1]
        if new != old and lines.count(old) == 1 and (row, new) not in seen and _compiles(lines, row, new):
            seen.add((row, new))
            out.append(Mutation(file, old.rstrip("\n"), new.rstrip("\n"), "generated"))
    return out


def _number(text: str) -> str:
    try:
        value = ast.literal_eval(text)
    except ValueError:
        return text
    if isinstance(value, bool) or not isinstance(value, int | float):
        return text
    if isinstance(value, float):
        return "1.0" if value != 1.0 else "2.0"
    return {0: "1", 1: "0"}.get(value, str(value * 10))


def _statements(node: ast.AST, lines: list[str], skip: set[int]) -> list[tuple[int, str]]:
    """A raise, return, continue, break or bare call made dead (`if False: ...`); a `-> None` function that
    returns before its first statement."""
    out = []
    if isinstance(node, ast.Raise | ast.Return | ast.Continue | ast.Break) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        line = lines[node.lineno - 1]
        if node.lineno not in skip and line[node.col_offset:].lstrip() == line[node.col_offset:]:
            out.append((node.lineno, line[:node.col_offset] + "if False: " + line[node.col_offset:]))
    if isinstance(node, ast.FunctionDef) and isinstance(node.returns, ast.Constant) and node.returns.value is None:
        body = node.body[1:] if _is_docstring(node.body[0]) else node.body
        first = body[0] if body else None
        if isinstance(first, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Expr | ast.Raise | ast.Return):
            line = lines[first.lineno - 1]
            out.append((first.lineno, line[:first.col_offset] + "return None; " + line[first.col_offset:]))
    return out


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _docstring_lines(source: str) -> set[int]:
    rows: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            rows.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return rows


def _compiles(lines: list[str], row: int, new: str) -> bool:
    try:
        compile("".join([*lines[:row - 1], new, *lines[row:]]), "<mutant>", "exec")
    except SyntaxError:
        return False
    return True


# -- which tests ------------------------------------------------------------------------------------------------

def module_name(file: str) -> str:
    parts = Path(file).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def tests_for(file: str, root: Path) -> list[str]:
    """The mirrored test modules of builder/<package>/<module>.py and every test module that imports it."""
    module = module_name(file)
    parts = module.split(".")
    found: set[str] = set()  # (cached: the test folder is parsed once per module and run)
    if len(parts) >= 3:
        folder = root / "tests" / parts[1]
        found.update(str(p.relative_to(root)) for p in folder.glob(f"test_{parts[-1]}.py"))
        found.update(str(p.relative_to(root)) for p in folder.glob(f"test_{parts[-1]}_*.py"))
    for path in (root / "tests").rglob("test_*.py"):
        if _imports(path, module):
            found.add(str(path.relative_to(root)))
    return sorted(found)


def _imports(path: Path, module: str) -> bool:
    """path imports module, or its package whose __init__ imports it (`from builder import site` reaches
    builder.site.collect when builder/site/__init__.py imports that)."""
    package, _, name = module.rpartition(".")
    init = ROOT / Path(*package.split(".")) / "__init__.py"
    via_package = init.is_file() and f"{package}.{name} import" in init.read_text(encoding="utf-8")
    grand, _, short = package.rpartition(".")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == module or a.name.startswith(module + ".")
                                                for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == module or node.module.startswith(module + "."):
                return True
            if node.module == package and any(a.name == name for a in node.names):
                return True
            if via_package and node.module == grand and any(a.name == short for a in node.names):
                return True
        if via_package and isinstance(node, ast.Import) and any(a.name == package for a in node.names):
            return True
    return False


# -- running ------------------------------------------------------------------------------------------------------

def copy_checkout(dest: Path, head: bool = False) -> None:
    """The files git lists (untracked ones included), or with head the last commit's tree alone (a stable base
    while others edit the working tree)."""
    if head:
        archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def run_tests(tree: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    """passed, failed or timeout, the seconds it took, and the end of pytest's output."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", FAST,
                               *tests], check=False, cwd=tree, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - started, ""
    state = {0: "passed", 5: "no tests"}.get(proc.returncode, "failed")
    return state, time.monotonic() - started, (proc.stdout + proc.stderr).decode(errors="replace")[-3000:]


def run(mutations: list[Mutation], timeout: float, verbose: bool, head: bool = False,
        only: tuple[str, ...] = ()) -> int:
    with tempfile.TemporaryDirectory(prefix="rif-mutate-") as tmp:
        tree = Path(tmp)
        copy_checkout(tree, head)
        baseline: dict[tuple[str, ...], tuple[str, float, str]] = {}
        caught = survived = skipped = 0
        for k, m in enumerate(mutations, start=1):
            target = tree / m.file
            original = target.read_text(encoding="utf-8")
            if original.count(m.old) != 1:
                print(f"[{k}/{len(mutations)}] STALE     {m.label()} (the old text is not once in the file)")
                skipped += 1
                continue
            tests = only or tuple(sorted({*tests_for(m.file, tree), *m.tests}))
            if tests not in baseline:
                baseline[tests] = run_tests(tree, list(tests), timeout)
            if baseline[tests][0] != "passed":
                print(f"[{k}/{len(mutations)}] BASELINE  {m.label()}: unmutated tests {baseline[tests][0]}"
                      + (f"\n{baseline[tests][2]}" if verbose else ""))
                skipped += 1
                continue
            target.write_text(original.replace(m.old, m.new, 1), encoding="utf-8")
            try:
                state, took, _ = run_tests(tree, list(tests), timeout)
            finally:
                target.write_text(original, encoding="utf-8")
            ok = state in ("failed", "timeout")
            caught, survived = caught + ok, survived + (not ok)
            word = "caught" if ok else "SURVIVED"
            print(f"[{k}/{len(mutations)}] {word:<9} {m.label()} ({len(tests)} test files, {took:.0f} s)"
                  + (f"  guard: {m.guard}" if m.guard and (verbose or not ok) else ""), flush=True)
        total = caught + survived
        print(f"caught {caught} of {total} mutations ({100 * caught / max(total, 1):.1f}%); "
              f"{survived} survived, {skipped} not run")
        return 0 if survived == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lists", nargs="*", type=Path, help="YAML mutation lists (tests/mutations/*.yaml)")
    parser.add_argument("--generate", action="append", default=[], metavar="MODULE",
                        help="builder/PKG/MODULE.py: mutations made by the operators (repeatable)")
    parser.add_argument("--sample", type=int, metavar="N", help="a random N of the generated mutations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--file", action="append", default=[], help="only mutations of these files")
    parser.add_argument("--list-only", action="store_true", help="print the mutations and their tests, run nothing")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per test run (then: caught)")
    parser.add_argument("--tests", nargs="+", default=(), metavar="TEST",
                        help="run these test files for every mutation instead of each module's own (a quick check)")
    parser.add_argument("--head", action="store_true",
                        help="mutate the last commit's tree, not the working tree (others' edits left out)")
    parser.add_argument("-v", "--verbose", action="store_true", help="say each guard, and why a baseline failed")
    args = parser.parse_args(argv)
    mutations = load_lists(args.lists)
    generated = [m for f in args.generate for m in generate(f)]
    if args.sample is not None:
        generated = random.Random(args.seed).sample(generated, min(args.sample, len(generated)))
    mutations += generated
    if args.file:
        mutations = [m for m in mutations if m.file in args.file]
    if args.list_only:
        for m in mutations:
            print(f"{m.label()}  [{' '.join(sorted({*tests_for(m.file, ROOT), *m.tests}))}]")
        return 0
    return run(mutations, args.timeout, args.verbose, args.head, tuple(args.tests))


if __name__ == "__main__":
    sys.exit(main())
