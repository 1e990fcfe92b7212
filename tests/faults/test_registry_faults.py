"""Fault injection (issue 13): the real engine and a real registry, a fault-injecting proxy between them.

One htpasswd registry (tests.fakes.registries) and one tests.fakes.faultproxy.FaultProxy in front of it serve the
module;
every publish, the factory's own HTTP client and dockerd's pushes alike, goes through the proxy
(`--registry PROXY/NS`). The first publish builds (or finds in the engine's cache) the one cell and uploads
its layers; every case then publishes the same image to a namespace of its own, so dockerd mounts the layers
the registry already holds and the case costs a validation and a few requests.

For each fault, the run must: exit 0 when the fault is transient and the retries absorb it, 1 when it
persists, saying in the record (or, before any image was touched, on stderr) what failed; leave no tag on a
missing or half-pushed manifest (checked on the registry directly, not through the proxy); be followed by
a fault-free rerun that completes; and never show the password in its output, record or logs. Runs end by
the retry policy's bounds (attempts, total time): asserted on their outcome, never on a duration.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import pytest

from builder.core.tags import REFERRERS_TAG_RE
from builder.publish.push import push_image
from builder.registry import retry
from builder.registry.client import RegistryClient
from builder.registry.credentials import Credentials
from builder.registry.errors import RegistryError
from tests.fakes.faultproxy import Fault, FaultProxy, Rule
from tests.fakes.registries import Registry, need_docker_registry, write_htpasswd
from tests.publish.test_promote import MATRIX, RUNTIME

pytestmark = [pytest.mark.docker, pytest.mark.registry]

USER = "alice"
SECRET = f"fault-s3cret-{uuid.uuid4().hex}"
IMMUTABLE = rf"/manifests/{re.escape(RUNTIME)}-[0-9a-f]{{12}}$"  # dockerd's PUT of the pushed manifest
MOVING = rf"/manifests/{re.escape(RUNTIME)}$"  # the factory's PUT moving the cell's tag to it
UPLOADS = r"/blobs/uploads/(?!.*[?&]mount=)"  # upload sessions; mounting a blob the registry holds is no upload
RUN_TIMEOUT_S = 600  # generous: a hung run fails here instead of hanging the suite
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Run:
    """One `builder publish` run: exit code, streams, the cell's record, and the text of its logs."""

    code: int
    stdout: str
    stderr: str
    record_text: str
    logs: dict[str, str]

    @property
    def cell(self) -> dict[str, object]:
        images = json.loads(self.record_text)["images"]
        assert [i["tag"] for i in images] == [RUNTIME], images
        return dict(images[0])

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def assert_no_secret(self) -> None:
        assert SECRET not in self.output, self.output
        assert SECRET not in self.record_text
        for name, text in self.logs.items():
            assert SECRET not in text, name
        assert "Traceback" not in self.output and "error: unexpected" not in self.stderr, self.output


@dataclass
class Site:
    """The module's registry, the proxy in front of it, and the inputs of a one-cell publish."""

    registry: Registry
    proxy: FaultProxy
    matrix: Path
    wheelhouse: Path
    root: Path
    api: RegistryClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = RegistryClient(self.registry.address, Credentials(USER, SECRET, "test"))  # direct, no proxy

    def publish(self, namespace: str, where: Path) -> Run:
        """A one-cell publish into namespace, of content of its own: its source label names the namespace, so its
        config is a blob no earlier case pushed. The engine mounts a blob it pushed before to the same registry from
        that repository (no upload), so with one image for every case a fault on uploads met no upload once an
        earlier case had pushed (seen on 2026-11-29: the push went through and the SBOM's upload failed)."""
        where.mkdir(parents=True)
        matrix = where / "matrix.yaml"
        matrix.write_text(self.matrix.read_text() + f"source_url: https://example.invalid/{namespace}\n")
        record = where / "record.json"
        env = {**os.environ, "RIF_REGISTRY_USER": USER, "RIF_REGISTRY_PASSWORD": SECRET}
        env.pop("RIF_REGISTRY", None)
        proc = subprocess.run([sys.executable, "-m", "builder", "publish", "--matrix", str(matrix),
                               "--registry", f"{self.proxy.address}/{namespace}", "--wheelhouse",
                               str(self.wheelhouse), "--record", str(record), "--progress", "plain",
                               "--cell", RUNTIME],
                              capture_output=True, text=True, cwd=where, env=env, timeout=RUN_TIMEOUT_S, check=False)
        logs = {str(p): p.read_text(errors="replace") for p in sorted((where / ".rif" / "logs").glob("*.log"))}
        return Run(proc.returncode, proc.stdout, proc.stderr, record.read_text() if record.exists() else "{}", logs)

    def tags(self, namespace: str) -> list[str]:
        """Every tag of the namespace's repository, each checked to resolve in full (read directly)."""
        repo = f"{namespace}/pytorch"
        found = [t for t in self.api.tags(repo) if not REFERRERS_TAG_RE.fullmatch(t)]  # an SBOM's index: no image
        for tag in found:
            manifest = self.api.manifest(repo, tag)
            assert manifest is not None, f"{repo}:{tag} points at a missing manifest"
            self._assert_complete(repo, tag, json.loads(manifest.body))
        return found

    def _assert_complete(self, repo: str, tag: str, body: dict[str, object]) -> None:
        children = body.get("manifests")
        if isinstance(children, list):  # an index: each of its manifests must be complete
            for child in children:
                manifest = self.api.manifest(repo, child["digest"])
                assert manifest is not None, f"{repo}:{tag}: index entry {child['digest']} is missing"
                self._assert_complete(repo, tag, json.loads(manifest.body))
            return
        config, layers = body["config"], body["layers"]
        assert isinstance(config, dict) and isinstance(layers, list) and layers, f"{repo}:{tag}: {body}"
        for blob in [config, *layers]:
            assert self._blob_status(repo, blob["digest"]) == 200, f"{repo}:{tag}: blob {blob['digest']} is missing"

    def _blob_status(self, repo: str, digest: str) -> int:
        token = base64.b64encode(f"{USER}:{SECRET}".encode()).decode()
        req = urllib.request.Request(f"http://{self.registry.address}/v2/{repo}/blobs/{digest}", method="HEAD",
                                     headers={"Authorization": f"Basic {token}"})
        try:
            with NO_PROXY.open(req, timeout=30) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return exc.code


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, docker_client: docker.DockerClient, base_image: str,
         wheelhouse: Path) -> Iterator[Site]:
    """An htpasswd registry behind a fault proxy, already holding the cell (published by a fault-free run)."""
    need_docker_registry()
    root = tmp_path_factory.mktemp("faults")
    registry = Registry(root, write_htpasswd(root / "htpasswd", USER, SECRET)).start()
    proxy = FaultProxy(registry.address)
    matrix = root / "matrix.yaml"
    matrix.write_text(MATRIX)
    try:
        site = Site(registry, proxy, matrix, wheelhouse, root)
        first = site.publish("seed", root / "seed")
        assert first.code == 0, first.output
        assert first.cell["state"] == "published", first.cell
        assert set(site.tags("seed")) == {RUNTIME, "latest", str(first.cell["immutable_tag"])}
        first.assert_no_secret()
        yield site
    finally:
        proxy.close()
        registry.close()


@dataclass(frozen=True)
class Case:
    """A fault (rules of the proxy) and what the run must end with."""

    rules: tuple[tuple[Fault, str, str, int | None], ...]  # (fault, method, path pattern, times; None: always)
    code: int
    state: str  # the cell's state in the record
    says: tuple[str, ...] = ()  # in the cell's failure text, or on stderr when no image was reached
    pushed: bool = True  # the immutable tag exists after the faulted run

    @property
    def transient(self) -> bool:
        return self.code == 0


ONCE, ALWAYS = 1, None
TRIES = f"still failing after {retry.ATTEMPTS} tries"
CASES = {
    # Transient: the retries absorb them (the factory's, or dockerd's push retried whole by the factory).
    "500-once-on-the-engine's-manifest-put": Case(((Fault.server_error(), "PUT", IMMUTABLE, ONCE),), 0, "published"),
    "500-once-on-a-tag-move": Case(((Fault.server_error(), "PUT", MOVING, ONCE),), 0, "published"),
    "reset-once-on-a-manifest-lookup": Case(((Fault.reset(), "GET", "/manifests/", ONCE),), 0, "published"),
    "reset-once-on-the-engine's-blob-upload": Case(((Fault.reset(), "POST", UPLOADS, ONCE),), 0, "published"),
    "closed-unanswered-once-on-a-tag-move": Case(((Fault.drop(), "PUT", MOVING, ONCE),), 0, "published"),
    "stall-10s-once-on-the-engine's-manifest-put": Case(((Fault.stall(10), "PUT", IMMUTABLE, ONCE),), 0,
                                                        "published"),
    # Persistent: the run ends by the retry policy's bounds and says what failed.
    "500-always-on-tag-moves": Case(((Fault.server_error(), "PUT", MOVING, ALWAYS),), 1, "failed",
                                    ("500", "UNKNOWN", TRIES)),
    "500-always-everywhere": Case(((Fault.server_error(), ".*", ".*", ALWAYS),), 1, "not-attempted",
                                  ("500", "UNKNOWN", TRIES), pushed=False),
    "disk-full-on-blob-uploads": Case(((Fault.disk_full(), "POST|PATCH|PUT", UPLOADS, ALWAYS),), 1, "failed",
                                      ("500", "UNKNOWN", "no space left on device", TRIES), pushed=False),
    "401-with-realm-everywhere": Case(((Fault.unauthorized(realm=True), ".*", ".*", ALWAYS),), 1, "not-attempted",
                                      ("401", "refused", f"'{USER}'"), pushed=False),
    "401-without-realm-on-tag-moves": Case(((Fault.unauthorized(realm=False), "PUT", MOVING, ALWAYS),), 1,
                                           "failed", ("without a realm",)),
    "403-with-realm-on-blob-uploads": Case(((Fault.denied(realm=True), "POST|PATCH|PUT", UPLOADS, ALWAYS),), 1,
                                           "failed", ("403", "denied", "DENIED", f"'{USER}'"), pushed=False),
    "403-without-realm-on-tag-moves": Case(((Fault.denied(realm=False), "PUT", MOVING, ALWAYS),), 1, "failed",
                                           ("403", "denied", f"'{USER}'")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fault(site: Site, name: str, tmp_path: Path) -> None:
    case = CASES[name]
    namespace = f"f{uuid.uuid4().hex[:10]}"
    rules = [Rule(fault, method, path, times) for fault, method, path, times in case.rules]
    with site.proxy.faults(*rules):
        run = site.publish(namespace, tmp_path / "faulted")
    seen = site.proxy.snapshot()
    assert all(rule.hits for rule in rules), f"the fault never fired: {seen}"
    assert run.code == case.code, run.output
    cell = run.cell
    assert cell["state"] == case.state, (cell, run.output)
    said = ""
    if case.transient:
        # Each request that failed was asked again, and then got through (a stalled one went on by itself).
        for hit in [s for s in seen if s.fault is not None and s.fault.kind != "stall"]:
            assert any((s.method, s.path, s.fault) == (hit.method, hit.path, None) for s in seen), (hit, seen)
        assert cell["pushed"] and cell["moved"] == [RUNTIME, "latest"], cell
    elif case.state == "failed":
        assert cell["failed_stage"] == "push", cell
        said = str(cell["failure"])
        assert f"push failed {site.proxy.address}/{namespace}/pytorch" in run.stderr, run.stderr
        assert cell["moved"] == [], cell  # a tag that did not move is never reported as moved
    else:  # refused before any image was built: the reason is on stderr, the record lists the cell untouched
        said = run.stderr
        assert "==> validate" not in run.stdout and "==> build" not in run.stdout, run.output
    for word in case.says:
        assert word in said, f"{word!r} not in {said!r}"
    run.assert_no_secret()

    tags = site.tags(namespace)  # every tag resolves to a complete manifest
    immutable = str(cell["immutable_tag"])
    assert (immutable in tags) == case.pushed, tags
    if case.transient:
        assert set(tags) == {immutable, RUNTIME, "latest"}
        assert site.api.digest(f"{namespace}/pytorch", RUNTIME) == cell["digest"]
    else:
        assert RUNTIME not in tags and "latest" not in tags, tags  # no moving tag moved

    rerun = site.publish(namespace, tmp_path / "rerun")
    assert rerun.code == 0, rerun.output
    assert rerun.cell["state"] in ("published", "skipped"), rerun.cell
    rerun.assert_no_secret()
    assert set(site.tags(namespace)) == {immutable, RUNTIME, "latest"}
    assert site.api.digest(f"{namespace}/pytorch", RUNTIME) == site.api.digest(f"{namespace}/pytorch", "latest") \
        == rerun.cell["digest"]


def test_a_push_the_engine_keeps_retrying_is_given_up_at_the_retry_limit(
        tmp_path: Path, docker_client: docker.DockerClient, base_image: str) -> None:
    """dockerd retries a failed layer upload itself for about a minute per push: the factory closes the push
    when the policy's total time is up (here a short one) and names the cause the registry gives."""
    need_docker_registry()
    registry = Registry(tmp_path).start()
    proxy = FaultProxy(registry.address)
    local = f"rif-test/faults:{uuid.uuid4().hex[:8]}"
    dockerfile = f"FROM {base_image}\nLABEL rif.test.fault={uuid.uuid4().hex}\n"
    image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=local, rm=True, pull=False)
    try:
        rule = proxy.inject(Fault.disk_full(), "POST|PATCH|PUT", "/blobs/uploads/", times=None)
        with pytest.raises(RegistryError) as info:
            push_image(docker_client, str(image.id), RegistryClient(proxy.address), "ns/tiny", "t", None,
                       retry.Policy(total_s=3))
        assert rule.hits, proxy.snapshot()
        message = str(info.value)
        assert "still running when the retry policy's time was up" in message, message
        assert "500" in message and "no space left on device" in message, message
        assert RegistryClient(registry.address).tags("ns/tiny") == []
    finally:
        docker_client.images.remove(local)
        proxy.close()
        registry.close()
