"""The runner pool's size limit (builder.publish.runners.MAX_RUNNERS, documented as 32: a pool is a handful of
machine sizes) on both sides, written as literals: 32 runners are a pool, 33 are an error naming the file, its line
and key, and the count and limit; through the command line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core.errors import InputError
from builder.publish import runners
from testkit.matrices import cpu_matrix


def pool_file(tmp_path: Path, count: int) -> Path:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(cpu_matrix("'2.13.0'"))
    lines = "".join(f"  r{k:02d}: {k + 1}G\n" for k in range(count))
    (tmp_path / runners.FILE).write_text(f"default: r00\nrunners:\n{lines}")
    return matrix


def test_a_pool_of_exactly_32_runners_is_read_smallest_first(tmp_path: Path) -> None:
    pool = runners.beside(pool_file(tmp_path, 32))
    assert len(pool.runners) == 32 and pool.default == "r00"
    assert pool.runners[0] == runners.Runner("r00", 1 << 30) and pool.largest == runners.Runner("r31", 32 << 30)


def test_a_pool_of_33_runners_is_an_error_naming_file_line_key_and_the_limit(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        runners.beside(pool_file(tmp_path, 33))
    assert str(caught.value).startswith(f"{tmp_path / runners.FILE}:2: runners: 33 runners, over the limit of 32")


def test_the_matrix_command_exits_2_on_a_pool_of_33_runners(tmp_path: Path) -> None:
    matrix = pool_file(tmp_path, 33)
    result = CliRunner().invoke(app, ["matrix", "-m", str(matrix), "--format", "github"],
                                env={"COLUMNS": "300", "NO_COLOR": "1"})
    assert result.exit_code == 2, result.output
    assert "33 runners, over the limit of 32" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["matrix", "-m", str(pool_file(tmp_path, 32)), "--format", "github"],
                                env={"COLUMNS": "300", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert '"runner":"r' in result.stdout


@pytest.mark.parametrize("label", ["ubuntu 24.04", "-x", ".x", "_x", "a;b", "x" * 101])
def test_a_runner_label_a_workflow_cannot_run_on_is_refused_even_with_its_disk(tmp_path: Path, label: str) -> None:
    """--runner LABEL --runner-disk SIZE makes a one-runner pool of its own: the label is checked there too, before
    it reaches a workflow's runs-on."""
    with pytest.raises(InputError) as caught:
        runners.resolve(pool_file(tmp_path, 2), label, "60G")
    assert str(caught.value) == (f"(command line): --runner: {label[:80]!r} is not a runner label: "
                                 "[A-Za-z0-9_.-], at most 100")


def test_a_label_of_100_characters_is_a_runner_label(tmp_path: Path) -> None:
    pool = runners.resolve(pool_file(tmp_path, 2), "x" * 100, "60G")
    assert pool.runners == (runners.Runner("x" * 100, 60 << 30),)


def test_plan_exits_2_on_a_runner_label_a_workflow_cannot_run_on(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["plan", "-m", str(pool_file(tmp_path, 2)), "--registry", "127.0.0.1:1/ns",
                                      "--runner", "a;b", "--runner-disk", "60G", "--format", "github"],
                                env={"COLUMNS": "300", "NO_COLOR": "1"})
    assert result.exit_code == 2, result.output
    assert "--runner: 'a;b' is not a runner label" in " ".join(result.output.split())
