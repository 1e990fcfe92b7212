"""builder.pipeline.jobs: one job per image from a matrix or from the engine, combinations kept together."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from docker.errors import APIError, ImageNotFound, NotFound

from builder.core import tags
from builder.core.errors import InputError
from builder.matrix.expand import load_matrix
from builder.matrix.selection import plan_images
from builder.pipeline import lifecycle
from builder.pipeline.jobs import Job, by_combination, job_for_image, matrix_jobs, shard_jobs
from builder.registry.errors import RegistryError
from builder.render.sources import WheelSource
from tests.fakes.checkout import DATA, ROOT


def test_shards_keep_a_combination_together_and_cover_every_image() -> None:
    todo = matrix_jobs(ROOT / "matrix.yaml", None, None, WheelSource())
    parts = [shard_jobs(todo, f"{k}/3") for k in (1, 2, 3)]
    assert sorted(j.tag for p in parts for j in p) == sorted(j.tag for j in todo)
    owners = {j.combination: k for k, p in enumerate(parts) for j in p}
    assert all(owners[j.combination] == k for k, p in enumerate(parts) for j in p)


@pytest.fixture(scope="module")
def golden() -> list[Job]:
    return matrix_jobs(DATA / "golden.yaml", None, None, WheelSource())


def test_matrix_jobs_render_every_selected_cell_and_remember_their_matrix(golden: list[Job]) -> None:
    assert len(golden) == 3 and all(j.matrix == DATA / "golden.yaml" and j.rendered is not None for j in golden)
    job = golden[0]
    assert job.local_image == tags.local_ref(job.repository, job.tag) and job.labels is not None
    assert job.labels[tags.HASH_LABEL] == job.content_hash
    one = matrix_jobs(DATA / "golden.yaml", [golden[1].tag], None, WheelSource())
    assert [j.tag for j in one] == [golden[1].tag]


def test_a_jobs_report_starts_planned_under_its_immutable_tag(golden: list[Job]) -> None:
    report = lifecycle.planned(golden[0])
    assert (report.tag, report.state, report.content_hash) == (golden[0].tag, "planned", golden[0].content_hash)
    assert report.immutable_tag == tags.immutable_tag(golden[0].tag, golden[0].content_hash)


def test_what_a_bake_takes_from_outside_and_nothing_for_an_image_in_the_engine(golden: list[Job]) -> None:
    need = golden[0].need()
    assert need is not None and need.dockerfile == golden[0].rendered.dockerfile  # type: ignore[union-attr]
    pushed = replace(golden[0], rendered=None)
    assert pushed.need() is None and pushed.combination == pushed.tag


def test_by_combination_keeps_the_jobs_order(golden: list[Job]) -> None:
    groups = by_combination(golden + golden[:1])
    assert len(groups) == 3 and [j.tag for j in next(iter(groups.values()))] == [golden[0].tag] * 2
    assert shard_jobs(golden, None) == golden


class Images:
    def __init__(self, image: object | None, pulled: object | None = None,
                 refused: APIError | None = None) -> None:
        self.image, self.pulled, self.refused = image, pulled, refused
        self.asked: list[tuple[str, ...]] = []

    def get(self, ref: str) -> object:
        self.asked.append(("get", ref))
        if self.image is None:
            raise ImageNotFound(ref)
        return self.image

    def pull(self, repository: str, tag: str) -> object:
        """As docker-py's pull: the engine's 404 (NotFound) carries the registry's answer as its explanation."""
        self.asked.append(("pull", repository, tag))
        if self.refused is not None:
            raise self.refused
        return self.pulled


def client(labels: dict[str, str] | None) -> Any:
    return SimpleNamespace(images=Images(None if labels is None else SimpleNamespace(labels=labels, id="sha256:1")))


def test_an_image_in_the_engine_is_held_to_its_matrix_cell_by_id(golden: list[Job]) -> None:
    plans = plan_images(load_matrix(DATA / "golden.yaml"))
    own = {tags.TAG_LABEL: golden[0].tag, tags.HASH_LABEL: golden[0].content_hash}
    job = job_for_image(client(own), "x", plans)
    assert (job.tag, job.rendered, job.local_image) == (golden[0].tag, None, "sha256:1")
    for labels, said in ((None, "no local image 'x'"), ({}, "was not built by rocm-image-factory"),
                         ({tags.TAG_LABEL: "other", tags.HASH_LABEL: "h"}, "is no image of this matrix")):
        with pytest.raises(InputError, match=said):
            job_for_image(client(labels), "x", plans)


OWN = {tags.TAG_LABEL: "t", tags.HASH_LABEL: "h"}


@pytest.mark.parametrize(("ref", "pulled"), [
    ("127.0.0.1:5000/ns/x:t", ("127.0.0.1:5000/ns/x", "t")),
    ("127.0.0.1:5000/ns/x", ("127.0.0.1:5000/ns/x", "latest")),
    ("127.0.0.1:5000/ns/x:t@sha256:" + "a" * 64, ("127.0.0.1:5000/ns/x", "sha256:" + "a" * 64)),  # by digest
])
def test_an_image_the_engine_lacks_is_pulled_as_docker_run_does(ref: str, pulled: tuple[str, str],
                                                                  golden: list[Job]) -> None:
    plans = plan_images(load_matrix(DATA / "golden.yaml"))
    own = {tags.TAG_LABEL: golden[0].tag, tags.HASH_LABEL: golden[0].content_hash}
    images = Images(None, SimpleNamespace(labels=own, id="sha256:2"))
    job = job_for_image(SimpleNamespace(images=images), ref, plans, pull=True)
    assert images.asked == [("get", ref), ("pull", *pulled)] and job.local_image == "sha256:2"
    images.asked.clear()
    with pytest.raises(InputError, match="no local image"):  # builder push never pulls
        job_for_image(SimpleNamespace(images=images), ref, plans)
    assert images.asked == [("get", ref)]


def test_a_pull_the_registry_refuses_is_its_error_naming_the_registry() -> None:
    answer = 'failed to resolve reference "127.0.0.1:5000/ns/x:nope": 127.0.0.1:5000/ns/x:nope: not found\x1b[2J'
    response = requests.Response()
    response.status_code = 404
    images = Images(None, refused=NotFound("404 Client Error", response=response, explanation=answer))
    with pytest.raises(RegistryError) as caught:
        job_for_image(SimpleNamespace(images=images), "127.0.0.1:5000/ns/x:nope", pull=True)
    said = str(caught.value)
    assert said.startswith("127.0.0.1:5000: cannot pull 127.0.0.1:5000/ns/x:nope: ") and "not found" in said
    assert "\x1b" not in said and caught.value.status == 404


def test_a_full_image_id_the_engine_lacks_is_not_pulled() -> None:
    images = Images(None)
    with pytest.raises(InputError, match="no local image"):
        job_for_image(SimpleNamespace(images=images), "sha256:" + "a" * 64, pull=True)
    assert [a[0] for a in images.asked] == ["get"]
