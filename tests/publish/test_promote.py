"""Publishing on real registries: skip by content, promote by digest, survive a dying registry, auth.

Each test proves what its name says with structure, never with timings: the run record, the digests the
registry serves, and (through tests.fakes.faultproxy.FaultProxy, with no faults) the requests that reached the registry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from builder.core import tags
from builder.pipeline import jobs, lifecycle
from builder.pipeline.options import PushOptions
from builder.publish.promote import Target
from builder.registry.client import RegistryClient
from builder.registry.credentials import Credentials
from testkit import synthwheels
from testkit.matrices import BARE_TORCH, cpu_matrix
from tests.fakes.checkout import ROOT, builder_cli
from tests.fakes.engine import labelled_image, saved_image
from tests.fakes.faultproxy import FaultProxy
from tests.fakes.registries import Registry, free_port, need_docker_registry, write_htpasswd

__all__ = ["DEVEL", "MATRIX", "RUNTIME", "Registry", "free_port", "image_tags", "publish"]

pytestmark = pytest.mark.docker

RUNTIME = "cpu_debian12_py3.11_torch2.13.0_runtime"
DEVEL = "cpu_debian12_py3.11_torch2.13.0_devel"
MISSING = "cpu_debian12_py3.11_torch2.12.0_runtime"  # the wheelhouse holds no torch 2.12.0: its build fails
TORCH = BARE_TORCH
MATRIX = cpu_matrix(TORCH, image="pytorch") + "  flavor: [runtime, devel]\n"
ML_USER = "user: ml"  # a devel image of another user: its SDK steps (above the user's layer) built again


def cell_override(flavor: str, tag: str, extra: str) -> str:
    """A matrix in which one cell's input changes and every other cell stays the same (explicit tag: never latest)."""
    return (MATRIX + f"exclude:\n  - {{flavor: {flavor}}}\ninclude:\n"
            f"  - {{os: debian-12, platform: cpu, torch: {TORCH}, flavor: {flavor}, tag: {tag}, {extra}}}\n")


def runtime_as(extra: str) -> str:
    """The runtime cell with one input changed, through an include WITHOUT `tag:`: same readable tag, and
    still the `latest` candidate (builder.matrix.selection.latest_cell never picks an explicit-tag cell)."""
    return (MATRIX + "exclude:\n  - {flavor: runtime}\ninclude:\n"
            f"  - {{os: debian-12, platform: cpu, torch: {TORCH}, flavor: runtime, {extra}}}\n")


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    record: dict[str, dict[str, object]]

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr


def publish(matrix_text: str, registry: str, wheelhouse: Path, tmp: Path, env: dict[str, str] | None = None,
            *extra: str, command: str = "publish") -> Run:
    matrix = tmp / f"m-{uuid.uuid4().hex[:6]}.yaml"
    matrix.write_text(matrix_text)
    record = tmp / f"r-{uuid.uuid4().hex[:6]}.json"
    proc = builder_cli(command, "--matrix", str(matrix), "--registry", registry, "--wheelhouse", str(wheelhouse),
                       "--record", str(record), *extra, env={**os.environ, **(env or {})})
    cells = {c["tag"]: c for c in json.loads(record.read_text())["images"]} if record.exists() else {}
    return Run(proc, cells)


@dataclass
class Namespace:
    """A fresh namespace on the shared test registry, published to directly or through a proxy."""

    registry: str
    name: str
    api: RegistryClient

    @property
    def target(self) -> str:
        return f"{self.registry}/{self.name}"

    @property
    def repo(self) -> str:
        return f"{self.name}/pytorch"

    def via(self, proxy: FaultProxy) -> str:
        return f"{proxy.address}/{self.name}"

    def digests(self) -> dict[str, str | None]:
        return {tag: self.api.digest(self.repo, tag) for tag in image_tags(self.api, self.repo)}


@pytest.fixture
def ns(registry: str) -> Namespace:
    return Namespace(registry, f"pub{uuid.uuid4().hex[:8]}", RegistryClient(registry))


@pytest.fixture
def proxy(registry: str) -> Iterator[FaultProxy]:
    """Between the factory (its own client and dockerd's pushes) and the shared registry: records each request."""
    recording = FaultProxy(registry)
    yield recording
    recording.close()


def image_tags(api: RegistryClient, repo: str) -> list[str]:
    """The repository's tags but the referrers fallback tags (`sha256-<hex>`: the index of an image's SBOM)."""
    return [t for t in api.tags(repo) if not tags.REFERRERS_TAG_RE.fullmatch(t)]


def uploads(proxy: FaultProxy) -> list[str]:
    """Blob uploads that reached the registry: POST/PATCH/PUT under /blobs/uploads/."""
    return [f"{r.method} {r.path}" for r in proxy.snapshot() if "/blobs/uploads/" in r.path]


def test_republish_builds_and_pushes_nothing(ns: Namespace, proxy: FaultProxy, base_image: str,
                                             wheelhouse: Path, tmp_path: Path) -> None:
    first = publish(MATRIX, ns.target, wheelhouse, tmp_path)
    assert first.proc.returncode == 0, first.output
    assert {k: v["state"] for k, v in first.record.items()} == {RUNTIME: "published", DEVEL: "published"}
    digests = ns.digests()
    immutable = {str(r["immutable_tag"]) for r in first.record.values()}
    assert set(digests) == {RUNTIME, DEVEL, "latest"} | immutable
    assert digests[RUNTIME] == digests["latest"] == first.record[RUNTIME]["digest"]

    again = publish(MATRIX, ns.via(proxy), wheelhouse, tmp_path)
    assert again.proc.returncode == 0, again.output
    assert {k: (v["state"], v["pushed"], v["moved"]) for k, v in again.record.items()} == {
        RUNTIME: ("skipped", False, []), DEVEL: ("skipped", False, [])}
    assert ns.digests() == digests
    assert "0 built, 2 unchanged, 0 failed" in again.proc.stdout
    # True numbers: the first run uploaded at most what the registry lacked (the devel image's runtime layers only
    # once; layers that earlier tests pushed to other repositories of this registry are mounted, not uploaded),
    # the re-publish nothing; installed (unpacked) is above compressed (what a pull downloads).
    assert all(0 <= int(v["pushed_bytes"]) <= int(v["compressed_bytes"]) for v in first.record.values())
    assert first.record[DEVEL]["pushed_bytes"] < first.record[DEVEL]["compressed_bytes"]
    assert all(v["pushed_bytes"] == 0 for v in again.record.values())
    assert all(int(v["image_bytes"]) > int(v["compressed_bytes"]) for v in first.record.values())
    assert "0 B pushed" in again.proc.stdout
    assert "==> build" not in again.proc.stdout
    # The second run went through the proxy (it looked the immutable tags up there) and wrote nothing.
    seen = {r.path for r in proxy.snapshot()}
    assert {f"/v2/{ns.repo}/manifests/{tag}" for tag in immutable} <= seen
    assert proxy.writes == []


def test_plan_touches_nothing(ns: Namespace, proxy: FaultProxy, base_image: str, wheelhouse: Path,
                              tmp_path: Path, docker_client: docker.DockerClient) -> None:
    run = publish(MATRIX, ns.via(proxy), wheelhouse, tmp_path, None, command="plan")
    assert run.proc.returncode == 0, run.output
    assert {k: (v["state"], v["moved"]) for k, v in run.record.items()} == {
        RUNTIME: ("would-build", [RUNTIME, "latest"]), DEVEL: ("would-build", [DEVEL])}
    assert ns.api.tags(ns.repo) == []
    assert proxy.snapshot() and proxy.writes == []
    assert "==> build" not in run.proc.stdout and "2 would be built, 0 unchanged; nothing built" in run.proc.stdout


def test_plan_on_a_populated_namespace_would_skip_and_sends_no_write(
        ns: Namespace, proxy: FaultProxy, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    first = publish(MATRIX, ns.target, wheelhouse, tmp_path)
    assert first.proc.returncode == 0, first.output
    # Someone moved `latest` by hand: a real publish would move it back, a plan only says so.
    devel = ns.api.manifest(ns.repo, DEVEL)
    assert devel is not None
    ns.api.put_tag(ns.repo, "latest", devel)
    before = ns.digests()

    # `publish --plan` and `publish --dry-run`: the old spellings of `plan`, which say so
    for command, old in (("plan", []), ("publish", ["--plan"]), ("publish", ["--dry-run"])):
        proxy.clear()
        dry = publish(MATRIX, ns.via(proxy), wheelhouse, tmp_path, None, *old, command=command)
        assert dry.proc.returncode == 0, dry.output
        assert {k: (v["state"], v["pushed"], v["moved"]) for k, v in dry.record.items()} == {
            RUNTIME: ("would-skip", False, ["latest"]), DEVEL: ("would-skip", False, [])}
        assert "==> build" not in dry.proc.stdout
        assert any(r.method == "GET" and r.path == f"/v2/{ns.repo}/manifests/latest" for r in proxy.snapshot())
        assert proxy.writes == []
        assert ns.digests() == before
        notices = [line for line in dry.proc.stderr.splitlines() if line.startswith("notice:")]
        assert notices == [f"notice: `builder publish {o}` is now `builder plan`; the old spelling goes in the next "
                           "release" for o in old]


def test_no_push_builds_and_validates_and_writes_nothing(ns: Namespace, proxy: FaultProxy, base_image: str,
                                                         wheelhouse: Path, tmp_path: Path,
                                                         docker_client: docker.DockerClient) -> None:
    first = publish(MATRIX, ns.target, wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert first.proc.returncode == 0, first.output
    before = ns.digests()

    # The devel image is content the namespace lacks (and `latest`'s runtime is published): it is built and
    # validated, the runtime stays unchanged, and not one write reaches the registry. (The same devel image as
    # test_changed_cell_alone_is_rebuilt_...'s: its SDK layers, which a new user builds again, come from BuildKit's
    # cache the second time; a user of its own here cost a cold devel build every run.)
    changed = cell_override("devel", DEVEL, ML_USER)
    run = publish(changed, ns.via(proxy), wheelhouse, tmp_path, None, "--no-push")
    assert run.proc.returncode == 0, run.output
    assert {k: (v["state"], v["pushed"], v["digest"] is None) for k, v in run.record.items()} == {
        RUNTIME: ("would-skip", False, False), DEVEL: ("validated", False, True)}
    devel = run.record[DEVEL]
    assert devel["moved"] == [] and devel["validation"] and not devel["failed_checks"]
    assert devel["sbom_packages"] and devel["sbom_digest"] and devel["sbom_artifact"] is None  # made, not attached
    assert docker_client.images.get(str(devel["image_id"])).labels[tags.HASH_LABEL] == devel["content_hash"]
    assert f"==> validate {DEVEL}" in run.proc.stdout and "==> push" not in run.proc.stdout
    assert "1 built and validated, 1 unchanged, 0 failed; nothing pushed, no tag moved" in run.proc.stdout
    assert proxy.snapshot() and proxy.writes == [], proxy.writes
    assert ns.digests() == before


def test_no_push_records_a_failing_validation_and_plan_excludes_it(
        ns: Namespace, proxy: FaultProxy, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    broken = cell_override("runtime", RUNTIME, "expect: {torch: '2.12.0'}")
    run = publish(broken, ns.via(proxy), wheelhouse, tmp_path, None, "--no-push", "--cell", RUNTIME)
    assert run.proc.returncode == 1, run.output
    cell = run.record[RUNTIME]
    assert (cell["state"], cell["failed_stage"], cell["pushed"]) == ("failed", "validate", False)
    assert proxy.writes == [] and ns.api.tags(ns.repo) == []
    both = publish(MATRIX, ns.target, wheelhouse, tmp_path, None, "--no-push", "--plan")
    assert both.proc.returncode == 2 and "--no-push" in both.proc.stderr, both.output


def test_latest_follows_new_content_across_runs(ns: Namespace, base_image: str, wheelhouse: Path,
                                                tmp_path: Path) -> None:
    first = publish(MATRIX, ns.target, wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert first.proc.returncode == 0, first.output
    old = first.record[RUNTIME]["digest"]
    assert ns.api.digest(ns.repo, "latest") == ns.api.digest(ns.repo, RUNTIME) == old

    # Same tag, new content (another user): the runtime cell is still the `latest` candidate.
    second = publish(runtime_as("user: ml"), ns.target, wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert second.proc.returncode == 0, second.output
    cell = second.record[RUNTIME]
    assert (cell["state"], cell["moved"], cell["previous_digest"]) == ("published", [RUNTIME, "latest"], old)
    assert cell["digest"] != old
    assert ns.api.digest(ns.repo, "latest") == ns.api.digest(ns.repo, RUNTIME) == cell["digest"]
    assert ns.api.config_labels(ns.repo, "latest")[tags.HASH_LABEL] == cell["content_hash"]


def test_latest_stays_on_the_good_image_when_its_candidate_fails(ns: Namespace, base_image: str, wheelhouse: Path,
                                                                 tmp_path: Path) -> None:
    first = publish(MATRIX, ns.target, wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert first.proc.returncode == 0, first.output
    good = first.record[RUNTIME]["digest"]

    broken = publish(runtime_as("expect: {torch: '2.12.0'}"), ns.target, wheelhouse, tmp_path, None,
                     "--cell", RUNTIME)
    assert broken.proc.returncode == 1, broken.output
    cell = broken.record[RUNTIME]
    assert "latest" in cell["tags"]  # type: ignore[operator]  # the failing image WAS the one to get `latest`
    assert (cell["state"], cell["failed_stage"], cell["moved"]) == ("failed", "validate", [])
    assert ns.api.digest(ns.repo, "latest") == ns.api.digest(ns.repo, RUNTIME) == good
    assert str(cell["immutable_tag"]) not in ns.api.tags(ns.repo)


def test_revert_moves_tags_back_by_digest_without_upload(ns: Namespace, proxy: FaultProxy, base_image: str,
                                                         wheelhouse: Path, tmp_path: Path) -> None:
    content_a, content_b = MATRIX, runtime_as("user: ml")
    a = publish(content_a, ns.target, wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert a.proc.returncode == 0, a.output
    b = publish(content_b, ns.target, wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert b.proc.returncode == 0, b.output
    digest_a, digest_b = a.record[RUNTIME]["digest"], b.record[RUNTIME]["digest"]
    assert digest_a != digest_b and ns.api.digest(ns.repo, RUNTIME) == digest_b

    back = publish(content_a, ns.via(proxy), wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert back.proc.returncode == 0, back.output
    cell = back.record[RUNTIME]
    assert (cell["state"], cell["pushed"], cell["moved"]) == ("skipped", False, [RUNTIME, "latest"])
    assert (cell["digest"], cell["previous_digest"]) == (digest_a, digest_b)
    assert ns.api.digest(ns.repo, RUNTIME) == ns.api.digest(ns.repo, "latest") == digest_a
    # Registry-side re-tags only: two manifest PUTs, not one blob.
    assert uploads(proxy) == []
    assert sorted(f"{r.method} {r.path}" for r in proxy.writes) == [
        f"PUT /v2/{ns.repo}/manifests/{RUNTIME}", f"PUT /v2/{ns.repo}/manifests/latest"]


@pytest.fixture
def tiny_image(base_image: str, docker_client: docker.DockerClient) -> Iterator[tuple[str, str, str]]:
    """A small image carrying the factory's labels (FROM the local debian:12), built in seconds: (tag, hash, ID)."""
    tag, content_hash = f"guard{uuid.uuid4().hex[:6]}", "sha256:" + uuid.uuid4().hex * 2
    local = f"rif-test/pytorch:{tag}"  # a name of its own: pushing removes only the push alias
    yield tag, content_hash, labelled_image(docker_client, base_image, local,
                                            {tags.TAG_LABEL: tag, tags.HASH_LABEL: content_hash})
    docker_client.images.remove(local)


def test_digest_mismatch_guard_fails_the_image_and_moves_no_tag(
        ns: Namespace, tiny_image: tuple[str, str, str], docker_client: docker.DockerClient) -> None:
    tag, labelled, image_id = tiny_image
    target = Target(ns.target, ns.api, None)
    options = lifecycle.Options(validate=None, push=PushOptions(target=target, sbom=False))  # no venv to inventory

    def job(content_hash: str) -> jobs.Job:
        return jobs.Job(tag=tag, repository="pytorch", tags=[tag, "latest"], content_hash=content_hash, expect={},
                        labels=None, local_image=image_id)

    # The run believes it validated other content than what the pushed immutable tag holds.
    claimed = "sha256:" + uuid.uuid4().hex * 2
    [report] = lifecycle.run(docker_client, [job(claimed)], options)
    assert (report.state, report.failed_stage, report.moved) == ("failed", "push", ())
    assert report.failure is not None and "holds another image" in report.failure, report.failure
    assert ns.api.tags(ns.repo) == [tags.immutable_tag(tag, claimed)]  # pushed, never promoted

    # The same image, claimed for what it is: the guard lets it through and the tags move.
    [report] = lifecycle.run(docker_client, [job(labelled)], options)
    assert (report.state, report.moved) == ("published", (tag, "latest")), report.failure
    assert ns.api.digest(ns.repo, tag) == ns.api.digest(ns.repo, "latest") == report.digest


def test_a_failed_build_is_recorded_and_the_other_cells_publish(ns: Namespace, base_image: str, wheelhouse: Path,
                                                                tmp_path: Path) -> None:
    missing = "{version: '2.12.0', torchvision: null, torchaudio: null}"
    matrix = (cpu_matrix(missing, TORCH, image="pytorch") +
              "  flavor: [runtime, devel]\nexclude:\n  - {torch: '2.12.0', flavor: devel}\n")
    # torch 2.12.0 is in the wheelhouse by name (the preflight passes) but no zip: pip fails inside the bake.
    run = publish(matrix, ns.target, synthwheels.with_a_corrupt_wheel(wheelhouse, tmp_path / "wheels"), tmp_path)
    assert run.proc.returncode == 1, run.output
    assert list(run.record) == [MISSING, RUNTIME, DEVEL]  # the failure comes first, the others still go on
    failed = run.record[MISSING]
    assert (failed["state"], failed["failed_stage"], failed["pushed"]) == ("failed", "build", False)
    assert str(failed["failure"]).startswith("build:") and failed["log_tail"], failed
    states = {k: v["state"] for k, v in run.record.items() if k != MISSING}
    assert states == {RUNTIME: "published", DEVEL: "published"}, (run.record, run.output)
    published = set(image_tags(ns.api, ns.repo))
    assert {RUNTIME, DEVEL, "latest"} <= published
    assert MISSING not in published and str(failed["immutable_tag"]) not in published
    for cell in (RUNTIME, DEVEL):
        assert ns.api.digest(ns.repo, cell) == run.record[cell]["digest"]


def test_changed_cell_alone_is_rebuilt_and_a_failing_cell_keeps_its_good_digest(
        ns: Namespace, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    first = publish(MATRIX, ns.target, wheelhouse, tmp_path)
    assert first.proc.returncode == 0, first.output
    good = {RUNTIME: ns.api.digest(ns.repo, RUNTIME), DEVEL: ns.api.digest(ns.repo, DEVEL)}

    changed = publish(cell_override("devel", DEVEL, ML_USER), ns.target, wheelhouse, tmp_path)
    assert changed.proc.returncode == 0, changed.output
    assert changed.record[RUNTIME]["state"] == "skipped"
    assert changed.record[DEVEL]["state"] == "published" and changed.record[DEVEL]["moved"] == [DEVEL]
    assert ns.api.digest(ns.repo, RUNTIME) == good[RUNTIME]
    assert ns.api.digest(ns.repo, DEVEL) == changed.record[DEVEL]["digest"] != good[DEVEL]

    broken = publish(cell_override("runtime", RUNTIME, "expect: {torch: '2.12.0'}"), ns.target, wheelhouse, tmp_path)
    assert broken.proc.returncode == 1
    assert broken.record[RUNTIME]["state"] == "failed" and broken.record[RUNTIME]["failure"] == "validation"
    assert any("torch" in str(c) for c in broken.record[RUNTIME]["failed_checks"])  # type: ignore[attr-defined]
    assert ns.api.digest(ns.repo, RUNTIME) == ns.api.digest(ns.repo, "latest") == good[RUNTIME]


# -- registries started by the tests themselves (tests.fakes.registries) ------------------------------------------

@pytest.fixture
def own_registry(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Registry]:
    need_docker_registry()
    reg = Registry(tmp_path).start()
    yield reg
    reg.close()


def assert_every_tag_resolves(api: RegistryClient, repo: str) -> None:
    for tag in image_tags(api, repo):
        manifest = api.manifest(repo, tag)
        assert manifest is not None, f"{repo}:{tag} points at a missing manifest"
        assert api.config_labels(repo, tag), f"{repo}:{tag}: config blob missing"


def test_registry_dying_mid_push_fails_cleanly_and_a_rerun_completes(
        own_registry: Registry, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    target = f"{own_registry.address}/dying"
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX)
    record = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "builder", "publish", "--matrix", str(matrix), "--registry", target,
           "--wheelhouse", str(wheelhouse), "--record", str(record), "--cell", RUNTIME]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    assert proc.stdout is not None
    output = []
    for line in proc.stdout:
        output.append(line)
        if line.startswith("==> push"):
            time.sleep(1.0)  # the layers are on their way
            own_registry.stop()
            break
    output += proc.stdout.readlines()
    assert proc.wait(timeout=300) == 1, "".join(output)
    cell = json.loads(record.read_text())["images"][0]
    assert cell["state"] == "failed" and str(cell["failure"]).startswith("push:"), cell

    own_registry.start()
    api = RegistryClient(own_registry.address)
    assert RUNTIME not in api.tags("dying/pytorch")
    assert_every_tag_resolves(api, "dying/pytorch")
    rerun = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "==> build" not in rerun.stdout  # the image built before the failure is reused, not rebuilt
    cell = json.loads(record.read_text())["images"][0]
    assert cell["state"] == "published" and api.digest("dying/pytorch", RUNTIME) == cell["digest"]
    assert cell["validation_reused"] and cell["validation"]  # the first run's pass, taken (builder.validate.reuse)
    assert_every_tag_resolves(api, "dying/pytorch")


SECRET = f"s3cret-{uuid.uuid4().hex}"


@pytest.fixture
def auth_registry(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Registry]:
    need_docker_registry()
    reg = Registry(tmp_path, write_htpasswd(tmp_path / "htpasswd", "alice", SECRET)).start()
    yield reg
    reg.close()


def assert_secret_in_no_layer(client: docker.DockerClient, image_id: str, secret: str) -> None:
    """The secret is in no label, history entry, config, manifest or file of any layer of the image."""
    image = client.images.get(image_id)
    assert secret not in json.dumps(image.attrs) + json.dumps(image.history())
    needle, files = secret.encode(), 0
    for blob, entry, content in saved_image(client, image_id):
        tail = b""
        while chunk := content.read(1 << 20):  # a torch library is hundreds of MB: read in pieces
            assert needle not in tail + chunk, f"{blob} {entry.name if entry else ''}"
            tail = chunk[-len(needle):]
        files += entry is not None
    assert files > 100, "the saved image has no layer files to scan"


def test_htpasswd_registry_with_good_and_wrong_credentials(
        auth_registry: Registry, base_image: str, wheelhouse: Path, tmp_path: Path,
        docker_client: docker.DockerClient) -> None:
    target = f"{auth_registry.address}/private"
    # A user name never used before: new content, so the image scanned below is built by this very run,
    # with the credentials in the builder's environment.
    matrix = cell_override("runtime", RUNTIME, f"user: u{uuid.uuid4().hex[:8]}")
    wrong = publish(matrix, target, wheelhouse, tmp_path,
                    {"RIF_REGISTRY_USER": "alice", "RIF_REGISTRY_PASSWORD": "not-the-password"}, "--cell", RUNTIME)
    assert wrong.proc.returncode == 1
    # Rejected credentials stop the run before any build: one line naming registry and user, a full record.
    message = wrong.proc.stderr
    assert auth_registry.address in message and "'alice'" in message and "RIF_REGISTRY_USER" in message
    assert "==> build" not in wrong.proc.stdout and "Traceback" not in message
    assert wrong.record[RUNTIME]["state"] == "not-attempted"
    assert "not-the-password" not in wrong.output + json.dumps(wrong.record)

    good = publish(matrix, target, wheelhouse, tmp_path,
                   {"RIF_REGISTRY_USER": "alice", "RIF_REGISTRY_PASSWORD": SECRET}, "--cell", RUNTIME)
    assert good.proc.returncode == 0, good.output
    cell = good.record[RUNTIME]
    assert f"==> build {RUNTIME}" in good.proc.stdout and cell["build_seconds"] is not None  # built here
    assert cell["state"] == "published" and cell["pushed"] is True
    api = RegistryClient(auth_registry.address, Credentials("alice", SECRET, "test"))
    assert api.digest("private/pytorch", RUNTIME) == cell["digest"]

    # The secret is in no log line, run record, label, history entry or layer of the image.
    assert SECRET not in good.output + json.dumps(good.record)
    image_id = str(cell["image_id"])
    assert docker_client.images.get(image_id).labels[tags.HASH_LABEL] == cell["content_hash"]
    assert_secret_in_no_layer(docker_client, image_id, SECRET)


def test_a_push_after_the_cache_export_uploads_no_blob_twice(ns: Namespace, proxy: FaultProxy, base_image: str,
                                                             wheelhouse: Path, tmp_path: Path) -> None:
    """Cache export (mode=max, to NS/buildcache) and push go through the proxy: each blob is uploaded (an upload
    finished by `PUT ...?digest=`) at most once; the push mounts from the cache what the export uploaded. The
    image's own name is new, so it is baked (from BuildKit's local cache) and its cache exported. Baked by the engine's
own BuildKit, the images go straight into its store: the blobs to mount come from the cache manifest."""
    image = f"pytorch{uuid.uuid4().hex[:8]}"
    matrix = cpu_matrix(TORCH, image=image) + "  flavor: [runtime, devel]\n"
    run = publish(matrix, ns.via(proxy), wheelhouse, tmp_path, None, "--cache-registry", ns.via(proxy))
    assert run.proc.returncode == 0, run.output
    assert {v["state"] for v in run.record.values()} == {"published"}
    assert {v["loaded_bytes"] for v in run.record.values()} == {0}  # the engine's own BuildKit: no layout streamed
    seen = proxy.snapshot()
    done = [urllib.parse.parse_qs(r.query).get("digest", [""])[0]
            for r in seen if r.method == "PUT" and "/blobs/uploads/" in r.path]
    assert any(f"/v2/{ns.name}/buildcache/blobs/uploads/" in r.path for r in seen if r.method == "PUT")
    assert all(done) and sorted(d for d in set(done) if done.count(d) > 1) == []
    mounted = [r for r in seen if r.method == "POST" and f"from={ns.name}/buildcache" in r.query]
    assert any(r.path.startswith(f"/v2/{ns.name}/{image}/blobs/uploads/") for r in mounted)
