"""What a run records of an image already published (issue 53, "Registry answers"): pushing content its immutable
tag already holds uploads nothing (pushed_bytes 0, never its compressed size), and the image's compressed size is
what its manifest lists (config and layers), set when its tags move.

The registry is the scripted loopback registry holding manifests and configs in memory (tests/fakes/
stored_registry.py: GET manifests and blobs, PUT manifests); the image to push is never asked of an engine (the
client is None: a push that reached the engine would fail)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import cast

import docker
import pytest

from builder.pipeline.jobs import Job, matrix_jobs
from builder.publish.promote import Target
from builder.registry.client import Manifest, RegistryClient
from builder.registry.errors import RegistryError
from builder.render.sources import WheelSource
from testkit.scripted_registry import FAST, Reply, Scripted, Seen
from testkit.stored_registry import Store
from tests.fakes.checkout import ROOT

Start = Callable[[Callable[[Seen], Reply]], Scripted]
NO_ENGINE = cast(docker.DockerClient, None)


def one_job() -> Job:
    return matrix_jobs(ROOT / "examples" / "local.yaml", None, None, WheelSource())[0]


def published(server: Start) -> tuple[Store, Scripted, Target, Job]:
    store, job = Store(), one_job()
    scripted = server(store.answer)
    store.publish(f"rocm/{job.repository}", job.immutable_tag, job.content_hash)
    return store, scripted, Target(f"{scripted.address}/rocm", RegistryClient(scripted.address, policy=FAST), None), job


def test_pushing_content_already_published_uploads_nothing_and_says_0_bytes(server: Start) -> None:
    store, scripted, target, job = published(server)
    pushed = target.push(NO_ENGINE, "sha256:" + "0" * 64, job.repository, immutable_tag=job.immutable_tag,
                         content_hash=job.content_hash)
    assert pushed.pushed_bytes == 0 and not pushed.uploaded and pushed.manifest is not None
    manifest = pushed.manifest
    body = store.manifests[f"rocm/{job.repository}:{job.immutable_tag}"]
    assert manifest.body == body and json.loads(body)["config"]["size"] > 0  # so 0 is not its compressed size
    assert not any(s.method in ("PUT", "POST", "PATCH") for s in scripted.seen)


def test_moving_the_tags_records_the_compressed_size_the_manifest_lists(server: Start) -> None:
    store, _, target, job = published(server)
    pushed = target.push(NO_ENGINE, "sha256:" + "0" * 64, job.repository, immutable_tag=job.immutable_tag,
                         content_hash=job.content_hash)
    assert pushed.manifest is not None
    manifest = pushed.manifest
    promoted = target.promote(job.repository, job.tags, manifest, own=job.tag)
    config_size = json.loads(manifest.body)["config"]["size"]
    assert (promoted.digest, promoted.compressed_bytes, pushed.pushed_bytes) == (manifest.digest, config_size, 0)
    assert store.digest(f"rocm/{job.repository}", job.tag) == manifest.digest


# -- the referrers tag's index (a registry without the referrers API): read through the model before it is extended

class IndexOnly:
    """A RegistryClient's shape as _index_referrer uses it: the referrers tag's manifest, and the manifest put."""

    address = "127.0.0.1:5000"

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.put: list[bytes] = []

    def manifest(self, repo: str, reference: str) -> Manifest | None:
        return Manifest(self.body, "application/vnd.oci.image.index.v1+json", "sha256:" + "e" * 64)

    def put_manifest(self, repo: str, reference: str, body: bytes, media_type: str) -> None:
        self.put.append(body)


SUBJECT = "sha256:" + "5" * 64
ARTIFACT = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "a" * 64, "size": 9}


@pytest.mark.parametrize("body", [b'{"manifests": "x"}', b'{"manifests": [{"digest": 5}]}', b"[]",
                                  b'{"manifests": [' + b'{"mediaType": "a", "digest": "sha256:' + b"b" * 64 +
                                  b'", "size": 1},' * 2000 + b'{}]}'])
def test_a_referrers_index_of_another_shape_is_a_registry_error_and_nothing_is_put(body: bytes) -> None:
    api = IndexOnly(body)
    target = Target("127.0.0.1:5000/rocm", api, None)  # type: ignore[arg-type]
    with pytest.raises(RegistryError, match=r"127\.0\.0\.1:5000/rocm/pytorch:sha256-5{64} referrers index"):
        target._index_referrer("rocm/pytorch", SUBJECT, ARTIFACT)
    assert api.put == []


def test_a_referrers_index_of_the_right_shape_keeps_its_entries_and_gains_the_artifact() -> None:
    kept = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "b" * 64, "size": 1}
    api = IndexOnly(json.dumps({"schemaVersion": 2, "manifests": [kept]}).encode())
    Target("127.0.0.1:5000/rocm", api, None)._index_referrer(  # type: ignore[arg-type]
        "rocm/pytorch", SUBJECT, ARTIFACT)
    [put] = api.put
    assert json.loads(put)["manifests"] == [kept, ARTIFACT]
