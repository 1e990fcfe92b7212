"""An image whose content is already published (issue 53, "Registry answers"): its lifecycle skips the build and
records that it pushed 0 bytes (a rehearsal, --no-push, pushed nothing and says so: None), never leaving the
count unset for a publish that did run.

The registry is the scripted loopback one holding manifests in memory (testkit/stored_registry.py); there is no
engine (the client is None: a lifecycle that built, validated or pushed would fail on it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import docker
import pytest

from builder.core import tags
from builder.pipeline import lifecycle
from builder.pipeline.jobs import matrix_jobs
from builder.pipeline.options import PushOptions
from builder.publish.promote import Target
from builder.registry.client import Manifest, RegistryClient
from builder.render.sources import WheelSource
from testkit.scripted_registry import FAST, Reply, Scripted, Seen
from testkit.stored_registry import MANIFEST_TYPE, Store
from tests.fakes.checkout import ROOT

Start = Callable[[Callable[[Seen], Reply]], Scripted]


@pytest.mark.parametrize(("no_push", "state", "pushed"), [(False, "skipped", 0), (True, "would-skip", None)])
def test_an_unchanged_image_records_0_bytes_pushed(no_push: bool, state: str, pushed: int | None,
                                                    server: Start) -> None:
    store = Store()
    scripted = server(store.answer)
    [job, *_] = matrix_jobs(ROOT / "examples" / "local.yaml", None, None, WheelSource())
    repo, immutable = f"rocm/{job.repository}", tags.immutable_tag(job.tag, job.content_hash)
    body = store.publish(repo, immutable, job.content_hash)
    for tag in job.tags:
        store.manifests[f"{repo}:{tag}"] = body
    target = Target(f"{scripted.address}/rocm", RegistryClient(scripted.address, policy=FAST), None)
    options = lifecycle.Options(validate=None, push=PushOptions(target=target, skip_published=True, sbom=False,
                                                                no_push=no_push))
    found = Manifest(store.manifests[f"{repo}:{immutable}"], MANIFEST_TYPE, store.digest(repo, immutable) or "")
    report = lifecycle.run_image(cast(docker.DockerClient, None), job, options,
                                 lifecycle.Prepared(published={job.tag: found}))
    assert (report.state, report.pushed_bytes, report.failure) == (state, pushed, None)
    assert report.compressed_bytes is not None and report.compressed_bytes > 0
