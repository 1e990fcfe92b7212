"""The registry side of publishing: is this content published, push it once, promote tags by digest.

An image is pushed under its immutable tag `<tag>-<hash12>` only; the moving tags (each cell's readable
tag, `latest`) are then PUT registry-side to that exact manifest, so a tag never points at a manifest
that is not there, and a failure before promotion leaves every moving tag on the previous good image.
An immutable tag that already exists is never pushed again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import docker
from docker.errors import DockerException

from builder.core.tags import HASH_LABEL
from builder.publish.push import push_image
from builder.publish.record import Attached, Promoted, Pushed
from builder.registry import credentials, models, retry, transport
from builder.registry.client import Manifest, RegistryClient, referrers_tag
from builder.registry.errors import RegistryError
from builder.render import lockrecord
from builder.validate.sbom import MEDIA_TYPE, Sbom

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
UNCOMPRESSED = "containerd.io/uncompressed"  # BuildKit's annotation of a cache layer: its diff ID
EMPTY_CONFIG = b"{}"  # the OCI 1.1 empty descriptor's content
EMPTY_DIGEST = "sha256:" + hashlib.sha256(EMPTY_CONFIG).hexdigest()


@dataclass
class Target:
    """REGISTRY/NAMESPACE with its credentials: where a run publishes."""

    registry: str
    api: RegistryClient
    credentials: credentials.Credentials | None

    @classmethod
    def of(cls, registry: str, policy: retry.Policy = retry.DEFAULT, insecure: frozenset[str] = frozenset()) -> Target:
        """The target of a checked --registry; insecure: the --insecure-registry hosts (plain HTTP allowed)."""
        found = credentials.lookup(registry)
        api = RegistryClient(credentials.registry_host(registry), found, policy=policy, insecure=insecure)
        return cls(registry, api, found)

    @property
    def namespace(self) -> str:
        return self.registry[len(self.api.address):].strip("/")

    def repository(self, image: str) -> str:
        return f"{self.namespace}/{image}" if self.namespace else image

    def preflight(self, image: str, write: bool = True) -> None:
        """Fail in seconds, before any build, when the registry is down or refuses our credentials.

        write=False (a --no-push run): read access is all the run needs, so that is all it asks for.
        """
        self.api.ping(self.repository(image), write=write)

    def published(self, image: str, immutable_tag: str, content_hash: str) -> Manifest | None:
        """The manifest of this content's immutable tag, if it was published before (and holds that content)."""
        repo = self.repository(image)
        manifest = self.api.manifest(repo, immutable_tag)
        if manifest is not None:
            labels = self.api.config(repo, manifest).labels
            if labels.get(HASH_LABEL) != content_hash:
                raise RegistryError(f"{self.api.address}/{repo}:{immutable_tag} exists with content hash "
                                    f"{labels.get(HASH_LABEL)!r}, not {content_hash}: an immutable tag is "
                                    "never overwritten; delete it by hand if it is wrong")
        return manifest

    def push(self, client: docker.DockerClient, image_id: str, image: str, *, immutable_tag: str, content_hash: str,
             cache: str | None = None, blobs: tuple[str, ...] = (), cache_tag: str | None = None) -> Pushed:
        """Push the validated local image under its immutable tag (unless already there).

        cache (REGISTRY/REPOSITORY of BuildKit's registry cache) and blobs (the image's config and layers): the
        blobs the cache export uploaded are mounted from there first, so the push finds them and uploads each
        layer once. An image exported straight into the engine has no layout to list its blobs: they are read
        from the cache manifest under cache_tag (its bake target) instead. What the registry refuses after the
        upload comes back as the result's failure (the layers went up: the record says so)."""
        repo = self.repository(image)
        existing = self.published(image, immutable_tag, content_hash)
        if existing is not None:  # same content published before: it was validated then, and it never changes
            return Pushed(manifest=existing, pushed_bytes=0)
        if cache is not None and cache.startswith(f"{self.api.address}/"):
            source = cache[len(self.api.address) + 1:]
            self._mount(repo, source, blobs or self._cached_layers(client, image_id, source, cache_tag))
        uploaded: set[str] = set()
        digest = push_image(client, image_id, self.api, repo, immutable_tag, self.credentials, uploaded=uploaded)
        manifest = None
        try:
            manifest = self.api.manifest(repo, immutable_tag)
            if manifest is None or manifest.digest != digest:
                raise RegistryError(f"{self.api.address}/{repo}:{immutable_tag} is not the digest just pushed")
            pushed_bytes = uploaded_size(manifest.body, uploaded)
            self._check_content(repo, manifest, immutable_tag, content_hash, image_id)
        except RegistryError as exc:
            sized = uploaded_size(manifest.body, uploaded) if manifest is not None and manifest.digest == digest \
                else None
            return Pushed(manifest=None, uploaded=True, pushed_bytes=sized, failure=str(exc))
        return Pushed(manifest=manifest, uploaded=True, pushed_bytes=pushed_bytes)

    def _mount(self, repo: str, source: str, blobs: tuple[str, ...]) -> None:
        """Mount blobs from source, registry-side; one the registry will not mount is left to the push."""
        for digest in blobs:
            try:
                self.api.mount_blob(repo, digest, source)
            except RegistryError:
                return  # the push itself says what is wrong with the registry, if anything

    def _cached_layers(self, client: docker.DockerClient, image_id: str, source: str, tag: str | None
                       ) -> tuple[str, ...]:
        """The layers of the cache manifest source:tag that are the image's: BuildKit annotates each with its
        uncompressed digest, which is the image's diff ID. Nothing when either cannot be read (the push uploads)."""
        if tag is None:
            return ()
        try:
            diff_ids = set((client.images.get(image_id).attrs.get("RootFS") or {}).get("Layers") or [])
            found = self.api.manifest(source, tag)
            doc = models.parse(models.ManifestDoc, found.body, f"{source}:{tag}") if found is not None else None
        except (DockerException, RegistryError):
            return ()
        return tuple(d.digest for d in doc.layers if transport.is_digest(d.digest) and d.annotations is not None
                     and d.annotations.get(UNCOMPRESSED) in diff_ids) if doc is not None else ()

    def _check_content(self, repo: str, manifest: Manifest, immutable_tag: str, content_hash: str,
                       image_id: str) -> None:
        """The immutable tag must name what was validated: the same manifest (the engine's image ID in its
        containerd store), the same content hash."""
        labels = self.api.config(repo, manifest).labels
        if labels.get(HASH_LABEL) != content_hash or manifest.digest != image_id:
            raise RegistryError(f"{self.api.address}/{repo}:{immutable_tag} holds another image than the "
                                "one validated (was it pushed by a concurrent run?)")

    def attach_sbom(self, image: str, manifest: Manifest, sbom: Sbom) -> Attached:
        """Attach sbom to the pushed image as an OCI 1.1 artifact whose `subject` is its manifest."""
        artifact = self._attach(image, manifest, MEDIA_TYPE, sbom.body, "sbom.cdx.json",
                                {"dev.rocm-image-factory.packages": str(len(sbom.packages))})
        return Attached(kind="sbom", artifact=artifact, sbom_digest=sbom.digest)

    def attach_lock(self, image: str, manifest: Manifest, recorded: lockrecord.Recorded) -> Attached:
        """Attach the lock the image was built from (builder.render.lockrecord), as sbom is."""
        artifact = self._attach(image, manifest, lockrecord.MEDIA_TYPE, recorded.body, lockrecord.TITLE,
                                recorded.annotations())
        return Attached(kind="lock", artifact=artifact)

    def _attach(self, image: str, manifest: Manifest, artifact_type: str, blob: bytes, title: str,
                annotations: dict[str, str]) -> str:
        """One blob as an OCI 1.1 artifact of artifact_type whose `subject` is manifest; the artifact's digest.

        The blob and an empty config go up first, then the artifact manifest by digest. A registry that serves
        the referrers API says so (`OCI-Subject`) and indexes it itself; for any other (distribution 2.8) the
        referrers tag schema's fallback is kept: the image index tagged `sha256-<hex of the image digest>`
        lists the artifact, beside any referrer it listed before.
        """
        repo = self.repository(image)
        self.api.push_blob(repo, EMPTY_CONFIG)
        layer = self.api.push_blob(repo, blob)
        body = json.dumps({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": artifact_type,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY_DIGEST, "size": 2,
                       "data": "e30="},
            "layers": [{"mediaType": artifact_type, "digest": layer, "size": len(blob),
                        "annotations": {"org.opencontainers.image.title": title}}],
            "subject": {"mediaType": manifest.media_type, "digest": manifest.digest, "size": len(manifest.body)},
            "annotations": annotations,
        }, separators=(",", ":")).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        artifact, subject = self.api.put_manifest(repo, digest, body, OCI_MANIFEST)
        if subject != manifest.digest:
            self._index_referrer(repo, manifest.digest, {"mediaType": OCI_MANIFEST, "digest": artifact.digest,
                                                         "size": len(body), "artifactType": artifact_type})
        return artifact.digest

    def has_sbom(self, image: str, manifest: Manifest) -> bool:
        """Whether an SBOM artifact refers to manifest (referrers API, or the fallback tag)."""
        return self.has_referrer(image, manifest, MEDIA_TYPE)

    def has_referrer(self, image: str, manifest: Manifest, artifact_type: str) -> bool:
        """Whether an artifact of artifact_type refers to manifest (referrers API, or the fallback tag)."""
        return bool(self.api.referrers(self.repository(image), manifest.digest, artifact_type))

    def _index_referrer(self, repo: str, subject: str, descriptor: dict[str, object]) -> None:
        tag = referrers_tag(subject)
        current = self.api.manifest(repo, tag)
        listed: list[dict[str, object]] = []
        if current is not None:  # its shape checked (a RegistryError otherwise); its entries kept as they are
            models.parse(models.Referrers, current.body, f"{self.api.address}/{repo}:{tag} referrers index")
            listed = json.loads(current.body).get("manifests") or []
        if any(m.get("digest") == descriptor["digest"] for m in listed):
            return
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [*listed, descriptor]}
        self.api.put_manifest(repo, tag, json.dumps(index, separators=(",", ":")).encode(), OCI_INDEX)

    def promote(self, image: str, tags: Sequence[str], manifest: Manifest, *, own: str | None = None,
                dry_run: bool = False, on_stage: Callable[[str], None] = lambda stage: None) -> Promoted:
        """Move every moving tag that points elsewhere to manifest, registry-side (no layer moves). own: the image's
        own tag, whose previous digest the result tells. A failed look-up or move ends the promotion: the result
        says why, and lists only the tags moved before it."""
        repo = self.repository(image)
        moved: list[str] = []
        previous = None
        try:
            for tag in tags:
                current = self.api.digest(repo, tag)
                if tag == own:
                    previous = current
                if current == manifest.digest:
                    continue
                if not dry_run:
                    on_stage(f"tag {tag}")
                    self.api.put_tag(repo, tag, manifest)
                moved.append(tag)  # only once it moved: a failed move is never reported as done
        except RegistryError as exc:
            return Promoted(digest=manifest.digest, compressed_bytes=compressed_size(manifest.body),
                            previous_digest=previous, moved=tuple(moved), failure=str(exc))
        return Promoted(digest=manifest.digest, compressed_bytes=compressed_size(manifest.body),
                        previous_digest=previous, moved=tuple(moved))


def uploaded_size(body: bytes, uploaded: set[str]) -> int | None:
    """The bytes of the manifest's blobs (config and layers) whose short ID the engine reported as uploaded."""
    try:
        data = json.loads(body)
        blobs = [data["config"], *data["layers"]]
        return sum(int(b["size"]) for b in blobs if str(b["digest"]).removeprefix("sha256:")[:12] in uploaded)
    except (ValueError, KeyError, TypeError, OverflowError):
        return None


def compressed_size(body: bytes) -> int | None:
    try:
        data = json.loads(body)
        return int(data["config"]["size"]) + sum(int(layer["size"]) for layer in data["layers"])
    except (ValueError, KeyError, TypeError, OverflowError):  # OverflowError: a size of 1e400
        return None
