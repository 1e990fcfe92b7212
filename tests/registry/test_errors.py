"""builder.registry.errors: a registry error says what happened, then its hint once; its kinds sort retries."""

from __future__ import annotations

from builder.registry.errors import TRANSIENT_STATUS, AuthError, RegistryError, TransientError


def test_the_hint_comes_once_at_the_end_and_message_stays_without_it() -> None:
    error = RegistryError("push refused", status=403, code="DENIED", hint="log in first")
    assert str(error) == "push refused; hint: log in first"
    assert (error.message, error.status, error.code) == ("push refused", 403, "DENIED")


def test_without_a_hint_the_error_is_its_message() -> None:
    assert str(RegistryError("gone")) == "gone"


def test_kinds_are_registry_errors_and_only_retryable_statuses_are_transient() -> None:
    assert issubclass(AuthError, RegistryError) and issubclass(TransientError, RegistryError)
    assert {429, 503} <= TRANSIENT_STATUS
    assert not {400, 401, 403, 404} & TRANSIENT_STATUS
