"""The engine's side of a push: `docker push` of one local image under one tag, classified and retried.

Push errors arrive inside the engine's JSON stream, not as exceptions, and carry no status code. A push
counts as done only when the stream ends with the registry's digest. A failed push is classified by
asking the registry itself (it is asked to start a blob upload, the push's own first write, and the session
is cancelled: 401/403 is an auth failure, a connection error or a 5xx is transient) and retried under the
one retry policy of builder.registry.retry. The engine retries failed uploads itself, for up to a minute per push, so
a push still running when the policy's total time is up is given up (the engine's stream is closed, which
cancels it) and classified the same way. Either way the error carries the registry's status, code and
message and what to do about it (builder.registry.hints), from the registry's own answer where there is one.
"""

from __future__ import annotations

import contextlib
import re
import time

import docker
from docker.errors import APIError, DockerException

from builder.registry import hints, retry
from builder.registry.client import RegistryClient
from builder.registry.credentials import Credentials
from builder.registry.errors import TRANSIENT_STATUS, AuthError, RegistryError, TransientError

DIGEST_RE = re.compile(r"digest: (sha256:[0-9a-f]{64})")
PROBE = retry.Policy(attempts=1)


def push_image(client: docker.DockerClient, image_id: str, api: RegistryClient, repository: str, tag: str,
               credentials: Credentials | None, policy: retry.Policy = retry.DEFAULT,
               uploaded: set[str] | None = None) -> str:
    """Push image_id as <registry>/repository:tag; returns the pushed digest or raises RegistryError.

    uploaded, when given, collects the short IDs (12 hex digits of the digest) of the blobs the engine said it
    uploaded (`Pushed`), not those the registry already had (`Layer already exists`, `Mounted from`)."""
    remote = f"{api.address}/{repository}"
    try:
        client.images.get(image_id).tag(remote, tag)
    except DockerException as exc:
        raise RegistryError(f"cannot tag {image_id} as {remote}:{tag}: {exc}") from exc
    deadline = time.monotonic() + policy.total_s
    try:
        return retry.call(lambda: _push_once(client, api, remote, repository, tag, credentials, deadline,
                                             uploaded if uploaded is not None else set()),
                          f"push {remote}:{tag}", policy)
    finally:
        with contextlib.suppress(DockerException):
            client.images.remove(f"{remote}:{tag}", noprune=True)  # the local alias only; layers stay


def _push_once(client: docker.DockerClient, api: RegistryClient, remote: str, repository: str, tag: str,
               credentials: Credentials | None, deadline: float, uploaded: set[str]) -> str:
    digest: str | None = None
    auth = credentials.auth_config() if credentials else None
    stream = None
    try:
        stream = client.api.push(remote, tag, stream=True, decode=True, auth_config=auth)
        for chunk in stream:
            if "error" in chunk:
                detail = chunk.get("errorDetail") or {}
                raise _classify(api, repository, detail.get("code"), str(chunk["error"]).strip())
            if chunk.get("status") == "Pushed" and isinstance(chunk.get("id"), str):
                uploaded.add(chunk["id"])
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                digest = str(aux["Digest"])
            elif (match := DIGEST_RE.search(str(chunk.get("status", "")))) is not None:
                digest = match.group(1)
            if digest is None and time.monotonic() > deadline:  # the engine is still retrying its uploads
                found = _classify(api, repository, None, "the push was still running when the retry policy's "
                                                         "time was up")
                raise found if isinstance(found, AuthError) else RegistryError(found.message, found.status,
                                                                               found.code, found.hint)
    except APIError as exc:  # the engine's own HTTP answer, with its status
        status = exc.response.status_code if exc.response is not None else None
        raise _classify(api, repository, status, f"Docker engine error: {exc.explanation or exc}") from exc
    except DockerException as exc:
        raise RegistryError(f"Docker engine error: {exc}") from exc
    finally:
        if stream is not None:
            stream.close()  # drops the engine's connection: an unfinished push is cancelled, not left running
    if digest is None:
        raise TransientError("the push stream ended without a digest")
    return digest


def _classify(api: RegistryClient, repository: str, code: object, message: str) -> RegistryError:
    """What kind of failure a push error is, from structured answers only (never the message's digits)."""
    status = code if isinstance(code, int) else None
    if status in (401, 403):
        return AuthError(message, status, hint=hints.hint(status, None, message, repository))
    if status is not None and status >= 400 and status not in TRANSIENT_STATUS:
        return RegistryError(message, status, hint=hints.hint(status, None, message, repository))
    probe = RegistryClient(api.address, api.credentials, api.scheme, PROBE, api.insecure)
    try:
        probe.probe_upload(repository)
    except AuthError as exc:
        return AuthError(f"{exc.message} (the push said: {message})", exc.status, exc.code, exc.hint)
    except RegistryError as exc:
        if retry.is_transient(exc) or exc.status is None:
            return TransientError(f"{message} (registry: {exc.message})", exc.status, exc.code, exc.hint)
        return RegistryError(f"{message} (registry: {exc.message})", exc.status, exc.code, exc.hint)
    # the registry answers and accepts us: a hiccup worth another try
    return TransientError(message, hint=hints.hint(None, None, message, repository))
