"""A failed push is classified from structured answers (status codes, the registry's own reply), never digits."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

from builder.publish.promote import uploaded_size
from builder.publish.push import _classify, _push_once
from builder.registry.client import RegistryClient
from builder.registry.errors import AuthError, RegistryError, TransientError
from testkit.scripted_registry import CREDS, FAST, Scripted, oci_error

DIGITS = "Put http://127.0.0.1:44013/v2/ns/blobs/uploads/401403: dial tcp: connect: connection reset by peer"


def test_digits_in_a_message_are_no_refused_login(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: (200, {}, b'{"tags": []}'))
    found = _classify(RegistryClient(reg.address, CREDS, policy=FAST), "ns/pytorch", None, DIGITS)
    assert type(found) is TransientError  # the registry answers us: worth another try


def test_the_registry_refusing_our_credentials_is_an_auth_error(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: (401, {"WWW-Authenticate": 'Basic realm="r"'}, b""))
    found = _classify(RegistryClient(reg.address, CREDS, policy=FAST), "ns/pytorch", None, "unauthorized")
    assert isinstance(found, AuthError) and "'alice'" in str(found)


def test_a_status_in_the_error_detail_decides_without_a_probe(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: (200, {}, b"{}"))
    api = RegistryClient(reg.address, CREDS, policy=FAST)
    assert isinstance(_classify(api, "ns/pytorch", 403, "denied"), AuthError)
    found = _classify(api, "ns/pytorch", 400, "manifest invalid")
    assert type(found) is RegistryError and found.status == 400
    assert reg.seen == []


def test_a_registry_that_is_gone_is_transient() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    found = _classify(RegistryClient(f"127.0.0.1:{port}", CREDS, policy=FAST), "ns/pytorch", None, "EOF")
    assert isinstance(found, TransientError)


def test_a_registry_answering_a_permanent_error_is_not_retried(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: oci_error(405, "UNSUPPORTED", "read-only"))
    found = _classify(RegistryClient(reg.address, CREDS, policy=FAST), "ns/pytorch", None, "upload refused")
    assert type(found) is RegistryError and found.status == 405 and "read-only" in str(found)


class _Engine:
    """docker push's JSON stream as the engine sends it: one layer uploaded, one the registry had, one mounted."""

    def __init__(self, chunks: list[dict[str, object]]) -> None:
        self.chunks = chunks
        self.api = self

    def push(self, *args: object, **kwargs: object) -> _Stream:
        return _Stream(self.chunks)


class _Stream(list[dict[str, object]]):
    def close(self) -> None:
        pass


CONFIG, NEW, HAD, MOUNTED = ("sha256:" + c * 64 for c in "cdef")
MANIFEST_BODY = json.dumps({"config": {"digest": CONFIG, "size": 1_500},
                            "layers": [{"digest": NEW, "size": 300_000_000}, {"digest": HAD, "size": 50_000_000},
                                       {"digest": MOUNTED, "size": 7}]}).encode()


def test_only_blobs_the_engine_uploaded_count_as_pushed() -> None:
    stream = [{"status": "Preparing", "id": NEW[7:19]}, {"status": "Pushing", "id": NEW[7:19]},
              {"status": "Pushed", "id": NEW[7:19]}, {"status": "Layer already exists", "id": HAD[7:19]},
              {"status": "Mounted from ns/other", "id": MOUNTED[7:19]}, {"status": "Pushed", "id": CONFIG[7:19]},
              {"status": f"t: digest: {'sha256:' + '1' * 64} size: 900"}]
    uploaded: set[str] = set()
    digest = _push_once(_Engine(stream), RegistryClient("127.0.0.1:9", policy=FAST), "r/ns", "ns", "t",  # type: ignore[arg-type]
                        None, time.monotonic() + 60, uploaded)
    assert digest == "sha256:" + "1" * 64
    assert uploaded == {NEW[7:19], CONFIG[7:19]}
    assert uploaded_size(MANIFEST_BODY, uploaded) == 300_001_500
    assert uploaded_size(MANIFEST_BODY, set()) == 0
    assert uploaded_size(b"not json", uploaded) is None
