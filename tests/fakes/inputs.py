"""Build inputs made once per run: the base image and a wheelhouse of real CPU torch."""

from __future__ import annotations

import fcntl
from pathlib import Path

import docker
import pytest

from tests.fakes import workers
from tests.fakes.checkout import DATA, ROOT, builder_cli

BASE = "debian:12"


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory,
               pytestconfig: pytest.Config) -> str:
    """debian:12 made locally with debootstrap, as `builder base` does for hosts that cannot pull."""
    try:
        docker_client.images.get(BASE)
    except docker.errors.ImageNotFound:
        try:
            docker_client.images.pull("debian", "12")
        except docker.errors.APIError:  # no registry reachable: make it from the host's Debian mirror
            made_once(docker_client, shared_folder(pytestconfig, tmp_path_factory))
    return BASE


def shared_folder(config: pytest.Config, factory: pytest.TempPathFactory) -> Path | None:
    """The run's folder its xdist workers share (each worker's base temp is inside it); None when this process is
    the run's only one, and nobody would load what it saved."""
    this = workers.worker(config)
    return factory.getbasetemp().parent if this is not None and this[1] > 1 else None


def made_once(client: docker.DockerClient, folder: Path | None) -> None:
    """`builder base debian-12` once per run: the engine tier's workers (an engine each) share the run's folder,
    so the first makes the image and saves it there and the others load that archive: one debootstrap, not one
    per engine, and the same base (the same digests) on every engine."""
    if folder is None:
        builder_cli("base", "debian-12", check=True)
        return
    archive = folder / "base-debian-12.tar"
    with open(folder / "base-debian-12.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            with archive.open("rb") as stream:
                client.images.load(stream)
            return
        builder_cli("base", "debian-12", check=True)
        partial = archive.with_suffix(".part")
        with partial.open("wb") as out:
            for chunk in client.images.get(BASE).save(chunk_size=1 << 20, named=True):
                out.write(chunk)
        partial.replace(archive)


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
