"""Registries that lie or attack, on loopback (issue 23): no credential leaves its origin, nothing unverified is
believed, every read is capped and ends within its deadline."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.registry import retry, transport
from builder.registry.client import DeadlineError, RegistryClient, RegistryError
from builder.registry.credentials import Credentials
from testkit.scripted_registry import Reply, Scripted, Seen
from tests.fakes.checkout import builder_cli

ONCE = retry.Policy(attempts=1, backoff_s=0.01, total_s=5)
CREDS = Credentials("alice", "s3cret", "test")
BASIC = "Basic " + base64.b64encode(b"alice:s3cret").decode()
BLOB = b'{"config": {"Labels": {"a": "b"}}}'
BLOB_DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()


def basic_then(reply: Callable[[Seen], Reply]) -> Callable[[Seen], Reply]:
    """A registry that asks for Basic, then answers authenticated requests with reply."""
    def answer(seen: Seen) -> Reply:
        if seen.auth != BASIC:
            return 401, {"WWW-Authenticate": 'Basic realm="r"'}, b""
        return reply(seen)
    return answer


def blob_server(seen: Seen) -> Reply:
    return 200, {}, BLOB


@pytest.mark.parametrize("other_scheme_host", ["127.0.0.1", "localhost"])
def test_basic_credentials_are_not_sent_where_a_blob_redirect_points(server: Callable[..., Scripted],
                                                                      other_scheme_host: str) -> None:
    other = server(blob_server)
    port = other.address.rsplit(":", 1)[1]
    reg = server(basic_then(lambda s: (307, {"Location": f"http://{other_scheme_host}:{port}/b"}, b"")))
    assert RegistryClient(reg.address, CREDS, policy=ONCE).blob("ns/r", BLOB_DIGEST) == BLOB
    assert other.seen and other.auths == []


def test_bearer_token_is_not_sent_where_a_blob_redirect_points(server: Callable[..., Scripted]) -> None:
    other = server(blob_server)

    def answer(seen: Seen) -> Reply:
        if seen.path.startswith("/token"):
            return 200, {}, json.dumps({"token": "T0KEN"}).encode()
        if seen.auth != "Bearer T0KEN":
            return 401, {"WWW-Authenticate": f'Bearer realm="http://{reg.address}/token",service="s"'}, b""
        return 307, {"Location": f"http://{other.address}/b"}, b""

    reg = server(answer)
    assert RegistryClient(reg.address, CREDS, policy=ONCE).blob("ns/r", BLOB_DIGEST) == BLOB
    assert other.seen and other.auths == []


def test_a_token_realm_that_redirects_does_not_take_the_password_along(server: Callable[..., Scripted]) -> None:
    other = server(lambda s: (200, {}, json.dumps({"token": "T"}).encode()))

    def answer(seen: Seen) -> Reply:
        if seen.path.startswith("/token"):
            return 307, {"Location": f"http://{other.address}/token"}, b""
        if seen.auth != "Bearer T":
            return 401, {"WWW-Authenticate": f'Bearer realm="http://{reg.address}/token"'}, b""
        return 200, {}, BLOB

    reg = server(answer)
    RegistryClient(reg.address, CREDS, policy=ONCE).blob("ns/r", BLOB_DIGEST)
    assert any(s.auth == BASIC for s in reg.seen)  # the realm itself got the password, as asked
    assert other.seen and other.auths == []


def test_a_redirect_to_ftp_is_refused(server: Callable[..., Scripted]) -> None:
    reg = server(lambda s: (307, {"Location": "ftp://127.0.0.1:9/blob"}, b""))
    with pytest.raises(RegistryError, match="redirected to a ftp: URL: refused"):  # not urllib's "Connection refused"
        RegistryClient(reg.address, CREDS, policy=ONCE).blob("ns/r", BLOB_DIGEST)


def test_a_loopback_registry_is_never_reached_through_a_proxy(server: Callable[..., Scripted],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = server(lambda s: (502, {}, b""))
    reg = server(basic_then(blob_server))
    monkeypatch.setattr(urllib.request, "_opener", None)  # urlopen's opener reads the proxies when it is built
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, f"http://{proxy.address}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert RegistryClient(reg.address, CREDS, policy=ONCE).blob("ns/r", BLOB_DIGEST) == BLOB
    assert proxy.seen == [] and reg.auths


def test_a_plain_http_password_is_never_handed_to_a_proxy(server: Callable[..., Scripted],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An insecure (plain HTTP) registry behind a proxy: the proxy, on loopback here, gets no password."""
    proxy = server(basic_then(blob_server))  # it plays the registry, and asks for Basic
    monkeypatch.setenv("http_proxy", f"http://{proxy.address}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setattr(urllib.request, "_opener", None)
    monkeypatch.setattr(socket, "getaddrinfo", loopback_only(socket.getaddrinfo))  # no DNS query leaves
    client = RegistryClient("registry.invalid:5000", CREDS, policy=ONCE, insecure=frozenset({"registry.invalid:5000"}))
    with pytest.raises(RegistryError, match="cleartext"):
        client.blob("ns/r", BLOB_DIGEST)
    assert proxy.seen and proxy.auths == []


def loopback_only(real: Callable[..., Any]) -> Callable[..., Any]:
    def resolve(host: object, *args: Any, **kwargs: Any) -> Any:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise socket.gaierror(f"test: {host!r} is not resolved (loopback only)")
        return real(host, *args, **kwargs)
    return resolve


MANIFEST = json.dumps({"schemaVersion": 2, "config": {"digest": BLOB_DIGEST, "size": len(BLOB)},
                       "layers": []}).encode()
MANIFEST_DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
OTHER = json.dumps({"schemaVersion": 2, "config": {"digest": "sha256:" + "0" * 64}, "layers": []}).encode()


def test_a_manifest_served_under_another_digest_is_refused(server: Callable[..., Scripted]) -> None:
    by_digest = server(lambda s: (200, {}, OTHER))  # no header: only the by-digest check can refuse it
    with pytest.raises(RegistryError, match="not sha256"):
        RegistryClient(by_digest.address, policy=ONCE).manifest("ns/r", MANIFEST_DIGEST)  # the bytes must be it
    lying = server(lambda s: (200, {"Docker-Content-Digest": MANIFEST_DIGEST}, OTHER))
    with pytest.raises(RegistryError, match="not sha256"):
        RegistryClient(lying.address, policy=ONCE).manifest("ns/r", "tag")  # by tag: the header must agree


def test_a_manifest_digest_comes_from_its_bytes_never_a_header_alone(server: Callable[..., Scripted]) -> None:
    no_header = server(lambda s: (200, {}, MANIFEST))
    found = RegistryClient(no_header.address, policy=ONCE).manifest("ns/r", "tag")
    assert found is not None and found.digest == MANIFEST_DIGEST
    hostile = server(lambda s: (200, {"Docker-Content-Digest": "sha256:$(touch /tmp/pwned)"}, MANIFEST))
    with pytest.raises(RegistryError, match="not a sha256 digest"):
        RegistryClient(hostile.address, policy=ONCE).manifest("ns/r", "tag")


def test_a_config_blob_with_other_bytes_is_refused(server: Callable[..., Scripted]) -> None:
    reg = server(lambda s: (200, {}, MANIFEST if "/manifests/" in s.path else b'{"config": {"Labels": {}}}'))
    client = RegistryClient(reg.address, policy=ONCE)
    found = client.manifest("ns/r", "tag")
    assert found is not None
    with pytest.raises(RegistryError, match="refused"):
        client.config("ns/r", found)


def test_a_reference_that_is_neither_tag_nor_digest_is_not_sent(server: Callable[..., Scripted]) -> None:
    reg = server(lambda s: (200, {}, MANIFEST))
    with pytest.raises(RegistryError, match="neither a tag nor a sha256 digest"):
        RegistryClient(reg.address, policy=ONCE).manifest("ns/r", "../../x")
    assert reg.seen == []


def raw_answer(answer: bytes) -> str:
    """A server on loopback that sends answer to its first request, as it is, then closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        with listener, contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(answer)

    threading.Thread(target=run, daemon=True).start()
    return f"127.0.0.1:{listener.getsockname()[1]}"


def test_an_oversized_manifest_announced_is_refused_before_any_read() -> None:
    """Content-Length over the cap, then a small body: only the header check refuses it (the read would not)."""
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {transport.MAX_MANIFEST_BYTES + 1}\r\n\r\n".encode()
    address = raw_answer(head + MANIFEST)
    with pytest.raises(RegistryError, match=f"{transport.MAX_MANIFEST_BYTES + 1} bytes is more than the"):
        RegistryClient(address, policy=ONCE).manifest("ns/r", "tag")


def test_an_oversized_manifest_unannounced_is_refused_at_the_cap() -> None:
    """No Content-Length (the body ends when the connection closes): only the read's own cap refuses it."""
    address = raw_answer(b"HTTP/1.0 200 OK\r\n\r\n" + b" " * (transport.MAX_MANIFEST_BYTES + 1))
    with pytest.raises(RegistryError, match=f"more than the {transport.MAX_MANIFEST_BYTES} bytes read: refused"):
        RegistryClient(address, policy=ONCE).manifest("ns/r", "tag")


@pytest.mark.parametrize("token", ["x" * (transport.MAX_TOKEN_BYTES + 1), "a\r\nX-Injected: 1"], ids=["huge", "crlf"])
def test_an_oversized_or_multi_line_token_is_refused(server: Callable[..., Scripted], token: str) -> None:
    def answer(seen: Seen) -> Reply:
        if seen.path.startswith("/token"):
            return 200, {}, json.dumps({"token": token}).encode()
        return 401, {"WWW-Authenticate": f'Bearer realm="http://{reg.address}/token"'}, b""

    reg = server(answer)
    with pytest.raises(RegistryError, match="refused"):
        RegistryClient(reg.address, CREDS, policy=ONCE).blob("ns/r", BLOB_DIGEST)
    assert not any(s.auth and s.auth.startswith("Bearer") for s in reg.seen)


@pytest.fixture
def drip() -> Iterator[Callable[[str], str]]:
    """A server that answers one byte every 0.2 s (in its headers, its body, or a TLS handshake), for at most
    30 s."""
    sockets: list[socket.socket] = []

    def start(where: str) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        sockets.append(listener)

        def run() -> None:
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                sockets.append(conn)
                conn.recv(65536)
                head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
                if where == "tls":  # a TLS record header announcing 16 KiB of handshake, then its bytes slowly
                    head = b"\x16\x03\x03\x40\x00"
                if where != "headers":
                    conn.sendall(head)
                end = time.monotonic() + 30
                for byte in (head if where == "headers" else b"x" * 100000):
                    if time.monotonic() > end:
                        break
                    conn.sendall(bytes([byte]))
                    time.sleep(0.2)

        threading.Thread(target=run, daemon=True).start()
        return f"127.0.0.1:{listener.getsockname()[1]}"

    yield start
    for sock in sockets:
        sock.close()


@pytest.mark.parametrize("where", ["body", "headers", "tls"])
def test_a_one_byte_at_a_time_server_cannot_hold_a_read_past_its_deadline(drip: Callable[[str], str],
                                                                         where: str) -> None:
    client = RegistryClient(drip(where), policy=ONCE, scheme="https" if where == "tls" else None)
    client.deadline_s = 1.0
    started = time.monotonic()
    with pytest.raises(RegistryError, match="within 1 s"):
        client.blob("ns/r", BLOB_DIGEST)
    assert time.monotonic() - started < 5


def test_the_watchdog_cuts_a_read_that_bytes_keep_alive() -> None:
    """The drip cases above are also held by the socket timeout and _read's check between chunks (a body, a
    TLS handshake): this one is the watchdog's alone, a blocking read the deadline must end from outside."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        watchdog = transport._Watchdog(0.2)
        watchdog.watch(ours)
        ours.settimeout(10)  # without the watchdog: a failure after 10 s, not a hang
        try:
            assert ours.recv(1) == b""  # blocks until the watchdog shuts the socket
        finally:
            watchdog.cancel()
        assert watchdog.fired
        with pytest.raises(TimeoutError, match=r"within 0\.2 s"):
            watchdog.remaining()


def test_one_thread_fires_each_watchdog_at_its_own_deadline_and_never_a_cancelled_one() -> None:
    """Every request's watchdog shares one thread (transport._Reaper): a deadline added after a later one still
    fires first, and a finished request's watchdog (cancelled) never fires."""
    later, gone = transport._Watchdog(30), transport._Watchdog(0.1)
    gone.cancel()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        sooner = transport._Watchdog(0.3)
        sooner.watch(ours)
        ours.settimeout(10)
        try:
            assert ours.recv(1) == b""  # blocks until `sooner` shuts the socket
        finally:
            sooner.cancel()
            later.cancel()
    assert sooner.fired and not later.fired and not gone.fired


def test_diff_by_digest_never_reports_another_image(server: Callable[..., Scripted], monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    from builder.audit import diff

    for name in ("RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    reg = server(lambda s: (200, {"Content-Type": "application/vnd.oci.image.index.v1+json"},
                           json.dumps({"manifests": []}).encode() if "/referrers/" in s.path else OTHER))
    ref = diff.parse_ref(f"{reg.address}/ns/r@{MANIFEST_DIGEST}", "A")
    with pytest.raises(RegistryError, match="not sha256"):
        diff.fetch(ref)


def test_odd_json_from_a_registry_is_a_one_line_registry_error_or_ignored(server: Callable[..., Scripted]) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    reg = server(lambda s: (200, {}, deep) if "/manifests/" in s.path
                else (500, {}, deep) if "/blobs/" in s.path else (200, {}, b'{"tags": [{"a": 1}, "ok", 5]}'))
    client = RegistryClient(reg.address, policy=ONCE)
    assert client.tags("ns/r") == ["ok"]
    with pytest.raises(RegistryError, match="not JSON"):
        client.config("ns/r", client.manifest("ns/r", "tag"))  # type: ignore[arg-type]
    with pytest.raises(RegistryError, match="500"):
        client.blob("ns/r", BLOB_DIGEST)


def test_a_token_that_never_expires_is_no_crash(server: Callable[..., Scripted]) -> None:
    def answer(seen: Seen) -> Reply:
        if seen.path.startswith("/token"):
            return 200, {}, b'{"token": "T", "expires_in": 1%s}' % (b"0" * 400)
        if seen.auth != "Bearer T":
            return 401, {"WWW-Authenticate": f'Bearer realm="http://{reg.address}/token"'}, b""
        return 200, {}, BLOB

    reg = server(answer)
    assert RegistryClient(reg.address, CREDS, policy=ONCE).blob("ns/r", BLOB_DIGEST) == BLOB


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m builder ...` with no credentials of this machine and a time limit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIF_REGISTRY_")}
    env["DOCKER_CONFIG"] = str(tmp_path)
    return builder_cli(*args, env=env, timeout=60)


def test_commands_against_a_hostile_registry_end_with_one_line(server: Callable[..., Scripted], tmp_path: Path) -> None:
    def answer(seen: Seen) -> Reply:
        if seen.path.endswith("/tags/list"):
            return 200, {}, json.dumps({"tags": ["good", "ftp", "lying"]}).encode()
        if seen.path.endswith("/manifests/ftp"):
            return 307, {"Location": "ftp://127.0.0.1:9/x"}, b""
        if seen.path.endswith("/manifests/good"):
            return 200, {}, MANIFEST
        if "/manifests/" in seen.path:
            return 200, {"Docker-Content-Digest": "sha256:$(touch /tmp/pwned)"}, MANIFEST
        return 200, {}, BLOB

    reg = server(answer)
    site = tmp_path / "site"
    proc = cli(tmp_path, "catalog", "--registry", f"{reg.address}/ns", "--repository", "r", "--out", str(site))
    assert proc.returncode == 1, proc.stderr  # the site is written, and says it is incomplete (issue 31)
    assert "Traceback" not in proc.stderr and proc.stderr.count("warning:") == 2  # each bad tag costs its page only
    assert all(line.startswith(("warning:", "error:")) for line in proc.stderr.splitlines())
    assert "2 thing(s) left out of the catalog" in proc.stderr
    assert not any("$(touch" in p.read_text() for p in site.rglob("*") if p.is_file())
    assert (site / "images" / "r" / "good.html").is_file()
    proc = cli(tmp_path, "diff", f"{reg.address}/ns/r@{MANIFEST_DIGEST}", f"{reg.address}/ns/r:good")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error:")


def test_a_challenge_from_the_host_a_registry_redirected_to_gets_no_password(server: Callable[..., Scripted]) -> None:
    """The registry needs no login, but sends the blob read elsewhere; that host challenges with a realm of its own:
    answering it would hand the registry's password to a host the registry never named as its realm."""
    def elsewhere(seen: Seen) -> Reply:
        if seen.path.startswith("/token"):
            return 200, {}, json.dumps({"token": "T"}).encode()
        if seen.auth == "Bearer T":
            return 200, {}, BLOB
        return 401, {"WWW-Authenticate": f'Bearer realm="http://{other.address}/token"'}, b""

    other = server(elsewhere)
    reg = server(lambda s: (307, {"Location": f"http://{other.address}/b"}, b""))
    with pytest.raises(RegistryError, match="not answered"):
        RegistryClient(reg.address, CREDS, policy=ONCE).blob("ns/r", BLOB_DIGEST)
    assert other.seen and other.auths == [] and not any(s.path.startswith("/token") for s in other.seen)


def test_a_registry_slow_on_every_request_cannot_hold_a_catalog_past_its_deadline(
        server: Callable[..., Scripted], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each answer well inside its own deadline, but thousands of them (5000 tags, a few requests each, each
    retried): only the command's deadline, shared by every request, bounds the whole."""
    from builder import site

    def answer(seen: Seen) -> Reply:
        if seen.path.endswith("/tags/list"):
            return 200, {}, json.dumps({"tags": [f"t{i}" for i in range(500)]}).encode()
        time.sleep(0.2)
        return 200, {}, MANIFEST if "/manifests/" in seen.path else BLOB

    for name in ("RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setattr(site, "DEADLINE_S", 1.0)
    reg = server(answer)
    started = time.monotonic()
    with pytest.raises(DeadlineError, match="within the command's 1 s"):
        site.build_catalog(f"{reg.address}/ns", tmp_path / "site", repositories=["r"])
    assert time.monotonic() - started < 5 and len(reg.seen) < 30
