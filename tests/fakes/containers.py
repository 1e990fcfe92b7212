"""Containers a test starts, every one removed at teardown (the `containers` fixture)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import docker
import pytest
from docker.models.containers import Container

from tests.fakes.policy import require_marker


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
