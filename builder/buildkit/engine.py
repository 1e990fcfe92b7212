"""One place that connects to the Docker engine, so every stage reports a missing engine the same way."""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar

import docker
from docker.errors import DockerException, NotFound
from docker.models.containers import Container


class EngineUnavailable(RuntimeError):
    pass


def connect() -> docker.DockerClient:
    """A client for DOCKER_HOST (or the local socket) with long timeouts: builds and pushes are slow."""
    try:
        client = docker.from_env(timeout=3600)
        client.ping()
    except DockerException as exc:
        raise EngineUnavailable(f"cannot reach the Docker engine ({exc}); is dockerd running?") from exc
    return client


# The image list's per-platform sizes (ImageData.Size.Unpacked) came with API 1.47 (Docker 28); docker-py 7.1
# speaks 1.44 by default, so this one request names the version it needs.
MANIFESTS_API = "1.47"


def installed_bytes(client: docker.DockerClient, image_id: str) -> int | None:
    """The image's size unpacked on disk (what a container's filesystem holds), None when the engine cannot say.

    With the containerd image store, `docker image inspect`'s Size is the compressed content (what a pull
    downloads) and `docker image ls` shows the two added; the unpacked size is the image list's
    ImageData.Size.Unpacked (`docker image ls --tree`). A graph-driver engine's Size is the unpacked size itself.
    """
    try:
        image = client.images.get(image_id)
        if "Descriptor" not in image.attrs:  # a graph driver: no containerd content store, Size is on disk
            return int(image.attrs.get("Size") or 0) or None
        answer = client.api.get(f"{client.api.base_url}/v{MANIFESTS_API}/images/json", params={"manifests": "1"})
        listed = answer.json() if answer.ok else []
    except (DockerException, ValueError, OSError):
        return None
    entry = next((e for e in listed if isinstance(e, dict) and e.get("Id") == image.id), None) \
        if isinstance(listed, list) else None
    manifests = entry.get("Manifests") if entry else None
    sizes = [((m.get("ImageData") or {}).get("Size") or {}).get("Unpacked")
             for m in manifests if isinstance(m, dict) and m.get("Kind") == "image" and m.get("Available")] \
        if isinstance(manifests, list) else []
    unpacked = [n for n in sizes if isinstance(n, int) and n > 0]
    return max(unpacked) if unpacked else None


A = TypeVar("A")
B = TypeVar("B")
# The container names of every side_by_side call the current thread works for (innermost last).
_GROUPS: contextvars.ContextVar[tuple[set[str], ...]] = contextvars.ContextVar("rif_container_groups", default=())
STOP_POLL_S = 0.2


def side_by_side(client: docker.DockerClient, first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """The two calls' results, the calls run at once on threads (each waits on its own container: a smoke test's
    torch import beside the testinfra suite's execs). Ctrl-C or SIGTERM reaches the calling thread only: the
    containers the calls started (see started()) are then removed until every call has returned, so the
    interrupt goes on with nothing left running, as it would after one call at a time."""
    names: set[str] = set()
    chain = (*_GROUPS.get(), names)

    def within(call: Callable[[], Any]) -> Any:
        _GROUPS.set(chain)
        return call()

    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rif-side")
    one: Future[A] = pool.submit(contextvars.copy_context().run, within, first)
    two: Future[B] = pool.submit(contextvars.copy_context().run, within, second)
    both: list[Future[Any]] = [one, two]
    try:
        return one.result(), two.result()
    except BaseException:
        while wait(both, timeout=STOP_POLL_S).not_done:
            for name in list(names):
                with contextlib.suppress(DockerException):
                    client.api.remove_container(name, force=True)
        raise
    finally:
        pool.shutdown(wait=True)


@contextmanager
def started(client: docker.DockerClient, image: str, command: list[str], **options: Any) -> Iterator[Container]:
    """A running container, removed afterwards whatever happens.

    It is named before it exists, so an interruption that lands between the engine creating it and the
    SDK returning (SIGTERM during containers.run) still finds and removes it.
    """
    name = f"rif-{uuid.uuid4().hex[:16]}"
    for group in _GROUPS.get():  # before it exists: side_by_side removes it, once made, if the run is interrupted
        group.add(name)
    try:
        yield client.containers.run(image, command, detach=True, name=name, **options)
    finally:
        with contextlib.suppress(NotFound):
            client.api.remove_container(name, force=True)


def run_captured(client: docker.DockerClient, image: str, command: list[str], timeout: float = 600,
                 **options: Any) -> tuple[int, str, str]:
    """Run a container to completion and return (exit code, stdout, stderr).

    containers.run() streams logs while the container runs and, against dockerd 20.10, sometimes returns
    nothing for a container that exits at once; waiting first and reading the logs after never loses output.
    Raises TimeoutError when the container outlives timeout (it is killed and removed).
    """
    with started(client, image, command, **options) as container:
        try:
            code = int(container.wait(timeout=timeout)["StatusCode"])
        except Exception as exc:  # requests' ReadTimeout or ConnectionError: either way it did not finish
            raise TimeoutError(f"{image} {' '.join(command)} did not finish within {timeout:g} s") from exc
        out = container.logs(stdout=True, stderr=False).decode(errors="replace")
        err = container.logs(stdout=False, stderr=True).decode(errors="replace")
    return code, out, err
