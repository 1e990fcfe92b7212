"""What a registry's answer means: its HTTP errors as RegistryErrors that say what to do.

Every failure carries the HTTP status, the registry's OCI error code and message, and a hint
(builder.registry.hints); the status decides the class the retry policy (builder.registry.retry) reads.
"""

from __future__ import annotations

import json
import urllib.error

from builder.registry import hints, retry
from builder.registry.credentials import Credentials, describe
from builder.registry.errors import AuthError, RegistryError, TransientError


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
    what_to_do = hints.hint(exc.code, code, message, repository)
    if exc.code in (401, 403):
        verb = "refused" if exc.code == 401 else "denied"
        return AuthError(f"registry {address} {verb} {method} {path} ({exc.code}{detail}) with "
                         f"{describe(credentials)}", exc.code, code, what_to_do)
    kind = TransientError if exc.code in retry.TRANSIENT_STATUS else RegistryError
    return kind(f"registry {address} answered {method} {path} with {exc.code}{detail}", exc.code, code, what_to_do)
