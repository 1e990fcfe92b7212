"""Read-only access to a registry's HTTP API (distribution spec v2): what is published, under which digest.

Manifests are only served in the format asked for, so every request names the Docker and OCI media types.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json"
)


class RegistryClient:
    def __init__(self, address: str, username: str | None = None, password: str | None = None,
                 scheme: str | None = None) -> None:
        # Docker treats loopback registries as plain HTTP; everything else is HTTPS.
        local = address.startswith(("127.", "localhost"))
        self.base = f"{scheme or ('http' if local else 'https')}://{address}/v2"
        self.auth = None
        if username and password:
            token = base64.b64encode(f"{username}:{password}".encode()).decode()
            self.auth = f"Basic {token}"

    def _request(self, method: str, path: str, accept: str = "application/json") -> urllib.request.Request:
        req = urllib.request.Request(f"{self.base}/{path}", method=method, headers={"Accept": accept})
        if self.auth:
            req.add_header("Authorization", self.auth)
        return req

    def tags(self, repository: str) -> list[str]:
        """Tags of repository; [] when the repository does not exist."""
        try:
            with urllib.request.urlopen(self._request("GET", f"{repository}/tags/list"), timeout=30) as resp:
                return list(json.load(resp).get("tags") or [])
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise

    def digest(self, repository: str, tag: str) -> str | None:
        """The manifest digest a tag points at, or None when the tag does not exist."""
        try:
            req = self._request("HEAD", f"{repository}/manifests/{tag}", MANIFEST_TYPES)
            with urllib.request.urlopen(req, timeout=30) as resp:
                digest = resp.headers.get("Docker-Content-Digest")
                return str(digest) if digest else None
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def config_labels(self, repository: str, tag: str) -> dict[str, str]:
        """Labels of a published image, read from its config blob (no pull needed)."""
        req = self._request("GET", f"{repository}/manifests/{tag}", MANIFEST_TYPES)
        with urllib.request.urlopen(req, timeout=30) as resp:
            manifest = json.load(resp)
        blob = self._request("GET", f"{repository}/blobs/{manifest['config']['digest']}")
        with urllib.request.urlopen(blob, timeout=30) as resp:
            config = json.load(resp)
        return dict(config.get("config", {}).get("Labels") or {})
