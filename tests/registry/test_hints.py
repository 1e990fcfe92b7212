"""Every registry error says its HTTP status, the registry's OCI code and message, and what to do about it.

Each error is answered by a scripted registry on loopback (testkit/scripted_registry.py) and read where a
person reads it: the exception the client raises, a failed cell's message in its report and run record, and the
one line a command prints when the registry refuses the run before it starts.
"""

from __future__ import annotations

import errno
import json
import socket
import ssl
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import docker
import pytest

from builder.pipeline.jobs import Job
from builder.pipeline.lifecycle import Options, run_image
from builder.pipeline.options import PushOptions
from builder.publish import record
from builder.publish.promote import Target
from builder.publish.push import _classify
from builder.registry import hints
from builder.registry.client import Manifest, RegistryClient, RegistryError
from testkit.scripted_registry import (
    CREDS,
    FAST,
    MANIFEST,
    Reply,
    Scripted,
    Seen,
    oci_error,
)
from tests.fakes.checkout import builder_cli

REPO = "ns/pytorch"
STORAGE_FULL = hints.HINTS["no space left on device"]
Operation = Callable[[RegistryClient], Any]


def put_tag(client: RegistryClient) -> object:
    return client.put_tag(REPO, "t", Manifest(MANIFEST, "application/vnd.oci.image.manifest.v1+json", "sha256:1"))


def config(client: RegistryClient) -> object:
    return client.config(REPO, Manifest(MANIFEST, "", "sha256:1"))


def upload(client: RegistryClient) -> object:
    client.probe_upload(REPO)
    return None


def tags(client: RegistryClient) -> object:
    return client.tags(REPO)


def html(status: int) -> Reply:
    return status, {"Content-Type": "text/html"}, b"<html><body>413 Request Entity Too Large</body></html>"


CASES: list[tuple[str, Reply, Operation, str]] = [
    ("401", (401, {"WWW-Authenticate": 'Basic realm="r"'}, b""), tags, hints.CREDENTIALS),
    ("401 UNAUTHORIZED", oci_error(401, "UNAUTHORIZED", "authentication required"), tags, hints.CREDENTIALS),
    ("403 DENIED", oci_error(403, "DENIED", "requested access to the resource is denied"), upload,
     hints.NO_PUSH_RIGHTS.replace(hints.REPOSITORY, REPO)),
    ("404 NAME_UNKNOWN", oci_error(404, "NAME_UNKNOWN", "repository name not known to registry"), upload,
     hints.NO_REPOSITORY.replace(hints.REPOSITORY, REPO)),
    ("400 MANIFEST_INVALID", oci_error(400, "MANIFEST_INVALID", "manifest invalid"), put_tag, hints.BAD_MANIFEST),
    ("404 BLOB_UNKNOWN", oci_error(404, "BLOB_UNKNOWN", "blob unknown to registry"), config, hints.LAYER_GONE),
    ("405 UNSUPPORTED", oci_error(405, "UNSUPPORTED", "The operation is unsupported."), put_tag, hints.READ_ONLY),
    ("405", (405, {}, b""), put_tag, hints.READ_ONLY),
    ("413", html(413), upload, hints.TOO_LARGE),
    ("429 TOOMANYREQUESTS", oci_error(429, "TOOMANYREQUESTS", "too many requests"), tags, hints.RATE_LIMITED),
    ("500 disk full", oci_error(500, "UNKNOWN", "filesystem: write /var/lib/registry: no space left on device"),
     upload, STORAGE_FULL),
    ("503", oci_error(503, "UNAVAILABLE", "service unavailable"), tags, hints.SERVER_TROUBLE),
]


@pytest.mark.parametrize(("reply", "operation", "hint"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_error_says_status_code_message_and_its_hint(server: Callable[..., Scripted],
                                                          reply: Reply, operation: Operation, hint: str) -> None:
    reg = server(lambda seen: reply)
    with pytest.raises(RegistryError) as exc:
        operation(RegistryClient(reg.address, CREDS, policy=FAST))
    said = str(exc.value)
    status, _, body = reply
    assert str(status) in said and exc.value.status == status
    errors = json.loads(body).get("errors") if body.startswith(b"{") else None
    if errors:
        assert errors[0]["code"] in said and errors[0]["message"] in said and exc.value.code == errors[0]["code"]
    assert exc.value.hint == hint and said.endswith(f"; hint: {hint}")
    assert said.count(hint) == 1  # a retried error says it once, not once per wrapper
    assert "pa55-word" not in said


def test_hints_are_looked_up_by_code_first_then_status() -> None:
    assert hints.hint(404, "NAME_UNKNOWN", "", "a/b") == hints.NO_REPOSITORY.replace(hints.REPOSITORY, "a/b")
    assert hints.hint(404, "BLOB_UNKNOWN") == hints.LAYER_GONE  # the code says more than the status
    assert hints.hint(401, "DENIED", "", "a/b") == hints.NO_PUSH_RIGHTS.replace(hints.REPOSITORY, "a/b")
    assert hints.hint(400, "UNSUPPORTED") == hints.READ_ONLY and hints.hint(400, "SIZE_INVALID") == hints.RERUN
    assert hints.hint(403, "denied") == hints.NO_PUSH_RIGHTS.replace(hints.REPOSITORY, "this repository")
    assert hints.hint(500, "UNKNOWN", "... No space left on device") == STORAGE_FULL  # the registry's own words
    assert hints.hint(418, "SOMETHING_NEW") is None and hints.hint(None) is None
    texts = [text for text in hints.HINTS.values()]
    assert all(texts.count(t) == 1 or t in vars(hints).values() for t in texts)  # shared ones are named once


def test_a_push_error_from_the_engine_gets_the_hint_of_its_status(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: (200, {}, b"{}"))
    api = RegistryClient(reg.address, CREDS, policy=FAST)
    assert _classify(api, REPO, 413, "request entity too large").hint == hints.TOO_LARGE
    denied = _classify(api, REPO, 403, "denied: requested access to the resource is denied")
    assert denied.hint == hints.NO_PUSH_RIGHTS.replace(hints.REPOSITORY, REPO)


def test_a_push_error_is_explained_by_the_registrys_own_answer(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: oci_error(404, "NAME_UNKNOWN", "repository name not known to registry"))
    found = _classify(RegistryClient(reg.address, CREDS, policy=FAST), REPO, None, "unknown: push refused")
    assert found.status == 404 and found.code == "NAME_UNKNOWN" and "push refused" in str(found)
    assert str(found).endswith(hints.NO_REPOSITORY.replace(hints.REPOSITORY, REPO))


def test_a_failed_cell_and_its_run_record_carry_the_hint(server: Callable[..., Scripted],
                                                         tmp_path: Path) -> None:
    def answer(seen: Seen) -> Reply:
        return oci_error(405, "UNSUPPORTED", "read-only mirror")

    reg = server(answer)
    target = Target(f"{reg.address}/ns", RegistryClient(reg.address, None, policy=FAST), None)
    job = Job(tag="cpu_t", repository="pytorch", tags=["cpu_t"], content_hash="a" * 64, expect={}, labels=None)
    engine = cast(docker.DockerClient, None)  # the registry refuses before anything reaches the engine
    report = run_image(engine, job, Options(push=PushOptions(target=target, skip_published=True)))
    assert report.failed and report.failed_stage == "registry"
    failure = report.failure or ""
    assert all(part in failure for part in ("405", "UNSUPPORTED", "read-only mirror", hints.READ_ONLY))
    record.write(tmp_path / "record.json", [report], target.registry)
    row = json.loads((tmp_path / "record.json").read_text())["images"][0]
    assert row["state"] == "failed" and row["failure"] == failure


def test_a_registry_refusing_the_run_prints_the_hint(server: Callable[..., Scripted], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    reg = server(lambda seen: (401, {"WWW-Authenticate": 'Basic realm="r"'}, b""))
    monkeypatch.delenv("RIF_REGISTRY_USER", raising=False)
    monkeypatch.delenv("RIF_REGISTRY_PASSWORD", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    proc = builder_cli("catalog", "--registry", f"{reg.address}/ns", "--out", str(tmp_path / "site"))
    assert proc.returncode == 1, proc.stderr
    assert "401" in proc.stderr and f"hint: {hints.CREDENTIALS}" in " ".join(proc.stderr.split())


# -- failures with no answer at all: a hint for each class of network error ------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_registry_that_refuses_connections_says_nothing_listens_there() -> None:
    client = RegistryClient(f"127.0.0.1:{_closed_port()}", policy=FAST)
    with pytest.raises(RegistryError) as caught:
        client.tags(REPO)
    assert "Connection refused" in str(caught.value)
    assert caught.value.hint == hints.REFUSED
    assert str(caught.value).endswith(f"hint: {hints.REFUSED}")


def test_https_to_a_plain_http_registry_names_insecure_registry(server: Callable[..., Scripted]) -> None:
    plain = server(lambda seen: (200, {}, b"{}"))
    client = RegistryClient(plain.address, scheme="https", policy=FAST)
    with pytest.raises(RegistryError) as caught:
        client.tags(REPO)
    assert caught.value.hint == hints.PLAIN_HTTP


@pytest.mark.parametrize(("exc", "expected"), [
    (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), hints.REFUSED),
    (urllib.error.URLError(socket.gaierror(-2, "Name or service not known")), hints.UNRESOLVED),
    (TimeoutError("GET x: no complete answer within 60 s"), hints.NO_ANSWER),
    (urllib.error.URLError(ssl.SSLCertVerificationError(1, "certificate verify failed")), hints.UNTRUSTED),
    (urllib.error.URLError(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")), hints.PLAIN_HTTP),
    (ConnectionResetError(104, "Connection reset by peer"), hints.CUT),
    (ConnectionError("GET x: RemoteDisconnected"), hints.CUT),
    (urllib.error.URLError(OSError(errno.ENETUNREACH, "Network is unreachable")), hints.UNREACHABLE),
    (urllib.error.URLError(OSError(errno.EHOSTUNREACH, "No route to host")), hints.UNREACHABLE),
])
def test_each_network_error_class_has_its_hint(exc: BaseException, expected: str) -> None:
    assert hints.network(exc) == expected


def test_a_network_error_nobody_knows_gets_no_invented_hint() -> None:
    assert hints.network(urllib.error.URLError(OSError(errno.EACCES, "Permission denied"))) is None
