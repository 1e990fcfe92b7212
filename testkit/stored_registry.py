"""A registry's tags and blobs held in memory, as the answer of a scripted registry (testkit.scripted_registry).

What the plan tests and benchmarks/bench_plan.py read: GET manifests (by tag or digest) and blobs, PUT manifests
(a tag moved), everything else 404. `publish_all` fills it as a finished publish leaves a namespace.
"""

from __future__ import annotations

import hashlib
import json

from builder.core.tags import HASH_LABEL
from builder.pipeline.jobs import Job
from testkit.scripted_registry import Reply, Seen

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


class Store:
    """A registry's tags and blobs in memory: GET manifests and blobs, PUT manifests (a tag moved)."""

    def __init__(self) -> None:
        self.manifests: dict[str, bytes] = {}  # "repo:tag" -> body
        self.blobs: dict[str, bytes] = {}

    def publish(self, repo: str, tag: str, content_hash: str, salt: str = "") -> bytes:
        config = json.dumps({"config": {"Labels": {HASH_LABEL: content_hash}}, "salt": salt}).encode()
        digest = "sha256:" + hashlib.sha256(config).hexdigest()
        self.blobs[digest] = config
        body = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "layers": [],
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest,
                                      "size": len(config)}}).encode()
        self.manifests[f"{repo}:{tag}"] = body
        return body

    def digest(self, repo: str, tag: str) -> str | None:
        body = self.manifests.get(f"{repo}:{tag}")
        return "sha256:" + hashlib.sha256(body).hexdigest() if body is not None else None

    def answer(self, seen: Seen) -> Reply:
        path = seen.path.split("?")[0][len("/v2/"):]
        if "/manifests/" in path:
            repo, ref = path.split("/manifests/")
            if seen.method == "PUT":
                self.manifests[f"{repo}:{ref}"] = seen.body
                return 201, {"Docker-Content-Digest": self.digest(repo, ref) or ""}, b""
            body = self.manifests.get(f"{repo}:{ref}") or self._by_digest(repo, ref)
            if body is None:
                return 404, {}, b""
            return 200, {"Content-Type": MANIFEST_TYPE}, body
        if "/blobs/" in path:
            blob = self.blobs.get(path.split("/blobs/")[1])
            return (200, {}, blob) if blob is not None else (404, {}, b"")
        return 404, {}, b""

    def _by_digest(self, repo: str, ref: str) -> bytes | None:
        return next((b for k, b in self.manifests.items()
                     if k.startswith(f"{repo}:") and "sha256:" + hashlib.sha256(b).hexdigest() == ref), None)


def publish_all(store: Store, todo: list[Job], namespace: str = "rocm") -> None:
    for job in todo:
        repo = f"{namespace}/{job.repository}"
        body = store.publish(repo, job.immutable_tag, job.content_hash)
        for tag in job.tags:
            store.manifests[f"{repo}:{tag}"] = body
