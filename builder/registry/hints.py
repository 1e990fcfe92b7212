"""What to do about a registry's error: one table, keyed by the registry's OCI error code, then the HTTP status.

A status alone often cannot say what went wrong (a 404 on an upload is a repository the registry will not
create; a 500 may be a full disk), so the registry's own words are read first: a phrase of its message that
names the cause, then its OCI error code (distribution spec, "Error codes"), then the HTTP status. Every
RegistryError made from a registry's answer carries the hint found here, and its message ends with it, so
a failed cell in the run view, the run record and the one-line preflight error all say what to do.
`error_of` turns a registry's HTTP error into that RegistryError; its status decides the class the retry policy
(builder.registry.retry) reads.
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
import ssl
import urllib.error

from builder.registry.credentials import ENV_PASSWORD, ENV_USER, Credentials, describe
from builder.registry.errors import TRANSIENT_STATUS, AuthError, RegistryError, TransientError

REPOSITORY = "{repository}"  # where a hint names the repository; "this repository" when it is not known

CREDENTIALS = f"check {ENV_USER}/{ENV_PASSWORD}, or docker login to this registry"
NO_PUSH_RIGHTS = f"the credentials lack push rights on {REPOSITORY}: grant them write access (ghcr.io: write:packages)"
NO_REPOSITORY = (f"the repository {REPOSITORY} does not exist and the registry does not create it on push: "
                 "create it there, or check --registry's namespace")
READ_ONLY = "the registry is read-only (a mirror?) or does not allow this operation: push to one that takes pushes"
TOO_LARGE = "the registry (or a proxy before it) refuses blobs this large: raise its body size limit"
RATE_LIMITED = "rate limited: wait, or log in for a higher limit, then rerun"
SERVER_TROUBLE = "the registry (or a proxy before it) failed: see its logs; a rerun publishes what is left"
RERUN = "an upload was cut short or corrupted on the way (a proxy rewriting bodies?): rerun"
BAD_MANIFEST = "the registry refuses the manifest: does it take Docker v2 / OCI image manifests?"
LAYER_GONE = "the registry lacks a blob the image needs (deleted or garbage-collected during the push?): rerun"

# Keys: a lower-case phrase of the registry's message, an OCI error code, or an HTTP status; looked up in that order.
HINTS: dict[str | int, str] = {
    "no space left on device": "the registry's storage is full: free space on it (or run its garbage collection), "
                               "then rerun",
    "UNAUTHORIZED": CREDENTIALS,
    "DENIED": NO_PUSH_RIGHTS,
    "NAME_UNKNOWN": NO_REPOSITORY,
    "NAME_INVALID": f"the registry refuses the repository name {REPOSITORY}: check --registry's namespace",
    "TAG_INVALID": "the registry refuses this tag (its own tag rules are stricter than the factory's?)",
    "MANIFEST_INVALID": BAD_MANIFEST,
    "MANIFEST_UNVERIFIED": BAD_MANIFEST,
    "MANIFEST_BLOB_UNKNOWN": LAYER_GONE,
    "BLOB_UNKNOWN": LAYER_GONE,
    "MANIFEST_UNKNOWN": "the registry has no such manifest (deleted meanwhile?): rerun",
    "BLOB_UPLOAD_UNKNOWN": RERUN,
    "BLOB_UPLOAD_INVALID": RERUN,
    "DIGEST_INVALID": RERUN,
    "SIZE_INVALID": RERUN,
    "UNSUPPORTED": READ_ONLY,
    "TOOMANYREQUESTS": RATE_LIMITED,
    400: "the registry refused the request as malformed (an old registry, or a proxy rewriting requests?)",
    401: CREDENTIALS,
    403: NO_PUSH_RIGHTS,
    404: NO_REPOSITORY,
    405: READ_ONLY,
    413: TOO_LARGE,
    429: RATE_LIMITED,
    500: SERVER_TROUBLE,
    502: SERVER_TROUBLE,
    503: SERVER_TROUBLE,
    504: SERVER_TROUBLE,
}
PHRASES = [key for key in HINTS if isinstance(key, str) and key.islower()]


def hint(status: int | None, code: str | None = None, message: str = "", repository: str | None = None) -> str | None:
    """What to do about this answer of a registry, or None when the table knows nothing better to say."""
    said = message.lower()
    found = next((HINTS[phrase] for phrase in PHRASES if phrase in said), None)
    if found is None and code:
        found = HINTS.get(code.upper())
    if found is None and status is not None:
        found = HINTS.get(status)
    return found.replace(REPOSITORY, repository or "this repository") if found else None


# A failure before any answer (no status, no error code): what the socket or TLS layer said, by exception class.
REFUSED = ("nothing listens there: is the registry running, and are the host and port right (e.g. --registry "
           "HOST:PORT/NS)?")
UNRESOLVED = "the host name does not resolve: check its spelling, or this machine's DNS (or its proxy, HTTPS_PROXY)"
NO_ANSWER = ("no answer in time: a firewall dropping the traffic, a proxy this network needs (HTTPS_PROXY, "
             "NO_PROXY), or a registry too busy to answer")
UNREACHABLE = "no route to the host: check this machine's network (a VPN or proxy it needs?)"
UNTRUSTED = ("the registry's certificate is not trusted here: add its CA to the system's store (or "
             "--insecure-registry HOST for a registry on a trusted network)")
PLAIN_HTTP = "the registry speaks plain HTTP, not HTTPS: name it with --insecure-registry HOST[:PORT]"
CUT = "the connection was cut mid-answer: a proxy or load balancer in between? rerun"


def network(exc: BaseException) -> str | None:
    """What to do about a failure that got no answer from the registry, from its exception class."""
    reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ConnectionRefusedError):
        return REFUSED
    if isinstance(reason, socket.gaierror):
        return UNRESOLVED
    if isinstance(reason, TimeoutError):
        return NO_ANSWER
    if isinstance(reason, ssl.SSLCertVerificationError):
        return UNTRUSTED
    if isinstance(reason, ssl.SSLError):
        return PLAIN_HTTP if "WRONG_VERSION_NUMBER" in str(reason).upper() else UNTRUSTED
    if isinstance(reason, (ConnectionError, http.client.HTTPException)):
        return CUT
    if isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return UNREACHABLE
    return None


def oci_error(exc: urllib.error.HTTPError) -> tuple[str | None, str]:
    """The first error of the spec's `{"errors": [{"code", "message"}]}` body, when there is one."""
    try:
        first = json.loads(exc.read(65536))["errors"][0]
        return str(first["code"]), str(first.get("message", ""))[:200]
    except (ValueError, KeyError, IndexError, TypeError, OSError, RecursionError):
        return None, ""


def error_of(exc: urllib.error.HTTPError, address: str, credentials: Credentials | None, method: str, path: str,
             repository: str) -> RegistryError:
    """The answer as a RegistryError: status, the registry's code and message, and what to do about it."""
    code, message = oci_error(exc)
    detail = f" {code}: {message}" if code else ""
    what_to_do = hint(exc.code, code, message, repository)
    if exc.code in (401, 403):
        verb = "refused" if exc.code == 401 else "denied"
        return AuthError(f"registry {address} {verb} {method} {path} ({exc.code}{detail}) with "
                         f"{describe(credentials)}", exc.code, code, what_to_do)
    kind = TransientError if exc.code in TRANSIENT_STATUS else RegistryError
    return kind(f"registry {address} answered {method} {path} with {exc.code}{detail}", exc.code, code, what_to_do)
