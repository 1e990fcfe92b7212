"""Stage 5: validated image -> published image. Only ever called with images that passed validation.

Push errors arrive inside the JSON stream, not as exceptions; a push counts as done only when the
stream ends with the registry's digest for the tag. Transient errors are retried with backoff; a
refused login is reported with the registry and whose credentials were tried, never the secret.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import docker
from docker.errors import APIError, DockerException

from builder import credentials as creds
from builder.registry import BACKOFF_S, RETRIES

DIGEST_RE = re.compile(r"digest: (sha256:[0-9a-f]{64})")
TRANSIENT = re.compile(r"connection refused|connection reset|timeout|timed out|EOF|5[0-9][0-9] |"
                       r"Service Unavailable|Bad Gateway|Internal Server Error|no such host|i/o", re.IGNORECASE)
AUTH = re.compile(r"unauthorized|authentication required|denied|401|403", re.IGNORECASE)


@dataclass(frozen=True)
class PushResult:
    ref: str
    ok: bool
    digest: str | None = None
    error: str | None = None


def push_image(client: docker.DockerClient, local_ref: str, repository: str, tag: str,
               retries: int = RETRIES, backoff: float = BACKOFF_S) -> PushResult:
    """Tag local_ref as repository:tag and push it, retrying transient failures."""
    ref = f"{repository}:{tag}"
    found = creds.lookup(repository)
    try:
        client.images.get(local_ref).tag(repository, tag)
    except DockerException as exc:
        return PushResult(ref, False, error=f"Docker engine error: {exc}")
    result = PushResult(ref, False, error="not tried")
    for attempt in range(retries + 1):
        result = _push_once(client, repository, tag, found)
        if result.ok or result.error is None or not TRANSIENT.search(result.error) or AUTH.search(result.error):
            break
        time.sleep(backoff * 2 ** attempt)
    if not result.ok and result.error and AUTH.search(result.error):
        who = found.describe() if found else "no credentials (RIF_REGISTRY_USER/RIF_REGISTRY_PASSWORD or docker login)"
        result = PushResult(ref, False, error=f"registry {creds.registry_host(repository)} refused the push with "
                                              f"{who}: {result.error}")
    return result


def _push_once(client: docker.DockerClient, repository: str, tag: str,
               found: creds.Credentials | None) -> PushResult:
    ref = f"{repository}:{tag}"
    digest: str | None = None
    auth = found.auth_config() if found else None
    try:
        for chunk in client.api.push(repository, tag, stream=True, decode=True, auth_config=auth):
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
