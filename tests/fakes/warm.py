"""Warm images: the content the suite reclaimed most often per readable tag, kept under a name of its own.

On the containerd store an image's compressed layers go with its last name, and BuildKit then
compresses the 750 MB torch layer again to export the very same image (about 25 s on 2 cores, once per test
that builds it). So, as a maintainer's engine keeps its images, the suite keeps one image per readable tag
under a name of its own (WARM_REPOSITORY): the content reclaimed most often for that tag. It holds layers,
never a name the factory looks up (rocm-image-factory/...), so every build still runs and every test still
starts without the factory's names; the warm names go at the session's end, or when disk runs short.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import pytest

from builder.core import tags
from tests.fakes.policy import engine_problem

WARM_REPOSITORY = "rif-test/warm"
MAX_WARM = 8  # readable tags kept warm: the suite's common images, a few GB at most


@dataclass
class Warm:
    """The session's warm images: how often each (readable tag, image) was reclaimed, and which image is kept per
    tag. At most MAX_WARM tags: a full set gives up its least reclaimed image for one reclaimed more often (an
    image a test makes once, of salted wheels or a random user, never pushes out the suite's common ones)."""

    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)  # readable tag -> image ID
    used: bool = False  # this session reclaimed a name

    def count(self, readable: str) -> int:
        return self.seen.get((readable, self.kept[readable]), 0)

    def choose(self, readable: str, image_id: str) -> tuple[bool, str | None]:
        """Count one more reclaim of the image: (keep it now, the other tag whose warm image it replaces)."""
        times = self.seen[(readable, image_id)] = self.seen.get((readable, image_id), 0) + 1
        if readable in self.kept:
            return self.kept[readable] != image_id and times > self.count(readable), None
        if len(self.kept) < MAX_WARM:
            return True, None
        victim = min(self.kept, key=self.count)
        return (True, victim) if times > self.count(victim) else (False, None)


WARM = Warm()


def warm_tag(readable: str) -> str:
    return hashlib.sha256(readable.encode()).hexdigest()[:16]  # a label holds any text: hashed, always a valid tag


def warm_ref(readable: str) -> str:
    return f"{WARM_REPOSITORY}:{warm_tag(readable)}"


def built_by_factory(image: Any) -> str | None:
    """The readable tag of an image a factory build made (it carries a content name the labels state), else None."""
    labels = image.labels or {}
    readable, content_hash = labels.get(tags.TAG_LABEL), labels.get(tags.HASH_LABEL)
    if not readable or not content_hash:
        return None
    name = tags.immutable_tag(readable, content_hash)
    return readable if any(ref.rpartition(":")[2] == name for ref in image.tags) else None


def keep_warm(client: docker.DockerClient, image: Any) -> None:
    readable = built_by_factory(image)
    WARM.used = True
    if readable is None:
        return
    keep, victim = WARM.choose(readable, str(image.id))
    if not keep:
        return
    older = WARM.kept.get(readable)
    with contextlib.suppress(docker.errors.APIError):
        image.tag(WARM_REPOSITORY, warm_tag(readable))  # moves the name off the older one, which keeps its image
        WARM.kept[readable] = str(image.id)
    if victim is not None:
        WARM.kept.pop(victim)
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(warm_ref(victim))  # removing a name removes its image when it was the last
    if older is not None:
        with contextlib.suppress(docker.errors.APIError):
            if not client.images.get(older).tags:  # held by the warm name alone
                client.images.remove(older, force=True)


def drop_warm(client: docker.DockerClient) -> None:
    for image in client.images.list(name=WARM_REPOSITORY):
        for ref in image.tags:
            if ref.startswith(WARM_REPOSITORY + ":"):
                with contextlib.suppress(docker.errors.APIError):
                    client.images.remove(ref)
    WARM.kept.clear()



@pytest.fixture(autouse=True, scope="session")
def warm_images() -> Iterator[None]:
    """The warm names go with a session that reclaimed (and so those a killed session left behind)."""
    yield
    if WARM.used and engine_problem() is None:
        client = docker.from_env(timeout=600)
        try:
            drop_warm(client)
        finally:
            client.close()
