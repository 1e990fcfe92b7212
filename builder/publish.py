"""The registry side of publishing: is this content published, push it once, promote tags by digest.

An image is pushed under its immutable tag `<tag>-<hash12>` only; the moving tags (each cell's readable
tag, `latest`) are then PUT registry-side to that exact manifest, so a tag never points at a manifest
that is not there, and a failure before promotion leaves every moving tag on the previous good image.
An immutable tag that already exists is never pushed again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import docker

from builder import credentials as creds
from builder import retry
from builder.push import push_image
from builder.record import ImageReport
from builder.registry import Manifest, RegistryClient
from builder.retry import RegistryError
from builder.tags import HASH_LABEL


@dataclass
class Target:
    """REGISTRY/NAMESPACE with its credentials: where a run publishes."""

    registry: str
    api: RegistryClient
    credentials: creds.Credentials | None

    @classmethod
    def of(cls, registry: str, policy: retry.Policy = retry.DEFAULT, insecure: frozenset[str] = frozenset()) -> Target:
        """The target of a checked --registry; insecure: the --insecure-registry hosts (plain HTTP allowed)."""
        found = creds.lookup(registry)
        api = RegistryClient(creds.registry_host(registry), found, policy=policy, insecure=insecure)
        return cls(registry, api, found)

    @property
    def namespace(self) -> str:
        return self.registry[len(self.api.address):].strip("/")

    def repository(self, image: str) -> str:
        return f"{self.namespace}/{image}" if self.namespace else image

    def preflight(self, image: str) -> None:
        """Fail in seconds, before any build, when the registry is down or refuses our credentials."""
        self.api.ping(self.repository(image), write=True)

    def published(self, report: ImageReport) -> Manifest | None:
        """The manifest of this content's immutable tag, if it was published before (and holds that content)."""
        repo = self.repository(report.repository)
        manifest = self.api.manifest(repo, report.immutable_tag)
        if manifest is not None:
            labels = self.api.config(repo, manifest).get("config", {}).get("Labels") or {}
            if labels.get(HASH_LABEL) != report.content_hash:
                raise RegistryError(f"{self.api.address}/{repo}:{report.immutable_tag} exists with content hash "
                                    f"{labels.get(HASH_LABEL)!r}, not {report.content_hash}: an immutable tag is "
                                    "never overwritten; delete it by hand if it is wrong")
        return manifest

    def push(self, client: docker.DockerClient, report: ImageReport) -> Manifest:
        """Push the validated local image under its immutable tag (unless already there); the manifest."""
        repo = self.repository(report.repository)
        existing = self.published(report)
        if existing is not None:
            return existing  # same content published before: it was validated then, and it never changes
        assert report.image_id is not None
        digest = push_image(client, report.image_id, self.api, repo, report.immutable_tag, self.credentials)
        report.pushed = True
        manifest = self.api.manifest(repo, report.immutable_tag)
        if manifest is None or manifest.digest != digest:
            raise RegistryError(f"{self.api.address}/{repo}:{report.immutable_tag} is not the digest just pushed")
        self._check_content(repo, manifest, report)
        return manifest

    def _check_content(self, repo: str, manifest: Manifest, report: ImageReport) -> None:
        """The immutable tag must name what was validated: same image config, same content hash."""
        config = self.api.config(repo, manifest)
        labels = config.get("config", {}).get("Labels") or {}
        config_digest = json.loads(manifest.body).get("config", {}).get("digest")
        if labels.get(HASH_LABEL) != report.content_hash or config_digest != report.image_id:
            raise RegistryError(f"{self.api.address}/{repo}:{report.immutable_tag} holds another image than the "
                                "one validated (was it pushed by a concurrent run?)")

    def promote(self, report: ImageReport, manifest: Manifest, dry_run: bool = False,
                on_stage: Callable[[str], None] = lambda stage: None) -> None:
        """Move every moving tag that points elsewhere to manifest, registry-side (no layer moves)."""
        repo = self.repository(report.repository)
        report.digest = manifest.digest
        report.compressed_bytes = compressed_size(manifest.body)
        for tag in report.tags:
            current = self.api.digest(repo, tag)
            if tag == report.tag:
                report.previous_digest = current
            if current == manifest.digest:
                continue
            if not dry_run:
                on_stage(f"tag {tag}")
                self.api.put_tag(repo, tag, manifest)
            report.moved.append(tag)  # only once it moved: a failed move is never reported as done


def compressed_size(body: bytes) -> int | None:
    try:
        data = json.loads(body)
        return int(data["config"]["size"]) + sum(int(layer["size"]) for layer in data["layers"])
    except (ValueError, KeyError, TypeError):
        return None
