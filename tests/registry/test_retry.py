"""builder.registry.retry: only transient failures are retried, classified from types and statuses, never digits."""

from __future__ import annotations

import email.message
import urllib.error

import pytest

from builder.registry import hints, retry
from builder.registry.errors import AuthError, RegistryError, TransientError

NOW = retry.Policy(attempts=3, backoff_s=0.0, total_s=60.0)


def http_error(code: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://r/v2/", code, "x", email.message.Message(), None)


@pytest.mark.parametrize(("exc", "transient"), [
    (TransientError("reset"), True),
    (RegistryError("busy", status=503), True),
    (RegistryError("gone", status=404), False),
    (AuthError("denied", status=401), False),
    (RegistryError("port 5401 refused 401 times"), False),  # digits in a message are no status
    (http_error(429), True),
    (http_error(403), False),
    (urllib.error.URLError(ConnectionRefusedError()), True),
    (ConnectionResetError(), True),
    (TimeoutError(), True),
    (ValueError("502"), False),
])
def test_is_transient_reads_types_and_statuses(exc: BaseException, transient: bool) -> None:
    assert retry.is_transient(exc) is transient


def failing(*errors: BaseException) -> tuple[list[int], object]:
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "ok"
    return calls, fn


def test_a_transient_failure_is_retried_until_it_succeeds() -> None:
    calls, fn = failing(TransientError("reset"), http_error(502))
    assert retry.call(fn, "tags", NOW) == "ok" and len(calls) == 3  # type: ignore[arg-type]


def test_a_permanent_failure_is_raised_at_once() -> None:
    calls, fn = failing(AuthError("denied", status=401))
    with pytest.raises(AuthError):
        retry.call(fn, "tags", NOW)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_the_last_transient_failure_becomes_a_registry_error_with_the_try_count_and_its_hint() -> None:
    busy = RegistryError("busy", status=503, code="UNAVAILABLE", hint="wait")
    calls, fn = failing(busy, busy, busy)
    with pytest.raises(RegistryError) as exc:
        retry.call(fn, "push x", NOW)  # type: ignore[arg-type]
    assert len(calls) == 3 and type(exc.value) is RegistryError
    assert (exc.value.message, exc.value.status, exc.value.code, exc.value.hint) == (
        "push x: still failing after 3 tries: busy", 503, "UNAVAILABLE", "wait")


def test_a_network_failure_gets_the_hint_of_its_class() -> None:
    refused = urllib.error.URLError(ConnectionRefusedError("refused"))
    _, fn = failing(refused, refused, refused)
    with pytest.raises(RegistryError) as exc:
        retry.call(fn, "tags", NOW)  # type: ignore[arg-type]
    assert exc.value.status is None and exc.value.hint == hints.network(refused) is not None
    assert exc.value.message == "tags: still failing after 3 tries: refused"
