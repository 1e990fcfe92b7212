"""A registry's HTTP API (distribution spec v2): what is published under which digest, and moving a tag.

Manifests are only served in the format asked for, so every request names the Docker and OCI media types.
Transient failures (connection refused, 5xx, timeouts) are retried with backoff; 401/403 become an
AuthError that names the registry and whose credentials were tried, never the secret.
"""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from builder.credentials import Credentials

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json"
)
RETRIES = 4
BACKOFF_S = 1.0
T = TypeVar("T")


class RegistryError(RuntimeError):
    pass


class AuthError(RegistryError):
    pass


@dataclass(frozen=True)
class Manifest:
    body: bytes
    media_type: str
    digest: str


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500 or exc.code == 429
    return isinstance(exc, (urllib.error.URLError, ConnectionError, TimeoutError, OSError))


def retry(fn: Callable[[], T], what: str, retries: int = RETRIES, backoff: float = BACKOFF_S) -> T:
    """Call fn, retrying transient errors with exponential backoff; other errors pass through at once."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except Exception as exc:
            if not is_transient(exc) or attempt == retries:
                if is_transient(exc):
                    raise RegistryError(f"{what}: still failing after {retries + 1} tries: {exc}") from exc
                raise
            time.sleep(backoff * 2 ** attempt)
    raise AssertionError("unreachable")


class RegistryClient:
    def __init__(self, address: str, credentials: Credentials | None = None, scheme: str | None = None,
                 retries: int = RETRIES, backoff: float = BACKOFF_S) -> None:
        # Docker treats loopback registries as plain HTTP; everything else is HTTPS.
        local = address.startswith(("127.", "localhost"))
        self.address = address
        self.base = f"{scheme or ('http' if local else 'https')}://{address}/v2"
        self.credentials = credentials
        self.retries, self.backoff = retries, backoff
        self._tokens: dict[str, str] = {}

    # -- reads -------------------------------------------------------------------------------------
    def tags(self, repository: str) -> list[str]:
        """Tags of repository; [] when the repository does not exist."""
        body = self._call("GET", f"{repository}/tags/list", repository, missing_ok=True)
        return list(json.loads(body).get("tags") or []) if body is not None else []

    def digest(self, repository: str, tag: str) -> str | None:
        """The manifest digest a tag points at, or None when the tag does not exist."""
        found = self.manifest(repository, tag)
        return found.digest if found else None

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        box: dict[str, str] = {}
        body = self._call("GET", f"{repository}/manifests/{reference}", repository, accept=MANIFEST_TYPES,
                          missing_ok=True, headers_out=box)
        if body is None:
            return None
        return Manifest(body, box.get("content-type", ""), box.get("docker-content-digest", ""))

    def config_labels(self, repository: str, tag: str) -> dict[str, str]:
        """Labels of a published image, read from its config blob (no pull needed)."""
        found = self.manifest(repository, tag)
        if found is None:
            return {}
        config_digest = json.loads(found.body)["config"]["digest"]
        blob = self._call("GET", f"{repository}/blobs/{config_digest}", repository)
        assert blob is not None
        return dict(json.loads(blob).get("config", {}).get("Labels") or {})

    # -- writes ------------------------------------------------------------------------------------
    def put_tag(self, repository: str, tag: str, manifest: Manifest) -> str:
        """Point tag at exactly this manifest (a registry-side re-tag: no layer moves); returns the digest."""
        box: dict[str, str] = {}
        self._call("PUT", f"{repository}/manifests/{tag}", repository, body=manifest.body,
                   content_type=manifest.media_type, headers_out=box)
        digest = box.get("docker-content-digest", manifest.digest)
        if digest != manifest.digest:
            raise RegistryError(f"{self.address}/{repository}:{tag} now points at {digest}, not {manifest.digest}")
        return digest

    # -- plumbing ----------------------------------------------------------------------------------
    def _call(self, method: str, path: str, repository: str, *, accept: str = "application/json",
              body: bytes | None = None, content_type: str | None = None, missing_ok: bool = False,
              headers_out: dict[str, str] | None = None) -> bytes | None:
        def once() -> bytes | None:
            return self._once(method, path, repository, accept, body, content_type, missing_ok, headers_out)

        return retry(once, f"{method} {self.address}/{path}", self.retries, self.backoff)

    def _once(self, method: str, path: str, repository: str, accept: str, body: bytes | None,
              content_type: str | None, missing_ok: bool, headers_out: dict[str, str] | None) -> bytes | None:
        for attempt in (1, 2):
            req = urllib.request.Request(f"{self.base}/{path}", method=method, data=body, headers={"Accept": accept})
            if content_type:
                req.add_header("Content-Type", content_type)
            auth = self._authorization(repository)
            if auth:
                req.add_header("Authorization", auth)
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    if headers_out is not None:
                        headers_out.update({k.lower(): v for k, v in resp.headers.items()})
                    return bytes(resp.read())
            except urllib.error.HTTPError as exc:
                if exc.code == 404 and missing_ok:
                    return None
                if exc.code == 401 and attempt == 1 and self._negotiate(exc, repository):
                    continue
                if exc.code in (401, 403):
                    raise AuthError(self._auth_message(exc.code, method, path)) from exc
                raise
        raise AssertionError("unreachable")

    def _authorization(self, repository: str) -> str | None:
        if repository in self._tokens:
            return f"Bearer {self._tokens[repository]}"
        if self.credentials is not None:
            raw = f"{self.credentials.username}:{self.credentials.password}".encode()
            return "Basic " + base64.b64encode(raw).decode()
        return None

    def _negotiate(self, exc: urllib.error.HTTPError, repository: str) -> bool:
        """Token registries (ghcr.io, Docker Hub) answer 401 with a Bearer challenge: fetch a token once."""
        challenge = exc.headers.get("WWW-Authenticate", "")
        if not challenge.lower().startswith("bearer ") or repository in self._tokens:
            return False
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        query = {k: v for k, v in params.items() if k in ("service", "scope")}
        query.setdefault("scope", f"repository:{repository}:pull,push")
        req = urllib.request.Request(f"{params['realm']}?{urllib.parse.urlencode(query)}")
        if self.credentials is not None:
            raw = f"{self.credentials.username}:{self.credentials.password}".encode()
            req.add_header("Authorization", "Basic " + base64.b64encode(raw).decode())
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                data = json.load(resp)
        except urllib.error.HTTPError:
            return False
        self._tokens[repository] = data.get("token") or data.get("access_token", "")
        return bool(self._tokens[repository])

    def _auth_message(self, code: int, method: str, path: str) -> str:
        who = self.credentials.describe() if self.credentials else "no credentials (set RIF_REGISTRY_USER and " \
                                                                   "RIF_REGISTRY_PASSWORD, or docker login)"
        verb = "refused" if code == 401 else "denied"
        return f"registry {self.address} {verb} {method} {path} ({code}) with {who}"
