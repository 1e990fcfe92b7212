"""One place that connects to the Docker engine, so every stage reports a missing engine the same way."""

from __future__ import annotations

import docker
from docker.errors import DockerException


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
