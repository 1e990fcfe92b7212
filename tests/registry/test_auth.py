"""builder.registry.auth against a scripted registry on loopback: Basic only after its challenge, Bearer tokens
per scope, never a password over plain HTTP to a host that is not loopback or named insecure.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Callable

import pytest

from builder.registry.auth import basic
from builder.registry.client import AuthError, Manifest, RegistryClient, RegistryError
from builder.registry.credentials import Credentials
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


def test_no_password_before_a_basic_challenge_and_basic_only_after_it(server: Callable[..., Scripted]) -> None:
    def answer(seen: Seen) -> Reply:
        if seen.auth != BASIC:
            return 401, {"WWW-Authenticate": 'Basic realm="r"'}, b"{}"
        return 200, MANIFEST_HEADERS, MANIFEST

    reg = server(answer)
    client = RegistryClient(reg.address, CREDS, policy=FAST)
    assert client.digest("ns/pytorch", "t") == MANIFEST_HEADERS["Docker-Content-Digest"]
    assert [s.auth for s in reg.seen] == [None, BASIC]



def test_an_anonymous_registry_never_sees_credentials(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: (200, MANIFEST_HEADERS, MANIFEST))
    client = RegistryClient(reg.address, CREDS, policy=FAST)
    client.manifest("ns/pytorch", "a")
    client.put_tag("ns/pytorch", "b", Manifest(MANIFEST, MANIFEST_HEADERS["Content-Type"],
                                               MANIFEST_HEADERS["Docker-Content-Digest"]))
    assert [s.auth for s in reg.seen] == [None, None]



def test_wrong_password_is_an_auth_error_naming_user_never_secret(server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: (401, {"WWW-Authenticate": 'Basic realm="r"'}, b""))
    with pytest.raises(AuthError) as exc:
        RegistryClient(reg.address, CREDS, policy=FAST).tags("ns/pytorch")
    assert reg.address in str(exc.value) and "'alice'" in str(exc.value) and SECRET not in str(exc.value)
    assert len(reg.seen) == 2  # not retried: the same password cannot start working



def token_registry(server: Callable[..., Scripted], realm: str | None = None,
                   token_reply: Callable[[Seen], Reply] | None = None) -> tuple[Scripted, Scripted]:
    """A registry that wants a token whose scope covers each request, and a token server granting exactly it."""
    def grant(seen: Seen) -> Reply:
        scope = seen.path.split("scope=", 1)[1].split("&")[0].replace("%3A", ":").replace("%2C", ",") \
            .replace("%2F", "/")
        return 200, {"Content-Type": "application/json"}, json.dumps({"token": scope, "expires_in": 300}).encode()

    tokens = server(token_reply or grant)
    where = realm or f"http://{tokens.address}/token"

    def answer(seen: Seen) -> Reply:
        need = "pull,push" if seen.method == "PUT" else "pull"
        if seen.auth != f"Bearer repository:ns/pytorch:{need}":
            challenge = f'Bearer realm="{where}",service="reg",scope="repository:ns/pytorch:{need}"'
            return oci_error(401, "UNAUTHORIZED", "authentication required") if seen.auth is None else \
                (401, {"WWW-Authenticate": challenge + ',error="insufficient_scope"'}, b"")
        return 200, MANIFEST_HEADERS, MANIFEST

    def with_challenge(seen: Seen) -> Reply:
        status, headers, body = answer(seen)
        if status == 401 and "WWW-Authenticate" not in headers:
            need = "pull,push" if seen.method == "PUT" else "pull"
            headers = {**headers, "WWW-Authenticate":
                       f'Bearer realm="{where}",service="reg",scope="repository:ns/pytorch:{need}"'}
        return status, headers, body

    return server(with_challenge), tokens



def test_token_per_operation_scope_pull_then_push(server: Callable[..., Scripted]) -> None:
    reg, tokens = token_registry(server)
    client = RegistryClient(reg.address, CREDS, policy=FAST)
    found = client.manifest("ns/pytorch", "a")
    assert found is not None
    client.put_tag("ns/pytorch", "b", found)  # needs push: a pull token would get 401 insufficient_scope
    client.manifest("ns/pytorch", "c")  # the cached pull token is reused
    assert [s.path.split("scope=")[1].split("&")[0] for s in tokens.seen] == [
        "repository%3Ans%2Fpytorch%3Apull", "repository%3Ans%2Fpytorch%3Apull%2Cpush"]
    assert all(s.auth == BASIC for s in tokens.seen)  # the password goes to the realm only
    assert all(s.auth is None or s.auth.startswith("Bearer ") for s in reg.seen)



def test_password_never_goes_to_a_plain_http_realm_that_is_not_loopback(
        server: Callable[..., Scripted], monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[str] = []
    real = socket.getaddrinfo

    def recording(host: str, *args: object, **kwargs: object) -> object:
        looked_up.append(str(host))
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", recording)
    reg, _ = token_registry(server, realm="http://auth.test/token")
    with pytest.raises(AuthError) as exc:
        RegistryClient(reg.address, CREDS, policy=FAST).tags("ns/pytorch")
    assert "plain HTTP" in str(exc.value) and SECRET not in str(exc.value)
    assert "auth.test" not in looked_up  # refused before the name was even resolved



def test_challenge_without_realm_and_token_that_is_not_json_are_clear_errors(
        server: Callable[..., Scripted]) -> None:
    reg = server(lambda seen: (401, {"WWW-Authenticate": 'Bearer service="reg"'}, b""))
    with pytest.raises(AuthError, match="without a realm"):
        RegistryClient(reg.address, CREDS, policy=FAST).tags("ns/pytorch")
    html, _ = token_registry(server, token_reply=lambda seen: (200, {"Content-Type": "text/html"}, b"<html>"))
    with pytest.raises(RegistryError, match="not JSON"):
        RegistryClient(html.address, CREDS, policy=FAST).tags("ns/pytorch")


def test_basic_is_the_base64_of_user_colon_password() -> None:
    assert basic(Credentials("user", "pa:ss", "test")) == "Basic " + base64.b64encode(b"user:pa:ss").decode()
