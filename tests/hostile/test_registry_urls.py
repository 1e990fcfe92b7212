"""A registry's `Location` (a redirect, a blob upload session) or Bearer `realm` that does not parse as a URL ends in
that registry's error (a RegistryError naming it; exit 1 from a command), never `unexpected ValueError: Invalid
IPv6 URL` or a port out of range: the scripted registry of tests/fakes answers with each."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.registry import retry
from builder.registry.client import RegistryClient, RegistryError
from testkit.scripted_registry import CREDS, MANIFEST, MANIFEST_HEADERS, Reply, Scripted, Seen
from tests.hostile.test_registry import BLOB_DIGEST, cli

ONCE = retry.Policy(attempts=1, backoff_s=0.01, total_s=5)
BAD_URLS = ["http://[::1/x", "http://[::1]]/x", "http://[not-an-address]/x", "http://user@[fe80::1/x",
            "//[::1/x", "http://127.0.0.1:99999/x", "http://127.0.0.1:-1/x", "http://127.0.0.1:abc/x",
            "https://[::1]:65536/x", "http:///x", "http://[::1%25eth0/x"]


def _client(reg: Scripted) -> RegistryClient:
    return RegistryClient(reg.address, CREDS, policy=ONCE)


def _refused_naming(reg: Scripted, call: Callable[[], object]) -> str:
    with pytest.raises(RegistryError) as caught:
        call()
    said = str(caught.value)
    assert reg.address in said, said
    return said


@pytest.mark.parametrize("location", BAD_URLS)
def test_a_redirect_to_a_location_that_is_no_url_is_the_registry_s_error(server: Callable[..., Scripted],
                                                                          location: str) -> None:
    reg = server(lambda s: (307, {"Location": location}, b""))
    _refused_naming(reg, lambda: _client(reg).blob("ns/r", BLOB_DIGEST))
    _refused_naming(reg, lambda: _client(reg).manifest("ns/r", "t"))


@pytest.mark.parametrize("location", BAD_URLS)
def test_a_blob_upload_location_that_is_no_url_is_the_registry_s_error(server: Callable[..., Scripted],
                                                                        location: str) -> None:
    def answer(seen: Seen) -> Reply:
        if seen.method == "HEAD":
            return 404, {}, b""
        if seen.method == "POST":
            return 202, {"Location": location}, b""
        return 201, {}, b""

    reg = server(answer)
    _refused_naming(reg, lambda: _client(reg).push_blob("ns/r", b"data"))
    digest = "sha256:" + hashlib.sha256(b"data").hexdigest()
    _refused_naming(reg, lambda: _client(reg).mount_blob("ns/r", digest, "ns/o"))
    _refused_naming(reg, lambda: _client(reg).probe_upload("ns/r"))
    assert [s.method for s in reg.seen] == ["HEAD", "POST", "POST", "POST"]  # nothing sent to an address that is none


@pytest.mark.parametrize("realm", BAD_URLS)
def test_a_bearer_realm_that_is_no_url_is_the_registry_s_error(server: Callable[..., Scripted], realm: str) -> None:
    reg = server(lambda s: (401, {"WWW-Authenticate": f'Bearer realm="{realm}",service="s"'}, b""))
    said = _refused_naming(reg, lambda: _client(reg).manifest("ns/r", "t"))
    assert "realm" in said


def test_a_command_against_such_a_registry_exits_1_naming_it(server: Callable[..., Scripted],
                                                            tmp_path: Path) -> None:
    def answer(seen: Seen) -> Reply:
        if seen.path.endswith("/manifests/good"):
            return 200, MANIFEST_HEADERS, MANIFEST
        if seen.path.endswith("/manifests/redirected"):
            return 307, {"Location": "http://[::1/x"}, b""
        return 401, {"WWW-Authenticate": 'Bearer realm="http://[::1/token"'}, b""

    reg = server(answer)
    for ref in (f"{reg.address}/ns/r:redirected", f"{reg.address}/ns/r:challenged"):
        proc = cli(tmp_path, "diff", f"{reg.address}/ns/r:good", ref)
        assert proc.returncode == 1, proc.stderr
        assert reg.address in proc.stderr and "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
        assert json.dumps(proc.stderr).count("\\n") <= 1  # one line
