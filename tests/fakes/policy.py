"""The engine and registry marker policy, a pytest plugin (tests/conftest.py loads it).

Engine and registry policy (issue 17, "CI cannot skip"): a test that needs the Docker engine carries
@pytest.mark.docker, one that needs the local registry (RIF_TEST_REGISTRY, default 127.0.0.1:5000) carries
@pytest.mark.registry. Before such a test runs, the engine (or registry) is probed once per session; when it
does not answer the test SKIPS on a developer machine and ERRORS when CI is set (any non-empty CI value other
than 0/false/no/off: CI=1, CI=true, ...), so a CI run can never go green by skipping the real work.

The markers are enforced: a test whose fixtures reach the engine (docker_client, containers, or any fixture
built on them) but lacks @pytest.mark.docker errors, whether or not an engine is there. A test using the
`registry` fixture is marked `registry` automatically, so the same policy applies to it.

Engine and registry tests run one at a time (what each leaves behind is tracked per test): under pytest-xdist
(`-n 2`, the fast tier) they fail at setup; the rest runs on every core.
"""

from __future__ import annotations

import functools
import os
import urllib.error
import urllib.request
from typing import Literal

import docker
import pytest

from tests.fakes import workers

DEFAULT_REGISTRY = "127.0.0.1:5000"
PROBE_TIMEOUT = 5  # seconds: an engine or registry that is up answers a ping at once
ENGINE_FIXTURES = frozenset({"docker_client", "containers"})  # fixtures that talk to the engine
MARKERS = {
    "docker": "needs a Docker engine (skips without one, fails when CI is set)",
    "registry": "needs the local registry started by scripts/setup.sh (skips without one, fails when CI is set)",
}

Policy = Literal["run", "skip", "fail"]


# --- the policy ------------------------------------------------------------------------------------------

def in_ci(ci_env: str | None) -> bool:
    """CI is set: any non-empty value (CI=1, CI=true, even CI=false): a CI job must never skip by accident."""
    return bool((ci_env or "").strip())


def docker_policy(ci_env: str | None, engine_up: bool) -> Policy:
    """What a marked test does: run when its service answers; otherwise fail under CI, skip elsewhere."""
    if engine_up:
        return "run"
    return "fail" if in_ci(ci_env) else "skip"


def unavailable(reason: str) -> None:
    """Skip locally; when CI is set a missing engine, registry or tool is a failure, never a silent skip."""
    if in_ci(os.environ.get("CI")):
        pytest.fail(f"CI is set and {reason}", pytrace=False)
    pytest.skip(reason)


@functools.cache
def engine_problem() -> str | None:
    """Why the Docker engine (DOCKER_HOST or the local socket) does not answer; None when it does. Asked once."""
    try:
        client = docker.from_env(timeout=PROBE_TIMEOUT)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # DockerException, or requests' connection errors: either way, no engine
        return f"{type(exc).__name__}: {exc}"
    return None


def registry_address() -> str:
    return os.environ.get("RIF_TEST_REGISTRY", DEFAULT_REGISTRY)


@functools.cache
def registry_problem(address: str) -> str | None:
    """Why http://ADDRESS/v2/ does not answer; None when it does (a 401 from an auth registry is an answer)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    try:
        opener.open(f"http://{address}/v2/", timeout=PROBE_TIMEOUT).close()
    except urllib.error.HTTPError:
        return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def apply_policy(policy: Policy, what: str, problem: str) -> None:
    message = f"{what} does not answer: {problem}"
    if policy == "fail":
        pytest.fail(f"CI is set and {message}", pytrace=False)
    if policy == "skip":
        pytest.skip(message)


def pytest_configure(config: pytest.Config) -> None:
    # Declared here as well as in pyproject.toml, so the markers exist wherever this file is loaded as a plugin.
    for name, help_text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {help_text}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "registry" in getattr(item, "fixturenames", ()) and item.get_closest_marker("registry") is None:
            item.add_marker(pytest.mark.registry)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture is set up: enforce the docker marker, then apply the engine and registry policy."""
    marked = item.get_closest_marker("docker") is not None
    engine = sorted(ENGINE_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    if engine and not marked:
        pytest.fail(f"{item.nodeid} uses the Docker engine (fixture {', '.join(engine)}) but is not marked "
                    "@pytest.mark.docker: mark it, so that it skips without an engine and fails when CI is set",
                    pytrace=False)
    if (marked or item.get_closest_marker("registry") is not None) and not workers.own_engine(item.config):
        pytest.fail(f"{item.nodeid} needs the engine or the registry, which one process at a time may use (its tests "
                    f"track what each leaves behind): run them without -n, or with an engine and registry per worker "
                    f"({workers.ENGINES_ENV}, as scripts/test.sh starts them)", pytrace=False)
    ci = os.environ.get("CI")
    if marked:
        problem = engine_problem()
        apply_policy(docker_policy(ci, problem is None), "the Docker engine", problem or "")
    if item.get_closest_marker("registry") is not None:
        address = registry_address()
        problem = registry_problem(address)
        apply_policy(docker_policy(ci, problem is None), f"the registry at {address}", problem or "")


def require_marker(request: pytest.FixtureRequest, marker: str, fixture: str) -> None:
    """Inside a function-scoped fixture: refuse a test that lacks the marker the fixture needs."""
    if request.node.get_closest_marker(marker) is None:
        pytest.fail(f"{request.node.nodeid} uses the fixture {fixture} but is not marked @pytest.mark.{marker}",
                    pytrace=False)

