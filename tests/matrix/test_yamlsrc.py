"""builder.matrix.yamlsrc: YAML with the line of every key and item, syntax and duplicate-key errors, file errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.errors import Problem
from builder.matrix.yamlsrc import LocatedYaml, dotted, load_located
from testkit.matrices import BASE, load_cells, problems_of, write_matrix

# --- LocatedYaml -----------------------------------------------------------------------------------------

LINES = {(): 1, ("matrix",): 2, ("matrix", "os"): 3, ("matrix", "os", 0): 4}


@pytest.mark.parametrize(("path", "line"), [
    (("matrix", "os", 0), 4),
    (("matrix", "os", 1), 3),
    (("matrix", "os", 1, "deeper"), 3),
    (("matrix", "torch", 0, "version"), 2),
    (("include", 0), 1),
    ((), 1),
])
def test_line_of_falls_back_to_deepest_recorded_prefix(path: tuple[str | int, ...], line: int) -> None:
    located = LocatedYaml(Path("m.yaml"), {}, dict(LINES))
    assert located.line_of(path) == line
    assert located.problem(path, "msg") == Problem(Path("m.yaml"), line, dotted(path), "msg")


def test_line_of_without_any_recorded_line() -> None:
    assert LocatedYaml(Path("m.yaml"), {}).line_of(("matrix", "os")) is None


def test_load_located_records_keys_and_items(tmp_path: Path) -> None:
    text = "# c\n" + BASE + "include:\n  - os: x\n    torch:\n      - '2.1'\n"
    located = load_located(write_matrix(tmp_path, text))
    assert located.data["matrix"]["torch"] == ["2.13.0"]
    assert {p: located.lines[p] for p in [(), ("matrix",), ("matrix", "platform"), ("include", 0),
                                         ("include", 0, "torch"), ("include", 0, "torch", 0)]} == {
        (): 2, ("matrix",): 2, ("matrix", "platform"): 4, ("include", 0): 7, ("include", 0, "torch"): 8,
        ("include", 0, "torch", 0): 9}


@pytest.mark.parametrize(("path", "text"), [
    ((), "(top level)"),
    (("matrix",), "matrix"),
    (("matrix", "torch", 1, "version"), "matrix.torch[1].version"),
    (("include", 0, "expect", "torch"), "include[0].expect.torch"),
])
def test_dotted(path: tuple[str | int, ...], text: str) -> None:
    assert dotted(path) == text


# --- loading: nulls, strings, duplicate keys, unreadable files ------------------------------------------

def test_plain_nulls_load_as_none(tmp_path: Path) -> None:
    located = load_located(write_matrix(tmp_path, "a: null\nb: ~\nc:\nd: 'null'\ne: \"\"\n"))
    assert located.data == {"a": None, "b": None, "c": None, "d": "null", "e": ""}


def test_unquoted_versions_stay_strings(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, """\
        matrix:
          os: [debian-12]
          platform: [cpu]
          torch: [2.10, 2.9]
        include:
          - {os: debian-12, platform: cpu, torch: {version: 2.5, torchvision: 0.20}}
        exclude:
          - {torch: 2.9}
        """)
    # The companions rule would reject a torchvision read as the float 0.2 (it pairs 2.5 with 0.20).
    assert [(c.torch, c.torchvision, c.torchaudio) for c in cells] == [
        ("2.10", "0.25.0", "2.10.0"), ("2.5", "0.20", "2.5.0")]
    assert cells[0].tag == "cpu_debian12_py3.11_torch2.10_runtime"


def test_all_duplicate_yaml_keys_are_reported_together(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, BASE + "matrix: {}\nimage: a\nimage: b\n")
    assert [str(p) for p in problems_of(file)] == [
        f"{file}:5: matrix: duplicate key (first at line 1)",
        f"{file}:7: image: duplicate key (first at line 6)",
    ]


def test_non_utf8_file_is_an_input_error(tmp_path: Path) -> None:
    file = tmp_path / "matrix.yaml"
    file.write_bytes(BASE.encode() + "image: caf\xe9\n".encode("latin-1"))
    [problem] = problems_of(file)
    assert problem.key == "(file)"


@pytest.mark.parametrize("name", ["absent.yaml", ""], ids=["missing", "directory"])
def test_unreadable_file(tmp_path: Path, name: str) -> None:
    file = tmp_path / name
    [problem] = problems_of(file)
    assert (problem.file, problem.line, problem.key) == (file, None, "(file)")
    assert str(problem).startswith(f"{file}: (file): cannot read: ")
