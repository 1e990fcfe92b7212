"""The GitHub rows: every `${{ matrix.* }}` a workflow reads is in every row, and GitHub's job limit holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builder import ghrows
from builder.errors import InputError
from builder.matrix import expand_matrix
from builder.plan import ImagePlan, latest_cell, plan_images, shard
from tests.conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
MATRIX_KEY = re.compile(r"\$\{\{\s*matrix\.([A-Za-z_][A-Za-z0-9_-]*)")


def production_plans() -> list[ImagePlan]:
    expansion = expand_matrix(ROOT / "matrix.yaml")
    return plan_images(expansion.cells, latest_cell(expansion.cells, expansion.default_os))


def test_every_matrix_key_the_workflows_read_is_in_every_row() -> None:
    read = {key for wf in WORKFLOWS for key in MATRIX_KEY.findall(wf.read_text())}
    assert read, "the publish workflows read matrix.tag at least"
    rows = [ghrows.row(p) for p in production_plans()]
    for row in rows:
        missing = read - set(row)
        assert not missing, f"{row['tag']}: workflows read matrix.{sorted(missing)}"
        assert all(isinstance(v, str) for v in row.values())


def test_the_row_names_every_tag_of_its_image_and_selects_it_by_its_own_tag() -> None:
    plans = production_plans()
    for plan in plans:
        row = ghrows.row(plan)
        assert row["tag"] == plan.content.tag
        assert row["tags"].split() == plan.tags
    assert sum("latest" in ghrows.row(p)["tags"].split() for p in plans) == 1


def test_more_than_256_images_are_refused_and_shards_fit(tmp_path: Path) -> None:
    plans = production_plans()
    assert len(plans) > ghrows.MAX_JOBS
    with pytest.raises(InputError) as exc:
        ghrows.matrix_json(plans)
    assert "--shard" in str(exc.value) and "(command line)" in str(exc.value)
    seen: list[str] = []
    for k in (1, 2):
        data = json.loads(ghrows.matrix_json(shard(plans, f"{k}/2")))
        assert len(data["include"]) <= ghrows.MAX_JOBS
        seen += [r["tag"] for r in data["include"]]
    assert sorted(seen) == sorted(p.content.tag for p in plans)


@pytest.mark.parametrize("spec", ["0/2", "3/2", "1", "a/b", "1/0", "-1/2"])
def test_bad_shard_is_a_command_line_error(spec: str) -> None:
    with pytest.raises(InputError) as exc:
        shard([], spec)
    assert "--shard" in str(exc.value)

