"""Redirects from registries that may be hostile: credentials stay on their origin (a redirect to another scheme,
host or port drops `Authorization` and cookies), a redirect to anything but http(s) is refused, and so is one to a
Location that does not parse as a URL (a registry's error, never urllib's ValueError)."""

from __future__ import annotations

import urllib.request
from typing import IO, Any

from builder.registry.address import checked_url
from builder.registry.errors import RegistryError


def same_origin(a: str, b: str) -> bool:
    """Same scheme, host and port (a default port spelled or not); a URL that does not parse is no one's origin."""
    try:
        pa, pb = checked_url(a), checked_url(b)
        return (pa.scheme, pa.hostname, pa.port or _PORTS.get(pa.scheme)) == \
            (pb.scheme, pb.hostname, pb.port or _PORTS.get(pb.scheme))
    except ValueError:
        return False


_PORTS = {"http": 80, "https": 443}


class Redirects(urllib.request.HTTPRedirectHandler):
    """Follow http(s) redirects only, and drop credentials whenever the origin changes."""

    max_redirections = 5

    def http_error_302(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                       headers: Any) -> Any:  # urllib splits the Location before it asks redirect_request
        try:
            return super().http_error_302(req, fp, code, msg, headers)
        except ValueError:
            raise RegistryError(f"{req.host} redirected to a Location that is no URL: refused") from None

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        scheme = checked_url(newurl).scheme.lower()
        if scheme not in _PORTS:
            raise RegistryError(f"{req.host} redirected to a {scheme or 'relative'}: URL: refused")
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not same_origin(req.full_url, new.full_url):
            for name in ("Authorization", "Cookie"):
                new.headers.pop(name, None)
                new.unredirected_hdrs.pop(name, None)
        return new
