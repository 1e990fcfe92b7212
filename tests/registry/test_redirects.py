"""builder.registry.redirects: origins compared by scheme, host and port; a Location that is no URL refused.

The redirects' hostile cases against a scripted registry: tests/hostile/test_registry.py and
tests/hostile/test_registry_urls.py.
"""

from __future__ import annotations

import io
import urllib.request
from email.message import Message

import pytest

from builder.registry import redirects
from builder.registry.errors import RegistryError


@pytest.mark.parametrize(("a", "b", "same"), [
    ("https://r.io/v2/", "https://r.io:443/token", True),
    ("http://r.io/v2/", "http://r.io:80/x", True),
    ("https://r.io/v2/", "http://r.io/v2/", False),
    ("https://r.io/v2/", "https://cdn.r.io/v2/", False),
    ("https://r.io:5000/", "https://r.io/", False),
    ("https://r.io:99999/", "https://r.io/", False),  # a port that is no port is no origin
])
def test_same_origin_is_scheme_host_and_port(a: str, b: str, same: bool) -> None:
    assert redirects.same_origin(a, b) is same


@pytest.mark.parametrize("location", ["http://[::1/x", "http://127.0.0.1:99999/x", "http://[::1]]/x",
                                      "http://[not-an-address]/x", "ftp://127.0.0.1/x"])
def test_a_redirect_to_a_location_that_is_no_http_url_is_refused_naming_who_sent_it(location: str) -> None:
    headers = Message()
    headers["Location"] = location
    req = urllib.request.Request("http://127.0.0.1:5000/v2/ns/r/blobs/x")
    for code in (301, 302, 303, 307, 308):
        with pytest.raises(RegistryError, match=r"^127\.0\.0\.1:5000 redirected to .*: refused$"):
            getattr(redirects.Redirects(), f"http_error_{code}")(req, io.BytesIO(), code, "moved", headers)


def test_a_redirect_across_origins_drops_the_credentials() -> None:
    req = urllib.request.Request("http://127.0.0.1:5000/v2/x", headers={"Authorization": "Basic x", "Cookie": "c"})
    new = redirects.Redirects().redirect_request(req, io.BytesIO(), 307, "moved", Message(), "http://127.0.0.1:6000/b")
    assert new is not None and not new.has_header("Authorization") and not new.has_header("Cookie")
    same = redirects.Redirects().redirect_request(req, io.BytesIO(), 307, "moved", Message(), "http://127.0.0.1:5000/b")
    assert same is not None and same.has_header("Authorization")
