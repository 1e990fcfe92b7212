"""builder.registry.transport: digests checked against the bytes.

The transport's hostile cases (redirects, proxies, drip-feeding servers, the watchdog):
tests/hostile/test_registry.py.
"""

from __future__ import annotations

import hashlib

import pytest

from builder.registry import transport
from builder.registry.errors import RegistryError

BODY = b'{"schemaVersion": 2}'
DIGEST = "sha256:" + hashlib.sha256(BODY).hexdigest()


@pytest.mark.parametrize(("value", "ok"), [
    (DIGEST, True), ("sha256:" + "A" * 64, False), ("sha256:" + "a" * 63, False), (DIGEST + "\n", False),
    ("sha512:" + "a" * 64, False), (None, False), (42, False)])
def test_is_digest_accepts_a_lower_case_sha256_only(value: object, ok: bool) -> None:
    assert transport.is_digest(value) is ok


def test_verify_digest_returns_the_bodys_digest_and_refuses_another() -> None:
    assert transport.digest_of(BODY) == DIGEST
    assert transport.verify_digest(BODY, None, "m") == DIGEST == transport.verify_digest(BODY, DIGEST, "m")
    with pytest.raises(RegistryError, match="not sha256:" + "0" * 64):
        transport.verify_digest(BODY, "sha256:" + "0" * 64, "m")
    with pytest.raises(RegistryError, match="not something that is not a sha256 digest"):
        transport.verify_digest(BODY, "latest\x1b[31m", "m")
