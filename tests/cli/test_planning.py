"""`builder publish --plan` (builder.cli.planning): options checked first, the plan's counts, the workflow's rows."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from builder.cli import planning
from builder.cli.app import app
from builder.core.errors import InputError
from builder.pipeline.jobs import Job, by_combination, matrix_jobs
from builder.publish.planner import Decision
from builder.render.sources import WheelSource
from tests.fakes.checkout import DATA, ROOT


def test_usage_errors_name_the_option() -> None:
    for args, option in ((["--format", "json"], "--format"), (["--move-tags"], "--move-tags"),
                         (["--plan", "--format", "xml"], "--format"), (["--plan", "--shard", "3/2"], "--shard")):
        proc = CliRunner().invoke(app, ["publish", "-m", str(ROOT / "examples/local.yaml"), "--registry",
                                        "127.0.0.1:1/x", *args])
        assert proc.exit_code == 2 and option in proc.output, (args, proc.output)


@pytest.mark.parametrize(("fmt", "plan", "move_tags", "option"), [
    ("xml", True, False, "--format"), ("json", False, False, "--format"), ("github", False, False, "--format"),
    ("text", False, True, "--move-tags"),
])
def test_check_format_refuses_what_belongs_to_plan(fmt: str, plan: bool, move_tags: bool, option: str) -> None:
    with pytest.raises(InputError) as exc:
        planning.check_format(fmt, plan, move_tags)
    assert exc.value.problems[0].key == option


def test_check_format_passes_the_formats_of_a_plan() -> None:
    for fmt in planning.FORMATS:
        planning.check_format(fmt, True, True)
    planning.check_format("text", False, False)


@pytest.fixture(scope="module")
def todo() -> list[Job]:
    return matrix_jobs(DATA / "golden.yaml", None, None, WheelSource())  # three combinations


def test_counts_every_action(todo: list[Job]) -> None:
    decisions = [Decision(todo[0], "build", "new"), Decision(todo[1], "skip", "same"),
                 Decision(todo[0], "error", "down")]
    assert planning.counts(decisions) == {"build": 1, "move-tags": 0, "skip": 1, "error": 1}


def test_github_rows_are_the_combinations_with_an_image_to_build_with_all_their_images(todo: list[Job]) -> None:
    combinations = by_combination(todo)
    first = next(iter(combinations))
    decisions = [Decision(j, "build" if j is combinations[first][0] else "skip", "") for j in todo]
    rows = json.loads(planning.github(decisions))["include"]
    assert [r["group"] for r in rows] == [first]
    assert sorted(rows[0]["cells"].split()) == sorted(j.tag for j in combinations[first])
    assert json.loads(planning.github([Decision(j, "skip", "") for j in todo])) == {"include": []}
