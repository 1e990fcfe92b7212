"""Shared fixtures and helpers.

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

import contextlib
import functools
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import docker
import pytest
from docker.models.containers import Container

from builder.core import tags
from builder.core.errors import InputError, Problem
from builder.core.spec import CellSpec
from builder.matrix.expand import Expansion, expand_matrix, load_matrix
from tests.fakes.matrices import ONE_CPU

# The tests' engine has no bridge (scripts/setup.sh; docker_client refuses one that has): `builder` runs the suite
# starts build their RUN steps on the host's network, as setup.sh's RIF_BUILD_NETWORK=host says, also from a shell
# that did not source it. The product's default stays BuildKit's own network.
os.environ.setdefault("RIF_BUILD_NETWORK", "host")

pytest_plugins = ["pytester", "tests.fakes.scripted_registry",  # the scripted registry: `server`
                  "tests.fakes.loopback"]  # every bind and connect on loopback

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
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
    if hasattr(item.config, "workerinput") and (marked or item.get_closest_marker("registry") is not None):
        pytest.fail(f"{item.nodeid} needs the engine or the registry, whose tests run serially (they track what "
                    "each test leaves behind): run them without -n", pytrace=False)
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


# --- engine, registry and build inputs --------------------------------------------------------------------

def builder_cli(*args: str, check: bool = False, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point, as a maintainer would (from the checkout, unless cwd says otherwise)."""
    return subprocess.run([sys.executable, "-m", "builder", *args], capture_output=True, text=True,
                          check=check, cwd=cwd)


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    """The engine, for tests marked docker (pytest_runtest_setup refuses unmarked users of this fixture)."""
    try:
        client = docker.from_env(timeout=3600)
        client.ping()
    except docker.errors.DockerException as exc:
        unavailable(f"the Docker engine does not answer: {exc}")
    bridged = bridges([network.attrs for network in client.networks.list()])
    if bridged:  # a container or build on it could reach, or serve on, an address off loopback
        pytest.fail(f"the Docker engine has bridge networks ({', '.join(bridged)}): tests need an engine without "
                    'one (scripts/setup.sh: "bridge": "none"), so containers and builds run on host or none only',
                    pytrace=False)
    return client


def bridges(networks: list[dict[str, Any]]) -> list[str]:
    """The networks (docker's network inspect dicts) that give a container an address off loopback: any driver
    but host, null (none) or a swarm's; an engine without a bridge leaves containers only host or none."""
    return sorted(str(n.get("Name")) for n in networks if n.get("Driver") not in ("host", "null", "overlay"))


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    """debian:12 made locally with debootstrap, as `builder base` does for hosts that cannot pull."""
    try:
        docker_client.images.get("debian:12")
    except docker.errors.ImageNotFound:
        try:
            docker_client.images.pull("debian", "12")
        except docker.errors.APIError:  # no registry reachable: make it from the host's Debian mirror
            builder_cli("base", "debian-12", check=True)
    return "debian:12"


def labelled_image(client: docker.DockerClient, base: str, tag: str, labels: dict[str, str]) -> str:
    """A small image FROM the base with these labels, built in seconds by the classic builder: its ID."""
    dockerfile = f"FROM {base}\nLABEL " + " ".join(f'{k}="{v}"' for k, v in labels.items()) + "\n"
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False)
    return str(image.id)


def saved_image(client: docker.DockerClient, image_id: str) -> Iterator[tuple[str, tarfile.TarInfo | None, IO[bytes]]]:
    """Every blob of the image's `docker save` (an OCI layout), streamed, never held whole (a torch layer is
    GBs): (blob, None, its bytes) for a manifest, config or index; (blob, entry, its bytes) for each regular
    file of each layer. Read each stream before the next item. Fails unless every layer was read."""
    image = client.images.get(image_id)
    stream = io.BufferedReader(_Chunks(image.save(chunk_size=1 << 20)), 1 << 20)
    layers = 0
    with tarfile.open(fileobj=stream, mode="r|") as outer:
        for member in outer:
            if not (member.name.startswith("blobs/") and member.isreg()):
                continue
            blob = outer.extractfile(member)
            assert blob is not None
            if blob.peek(1)[:1] == b"{":  # type: ignore[attr-defined]  # a manifest, config or index
                yield member.name, None, blob
                continue
            layers += 1
            try:
                with tarfile.open(fileobj=blob, mode="r|*") as layer:  # gzip (or plain) tar
                    for entry in layer:
                        content = layer.extractfile(entry) if entry.isreg() else None
                        yield member.name, entry, content if content is not None else io.BytesIO()
            except tarfile.ReadError as exc:  # the empty layer (an empty archive) holds no names
                assert "empty" in str(exc), exc
    assert layers == len(set(image.attrs["RootFS"]["Layers"]))  # every layer was read (a repeated one is one blob)


class _Chunks(io.RawIOBase):
    """docker-py's chunk iterator as a raw stream, for tarfile's streaming mode."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.rest = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self.rest:
            try:
                self.rest = next(self.chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self.rest))
        buffer[:size], self.rest = self.rest[:size], self.rest[size:]
        return size


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """Real CPU torch and numpy for Python 3.11, fetched once with the host's pip."""
    dest = ROOT / ".rif" / "wheelhouse"
    if not list(dest.glob("torch-*.whl")):
        builder_cli("wheelhouse", "--matrix", str(DATA / "e2e.yaml"), "--dest", str(dest), "--use-pip-config",
                    check=True)
    return dest


@pytest.fixture(scope="session")
def registry() -> str:
    """The local registry's address; its users are marked `registry` at collection, so the policy applies."""
    address = registry_address()
    problem = registry_problem(address)
    if problem is not None:
        unavailable(f"the registry at {address} does not answer ({problem}); scripts/setup.sh starts one")
    return address


@pytest.fixture
def namespace(registry: str) -> Iterator[str]:
    """A fresh namespace per test, so runs never see each other's tags."""
    yield f"{registry}/t{uuid.uuid4().hex[:10]}"


# --- disk: what a test or module built does not outlive it ----------------------------------------------
# A CI machine's free disk varies (tens of GB down to a few). Tests that change an input (a base, a wheel, a
# lock) rebuild the 750 MB torch layer under a new cache key, and every run of the lifecycle leaves a content-
# named image: unreclaimed, the suite's footprint grows by about 20 GB. After each docker test the names it made
# go (and BuildKit's cache is trimmed to BUILD_CACHE_KEEP when the engine's disk is short); after each module,
# the names its module-scoped fixtures made go too.
#
# Warm images: on the containerd store an image's compressed layers go with its last name, and BuildKit then
# compresses the 750 MB torch layer again to export the very same image (about 25 s on 2 cores, once per test
# that builds it). So, as a maintainer's engine keeps its images, the suite keeps one image per readable tag
# under a name of its own (WARM_REPOSITORY): the content reclaimed most often for that tag. It holds layers,
# never a name the factory looks up (rocm-image-factory/...), so every build still runs and every test still
# starts without the factory's names; the warm names go at the session's end, or when disk runs short.
SUITE_IMAGE_PREFIXES = ("rocm-image-factory/", "t/", "127.0.0.1:", "localhost:")
BUILD_CACHE_KEEP = 5 * 2**30  # bytes: room for the shared torch layers, so later tests still hit the cache
MIN_FREE = 20 * 2**30  # bytes free on the engine's disk below which the build cache is trimmed
WARM_REPOSITORY = "rif-test/warm"
MAX_WARM = 8  # readable tags kept warm: the suite's common images, a few GB at most


def suite_name(ref: str) -> bool:
    """A name the suite gives its images (never a warm name, a base's or a developer's)."""
    return ref.startswith(SUITE_IMAGE_PREFIXES)


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
        if short_of_disk(shutil.disk_usage(engine_root(client)).free):
            drop_warm(client)
            trim_build_cache(client, BUILD_CACHE_KEEP)


def short_of_disk(free: int) -> bool:
    """Trimming BuildKit's cache after every test made later tests build torch again (Docker 28 pruned the very
    steps they shared): the cache is trimmed only when the engine's disk is short."""
    return free < MIN_FREE


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


# --- containers: every one a test starts is removed at teardown -------------------------------------------

@dataclass(frozen=True)
class ContainerRun:
    """A finished container: exit code and its two streams."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def logs(self) -> str:
        return self.stdout + self.stderr


class TrackedContainers:
    """jupyter/docker-stacks' TrackedContainer, for any image: remembers every container it starts."""

    def __init__(self, client: docker.DockerClient, **defaults: Any) -> None:
        self.client = client
        self.defaults = defaults  # keyword arguments of containers.run() for every container
        self.started: list[Container] = []

    def run_detached(self, image: str, command: str | list[str] | None = None, **kwargs: Any) -> Container:
        container: Container = self.client.containers.run(image, command, detach=True,
                                                          **{**self.defaults, **kwargs})
        self.started.append(container)
        return container

    def run_and_wait(self, image: str, command: str | list[str] | None = None, *, timeout: float = 300,
                     **kwargs: Any) -> ContainerRun:
        """Run to completion; the logs are read after the exit, so none is lost. TimeoutError past timeout."""
        container = self.run_detached(image, command, **kwargs)
        try:
            code = int(container.wait(timeout=timeout)["StatusCode"])
        except Exception as exc:  # requests' ReadTimeout or ConnectionError: it did not finish
            container.kill()
            raise TimeoutError(f"{image} {command} did not finish within {timeout:g} s") from exc
        return ContainerRun(code, container.logs(stdout=True, stderr=False).decode(errors="replace"),
                            container.logs(stdout=False, stderr=True).decode(errors="replace"))

    def remove_all(self) -> None:
        while self.started:
            container = self.started.pop()
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                container.remove(force=True, v=True)


@pytest.fixture
def containers(request: pytest.FixtureRequest, docker_client: docker.DockerClient) -> Iterator[TrackedContainers]:
    """Start containers with containers.run_and_wait(image, command); all of them are removed at teardown."""
    require_marker(request, "docker", "containers")
    tracked = TrackedContainers(docker_client)
    yield tracked
    tracked.remove_all()


# --- matrix files: shared by the tests of yamlsrc, schema, matrix, spec, tags and compat -------------------

# Lines 1-4; error cases append from line 5 on.
BASE = ONE_CPU
CPU_TAG = "cpu_debian12_py3.11_torch2.13.0_runtime"


def write_matrix(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "matrix.yaml"
    file.write_text(textwrap.dedent(text), encoding="utf-8")
    return file


def load_cells(tmp_path: Path, text: str) -> list[CellSpec]:
    return load_matrix(write_matrix(tmp_path, text))


def expand_text(tmp_path: Path, text: str) -> Expansion:
    return expand_matrix(write_matrix(tmp_path, text))


def problems_of(file: Path) -> list[Problem]:
    with pytest.raises(InputError) as info:
        load_matrix(file)
    assert str(info.value) == "\n".join(str(p) for p in info.value.problems)
    return info.value.problems


def inc(body: str) -> str:
    """BASE plus one include entry on line 6."""
    return BASE + "include:\n  - {" + body + "}\n"

# Every cell of this product can work: torch 2.13 and 2.12 have pytorch.org wheels for ROCm 7.2 carrying gfx942
# and gfx950, for Python 3.11 (debian-12) and 3.12 (ubuntu-24.04).
PRODUCT = """\
matrix:
  os: [debian-12, ubuntu-24.04]
  platform: [cpu, rocm7.2]
  torch: ["2.13.0", "2.12.1"]
  gfx: [gfx94X-dcgpu, gfx950-dcgpu]
  flavor: [runtime, devel]
"""


def axes(cell: CellSpec) -> tuple[str, str, str, str | None, str]:
    return cell.os, cell.platform, cell.torch, cell.gfx, cell.flavor
