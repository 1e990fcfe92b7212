"""The engine tier on several engines at once: each pytest-xdist worker gets an engine and a registry of its own.

The engine tests track what each leaves behind on its engine (tests/fakes/reclaim.py) and prune its build cache,
so two never share one. scripts/test.sh starts a second engine and registry (scripts/setup.sh, RIF_INSTANCE=2)
and names both in RIF_TEST_ENGINES ("DOCKER_HOST=REGISTRY ..."); worker gwN takes the Nth pair as its
DOCKER_HOST and RIF_TEST_REGISTRY before any test or `builder` run reads them. Tests run a module at a time per
worker (`--dist loadfile`), so a module's fixtures live on one engine; the slowest modules are handed out first,
so that no worker is left with one at the end while the other idles.
"""

from __future__ import annotations

import os

import pytest

ENGINES_ENV = "RIF_TEST_ENGINES"
# The engine tier's slowest modules (docs/development.md's list), in the order they are handed out; the rest
# follow in collection order. Only the order changes with this list: a module missing from it still runs.
SLOWEST_FIRST = (
    "tests/validate/test_apptainer.py",
    "tests/publish/test_promote.py",
    "tests/e2e/test_os_pinned_example.py",
    "tests/faults/test_registry_faults.py",
    "tests/buildkit/test_bake.py",
    "tests/pipeline/test_locked.py",
    "tests/smoke/test_hip_image.py",
    "tests/e2e/test_build_push.py",
    "tests/smoke/test_image.py",
    "tests/pipeline/test_concurrent.py",
    "tests/publish/test_promote_auth.py",
)


def engines(value: str | None) -> list[tuple[str, str]]:
    """RIF_TEST_ENGINES's (DOCKER_HOST, registry) pairs; a word without both halves is an error naming it."""
    pairs = []
    for word in (value or "").split():
        host, _, registry = word.partition("=")
        if not host or not registry:
            raise pytest.UsageError(f"{ENGINES_ENV}: {word!r} is not DOCKER_HOST=REGISTRY")
        pairs.append((host, registry))
    return pairs


def worker(config: pytest.Config) -> tuple[int, int] | None:
    """(this worker's index, the number of workers) for a pytest-xdist worker; None for a run without -n (or a
    pytest a test starts, which inherits a worker's environment but is none)."""
    workerinput = getattr(config, "workerinput", None)
    if not workerinput:
        return None
    return int(str(workerinput["workerid"]).removeprefix("gw")), int(workerinput["workercount"])


def own_engine(config: pytest.Config) -> bool:
    """This process has an engine no other process of the run uses: it is the only one, or a worker with a pair
    of RIF_TEST_ENGINES to itself."""
    this = worker(config)
    return this is None or this[1] <= len(engines(os.environ.get(ENGINES_ENV)))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    this = worker(config)
    pairs = engines(os.environ.get(ENGINES_ENV))
    if this is not None and this[0] < len(pairs):
        os.environ["DOCKER_HOST"], os.environ["RIF_TEST_REGISTRY"] = pairs[this[0]]
    if len(pairs) > 1 and hasattr(config.option, "loadscopereorder"):
        # xdist hands out the modules with the most tests first unless told not to: the order is SLOWEST_FIRST's
        config.option.loadscopereorder = False


def slowest_first(items: list[pytest.Item], root: str) -> list[pytest.Item]:
    """The items, the slowest modules' first (in SLOWEST_FIRST's order), each module's items in their order."""
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}

    def key(item: pytest.Item) -> int:
        return rank.get(os.path.relpath(str(item.path), root), len(rank))
    return sorted(items, key=key)  # stable: every other module keeps its place


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if len(engines(os.environ.get(ENGINES_ENV))) > 1:
        items[:] = slowest_first(items, str(config.rootpath))
