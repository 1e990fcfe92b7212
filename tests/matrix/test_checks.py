"""builder.matrix.checks: schema errors at their place in the file, size limits from the axes alone, duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.errors import InputError
from builder.matrix import checks
from builder.matrix.yamlsrc import LocatedYaml, load_located
from testkit.matrices import ONE_CPU, cpu_matrix, problems_of, write_matrix


def test_same_torch_release_spelled_twice_is_a_duplicate(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, cpu_matrix("2.10", "2.10.0"))
    [problem] = problems_of(file)
    assert (problem.line, problem.key) == (4, "matrix.torch[1]") and "duplicate value '2.10.0'" in problem.message


def located(tmp_path: Path, text: str) -> LocatedYaml:
    return load_located(write_matrix(tmp_path, text))


def test_a_file_that_is_no_mapping_is_one_problem_at_its_top(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        checks.validate(located(tmp_path, "- a\n- b\n"))
    assert [p.message for p in exc.value.problems] == ["the matrix file must be a mapping"]


def test_a_schema_error_is_placed_where_it_is_in_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        checks.validate(located(tmp_path, ONE_CPU + "  flavour: [runtime]\nexclude:\n  - {torch: [1, 2]}\n"))
    assert {(p.line, p.key) for p in exc.value.problems} >= {(5, "matrix.flavour")}
    assert "unknown key" in next(p.message for p in exc.value.problems if p.key == "matrix.flavour")


def test_in_file_cuts_a_path_where_the_schema_made_a_scalar_a_list() -> None:
    data = {"exclude": [{"torch": "2.13.0"}], "matrix": {"os": ["debian-12"]}}
    assert checks._in_file(data, ("exclude", 0, "torch", 0)) == ("exclude", 0, "torch")
    assert checks._in_file(data, ("matrix", "os", 0)) == ("matrix", "os", 0)
    assert checks._in_file(data, ("missing", 3)) == ("missing",)


def test_size_is_refused_from_the_axes_with_the_shape_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = located(tmp_path, cpu_matrix("'2.13.0'", "'2.12.0'") + "  flavor: [runtime, devel]\n")
    model = checks.validate(source)
    checks.check_size(source, model)
    monkeypatch.setattr(checks, "MAX_CELLS", 3)
    with pytest.raises(InputError) as exc:
        checks.check_size(source, model)
    assert exc.value.problems[0].key == "matrix"
    assert "expands to 4 cells (1 os x 2 torch x 2 flavor x 1 channel x (0 rocm platforms x " in str(exc.value)
