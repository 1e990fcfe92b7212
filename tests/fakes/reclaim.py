"""Disk: what a test or module built does not outlive it (a pytest plugin: tests/conftest.py loads it).

A CI machine's free disk varies (tens of GB down to a few). Tests that change an input (a base, a wheel, a
lock) rebuild the 750 MB torch layer under a new cache key, and every run of the lifecycle leaves a content-
named image: unreclaimed, the suite's footprint grows by about 20 GB. After each docker test the names it made
go (and BuildKit's cache is trimmed by what the engine's disk is short of, least recently used first); after
each module, the names its module-scoped fixtures made go too.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
from collections.abc import Iterator

import docker
import pytest

from tests.fakes.policy import engine_problem
from tests.fakes.warm import drop_warm, keep_warm

SUITE_IMAGE_PREFIXES = ("rocm-image-factory/", "t/", "127.0.0.1:", "localhost:")
MIN_FREE = 12 * 2**30  # bytes free on the engine's disk below which the build cache is trimmed (the engine's own
# GC, scripts/setup.sh, frees disk below 8 GB: the suite trims first, by its shortfall, and GC stays a backstop)
WARM_MIN_FREE = 10 * 2**30  # bytes free below which, even after the trim, the warm names go too


def suite_name(ref: str) -> bool:
    """A name the suite gives its images (never a warm name, a base's or a developer's)."""
    return ref.startswith(SUITE_IMAGE_PREFIXES)


def refs_of(client: docker.DockerClient) -> set[tuple[str, str]]:
    """Every (name, image ID) of the engine, and ("", ID) for an untagged image."""
    return {(ref, str(image.id)) for image in client.images.list() for ref in (image.tags or [""])}


def reclaim(client: docker.DockerClient, before: set[tuple[str, str]]) -> None:
    """Remove the suite's names that are not in `before` (an untagged new image: the image); trim the build cache
    only when disk runs short. A name is removed, not its image: an image another name holds stays."""
    for image in client.images.list():
        new = [ref for ref in image.tags if suite_name(ref) and (ref, str(image.id)) not in before]
        if new:
            keep_warm(client, image)
        for ref in new:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(ref, force=True)
        if not image.tags and ("", str(image.id)) not in before:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(str(image.id), force=True)
    with contextlib.suppress(docker.errors.APIError, OSError):
        free = shutil.disk_usage(engine_root(client)).free
        if short_of_disk(free):
            trim_build_cache(client, cache_to_keep(free, build_cache_size(client)))
            if shutil.disk_usage(engine_root(client)).free < WARM_MIN_FREE:
                drop_warm(client)


def short_of_disk(free: int) -> bool:
    """Trimming BuildKit's cache after every test made later tests build torch again (Docker 28 pruned the very
    steps they shared): the cache is trimmed only when the engine's disk is short."""
    return free < MIN_FREE


def cache_to_keep(free: int, cache: int) -> int:
    """The build cache's size after a trim on a short disk: smaller by what the disk is short of MIN_FREE, not down
    to a fixed floor. CI's disk stays short for the engine tier's second half (16 GB free at its end): a trim to
    5 GB after each of those tests, and the warm names dropped with it, made the next test install and compress
    torch again; the shortfall is a few GB, taken from the least recently used records."""
    return max(cache - max(MIN_FREE - free, 0), 0)


def build_cache_size(client: docker.DockerClient) -> int:
    """Bytes BuildKit's cache holds (`docker system df`'s build cache alone: images are not sized)."""
    api = client.api
    df = api._result(api._get(api._url("/system/df"), params={"type": "build-cache"}), True)
    return sum(int(record.get("Size") or 0) for record in df.get("BuildCache") or [])


@functools.cache
def engine_root(client: docker.DockerClient) -> str:
    return str(client.info()["DockerRootDir"])


def trim_build_cache(client: docker.DockerClient, keep: int) -> None:
    """BuildKit's cache down to about keep bytes, least recently used first. API 1.48 (Docker 28) renamed the
    limit max-used-space and ignores keep-storage, docker-py's only parameter: both names go, for any engine."""
    api = client.api
    params = {"keep-storage": keep, "reserved-space": keep, "max-used-space": keep}
    api._result(api._post(api._url("/build/prune"), params=params), True)


@contextlib.contextmanager
def reclaiming(active: bool) -> Iterator[None]:
    """Only names that appear inside the block and are the suite's go: a developer's own images, the session's
    base images (debian:12, rif-test/*) and anything named before the block stay."""
    if not active or engine_problem() is not None:
        yield
        return
    client = docker.from_env(timeout=600)
    before = refs_of(client)
    try:
        yield
    finally:
        reclaim(client, before)
        client.close()


@pytest.fixture(autouse=True, scope="module")
def reclaim_module(request: pytest.FixtureRequest) -> Iterator[None]:
    items = [item for item in request.session.items if item.path == request.node.path]
    with reclaiming(any(item.get_closest_marker("docker") for item in items)):
        yield


@pytest.fixture(autouse=True)
def reclaim_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Set up after the module's fixtures, so what they made (shared by the module's tests) stays till its end."""
    with reclaiming(request.node.get_closest_marker("docker") is not None):
        yield
