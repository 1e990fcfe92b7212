"""--insecure-registry: plain HTTP (and credentials over it) only to loopback and to the hosts it names.

Names ending in `.test` resolve to 127.0.0.1 through a hook on socket.getaddrinfo, so a "remote" registry or
token realm is a scripted server on loopback: every byte these tests send stays on this machine, and the hook
records which names the client looked up (a realm it refuses must not even be resolved).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import publish, runs
from builder.cli.app import app
from builder.pipeline import jobs
from builder.publish.promote import Target
from builder.publish.push import _classify
from builder.registry.address import host_port, plain_http_ok
from builder.registry.client import AuthError, RegistryClient, RegistryError
from builder.registry.errors import TransientError
from testkit.scripted_registry import (
    BASIC,
    CREDS,
    FAST,
    MANIFEST,
    MANIFEST_HEADERS,
    SECRET,
    Reply,
    Scripted,
    Seen,
    oci_error,
)
from tests.fakes.checkout import DATA

LookedUp = list[str]


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> LookedUp:
    """`*.test` resolves to 127.0.0.1; every name looked up is recorded."""
    looked_up: LookedUp = []
    real = socket.getaddrinfo

    def resolve(host: object, *args: object, **kwargs: object) -> object:
        looked_up.append(str(host))
        target = "127.0.0.1" if str(host).endswith(".test") else host
        return real(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return looked_up


def port_of(reg: Scripted) -> str:
    return reg.address.rsplit(":", 1)[1]


# -- which hosts speak plain HTTP ---------------------------------------------------------------------------

@pytest.mark.parametrize(("address", "insecure", "scheme"), [
    ("reg.lan:5000", set(), "https"),
    ("reg.lan:5000", {"reg.lan:5000"}, "http"),
    ("reg.lan:5000", {"reg.lan"}, "https"),  # named with its port, as Docker's insecure-registries
    ("reg.lan:5001", {"reg.lan:5000"}, "https"),
    ("reg.lan", {"reg.lan"}, "http"),
    ("other.lan:5000", {"reg.lan:5000"}, "https"),
    ("10.0.0.7:5000", {"10.0.0.7:5000"}, "http"),
    ("[fd00::7]:5000", {"[fd00:0::7]:5000"}, "http"),  # IPs compared as addresses, not text
    ("localhost.evil.example:5000", set(), "https"),
    ("127.0.0.1:5000", set(), "http"),  # loopback needs no naming
])
def test_plain_http_only_for_loopback_and_hosts_named_insecure(address: str, insecure: set[str], scheme: str) -> None:
    assert RegistryClient(address, insecure=frozenset(insecure)).scheme == scheme
    assert Target.of(f"{address}/ns", insecure=frozenset(insecure)).api.scheme == scheme
    assert plain_http_ok(address, frozenset(host_port(h) for h in insecure)) is (scheme == "http")


def test_a_named_insecure_host_is_spoken_to_over_http(server: Callable[..., Scripted], names: LookedUp) -> None:
    reg = server(lambda seen: (200, {}, b'{"tags": ["a"]}'))
    address = f"reg.test:{port_of(reg)}"
    assert RegistryClient(address, insecure=frozenset({address}), policy=FAST).tags("ns/pytorch") == ["a"]
    assert [s.path for s in reg.seen] == ["/v2/ns/pytorch/tags/list"] and "reg.test" in names


def test_a_host_not_named_insecure_gets_https_only(server: Callable[..., Scripted], names: LookedUp) -> None:
    reg = server(lambda seen: (200, {}, b'{"tags": ["a"]}'))
    address = f"reg.test:{port_of(reg)}"
    with pytest.raises(RegistryError):
        RegistryClient(address, policy=FAST).tags("ns/pytorch")  # a TLS hello to a plain HTTP server
    assert reg.seen == [] and "reg.test" in names  # it went there, and never as plain HTTP


# -- Basic ------------------------------------------------------------------------------------------------

def basic_registry(seen: Seen) -> Reply:
    if seen.auth != BASIC:
        return 401, {"WWW-Authenticate": 'Basic realm="r"'}, b"{}"
    return 200, MANIFEST_HEADERS, MANIFEST


def test_basic_goes_over_plain_http_to_a_host_named_insecure_after_its_challenge(
        server: Callable[..., Scripted], names: LookedUp) -> None:
    reg = server(basic_registry)
    address = f"reg.test:{port_of(reg)}"
    client = RegistryClient(address, CREDS, insecure=frozenset({address}), policy=FAST)
    assert client.digest("ns/pytorch", "t") == MANIFEST_HEADERS["Docker-Content-Digest"]
    assert [s.auth for s in reg.seen] == [None, BASIC]


def test_basic_never_goes_over_plain_http_to_a_host_not_named(server: Callable[..., Scripted],
                                                               names: LookedUp) -> None:
    reg = server(basic_registry)
    address = f"reg.test:{port_of(reg)}"
    other = f"reg.test:{int(port_of(reg)) + 1}"
    client = RegistryClient(address, CREDS, scheme="http", insecure=frozenset({other}), policy=FAST)
    with pytest.raises(AuthError) as exc:
        client.tags("ns/pytorch")
    assert "plain HTTP" in str(exc.value) and "--insecure-registry" in str(exc.value)
    assert [s.auth for s in reg.seen] == [None] and SECRET not in str(exc.value)


# -- Bearer -----------------------------------------------------------------------------------------------

def test_a_plain_http_realm_named_insecure_gets_the_password(server: Callable[..., Scripted],
                                                             names: LookedUp) -> None:
    reg, tokens = named_realm_registry(server)
    client = RegistryClient(reg.address, CREDS, insecure=frozenset({f"auth.test:{port_of(tokens)}"}), policy=FAST)
    assert client.tags("ns/pytorch") == []
    assert [s.auth for s in tokens.seen] == [BASIC] and "auth.test" in names  # the password goes to the realm
    assert [s.auth for s in reg.seen] == [None, "Bearer t"]  # and never to the registry


@pytest.mark.parametrize("named", [set(), {"auth.test"}, {"reg.test"}])
def test_a_plain_http_realm_not_named_gets_no_password_and_is_not_even_resolved(
        server: Callable[..., Scripted], names: LookedUp, named: set[str]) -> None:
    reg, tokens = named_realm_registry(server)
    with pytest.raises(AuthError) as exc:
        RegistryClient(reg.address, CREDS, insecure=frozenset(named), policy=FAST).tags("ns/pytorch")
    assert "--insecure-registry" in str(exc.value) and SECRET not in str(exc.value)
    assert tokens.seen == [] and "auth.test" not in names


def named_realm_registry(server: Callable[..., Scripted]) -> tuple[Scripted, Scripted]:
    """A loopback registry whose Bearer realm is http://auth.test:PORT/token (the token server, via the hook)."""
    tokens = server(lambda seen: (200, {"Content-Type": "application/json"}, b'{"token": "t", "expires_in": 300}'))
    realm = f"http://auth.test:{port_of(tokens)}/token"

    def answer(seen: Seen) -> Reply:
        if seen.auth != "Bearer t":
            return 401, {"WWW-Authenticate": f'Bearer realm="{realm}",service="reg"'}, b""
        return 200, {}, b'{"tags": []}'

    return server(answer), tokens


# -- threading: a push's probe, the command line -----------------------------------------------------------

def test_a_failed_push_is_probed_with_the_same_insecure_hosts(server: Callable[..., Scripted],
                                                               names: LookedUp) -> None:
    def answer(seen: Seen) -> Reply:
        if seen.auth != BASIC:
            return 401, {"WWW-Authenticate": 'Basic realm="r"'}, b""
        return 202, {"Location": "/v2/ns/pytorch/blobs/uploads/u1"}, b""

    reg = server(answer)
    address = f"reg.test:{port_of(reg)}"
    found = _classify(RegistryClient(address, CREDS, insecure=frozenset({address}), policy=FAST), "ns/pytorch",
                      None, "EOF")
    assert type(found) is TransientError, found  # the probe logged in over plain HTTP, as named: a hiccup
    assert [(s.method, s.auth) for s in reg.seen][:2] == [("POST", None), ("POST", BASIC)]


def test_catalog_speaks_http_to_a_registry_named_insecure(server: Callable[..., Scripted], names: LookedUp,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RIF_REGISTRY", "RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    reg = server(lambda seen: (200, {}, b'{"tags": []}'))
    address = f"reg.test:{port_of(reg)}"
    result = CliRunner().invoke(app, ["catalog", "--registry", f"{address}/ns", "--insecure-registry", address,
                                      "--out", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    assert [s.path for s in reg.seen] == ["/v2/ns/pytorch/tags/list"]


PUSHING = [["publish", "--matrix", str(DATA / "e2e.yaml"), "--record"],
           ["build", "--matrix", str(DATA / "e2e.yaml"), "--push", "--report"],
           ["push", "an-image", "--report"]]


@pytest.mark.parametrize("command", PUSHING, ids=lambda c: c[0])
def test_every_pushing_command_asks_a_registry_named_insecure_over_http(
        command: list[str], server: Callable[..., Scripted], names: LookedUp, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to the registry's preflight, which refuses: no engine is reached (connect is stubbed)."""
    for var in ("RIF_REGISTRY", "RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    monkeypatch.setattr(runs, "connect", lambda: None)
    monkeypatch.setattr(publish, "connect", lambda: None)
    monkeypatch.setattr(jobs, "job_for_image",
                        lambda client, ref, *rest: jobs.Job(tag="cpu_t", repository="pytorch", tags=["cpu_t"],
                                                            content_hash="a" * 64, expect={}, labels=None))
    reg = server(lambda seen: oci_error(403, "DENIED", "read-only here"))
    address = f"reg.test:{port_of(reg)}"
    result = CliRunner().invoke(app, [*command, str(tmp_path / "record.json"), "--registry", f"{address}/ns",
                                      "--insecure-registry", address, "--progress", "plain"])
    assert result.exit_code == 1, result.output
    assert [s.path for s in reg.seen] == ["/v2/ns/pytorch/tags/list"]  # plain HTTP: the request was read
    assert (tmp_path / "record.json").is_file()
