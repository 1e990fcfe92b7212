"""Stage 5: validated image -> published image. Only ever called with images that passed validation.

Push errors arrive inside the JSON stream, not as exceptions; a push counts as done only when the
stream ends with the registry's digest for the tag.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import docker
from docker.errors import APIError, DockerException

DIGEST_RE = re.compile(r"digest: (sha256:[0-9a-f]{64})")


@dataclass(frozen=True)
class PushResult:
    ref: str
    ok: bool
    digest: str | None = None
    error: str | None = None


def credentials() -> dict[str, str] | None:
    """Registry credentials from the environment only: never from files in the repo, never into an image."""
    user, password = os.environ.get("RIF_REGISTRY_USER"), os.environ.get("RIF_REGISTRY_PASSWORD")
    return {"username": user, "password": password} if user and password else None


def push_image(client: docker.DockerClient, local_ref: str, repository: str, tag: str) -> PushResult:
    ref = f"{repository}:{tag}"
    digest: str | None = None
    try:
        client.images.get(local_ref).tag(repository, tag)
        for chunk in client.api.push(repository, tag, stream=True, decode=True, auth_config=credentials()):
            if "error" in chunk:
                return PushResult(ref, False, error=str(chunk["error"]).strip())
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                digest = str(aux["Digest"])
            elif (match := DIGEST_RE.search(str(chunk.get("status", "")))) is not None:
                digest = match.group(1)
    except (APIError, DockerException) as exc:
        return PushResult(ref, False, error=f"Docker engine error: {exc}")
    if digest is None:
        return PushResult(ref, False, error="the push stream ended without a digest")
    return PushResult(ref, True, digest)
