"""The Docker engine and the local registry as session fixtures, and helpers that make and read images on them.

Their users are held to the markers by tests/fakes/policy.py: docker_client is refused to an unmarked test, a
registry user is marked `registry` at collection.
"""

from __future__ import annotations

import io
import tarfile
import uuid
from collections.abc import Iterator
from typing import IO, Any

import docker
import pytest

from tests.fakes.policy import registry_address, registry_problem, unavailable


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
