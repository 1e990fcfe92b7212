"""A registry's HTTP API (distribution spec v2): what is published under which digest, and moving a tag.

Manifests are only served in the format asked for, so every request names the Docker and OCI media types.
Requests go out without credentials until the registry challenges them; builder.registry.auth answers the
challenge (Basic, or a Bearer token for the scope the operation needs). Plain HTTP only for loopback and for
the hosts named insecure (`--insecure-registry`, as Docker's `insecure-registries`).
Every failure is a RegistryError carrying the HTTP status, the registry's error code and message, and what
to do about it (builder.registry.hints); the one retry policy (builder.registry.retry) decides what
is worth another try.
Every request goes through builder.registry.transport (credentials kept on their origin, proxies, size caps, a total
deadline), and every manifest and blob read is checked against the digest of its bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from builder.registry import models, redirects, retry, transport
from builder.registry.address import checked_url, host_port, plain_http_ok
from builder.registry.auth import Auth
from builder.registry.credentials import Credentials
from builder.registry.errors import AuthError, DeadlineError, RegistryError
from builder.registry.hints import error_of

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json"
)
TIMEOUT_S = 60
WRITES = frozenset({"PUT", "POST", "PATCH", "DELETE"})
REFERENCE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")  # a tag, as the distribution spec spells it
MAX_LAYER_BYTES = 64 << 30  # a layer read to a file (builder reproduce): ROCm's largest are a few GB
LAYER_DEADLINE_S = 3600.0

__all__ = ["AuthError", "DeadlineError", "Manifest", "RegistryClient", "RegistryError", "referrers_tag"]


@dataclass(frozen=True)
class Manifest:
    body: bytes
    media_type: str
    digest: str


@dataclass
class _Response:
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class RegistryClient:
    def __init__(self, address: str, credentials: Credentials | None = None, scheme: str | None = None,
                 policy: retry.Policy = retry.DEFAULT, insecure: frozenset[str] = frozenset()) -> None:
        # Like Docker: loopback registries (and those named insecure) speak plain HTTP; everything else HTTPS.
        # insecure: the HOST[:PORT]s of --insecure-registry; they cover token realms as well as registries.
        self.address = address
        self.insecure = frozenset(host_port(h) for h in insecure) - {""}
        self.scheme = scheme or ("http" if plain_http_ok(address, self.insecure) else "https")
        self.base = f"{self.scheme}://{address}/v2"
        self.credentials = credentials
        self.policy = policy
        self.auth = Auth(address, credentials, self.scheme, self.insecure, self._seconds)
        self.deadline_s = transport.DEADLINE_S  # one request, start to last byte
        self.ends: float | None = None  # a whole command's deadline (time.monotonic()), set by until()
        self._budget_s = 0.0

    # -- reads -------------------------------------------------------------------------------------
    def ping(self, repository: str, write: bool = False) -> None:
        """Raise unless the credentials may read (or write) repository: a publish checks this first."""
        self._call("GET", f"{repository}/tags/list", repository, missing_ok=True, write=write)

    def probe_upload(self, repository: str) -> None:
        """Raise unless repository takes a blob upload now: start an upload session, then cancel it.

        What a failed push is classified by: a registry that denies writes, or whose storage is full, answers
        this with its status and error body, where the engine's push reports no more than the status.
        """
        self._cancelled_upload(repository, "")

    def mount_blob(self, repository: str, digest: str, source: str) -> bool:
        """Mount blob digest from source into repository, registry-side (no byte moves): True when the registry
        did (201); False when it started an upload instead (202: source lacks it, or no pull on source), which is
        cancelled."""
        query = f"?mount={urllib.parse.quote(digest, safe='')}&from={urllib.parse.quote(source, safe='/')}"
        return not self._cancelled_upload(repository, query)

    def _location(self, answer: _Response | None, what: str) -> urllib.parse.SplitResult:
        """The Location of an answer; this registry's error when it is no URL (never urllib's ValueError)."""
        try:
            return checked_url(answer.headers.get("location", "") if answer is not None else "")
        except ValueError:
            raise RegistryError(f"registry {self.address} answered {what} with a Location that is no URL") from None

    def _cancelled_upload(self, repository: str, query: str) -> bool:
        """POST an upload (query: a mount); True when that started an upload session, which is then cancelled."""
        started = self._call("POST", f"{repository}/blobs/uploads/{query}", repository)
        location = self._location(started, "a blob mount")
        if "/blobs/uploads/" not in location.path:
            return False  # a mounted blob's own address
        if location.path.startswith("/v2/") and location.netloc in ("", self.address):  # never credentials elsewhere
            session = location.path[len("/v2/"):] + (f"?{location.query}" if location.query else "")
            with contextlib.suppress(RegistryError):
                self._call("DELETE", session, repository)
        return True

    def tags(self, repository: str) -> list[str]:
        """Tags of repository; [] when the repository does not exist."""
        found = self._call("GET", f"{repository}/tags/list", repository, missing_ok=True,
                           limit=models.MAX_TAG_LIST_BYTES)
        if found is None:
            return []
        return models.parse(models.TagList, found.body, f"{self.address}/{repository} tag list").names

    def digest(self, repository: str, tag: str) -> str | None:
        """The manifest digest a tag points at, or None when the tag does not exist."""
        found = self.manifest(repository, tag)
        return found.digest if found else None

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        """The manifest under a tag or a digest; its digest is that of the bytes served, checked against the
        reference when it is a digest and against the registry's Docker-Content-Digest when it sends one."""
        if not (transport.is_digest(reference) or REFERENCE_RE.fullmatch(reference)):
            raise RegistryError(f"{reference[:80]!r} is neither a tag nor a sha256 digest: not asked for")
        found = self._call("GET", f"{repository}/manifests/{reference}", repository, accept=MANIFEST_TYPES,
                           missing_ok=True, limit=transport.MAX_MANIFEST_BYTES)
        if found is None:
            return None
        what = f"{self.address}/{repository} manifest {reference}"
        digest = transport.verify_digest(found.body, reference if reference.startswith("sha256:") else None, what)
        transport.verify_digest(found.body, found.headers.get("docker-content-digest"), what)
        return Manifest(found.body, found.headers.get("content-type", ""), digest)

    def config(self, repository: str, manifest: Manifest) -> models.ImageConfig:
        """A published image's config blob (labels, history), read without a pull, checked against its digest.

        At most models.MAX_CONFIG_BYTES are read (a real config is kilobytes): a bigger one is refused before
        it is parsed."""
        where = f"{self.address}/{repository}"
        config = models.parse(models.ManifestDoc, manifest.body, f"{where} manifest {manifest.digest}").config
        if config is None or not transport.is_digest(config.digest):
            raise RegistryError(f"{where}: manifest {manifest.digest} names no sha256 config")
        body = self.blob(repository, config.digest, models.MAX_CONFIG_BYTES)
        return models.parse(models.ImageConfig, body, f"{where} config {config.digest}")

    def config_labels(self, repository: str, tag: str) -> dict[str, str]:
        """Labels of a published image, read from its config blob (no pull needed)."""
        found = self.manifest(repository, tag)
        if found is None:
            return {}
        return self.config(repository, found).labels

    def blob(self, repository: str, digest: str, limit: int = transport.MAX_BLOB_BYTES) -> bytes:
        """A blob's bytes (at most limit), checked against its digest."""
        if not transport.is_digest(digest):
            raise RegistryError(f"{self.address}/{repository}: {digest[:80]!r} is not a sha256 digest: not asked for")
        found = self._call("GET", f"{repository}/blobs/{digest}", repository, accept="*/*", limit=limit)
        assert found is not None
        transport.verify_digest(found.body, digest, f"{self.address}/{repository} blob {digest}")
        return found.body

    def blob_to(self, repository: str, digest: str, path: Path, deadline_s: float = LAYER_DEADLINE_S) -> None:
        """A layer written to path as it arrives (never held in memory), checked against its digest."""
        if not transport.is_digest(digest):
            raise RegistryError(f"{self.address}/{repository}: {digest[:80]!r} is not a sha256 digest: not asked for")
        kept, self.deadline_s = self.deadline_s, deadline_s
        try:
            self._call("GET", f"{repository}/blobs/{digest}", repository, accept="*/*", limit=MAX_LAYER_BYTES,
                       sink=path)
        finally:
            self.deadline_s = kept
        sha = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                sha.update(chunk)
        if "sha256:" + sha.hexdigest() != digest:
            path.unlink(missing_ok=True)
            raise RegistryError(f"{self.address}/{repository} blob {digest}: the bytes served are "
                                f"sha256:{sha.hexdigest()}: refused")

    def referrers(self, repository: str, digest: str,
                  artifact_type: str | None = None) -> list[models.Descriptor]:
        """The descriptors of the manifests whose `subject` is digest (OCI 1.1), of artifact_type if given.

        The referrers API first; where the registry has none (404, as distribution 2.8), the referrers tag
        schema's fallback: the image index tagged `sha256-<hex>`.
        """
        query = f"?artifactType={urllib.parse.quote(artifact_type, safe='')}" if artifact_type else ""
        found = self._call("GET", f"{repository}/referrers/{digest}{query}", repository,
                           accept="application/vnd.oci.image.index.v1+json", missing_ok=True)
        if found is None or not found.headers.get("content-type", "").startswith("application/vnd.oci.image.index"):
            index = self.manifest(repository, referrers_tag(digest))
            body = index.body if index is not None else b'{"manifests": []}'
        else:
            body = found.body
        answer = models.parse(models.Referrers, body, f"{self.address}/{repository} referrers of {digest}")
        return [m for m in answer.manifests if artifact_type is None or m.artifact_type == artifact_type]

    # -- writes ------------------------------------------------------------------------------------
    def put_tag(self, repository: str, tag: str, manifest: Manifest) -> str:
        """Point tag at exactly this manifest (a registry-side re-tag: no layer moves); returns the digest."""
        done = self._call("PUT", f"{repository}/manifests/{tag}", repository, body=manifest.body,
                          content_type=manifest.media_type)
        digest = done.headers.get("docker-content-digest", manifest.digest) if done else manifest.digest
        if digest != manifest.digest:
            raise RegistryError(f"{self.address}/{repository}:{tag} now points at {digest}, not {manifest.digest}")
        return digest

    def push_blob(self, repository: str, data: bytes) -> str:
        """Upload data as a blob (one POST, one PUT; nothing when the registry has it already); its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if self._call("HEAD", f"{repository}/blobs/{digest}", repository, accept="*/*", missing_ok=True):
            return digest
        started = self._call("POST", f"{repository}/blobs/uploads/", repository)
        location = self._location(started, "a blob upload")
        if not location.path.startswith("/v2/") or location.netloc not in ("", self.address):
            raise RegistryError(f"registry {self.address} answered a blob upload with an unusable Location")
        query = f"{location.query}&" if location.query else ""
        session = f"{location.path[len('/v2/'):]}?{query}digest={urllib.parse.quote(digest, safe='')}"
        self._call("PUT", session, repository, body=data, content_type="application/octet-stream")
        return digest

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> tuple[Manifest, str | None]:
        """PUT a manifest under reference (a tag, or its own digest): the manifest, and the subject digest the
        registry acknowledged in `OCI-Subject` (only a registry that serves the referrers API sends it)."""
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        done = self._call("PUT", f"{repository}/manifests/{reference}", repository, body=body,
                          content_type=media_type)
        served = done.headers.get("docker-content-digest", digest) if done else digest
        if served != digest:
            raise RegistryError(f"{self.address}/{repository}:{reference} is {served}, not the {digest} sent")
        return Manifest(body, media_type, digest), (done.headers.get("oci-subject") if done else None)

    # -- plumbing ----------------------------------------------------------------------------------
    def _call(self, method: str, path: str, repository: str, *, accept: str = "application/json",
              body: bytes | None = None, content_type: str | None = None, missing_ok: bool = False,
              write: bool | None = None, limit: int = transport.MAX_BLOB_BYTES,
              sink: Path | None = None) -> _Response | None:
        scope = "pull,push" if (method in WRITES if write is None else write) else "pull"

        def once() -> _Response | None:
            return self._once(method, path, repository, scope, accept, body, content_type, missing_ok, limit, sink)

        return retry.call(once, f"{method} {self.address}/v2/{path}", self.policy)

    def _once(self, method: str, path: str, repository: str, scope: str, accept: str, body: bytes | None,
              content_type: str | None, missing_ok: bool, limit: int, sink: Path | None = None) -> _Response | None:
        for attempt in (1, 2):
            req = urllib.request.Request(f"{self.base}/{path}", method=method, data=body, headers={"Accept": accept})
            if content_type:
                req.add_header("Content-Type", content_type)
            auth = self.auth.header(repository, scope)
            if auth:
                req.add_header("Authorization", auth)
            try:
                with sink.open("wb") if sink is not None else contextlib.nullcontext() as out:
                    got = transport.request(req, limit, f"{method} {self.address}/v2/{path}", self._seconds(), out)
                return _Response(got.body, got.headers)
            except urllib.error.HTTPError as exc:
                if exc.code == 404 and missing_ok:
                    return None
                if exc.code == 401 and not redirects.same_origin(exc.url, req.full_url):
                    raise AuthError(f"registry {self.address} redirected {method} {path} to "
                                    f"{host_port(urllib.parse.urlsplit(exc.url).netloc)}, which asks for credentials: "
                                    "a challenge from off the registry's origin is not answered", 401) from None
                if exc.code == 401 and attempt == 1 and self.auth.answer(exc, repository, scope):
                    continue
                raise error_of(exc, self.address, self.credentials, method, path, repository) from None
        raise AssertionError("unreachable")

    def until(self, seconds: float) -> RegistryClient:
        """Every later request ends within seconds from now, all together: a registry answering each of a
        catalog's thousands of requests just inside its own deadline cannot hold the command for days."""
        self.ends = time.monotonic() + seconds
        self._budget_s = seconds
        return self

    def _seconds(self) -> float:
        """This request's deadline: its own, or what is left of the command's, whichever ends first."""
        if self.ends is None:
            return self.deadline_s
        left = self.ends - time.monotonic()
        if left <= 0:
            raise DeadlineError(f"registry {self.address}: no answers within the command's {self._budget_s:g} s: "
                                "stopped")
        return min(self.deadline_s, left)


def referrers_tag(digest: str) -> str:
    """The referrers tag schema's fallback tag of a manifest digest: `sha256:abc...` -> `sha256-abc...`."""
    algorithm, _, hex_ = digest.partition(":")
    return f"{algorithm}-{hex_}"[:128]
