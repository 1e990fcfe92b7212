"""tests/conftest.py and the plugins it loads (tests/fakes/: policy, engine, reclaim, warm, containers): the
docker/registry policy (skip locally, error under CI), the tracked containers, reclaiming and warm images."""

from __future__ import annotations

import ast
import uuid

import docker
import pytest

from builder.core import tags
from tests.fakes.checkout import ROOT
from tests.fakes.containers import TrackedContainers
from tests.fakes.engine import labelled_image
from tests.fakes.policy import ENGINE_FIXTURES, docker_policy, in_ci
from tests.fakes.reclaim import MIN_FREE, build_cache_size, cache_to_keep, reclaiming, short_of_disk, suite_name
from tests.fakes.warm import MAX_WARM, WARM_REPOSITORY, Warm, warm_ref

NO_ENGINE = "unix:///nonexistent/docker.sock"
NO_REGISTRY = "127.0.0.1:9"  # nothing listens on port 9


@pytest.mark.parametrize(("ci_env", "engine_up", "expected"), [
    (None, True, "run"),
    ("1", True, "run"),
    ("true", True, "run"),
    (None, False, "skip"),
    ("", False, "skip"),
    ("0", False, "fail"),
    ("false", False, "fail"),
    ("1", False, "fail"),
    ("true", False, "fail"),
    ("TRUE", False, "fail"),
])
def test_docker_policy(ci_env: str | None, engine_up: bool, expected: str) -> None:
    assert docker_policy(ci_env, engine_up) == expected


@pytest.mark.parametrize(("ci_env", "expected"), [
    (None, False), ("", False), ("  ", False), ("0", True), ("false", True), ("False", True), ("no", True),
    ("off", True), ("1", True), ("true", True), ("TRUE", True), ("yes", True), ("github-actions", True),
    (" true ", True),
])
def test_any_non_empty_ci_is_ci(ci_env: str | None, expected: bool) -> None:
    assert in_ci(ci_env) is expected


# --- the hooks, in an inner pytest that loads tests/conftest.py as a plugin, with no engine and no registry -----

INNER = """
import pytest


@pytest.mark.docker
def test_marked_docker(docker_client):
    pass


@pytest.mark.docker
def test_marked_docker_without_fixture():
    pass


def test_unmarked_docker_client(docker_client):
    pass


def test_unmarked_containers(containers):
    pass


def test_unmarked_base_image(base_image):
    pass


@pytest.mark.registry
def test_marked_registry():
    pass


def test_registry_fixture_is_marked_for_it(registry):
    pass


def test_pure():
    pass
"""


def inner_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None) -> pytest.RunResult:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    monkeypatch.setenv("RIF_TEST_REGISTRY", NO_REGISTRY)
    monkeypatch.setenv("COLUMNS", "200")
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    pytester.makepyfile(test_inner=INNER)
    return pytester.runpytest_subprocess("-p", "tests.conftest", "-p", "no:cacheprovider", "-rA",
                                         "--strict-markers", timeout=120)


UNMARKED = [
    "ERROR test_inner.py::test_unmarked_docker_client - *",
    "ERROR test_inner.py::test_unmarked_containers - *",
    "ERROR test_inner.py::test_unmarked_base_image - *",
    "test_inner.py::test_unmarked_docker_client uses the Docker engine (fixture docker_client) but is not marked "
    "@pytest.mark.docker: *",
    "test_inner.py::test_unmarked_containers uses the Docker engine (fixture containers, docker_client) but is not "
    "marked @pytest.mark.docker: *",
    "test_inner.py::test_unmarked_base_image uses the Docker engine (fixture docker_client) but is not marked "
    "@pytest.mark.docker: *",
]


@pytest.mark.parametrize("ci", ["1", "true"])
def test_under_ci_a_missing_engine_or_registry_is_an_error(pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    result = inner_run(pytester, monkeypatch, ci)
    result.assert_outcomes(passed=1, errors=7)
    result.stdout.fnmatch_lines_random([
        "ERROR test_inner.py::test_marked_docker - *",
        "ERROR test_inner.py::test_marked_docker_without_fixture - *",
        "ERROR test_inner.py::test_marked_registry - *",
        "ERROR test_inner.py::test_registry_fixture_is_marked_for_it - *",
        "PASSED test_inner.py::test_pure",
        *UNMARKED,
    ])
    lines = result.stdout.lines
    assert sum(line.startswith("CI is set and the Docker engine does not answer: ") for line in lines) == 2
    assert sum(line.startswith(f"CI is set and the registry at {NO_REGISTRY} does not answer: ")
               for line in lines) == 2
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize("ci", [None, ""])
def test_without_ci_a_missing_engine_or_registry_skips(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                       ci: str | None) -> None:
    result = inner_run(pytester, monkeypatch, ci)
    # The unmarked users of the engine still error: the marker is enforced with or without an engine.
    result.assert_outcomes(passed=1, skipped=4, errors=3)
    result.stdout.fnmatch_lines_random([
        "SKIPPED [[]2[]] *: the Docker engine does not answer: *",
        f"SKIPPED [[]2[]] *: the registry at {NO_REGISTRY} does not answer: *",
        *UNMARKED,
    ])
    assert not any(line.startswith("CI is set") for line in result.stdout.lines)


def test_misspelt_marker_is_an_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_typo="import pytest\n\n\n@pytest.mark.dokcer\ndef test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "tests.conftest", "-p", "no:cacheprovider", "--strict-markers",
                                           timeout=120)
    result.stdout.fnmatch_lines(["*'dokcer' not found in `markers` configuration option*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED



# fixture -> the folder of the plugin that defines it (testkit/: the fakes the benchmarks share)
SUITE_FIXTURES = {**{name: "tests/fakes" for name in ("docker_client", "base_image", "wheelhouse", "registry",
                                                       "namespace", "containers", "warm_images", "reclaim_module",
                                                       "reclaim_test")},
                  "server": "testkit"}


def test_the_conftest_loads_every_fixture_of_the_suite(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each concern is a plugin under tests/fakes/ (or testkit/): one that tests/conftest.py forgets to load takes
    its fixtures with it (the hooks above would still fire, so they do not show it)."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("COLUMNS", "200")
    result = pytester.runpytest_subprocess("-p", "tests.conftest", "-p", "no:cacheprovider", "--fixtures",
                                           timeout=120)
    result.stdout.fnmatch_lines_random([f"{name} *-- *{home}/*.py:*" for name, home in SUITE_FIXTURES.items()])

# --- tracked containers, on the real engine ------------------------------------------------------------------

@pytest.mark.docker
def test_run_and_wait_returns_exit_code_and_both_streams(containers: TrackedContainers, base_image: str) -> None:
    run = containers.run_and_wait(base_image, ["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=120)
    assert (run.exit_code, run.stdout, run.stderr) == (3, "out\n", "err\n")
    assert run.logs == "out\nerr\n"
    assert len(containers.started) == 1


@pytest.mark.docker
def test_every_started_container_is_removed(docker_client: docker.DockerClient, base_image: str) -> None:
    tracked = TrackedContainers(docker_client, labels={"org.rocm-image-factory.test": "tracked"})
    try:
        done = tracked.run_and_wait(base_image, ["true"], timeout=120)
        running = tracked.run_detached(base_image, ["sleep", "600"])
        assert done.exit_code == 0
        ids = [str(c.id) for c in tracked.started]
        assert len(ids) == 2 and running.id in ids
        assert all(c.labels.get("org.rocm-image-factory.test") == "tracked" for c in tracked.started)
        tracked.remove_all()
        assert tracked.started == []
        for container_id in ids:
            with pytest.raises(docker.errors.NotFound):
                docker_client.containers.get(container_id)
    finally:
        tracked.remove_all()  # whatever failed above, no container outlives the test


@pytest.mark.docker
def test_run_and_wait_past_its_timeout_raises(containers: TrackedContainers, base_image: str) -> None:
    with pytest.raises(TimeoutError, match="did not finish within 2 s"):
        containers.run_and_wait(base_image, ["sleep", "600"], timeout=2)
    assert len(containers.started) == 1  # removed at teardown like the others


# --- disk: reclaiming removes exactly what the block made under the suite's names -----------------------------

@pytest.mark.parametrize(("ref", "expected"), [
    ("rocm-image-factory/pytorch:cpu_x-0123456789ab", True),
    ("127.0.0.1:5000/t0/pytorch:a", True),
    ("debian:12", False),
    ("rif-test/trixie-hipcc:1", False),
    ("rif-test/warm:0123456789abcdef", False),  # a warm name outlives the test that made its image
    ("mine/keep:1", False),  # a name the suite never gives: it holds its image
])
def test_suite_name(ref: str, expected: bool) -> None:
    assert suite_name(ref) is expected


def _labelled_image(client: docker.DockerClient, base: str, tag: str) -> str:
    """A new image (its own ID: a fresh label) from the base, tagged as given."""
    return labelled_image(client, base, tag, {"rif.test.reclaim": uuid.uuid4().hex})


@pytest.mark.docker
def test_reclaiming_removes_the_suite_images_made_inside_and_keeps_the_rest(docker_client: docker.DockerClient,
                                                                          base_image: str) -> None:
    older = f"rocm-image-factory/reclaim:old{uuid.uuid4().hex[:8]}"
    kept: list[str] = [_labelled_image(docker_client, base_image, older)]
    try:
        with reclaiming(True):
            made = _labelled_image(docker_client, base_image, f"rocm-image-factory/reclaim:{uuid.uuid4().hex[:8]}")
            kept.append(_labelled_image(docker_client, base_image, f"rif-keep/reclaim:{uuid.uuid4().hex[:8]}"))
        ids = {image.id for image in docker_client.images.list()}
        assert made not in ids  # made inside the block, with the suite's name
        assert set(kept) <= ids  # older than the block / a name the suite never gives
    finally:
        for image_id in kept:
            docker_client.images.remove(image_id, force=True)


@pytest.mark.parametrize(("free_gib", "trim"), [(100, False), (13, False), (11, True), (0, True)])
def test_the_build_cache_is_trimmed_only_when_disk_is_short(free_gib: int, trim: bool) -> None:
    assert short_of_disk(free_gib * 2**30) is trim


GIB = 2**30


@pytest.mark.parametrize(("free", "cache", "keep"), [
    (MIN_FREE - 4 * GIB, 30 * GIB, 26 * GIB),  # CI's short disk: the shortfall goes, the torch steps stay
    (MIN_FREE - 4 * GIB, 3 * GIB, 0),  # a cache smaller than the shortfall goes whole
    (MIN_FREE, 30 * GIB, 30 * GIB),  # nothing short, nothing trimmed
    (0, 30 * GIB, 18 * GIB),
])
def test_a_short_disk_trims_the_build_cache_by_its_shortfall_only(free: int, cache: int, keep: int) -> None:
    assert cache_to_keep(free, cache) == keep


@pytest.mark.docker
def test_the_build_cache_size_is_what_the_engine_reports(docker_client: docker.DockerClient) -> None:
    size = build_cache_size(docker_client)
    reported = sum(int(r.get("Size") or 0) for r in docker_client.df().get("BuildCache") or [])
    assert size >= 0 and abs(size - reported) <= 2**30  # read apart: another session may build in between


def test_the_warm_image_of_a_tag_is_the_content_reclaimed_most_often() -> None:
    warm = Warm()
    assert warm.choose("runtime", "a") == (True, None)  # the first of its tag
    warm.kept["runtime"] = "a"
    assert warm.choose("runtime", "a") == (False, None)  # already kept
    assert warm.choose("runtime", "b") == (False, None)  # b once, a twice
    assert warm.choose("runtime", "b") == (False, None)  # twice each: a stays
    assert warm.choose("runtime", "b") == (True, None)  # b now more often than a


def test_a_full_set_of_warm_images_gives_up_its_least_reclaimed_for_one_reclaimed_more_often() -> None:
    warm = Warm(kept={f"t{i}": str(i) for i in range(MAX_WARM)})
    warm.seen = {(f"t{i}", str(i)): 2 + i for i in range(MAX_WARM)}
    assert warm.choose("once", "x") == (False, None)  # made once: it pushes nothing out
    assert warm.choose("once", "x") == (False, None)  # twice: as often as the least reclaimed, t0
    assert warm.choose("once", "x") == (True, "t0")


@pytest.mark.docker
def test_a_factory_build_reclaimed_keeps_its_layers_under_a_warm_name_only(
        docker_client: docker.DockerClient, base_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    warm = Warm()  # the session's own may be full by now
    monkeypatch.setattr("tests.fakes.warm.WARM", warm)
    # A short disk drops every warm name after the block (CI's disk is short by the engine tier's end): that is
    # reclaim's other case, not this one's, so this test runs as on a disk with room.
    monkeypatch.setattr("tests.fakes.reclaim.short_of_disk", lambda free: False)
    readable, content_hash = f"warm{uuid.uuid4().hex[:8]}", "sha256:" + uuid.uuid4().hex * 2
    content = f"rocm-image-factory/reclaim:{tags.immutable_tag(readable, content_hash)}"
    try:
        with reclaiming(True):
            made = labelled_image(docker_client, base_image, content,
                                  {tags.TAG_LABEL: readable, tags.HASH_LABEL: content_hash})
            docker_client.images.get(made).tag("rocm-image-factory/reclaim", readable)
        image = docker_client.images.get(made)
        assert image.tags == [warm_ref(readable)] and warm.kept[readable] == made  # the factory's names went
    finally:
        docker_client.images.remove(warm_ref(readable))
    assert made not in {i.id for i in docker_client.images.list(name=WARM_REPOSITORY)}


OWN_FIXTURES = {ROOT / "tests" / "fakes" / "engine.py", ROOT / "tests" / "fakes" / "containers.py"}


def test_no_fixture_takes_a_name_that_marks_its_tests() -> None:
    """A stand-in fixture named `registry` (or `docker_client`, `containers`) marks every test using it, which the
    fast tier then deselects: the scripts/setup.sh tests never ran that way. Only the suite's own fakes define them."""
    marking = {"registry", *ENGINE_FIXTURES}
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path in OWN_FIXTURES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in marking and any(
                    "fixture" in ast.unparse(d) for d in node.decorator_list):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert found == []
