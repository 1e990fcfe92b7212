"""benchmarks/bench_night.py's model of the publish workflow still matches .github/workflows/
(benchmarks/support/nightjobs.py).

The benchmark counts the jobs a scheduled run starts from the plan's outputs; if a job, its `needs` or its `if`
changes in the workflow, these fail, so the model is updated with it instead of reporting jobs no run starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.support import nightjobs
from benchmarks.support.nightjobs import ASSUMED, load_jobs, needs_and_if, workflow_jobs, workflow_locks

FILES = {"publish.yml": nightjobs.PUBLISH, "publish-cells.yml": nightjobs.CELLS}


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_workflow_has_exactly_the_jobs_needs_and_conditions_the_model_assumes(name: str) -> None:
    jobs = load_jobs(FILES[name])
    assert set(jobs) == set(ASSUMED[name]), "a job was added or removed: update workflow_jobs"
    for job, assumed in ASSUMED[name].items():
        assert needs_and_if(jobs[job]) == assumed, f"{name} {job}: its needs or if changed: update workflow_jobs"


def test_publish_calls_one_job_per_row_and_the_plan_says_rows_and_moves() -> None:
    jobs = load_jobs(nightjobs.PUBLISH)
    assert jobs["publish"]["uses"] == "./.github/workflows/publish-cells.yml"
    assert jobs["publish"]["with"]["groups"] == "${{ needs.plan.outputs.groups }}"
    assert jobs["publish"]["with"]["rows"] == "${{ fromJSON(needs.plan.outputs.count) }}"
    assert jobs["publish"]["with"]["stages"] == "${{ fromJSON(needs.plan.outputs.stages) }}"  # what stages runs on
    assert load_jobs(nightjobs.CELLS)["publish"]["strategy"]["matrix"] == "${{ fromJSON(inputs.groups) }}"
    outputs = jobs["plan"]["outputs"]
    assert outputs["count"] == "${{ steps.plan.outputs.count }}"
    assert outputs["moves"] == "${{ steps.plan.outputs.moves }}"
    assert outputs["stages"] == "${{ steps.plan.outputs.stages }}"
    script = next(s["run"] for s in jobs["plan"]["steps"] if s.get("id") == "plan")
    assert "builder plan" in script and "--format github" in script
    assert 'compgen -G "images/*/lock/base.txt"' in script and "args+=(--locks images)" in script


def test_the_model_starts_one_job_on_a_night_with_nothing_to_do() -> None:
    assert workflow_jobs(0, 0) == {"plan": 1}


def test_the_model_counts_each_row_sign_catalog_pages_and_shared_stages_the_cache_lacks() -> None:
    assert workflow_jobs(3, 0, 2) == {"plan": 1, "stages": 1, "publish": 3, "sign": 1, "catalog": 1, "pages": 1}
    assert workflow_jobs(3, 0, 0) == {"plan": 1, "publish": 3, "sign": 1, "catalog": 1, "pages": 1}
    assert workflow_jobs(1, 0) == {"plan": 1, "publish": 1, "sign": 1, "catalog": 1, "pages": 1}


def test_the_model_moves_tags_without_a_publish_job() -> None:
    assert workflow_jobs(0, 2) == {"plan": 1, "retag": 1, "catalog": 1, "pages": 1}


def test_locks_are_used_exactly_when_a_combination_has_a_base_lock(tmp_path: Path) -> None:
    (tmp_path / "images" / "combo" / "lock").mkdir(parents=True)
    (tmp_path / "images" / "combo" / "lock" / "torch.txt").write_text("")
    assert workflow_locks(tmp_path) is None
    (tmp_path / "images" / "combo" / "lock" / "base.txt").write_text("")
    assert workflow_locks(tmp_path) == tmp_path / "images"
