"""What a failed registry operation is: permanent, an auth refusal, a spent deadline or worth another try."""

from __future__ import annotations

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})  # statuses worth another try (TransientError)


class RegistryError(RuntimeError):
    """A registry operation failed for good: the cell fails with this message (never a secret)."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message  # what happened, without the hint: for errors that wrap this one
        self.status = status
        self.code = code  # the registry's OCI error code (DENIED, NAME_UNKNOWN, ...) when it sent one
        self.hint = hint  # what to do about it (builder.registry.hints), said once, at the end

    def __str__(self) -> str:
        return f"{self.message}; hint: {self.hint}" if self.hint else self.message


class AuthError(RegistryError):
    """401/403: retrying with the same credentials cannot help."""


class DeadlineError(RegistryError):
    """A whole command's time with a registry is spent: no further request is sent, none is retried."""


class TransientError(RegistryError):
    """Worth another try: the registry or the network may recover (5xx, 429, resets, timeouts)."""
