"""Shared fixtures. Docker-backed fixtures skip on a developer machine without an engine, but FAIL under CI=true."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
IN_CI = os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> None:
    """Skip locally; in CI a missing engine or registry is a failure, never a silent skip."""
    if IN_CI:
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def builder_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point, as a maintainer would."""
    return subprocess.run([sys.executable, "-m", "builder", *args], capture_output=True, text=True,
                          check=check, cwd=ROOT)


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=3600)
        client.ping()
    except docker.errors.DockerException as exc:
        unavailable(f"no Docker engine ({exc})")
    return client


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
    if not list(dest.glob("torch-*.whl")):
        builder_cli("wheelhouse", "--matrix", str(DATA / "e2e.yaml"), "--dest", str(dest), "--use-pip-config",
                    check=True)
    return dest


@pytest.fixture(scope="session")
def registry() -> str:
    address = os.environ.get("RIF_TEST_REGISTRY", "127.0.0.1:5000")
    try:
        urllib.request.urlopen(f"http://{address}/v2/", timeout=5)
    except OSError as exc:
        unavailable(f"no registry at {address} ({exc}); scripts/setup.sh starts one")
    return address


@pytest.fixture
def namespace(registry: str) -> Iterator[str]:
    """A fresh namespace per test, so runs never see each other's tags."""
    yield f"{registry}/t{uuid.uuid4().hex[:10]}"
