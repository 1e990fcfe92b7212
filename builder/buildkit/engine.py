"""One place that connects to the Docker engine, so every stage reports a missing engine the same way."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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


@contextmanager
def started(client: docker.DockerClient, image: str, command: list[str], **options: Any) -> Iterator[Container]:
    """A running container, removed afterwards whatever happens.

    It is named before it exists, so an interruption that lands between the engine creating it and the
    SDK returning (SIGTERM during containers.run) still finds and removes it.
    """
    name = f"rif-{uuid.uuid4().hex[:16]}"
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
