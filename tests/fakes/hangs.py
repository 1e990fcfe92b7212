"""A deadline for a test whose failure mode is a hang: a read or write that opens a planted FIFO blocks forever."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def alarm(error: BaseException, seconds: int = 10) -> Iterator[None]:
    """Raise error in the main thread after seconds (SIGALRM) instead of hanging; the previous handler restored."""
    def hung(signum: int, frame: object) -> None:
        raise error

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
