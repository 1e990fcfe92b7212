"""The registry-aware plan: build / move-tags / skip from the registry's answers, no engine, few requests.

Against a scripted registry that holds manifests and configs in memory (testkit/scripted_registry.py): what it
is asked, and what the plan decides and prints, `--format github` included.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.core.tags import HASH_LABEL
from builder.matrix.expand import expand_matrix
from builder.pipeline.jobs import Job, matrix_jobs
from builder.publish import planner
from builder.publish.promote import Target
from builder.registry.client import RegistryClient
from builder.render.sources import WheelSource
from testkit.scripted_registry import FAST, Reply, Scripted, Seen
from testkit.stored_registry import MANIFEST_TYPE, Store, publish_all
from tests.fakes.checkout import ROOT, builder_cli
from tests.fakes.registries import Registry, need_docker_registry

Start = Callable[[Callable[[Seen], Reply]], Scripted]


def example_jobs() -> list[Job]:
    return matrix_jobs(ROOT / "examples" / "local.yaml", None, None, WheelSource())


def target_of(scripted: Scripted, namespace: str = "rocm") -> Target:
    api = RegistryClient(scripted.address, policy=FAST)
    return Target(f"{scripted.address}/{namespace}", api, None)


def test_an_empty_namespace_builds_everything_with_one_manifest_request_each(server: Start) -> None:
    store = Store()
    scripted = server(store.answer)
    todo = example_jobs()
    decisions = planner.plan(target_of(scripted), todo)
    assert [(d.job.tag, d.action) for d in decisions] == [(j.tag, "build") for j in todo]
    assert all("nothing published" in d.reason and d.moves == d.job.tags for d in decisions)
    # The readable tag (404), then the immutable tag (404): nothing more.
    assert sorted(s.path for s in scripted.seen) == sorted(
        f"/v2/rocm/{j.repository}/manifests/{t}" for j in todo for t in (j.tag, j.immutable_tag))


def test_nothing_changed_skips_every_image_from_its_two_manifests_and_one_config(server: Start) -> None:
    store = Store()
    scripted = server(store.answer)
    todo = example_jobs()
    publish_all(store, todo)
    decisions = planner.plan(target_of(scripted), todo)
    assert [d.action for d in decisions] == ["skip"] * len(todo)
    manifests = [s.path for s in scripted.seen if "/manifests/" in s.path]
    blobs = [s.path for s in scripted.seen if "/blobs/" in s.path]
    # One manifest per moving tag (`latest` too), one per immutable tag (a deleted one is built again); one config
    # per image; no write.
    assert len(manifests) == sum(len(j.tags) + 1 for j in todo) and len(blobs) == len(todo)
    assert all(s.method == "GET" for s in scripted.seen)


def test_a_moved_tag_is_moved_back_by_digest_without_a_build(server: Start) -> None:
    store = Store()
    scripted = server(store.answer)
    todo = example_jobs()
    publish_all(store, todo)
    runtime, devel = todo
    store.manifests["rocm/pytorch:latest"] = store.manifests[f"rocm/pytorch:{devel.tag}"]  # moved by hand
    target = target_of(scripted)
    decisions = planner.plan(target, todo)
    assert [(d.action, d.moves) for d in decisions] == [("move-tags", ["latest"]), ("skip", [])]
    assert not [s for s in scripted.seen if s.method != "GET"], "a plan alone writes nothing"
    planner.move_tags(target, decisions)
    assert decisions[0].moved == ["latest"]
    assert store.digest("rocm/pytorch", "latest") == store.digest("rocm/pytorch", runtime.immutable_tag)
    assert [s.path for s in scripted.seen if s.method == "PUT"] == ["/v2/rocm/pytorch/manifests/latest"]


def test_new_content_is_built_and_an_immutable_tag_with_another_hash_is_an_error(server: Start) -> None:
    store = Store()
    scripted = server(store.answer)
    todo = example_jobs()
    runtime, devel = todo
    store.publish("rocm/pytorch", runtime.tag, "sha256:" + "0" * 64)  # the tag holds older content
    store.publish("rocm/pytorch", devel.immutable_tag, "sha256:" + "1" * 64)  # a lying immutable tag
    decisions = planner.plan(target_of(scripted), todo)
    assert (decisions[0].action, decisions[0].reason) == (
        "build", f"new content: no image under {runtime.immutable_tag}")
    assert decisions[1].action == "error" and "never overwritten" in decisions[1].reason


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/rif-plan/docker.sock", "NO_COLOR": "1",
           "PYTHONPATH": str(ROOT)}
    env.pop("RIF_REGISTRY", None)
    return builder_cli("plan", *args, env=env, timeout=300)


def test_the_command_plans_without_an_engine_in_every_format(server: Start, tmp_path: Path) -> None:
    store = Store()
    scripted = server(store.answer)
    todo = example_jobs()
    base = ["-m", "examples/local.yaml", "--registry", f"{scripted.address}/rocm",
            "--record", str(tmp_path / "record.json")]
    empty = cli(*base, "--format", "github")
    assert empty.returncode == 0, empty.stderr
    found = json.loads(empty.stdout)["include"]
    assert [r["cells"] for r in found] == [" ".join(j.tag for j in todo)]  # the one combination, all its images
    publish_all(store, todo)
    done = cli(*base, "--format", "github")
    assert done.returncode == 0 and json.loads(done.stdout) == {"include": []}, done.stderr
    listed = json.loads(cli(*base, "--format", "json").stdout)
    assert [(i["tag"], i["action"], i["immutable_tag"]) for i in listed["images"]] == [
        (j.tag, "skip", j.immutable_tag) for j in todo]
    text = cli(*base)
    assert text.returncode == 0 and "0 would be built, 2 unchanged; nothing built" in text.stdout, text.stderr
    assert "Docker engine" not in text.stderr


# -- a real registry (docker-registry on a port of its own), filled through the registry API: no engine ---------

def push_tiny(api: RegistryClient, repo: str, job: Job) -> None:
    """A one-layer image labelled with the job's content hash under its immutable tag, its moving tags on it."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                         "config": {"Labels": {HASH_LABEL: job.content_hash}}}).encode()
    layer = gzip.compress(b"", mtime=0)
    body = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_TYPE,
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": api.push_blob(repo, config), "size": len(config)},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                   "digest": api.push_blob(repo, layer), "size": len(layer)}]}).encode()
    manifest, _ = api.put_manifest(repo, job.immutable_tag, body, MANIFEST_TYPE)
    for tag in job.tags:
        api.put_tag(repo, tag, manifest)


@pytest.mark.registry
def test_a_real_registry_plans_nothing_then_the_changed_combination_then_everything(tmp_path: Path) -> None:
    from builder.publish import rows

    need_docker_registry()
    reg = Registry(tmp_path).start()
    try:
        api = RegistryClient(reg.address, policy=FAST)
        for job in example_jobs():
            push_tiny(api, f"rocm/{job.repository}", job)
        example = (ROOT / "examples" / "local.yaml").read_text()

        def found(matrix: str, namespace: str = "rocm") -> list[dict[str, object]]:
            path = tmp_path / "matrix.yaml"
            path.write_text(matrix)
            proc = cli("-m", str(path), "--registry", f"{reg.address}/{namespace}", "--format", "github",
                       "--record", str(tmp_path / "record.json"))
            assert proc.returncode == 0 and proc.stdout.count("\n") == 1, proc.stderr
            found: list[dict[str, object]] = json.loads(proc.stdout)["include"]
            return found

        assert found(example) == []
        # A new combination (debian-13 beside debian-12): its row alone; the published ones are left alone.
        added = example.replace("os: [debian-12]", "os: [debian-12, debian-13]")
        path = tmp_path / "added.yaml"
        path.write_text(added)
        fresh = [r for r in rows.rows(expand_matrix(path).cells) if "debian13" in str(r["cells"])]
        assert len(fresh) == 1 and found(added) == fresh
        # An altered image (the devel image's user): its combination's row alone.
        altered = example + ("exclude:\n  - {flavor: devel}\ninclude:\n  - {os: debian-12, platform: cpu, torch: "
                             "{version: '2.13.0', torchvision: null, torchaudio: null}, flavor: devel, user: dev}\n")
        path.write_text(altered)
        changed = [r for r in rows.rows(expand_matrix(path).cells) if "_devel" in str(r["cells"])]
        assert len(changed) == 1 and found(altered) == changed
        # An empty namespace: every combination.
        assert found(example, f"empty{uuid.uuid4().hex[:8]}") == rows.rows(
            expand_matrix(ROOT / "examples" / "local.yaml").cells)
    finally:
        reg.close()


def test_the_token_is_fetched_once_though_many_workers_look_up_at_once(server: Start) -> None:
    store = Store()
    holder: list[Scripted] = []

    def answer(seen: Seen) -> Reply:
        if seen.path.startswith("/token"):
            return 200, {"Content-Type": "application/json"}, b'{"token": "t0ken", "expires_in": 300}'
        if seen.auth != "Bearer t0ken":
            realm = f'Bearer realm="http://{holder[0].address}/token",service="fake"'
            return 401, {"WWW-Authenticate": realm}, b""
        return store.answer(seen)

    holder.append(scripted := server(answer))
    todo = matrix_jobs(ROOT / "matrix.yaml", None, None, WheelSource())
    decisions = planner.plan(target_of(scripted), todo, workers=16)
    assert {d.action for d in decisions} == {"build"}
    assert len([s for s in scripted.seen if s.path.startswith("/token")]) == 1


def test_the_command_moves_tags_registry_side_without_an_engine(server: Start, tmp_path: Path) -> None:
    store = Store()
    scripted = server(store.answer)
    runtime, devel = todo = example_jobs()
    publish_all(store, todo)
    store.manifests["rocm/pytorch:latest"] = store.manifests[f"rocm/pytorch:{devel.tag}"]
    proc = cli("-m", "examples/local.yaml", "--registry", f"{scripted.address}/rocm", "--move-tags",
               "--record", str(tmp_path / "record.json"))
    assert proc.returncode == 0, proc.stderr
    assert store.digest("rocm/pytorch", "latest") == store.digest("rocm/pytorch", runtime.tag)
    record = {i["tag"]: (i["state"], i["moved"]) for i in json.loads((tmp_path / "record.json").read_text())["images"]}
    assert record == {runtime.tag: ("skipped", ["latest"]), devel.tag: ("skipped", [])}
    assert "moved latest" in " ".join(proc.stdout.split())


def test_a_deleted_immutable_tag_is_built_again_though_the_cell_tag_holds_the_content(server: Start) -> None:
    store = Store()
    scripted = server(store.answer)
    todo = example_jobs()
    publish_all(store, todo)
    gone = todo[0]
    del store.manifests[f"rocm/{gone.repository}:{gone.immutable_tag}"]
    decisions = planner.plan(target_of(scripted), todo)
    assert [d.action for d in decisions] == ["build"] + ["skip"] * (len(todo) - 1)
    assert f"{gone.immutable_tag} is gone" in decisions[0].reason


@pytest.mark.registry
def test_a_real_registry_plans_build_for_an_image_whose_immutable_tag_was_deleted(tmp_path: Path) -> None:
    """The tag's folder removed from the registry's storage: a tag deleted, its manifest (under the cell tag) kept."""
    need_docker_registry()
    reg = Registry(tmp_path).start()
    try:
        api = RegistryClient(reg.address, policy=FAST)
        todo = example_jobs()
        for job in todo:
            push_tiny(api, f"rocm/{job.repository}", job)
        gone = todo[0]
        tags = reg.storage / "docker/registry/v2/repositories/rocm" / gone.repository / "_manifests/tags"
        assert (tags / gone.tag).is_dir()
        subprocess.run(["rm", "-r", str(tags / gone.immutable_tag)], check=True)
        proc = cli("-m", "examples/local.yaml", "--registry", f"{reg.address}/rocm", "--format", "json",
                   "--record", str(tmp_path / "record.json"))
        assert proc.returncode == 0, proc.stderr
        actions = {i["tag"]: (i["action"], i["reason"]) for i in json.loads(proc.stdout)["images"]}
        assert actions[gone.tag][0] == "build" and "is gone" in actions[gone.tag][1]
        assert all(a == "skip" for t, (a, _) in actions.items() if t != gone.tag)
    finally:
        reg.close()
