"""Build inputs made once per session: the base image and a wheelhouse of real CPU torch."""

from __future__ import annotations

import fcntl
from pathlib import Path

import docker
import pytest

from tests.fakes.checkout import DATA, ROOT, builder_cli


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


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """Real CPU torch and numpy for Python 3.11, fetched once with the host's pip."""
    dest = ROOT / ".rif" / "wheelhouse"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / "wheelhouse.lock", "w") as lock:  # the engine tier's workers share it: one fetches
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not list(dest.glob("torch-*.whl")):
            builder_cli("wheelhouse", "--matrix", str(DATA / "e2e.yaml"), "--dest", str(dest), "--use-pip-config",
                        check=True)
    return dest
