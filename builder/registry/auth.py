"""Answering a registry's auth challenge (distribution spec's flow): Basic, or Bearer tokens cached per scope.

Every request goes out without credentials until the registry challenges it (the registry itself: a 401
from a host it redirected to is not answered, or that host could name a realm of its own and receive the
password); Basic credentials go only to a registry that asks for Basic; a Bearer token is fetched from the
challenge's realm for the scope the operation needs (`pull` to read, `pull,push` to write), cached per
repository and scope until it expires. Credentials over plain HTTP only for loopback and for the hosts
named insecure (`--insecure-registry`): a realm on any other host gets no password over plain HTTP,
whatever the registry says.
"""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from builder.registry import hints, models, transport
from builder.registry.address import checked_url, host_port, plain_http_ok
from builder.registry.credentials import Credentials, describe
from builder.registry.errors import AuthError
from builder.registry.hints import error_of, oci_error

TOKEN_LIFETIME_S = 60  # the token spec's default when the server names no expires_in
MAX_TOKEN_CHARS = 16 << 10
TOKEN_RE = re.compile(rf"[\x21-\x7e]{{1,{MAX_TOKEN_CHARS}}}")  # one header value: no space, no CR/LF


@dataclass
class _Token:
    value: str
    expires: float


class Auth:
    """One registry's credentials and what they bought: the Basic flag and the Bearer tokens in hand."""

    def __init__(self, address: str, credentials: Credentials | None, scheme: str, insecure: frozenset[str],
                 seconds: Callable[[], float]) -> None:
        # seconds: the deadline of the next request (the client's own, or what is left of the command's)
        self.address = address
        self.credentials = credentials
        self.scheme = scheme
        self.insecure = insecure
        self._seconds = seconds
        self._tokens: dict[tuple[str, str], _Token] = {}
        self._basic = False  # the registry asked for Basic: send it from now on

    def header(self, repository: str, scope: str) -> str | None:
        """The Authorization header a request for repository and scope carries now, if any."""
        token = self._tokens.get((repository, scope))
        if token is not None and token.expires > time.monotonic():
            return f"Bearer {token.value}"
        if self._basic and self.credentials is not None:
            return basic(self.credentials)
        return None

    def answer(self, exc: urllib.error.HTTPError, repository: str, scope: str) -> bool:
        """True when the challenge can be answered (credentials or a token now in hand): try again."""
        scheme, _, rest = exc.headers.get("WWW-Authenticate", "").partition(" ")
        params = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if scheme.lower() == "basic":
            if self.credentials is None or self._basic:
                return False
            if self.scheme != "https" and not plain_http_ok(self.address, self.insecure):
                raise AuthError(f"registry {self.address} asks for a password over plain HTTP and is neither "
                                "loopback nor named with --insecure-registry: refused")
            self._basic = True
            return True
        if scheme.lower() != "bearer":
            return False
        if "realm" not in params:
            raise AuthError(f"registry {self.address} sent a Bearer challenge without a realm: cannot authenticate",
                            401)
        wanted = params.get("scope") or f"repository:{repository}:{scope}"
        self._tokens[(repository, scope)] = self._fetch_token(params["realm"], params.get("service"), wanted,
                                                              repository)
        return True

    def _fetch_token(self, realm: str, service: str | None, scope: str, repository: str) -> _Token:
        try:
            parts = checked_url(realm)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("https", "http") or not parts.hostname:
            raise AuthError(f"registry {self.address} names a token realm that is not an http(s) URL")
        query = urllib.parse.urlencode({k: v for k, v in (("service", service), ("scope", scope)) if v})
        req = urllib.request.Request(f"{realm}{'&' if parts.query else '?'}{query}")
        where = host_port(parts.netloc)
        if self.credentials is not None:
            if parts.scheme != "https" and not plain_http_ok(parts.netloc, self.insecure):
                raise AuthError(f"token realm {parts.scheme}://{where} of registry {self.address} is plain HTTP, "
                                "neither loopback nor named with --insecure-registry: the password is not sent "
                                "there")
            req.add_header("Authorization", basic(self.credentials))
        try:
            got = transport.request(req, transport.MAX_TOKEN_BYTES, f"token from {where}", self._seconds())
            data = models.parse(models.TokenAnswer, got.body, f"token from {where}")
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                code, message = oci_error(exc)
                raise AuthError(f"token server {where} for registry {self.address} refused "
                                f"{describe(self.credentials)} ({exc.code})", exc.code, code,
                                hints.hint(exc.code, code, message, repository)) from None
            raise error_of(exc, self.address, self.credentials, "GET", f"token ({where})", repository) from None
        value = data.token or data.access_token
        if not isinstance(value, str) or not value:
            raise AuthError(f"token server {where} answered without a token")
        if not TOKEN_RE.fullmatch(value):
            raise AuthError(f"token server {where} answered with a token that is no header value of at most "
                            f"{MAX_TOKEN_CHARS} printable characters: refused")
        lifetime = data.expires_in
        lifetime = min(lifetime, 86400) if isinstance(lifetime, int) and lifetime > 0 else TOKEN_LIFETIME_S
        return _Token(value, time.monotonic() + max(lifetime - 5, 1))


def basic(credentials: Credentials) -> str:
    """The Basic Authorization header value of credentials."""
    raw = f"{credentials.username}:{credentials.password}".encode()
    return "Basic " + base64.b64encode(raw).decode()
