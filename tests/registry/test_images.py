"""Image references split as Docker does, and whether a registry serves one: one manifest read, never a pull."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from builder.registry import hints, images
from testkit.scripted_registry import MANIFEST, MANIFEST_HEADERS, Scripted, Seen


@pytest.mark.parametrize(("ref", "expected"), [
    ("debian:13", (images.DOCKER_HUB, "library/debian", "13")),
    ("debian", (images.DOCKER_HUB, "library/debian", "latest")),
    ("rocm/pytorch:latest", (images.DOCKER_HUB, "rocm/pytorch", "latest")),
    ("127.0.0.1:5000/library/debian:12", ("127.0.0.1:5000", "library/debian", "12")),
    ("localhost/debian", ("localhost", "debian", "latest")),
    ("mirror.example/ubuntu:24.04@sha256:" + "a" * 64, ("mirror.example", "ubuntu", "sha256:" + "a" * 64)),
])
def test_references_name_their_registry(ref: str, expected: tuple[str, str, str]) -> None:
    assert images.registry_of(ref) == expected


def test_a_served_base_passes_and_a_missing_one_is_named(server: Callable[..., Scripted]) -> None:
    def answer(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        if seen.path == "/v2/library/debian/manifests/12":
            return 200, MANIFEST_HEADERS, MANIFEST
        return 404, {}, b""

    reg = server(answer)
    serves = images.serves()
    assert serves(f"{reg.address}/library/debian:12") is None
    assert serves(f"{reg.address}/library/debian:13") == f"{reg.address} has no library/debian:13"
    assert {s.method for s in reg.seen} == {"GET"} and not any("/blobs/" in s.path for s in reg.seen)


def test_a_registry_that_does_not_answer_is_asked_once_and_named_with_its_hint() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    serves = images.serves()
    first = serves(f"{address}/library/debian:13")
    assert first is not None and "Connection refused" in first and hints.REFUSED in first
    assert serves(f"{address}/library/ubuntu:24.04") == first  # not asked again
