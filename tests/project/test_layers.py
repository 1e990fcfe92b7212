"""The layout rules of docs/architecture.md: packages by role in layers, arrows one way, small modules, every module
imported under its own name, what varies in one module per variant.

Every import counts, lazy ones inside functions and `if TYPE_CHECKING:` ones included: a cycle hidden in a
function is still a cycle a reader has to untangle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.fakes.checkout import ROOT

PACKAGE = ROOT / "builder"
# A package may import only itself and packages of a lower layer (docs/architecture.md's table, top to bottom).
LAYER = {"core": 0, "smoke": 0, "matrix": 1, "registry": 1, "buildkit": 1, "render": 2, "validate": 2,
        "publish": 3, "pipeline": 4, "audit": 5, "site": 5, "which": 5, "cli": 6}
MAX_LINES = 300


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module of the package that name imports (resolved to the module, not the symbol)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for imported in targets:
            target = imported
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target.startswith("builder") and target != name and not name.startswith(target + "."):
                out.add(target)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def package_of(module: str) -> str:
    """builder.<package>.x -> <package>; "" for builder itself and its __main__ (the entry point, above all)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYER else ""


def test_builder_holds_role_packages_only() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in {"__init__.py", "__main__.py"})
    assert not loose, f"modules loose at builder/ top level: {loose}"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(LAYER), "a package was added or removed: give it its layer here and a row in the docs"


@pytest.mark.parametrize("folder", ["builder", "benchmarks"])
def test_every_module_is_under_300_lines(folder: str) -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_no_import_cycle_between_modules() -> None:
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        state[v] = 1
        stack.append(v)
        for w in sorted(GRAPH.get(v, ())):
            if state.get(w) == 1:
                cycles.append([*stack[stack.index(w):], w])
            elif w not in state:
                visit(w)
        stack.pop()
        state[v] = 2

    for v in sorted(GRAPH):
        if v not in state:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_packages_import_only_packages_of_lower_layers() -> None:
    upward = sorted(f"{a} -> {b}" for a, bs in GRAPH.items() for b in bs
                    if (pa := package_of(a)) and (pb := package_of(b)) and pa != pb and LAYER[pb] >= LAYER[pa])
    assert not upward, "imports against the layers (docs/architecture.md): " + ", ".join(upward)


def test_core_imports_nothing_of_the_package() -> None:
    assert not {b for a, bs in GRAPH.items() if package_of(a) == "core" for b in bs if package_of(b) != "core"}


def test_the_checker_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    """The rules would be toothless if an import inside a function or under TYPE_CHECKING went unseen."""
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from builder.cli import app\n"
                      "def f():\n    from builder.pipeline.jobs import Job\n")
    assert _imports("builder.core.m", module) == {"builder.cli.app", "builder.pipeline.jobs"}


ALIAS = re.compile(r"^\s*(from builder[.\w]* import .* as |from \.+[\w.]* import .* as |import builder\.[\w.]+ as )")


def test_every_module_of_the_package_is_imported_under_its_own_name() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}" for p in [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
                                                      *(ROOT / "benchmarks").rglob("*.py")]
             for n, line in enumerate(p.read_text().splitlines(), 1) if ALIAS.match(line)]
    assert not found, f"import aliases of the package's own names: {found}"


# A branch on an OS family or channel name: what the variant modules (core/osfamilies, core/channels) answer.
BRANCH = re.compile(r'(family|channel|distro)[a-z_]* *(==|!=|in|not in) |== *"(apt|dnf|therock|pytorch|local)"|'
                    r'"(apt|dnf|therock|pytorch|local)" *(==|!=|in )')
VARIANTS = (PACKAGE / "core" / "osfamilies", PACKAGE / "core" / "channels", PACKAGE / "smoke")
MAX_BRANCHES = 0  # each channel and OS family answers for itself (builder/core/channels, builder/core/osfamilies)


def test_branches_on_a_variant_name_stay_in_the_variant_modules() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}" for p in PACKAGE.rglob("*.py")
             if not any(p.is_relative_to(v) for v in VARIANTS)
             for n, line in enumerate(p.read_text().splitlines(), 1) if BRANCH.search(line)]
    assert len(found) <= MAX_BRANCHES, f"{len(found)} branches on an OS family or channel name: {found}"


# --- tests mirror the package: tests/<package>/test_<module>.py for every module with logic -------------------

# A module whose test module has another name, and why.
TESTED_AS = {
    # The zipapp's bundle(): tests/smoke/test_smoke.py is torch_smoke/smoke.py's (torch_smoke is tested in tests/smoke).
    "builder.smoke": "tests/smoke/test_bundle.py",
    # Two modules named base.py (the interfaces of wheel channels and of OS families): each tested with its registry.
    "builder.core.channels.base": "tests/core/test_channels.py",
    "builder.core.osfamilies.base": "tests/core/test_osfamilies.py",
}
# Modules with no logic: constants, re-exports or one call, and no function with a branch (checked below).
NO_LOGIC = {
    "builder": "the version string",
    "builder.__main__": "`python -m builder`: calls the CLI's main()",
    "builder.validate.suite": "where the in-image suite's files are: one constant",
}
# The in-image suite is itself tests: pytest runs it inside each image (tests/validate/test_runner*.py).
IN_IMAGE = "builder.validate.suite."
BRANCHES = (ast.If, ast.For, ast.While, ast.Try, ast.Match, ast.IfExp, ast.BoolOp, ast.comprehension, ast.With)


def mirror_of(module: str) -> str:
    """builder.<package>[.<subpackage>].<module> -> tests/<package>/test_<module>.py; a package's __init__ is
    tested as its own name (builder.site -> tests/site/test_site.py), __main__ as main."""
    parts, init = module.split("."), MODULES[module].name == "__init__.py"
    name = parts[-1] if init else parts[-1].strip("_")
    folder = f"{parts[1]}/" if len(parts) > (1 if init else 2) else ""  # builder's own modules: tests/test_*.py
    return TESTED_AS.get(module, f"tests/{folder}test_{name}.py")


def needs_tests(module: str) -> bool:
    """Every module that holds a statement besides its docstring, imports and __all__ (an empty __init__ does not)."""
    body = ast.parse(MODULES[module].read_text()).body
    return module not in NO_LOGIC and not module.startswith(IN_IMAGE) and any(
        not isinstance(node, ast.Import | ast.ImportFrom) and not (isinstance(node, ast.Expr) and i == 0)
        and not (isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["__all__"])
        for i, node in enumerate(body))


def test_every_module_with_logic_has_its_test_module() -> None:
    missing = sorted(f"{m} -> {mirror_of(m)}" for m in MODULES
                     if needs_tests(m) and not (ROOT / mirror_of(m)).is_file())
    assert not missing, "modules without their test module: " + ", ".join(missing)


def test_modules_said_to_have_no_logic_have_no_branch_and_no_test_module() -> None:
    for module in NO_LOGIC:
        tree = ast.parse(MODULES[module].read_text())
        branches = [n for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                    for n in ast.walk(f) if isinstance(n, BRANCHES)]
        assert not branches, f"{module} has logic now: give it {mirror_of(module)} and drop it from NO_LOGIC"
        assert not (ROOT / mirror_of(module)).is_file(), f"{module} has a test module: drop it from NO_LOGIC"


def test_the_mirror_names_test_modules_as_the_docs_say() -> None:
    assert mirror_of("builder.core.tags") == "tests/core/test_tags.py"
    assert mirror_of("builder.smoke.torch_smoke.gpu") == "tests/smoke/test_gpu.py"
    assert mirror_of("builder.smoke.torch_smoke.__main__") == "tests/smoke/test_main.py"
    assert mirror_of("builder.which") == "tests/which/test_which.py"
    assert mirror_of("builder.__main__") == "tests/test_main.py"
    assert needs_tests("builder.which") and not needs_tests("builder.core") and not needs_tests("builder.__main__")
