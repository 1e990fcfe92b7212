"""The registry client against a scripted registry on loopback: error classes, retries (its auth flow: test_auth.py).

The server is testkit/scripted_registry.py's: a plain HTTP server in the test process that records every
request, so the tests can say exactly which request carried which credentials. Real registries (anonymous,
htpasswd) are used in test_publish.py; this file pins the protocol rules that those cannot show.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable

import pytest

from builder.registry.client import AuthError, Manifest, RegistryClient, RegistryError
from testkit.scripted_registry import (
    FAST,
    MANIFEST,
    Scripted,
    oci_error,
)

# -- errors and retries -----------------------------------------------------------------------------------

def test_405_is_a_registry_error_with_status_and_code_and_is_not_retried(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: oci_error(405, "UNSUPPORTED", "read-only mirror"))
    with pytest.raises(RegistryError) as exc:
        RegistryClient(reg.address, policy=FAST).put_tag("ns/pytorch", "t", Manifest(MANIFEST, "x", "sha256:1"))
    assert (exc.value.status, exc.value.code) == (405, "UNSUPPORTED") and "read-only mirror" in str(exc.value)
    assert len(reg.seen) == 1


def test_5xx_is_retried_then_reported_with_the_try_count(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: oci_error(503, "UNAVAILABLE", "disk full"))
    with pytest.raises(RegistryError) as exc:
        RegistryClient(reg.address, policy=FAST).tags("ns/pytorch")
    assert len(reg.seen) == FAST.attempts and f"after {FAST.attempts} tries" in str(exc.value)
    assert exc.value.status == 503 and "disk full" in str(exc.value)


def test_a_transient_failure_then_success_returns_the_answer(server: Callable[..., Scripted]) -> None:
    replies = iter([oci_error(500, "UNKNOWN", "hiccup"), (200, {}, b'{"tags": ["a"]}')])
    reg = server(lambda seen: next(replies))
    assert RegistryClient(reg.address, policy=FAST).tags("ns/pytorch") == ["a"]


def test_connection_refused_is_transient_and_classified_without_reading_digits() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(RegistryError) as exc:
        RegistryClient(f"127.0.0.1:{port}", policy=FAST).tags("ns/pytorch")
    assert not isinstance(exc.value, AuthError) and "tries" in str(exc.value)


@pytest.mark.registry
def test_a_blob_is_mounted_from_a_repository_that_holds_it_and_only_from_one(registry: str) -> None:
    """201 from the holder: the blob is there, no byte sent; 202 (the source lacks it): False, the session
    cancelled and the blob still absent."""
    api = RegistryClient(registry)
    stamp = uuid.uuid4().hex[:10]
    digest = api.push_blob(f"m{stamp}/cache", uuid.uuid4().bytes * 64)
    assert api.mount_blob(f"m{stamp}/image", digest, f"m{stamp}/cache")
    assert api.blob(f"m{stamp}/image", digest)
    assert not api.mount_blob(f"m{stamp}/other", digest, f"m{stamp}/empty")
    with pytest.raises(RegistryError):
        api.blob(f"m{stamp}/other", digest)
