"""The runner jobs a scheduled run of .github/workflows/publish.yml starts, from its plan's outputs (bench_night).

One function, `workflow_jobs`, is the model; ASSUMED is what it takes from the two workflow files (each job's
`needs` and `if`, as written there). tests/project/test_nightjobs.py parses the workflows and compares them to
ASSUMED, so an edit to a job, its `needs` or its condition fails a test instead of leaving the model quietly
wrong. `workflow_locks` is the plan step's rule for `--locks images`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
PUBLISH = ROOT / ".github" / "workflows" / "publish.yml"
CELLS = ROOT / ".github" / "workflows" / "publish-cells.yml"

# job -> (needs, if) as the workflow files write them, blanks folded (None: no `if:`, the default success()).
ASSUMED: dict[str, dict[str, tuple[tuple[str, ...], str | None]]] = {
    "publish.yml": {
        "plan": ((), None),
        "retag": (("plan",), "needs.plan.outputs.moves != '0' && inputs.dry_run != true"),
        "publish": (("plan",), "needs.plan.outputs.count != '0'"),
        "catalog": (("plan", "publish", "retag"),
                    "${{ !cancelled() && needs.plan.result == 'success' && inputs.dry_run != true "
                    "&& (needs.plan.outputs.count != '0' || needs.plan.outputs.moves != '0') }}"),
        "pages": (("catalog",), None),
    },
    "publish-cells.yml": {
        "stages": ((), "inputs.stages > 0 && inputs.dry_run != true"),  # inputs.stages: the plan's stages
        "publish": (("stages",), "${{ !cancelled() }}"),  # strategy.matrix: fromJSON(inputs.groups): one job per row
        "sign": (("publish",), "${{ !cancelled() && inputs.dry_run != true }}"),
    },
}


def workflow_jobs(rows: int, moves: int, stages: int = 0) -> dict[str, int]:
    """Runner jobs a scheduled (not dry) run of publish.yml starts, by job name, given the plan job's outputs:
    `count` (rows: combinations with an image to build), `moves` (published images whose tags point elsewhere) and
    `stages` (stages several rows share that the build cache lacks).

    publish.yml: `plan` always; `retag` when moves != 0; `publish` calls publish-cells.yml when count != 0 (with
    rows = count, stages = stages), which starts `stages` (those stages, built once first) when stages > 0, one
    `publish` job per row and then one `sign` job; `catalog` when count != 0 or moves != 0, and `pages` after it.
    """
    jobs = {"plan": 1}
    if moves:
        jobs["retag"] = 1
    if rows:
        jobs["stages"] = 1 if stages > 0 else 0
        jobs["publish"] = rows
        jobs["sign"] = 1
    if rows or moves:
        jobs["catalog"] = 1
        jobs["pages"] = 1
    return {job: n for job, n in jobs.items() if n}


def load_jobs(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    jobs: dict[str, Any] = doc["jobs"]
    return jobs


def needs_and_if(job: dict[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """A job's `needs` (always a tuple) and its `if` (stripped, None when absent), as written."""
    needs = job.get("needs", ())
    condition = job.get("if")
    return (tuple([needs] if isinstance(needs, str) else needs),
            " ".join(str(condition).split()) if condition is not None else None)


def workflow_locks(tree: Path) -> Path | None:
    """The plan step's rule: `--locks images` exactly when `compgen -G "images/*/lock/base.txt"` finds a file."""
    images = tree / "images"
    return images if any(images.glob("*/lock/base.txt")) else None
