"""The one retry policy for every registry operation: HTTP calls, docker pushes, tag moves.

Failures are classified from structured data only (exception types, HTTP status codes, the registry's
error codes), never from digits in a message: a port number or a digest containing "401" is no refused
login. Only transient failures are retried, with exponential backoff, within a total time limit.
"""

from __future__ import annotations

import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from builder.registry import hints
from builder.registry.errors import TRANSIENT_STATUS, RegistryError, TransientError

T = TypeVar("T")

ATTEMPTS = 5
BACKOFF_S = 1.0
TOTAL_S = 120.0  # a registry down for longer fails its cells; the next scheduled run picks them up



@dataclass(frozen=True)
class Policy:
    attempts: int = ATTEMPTS
    backoff_s: float = BACKOFF_S
    total_s: float = TOTAL_S


DEFAULT = Policy()


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, TransientError):
        return True
    if isinstance(exc, RegistryError):
        return exc.status in TRANSIENT_STATUS
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in TRANSIENT_STATUS
    return isinstance(exc, (urllib.error.URLError, ConnectionError, TimeoutError))


def call(fn: Callable[[], T], what: str, policy: Policy = DEFAULT) -> T:
    """fn(), retried while it fails transiently; the last transient failure becomes a RegistryError."""
    retrying = Retrying(
        stop=stop_after_attempt(policy.attempts) | stop_after_delay(policy.total_s),
        wait=wait_exponential(multiplier=policy.backoff_s, max=30),
        retry=retry_if_exception(is_transient),
        reraise=True,
    )
    try:
        return retrying(fn)
    except Exception as exc:
        if not is_transient(exc):
            raise
        tries = retrying.statistics.get("attempt_number", 1)
        last = exc if isinstance(exc, RegistryError) else None
        raise RegistryError(f"{what}: still failing after {tries} tries: {_reason(exc)}", _status(exc),
                            last.code if last else None, last.hint if last else hints.network(exc)) from exc


def _status(exc: BaseException) -> int | None:
    if isinstance(exc, RegistryError):
        return exc.status
    return exc.code if isinstance(exc, urllib.error.HTTPError) else None


def _reason(exc: BaseException) -> object:
    if isinstance(exc, RegistryError):
        return exc.message  # its hint goes on the error that wraps it, once
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        return exc.reason
    return exc
