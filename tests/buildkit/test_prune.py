"""`builder prune`: superseded local content names go, and nothing else (not a user's name, not an image a
container needs, not the current build of a tag, not anything outside the factory's namespace)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import docker
import pytest

from builder.buildkit.prune import LocalName, stale
from builder.core import tags
from tests.fakes.checkout import builder_cli
from tests.fakes.engine import labelled_image

NS = tags.LOCAL_NAMESPACE


def _name(ref: str, image_id: str, tag: str, content_hash: str) -> LocalName:
    return LocalName(ref, image_id, {tags.TAG_LABEL: tag, tags.HASH_LABEL: content_hash})


H1, H2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def _pair(repo: str, tag: str, image_id: str, content_hash: str, readable: bool = True) -> list[LocalName]:
    """What a build leaves: the content name and (unless moved since) the readable tag, on one image."""
    names = [_name(f"{NS}/{repo}:{tags.immutable_tag(tag, content_hash)}", image_id, tag, content_hash)]
    return names + ([_name(f"{NS}/{repo}:{tag}", image_id, tag, content_hash)] if readable else [])


def test_a_content_name_goes_once_its_tag_names_a_newer_build() -> None:
    names = _pair("pytorch", "t", "old", H1, readable=False) + _pair("pytorch", "t", "new", H2)
    assert [n.ref for n in stale(names, set())] == [f"{NS}/pytorch:{tags.immutable_tag('t', H1)}"]


@pytest.mark.parametrize("case", ["current", "tag gone", "in use", "other namespace", "not a content name",
                                  "another repository's tag"])
def test_what_is_never_pruned(case: str) -> None:
    old = _pair("pytorch", "t", "old", H1, readable=False)
    newer = _pair("pytorch", "t", "new", H2)
    names, in_use = old + newer, set()
    if case == "current":
        names = newer
    elif case == "tag gone":  # nothing says the old build was superseded
        names = old
    elif case == "in use":
        in_use = {"old"}
    elif case == "other namespace":  # the same labels under a user's name
        names = [_name(f"me/pytorch:{tags.immutable_tag('t', H1)}", "old", "t", H1), *newer]
    elif case == "not a content name":  # the user's own tag in the factory's namespace
        names = [_name(f"{NS}/pytorch:keep-this", "old", "t", H1), *newer]
    elif case == "another repository's tag":  # rocm-image-factory/other:t moved, not pytorch:t
        names = old + _pair("other", "t", "new", H2)
    assert stale(names, in_use) == []


@pytest.fixture
def repo(docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"prune{uuid.uuid4().hex[:8]}"
    yield name
    for image in docker_client.images.list(name=f"{NS}/{name}"):
        docker_client.images.remove(str(image.id), force=True)


def _build(client: docker.DockerClient, base: str, repo: str, tag: str, content_hash: str) -> str:
    """An image as a build leaves it: content name and readable tag."""
    content = f"{NS}/{repo}:{tags.immutable_tag(tag, content_hash)}"
    image_id = labelled_image(client, base, content, {tags.TAG_LABEL: tag, tags.HASH_LABEL: content_hash,
                                                      "rif.test.nonce": uuid.uuid4().hex})
    client.images.get(image_id).tag(f"{NS}/{repo}", tag)
    return image_id


@pytest.mark.docker
def test_prune_removes_superseded_builds_and_keeps_what_anyone_needs(
        docker_client: docker.DockerClient, base_image: str, repo: str) -> None:
    hashes = ["sha256:" + uuid.uuid4().hex * 2 for _ in range(6)]
    old = _build(docker_client, base_image, repo, "a", hashes[0])
    shared = _build(docker_client, base_image, repo, "b", hashes[1])
    docker_client.images.get(shared).tag(f"{NS}/{repo}", "mine")  # a name the user gave it
    used = _build(docker_client, base_image, repo, "c", hashes[2])
    container = docker_client.containers.create(used, command="true")
    try:
        current = {t: _build(docker_client, base_image, repo, t, h) for t, h in zip("abc", hashes[3:], strict=True)}
        gone = f"{NS}/{repo}:{tags.immutable_tag('a', hashes[0])}"

        dry = builder_cli("prune", "--image", repo, "--dry-run")
        assert dry.returncode == 0 and f"would remove {gone}" in dry.stdout, dry.stdout + dry.stderr
        assert docker_client.images.get(gone).id == old  # a dry run removes nothing

        proc = builder_cli("prune", "--image", repo)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        ids = {i.id for i in docker_client.images.list()}
        refs = {t for i in docker_client.images.list(name=f"{NS}/{repo}") for t in i.tags}
        assert old not in ids  # superseded, no other name: deleted
        assert shared in ids and f"{NS}/{repo}:mine" in refs  # untagged only: the user's name holds it
        assert f"{NS}/{repo}:{tags.immutable_tag('b', hashes[1])}" not in refs
        assert used in ids and f"{NS}/{repo}:{tags.immutable_tag('c', hashes[2])}" in refs  # a container needs it
        assert {f"{NS}/{repo}:{t}" for t in "abc"} <= refs and set(current.values()) <= ids
        assert "removed" in proc.stdout and "images deleted" in proc.stdout, proc.stdout
    finally:
        container.remove(force=True)
