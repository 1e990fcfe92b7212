"""builder.core.errors: a problem names its file, line and key; an input error carries every problem."""

from __future__ import annotations

from pathlib import Path

from builder.core.errors import COMMAND_LINE, InputError, Problem, usage_error


def test_a_problem_names_file_line_key_and_message() -> None:
    assert str(Problem(Path("m.yaml"), 7, "cells[0].os", "unknown")) == "m.yaml:7: cells[0].os: unknown"


def test_a_problem_without_a_line_names_the_file_alone() -> None:
    assert str(Problem(Path("m.yaml"), None, "torch", "missing")) == "m.yaml: torch: missing"


def test_an_input_error_keeps_every_problem_one_per_line() -> None:
    problems = [Problem(Path("a.yaml"), 1, "x", "bad"), Problem(Path("b.yaml"), None, "y", "worse")]
    error = InputError(problems)
    assert error.problems == problems
    assert str(error) == "a.yaml:1: x: bad\nb.yaml: y: worse"


def test_a_usage_error_blames_the_command_line_option() -> None:
    error = usage_error("--gfx", "not a target")
    assert error.problems == [Problem(COMMAND_LINE, None, "--gfx", "not a target")]
    assert str(error) == "(command line): --gfx: not a target"
