"""The suite's traffic stays on loopback, checked at run time (issue 31): every bind, connect and sendto of
every socket this process opens is checked before it happens, and one off loopback is refused and fails
the test that made it, even when the code under test catches the error.

Allowed: AF_UNIX (the Docker SDK's engine socket), 127.0.0.0/8, ::1 (and ::ffff:127.x), and a name such as
`localhost` only when every address it resolves to is loopback. Refused: 0.0.0.0, ::, '' (every interface),
any other address or name. Processes a test starts are out of reach of this: the registries tests start
are checked by their config's `addr:` (check_address, tests/fakes/registries.py), builds and containers by
their network (host or none, on an engine without a bridge: tests/project/test_loopback_only.py).

Loaded by tests/conftest.py; `-p tests.fakes.loopback` loads it into any other pytest run.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

_ORIGINAL = {name: getattr(socket.socket, name) for name in ("bind", "connect", "connect_ex", "sendto")}
_LOCK = threading.Lock()
_VIOLATIONS: list[str] = []


class OffLoopback(AssertionError):
    """A socket asked for an address off loopback: not an OSError, so code under test does not take it for a
    network failure to retry or report."""


def _is_loopback_ip(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def is_loopback(host: str) -> bool:
    """host is a loopback address, or a name every address of which is loopback."""
    if _is_loopback_ip(host):
        return True
    if not host or host in ("0.0.0.0", "::") or _looks_like_ip(host):
        return False
    try:
        found = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(found) and all(_is_loopback_ip(str(info[4][0])) for info in found)


def _looks_like_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def allowed(family: int, address: Any) -> bool:
    """What a socket of family may bind, connect or send to."""
    if family == getattr(socket, "AF_UNIX", None):
        return True
    if family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple) and address:
        return isinstance(address[0], str) and is_loopback(address[0])
    return False


def check_address(address: str, what: str) -> None:
    """`host:port` (a registry's `addr:`, a proxy's listen address) is on loopback; else fail the test."""
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    if not is_loopback(host):
        _refuse(f"{what} listens on {address!r}, off loopback")


def _refuse(message: str) -> None:
    with _LOCK:
        _VIOLATIONS.append(message)
    raise OffLoopback(message)


def _guarded(name: str) -> Callable[..., Any]:
    original = _ORIGINAL[name]

    def guarded(self: socket.socket, *args: Any) -> Any:
        address = args[-1] if name == "sendto" else args[0]
        if not allowed(self.family, address):
            _refuse(f"socket.{name}({address!r}) off loopback (family {self.family!r})")
        return original(self, *args)

    guarded.__name__ = name
    return guarded


def install() -> None:
    for name in _ORIGINAL:
        setattr(socket.socket, name, _guarded(name))


def uninstall() -> None:
    for name, original in _ORIGINAL.items():
        setattr(socket.socket, name, original)


def taken() -> list[str]:
    """The refusals so far, emptied."""
    with _LOCK:
        found = _VIOLATIONS[:]
        _VIOLATIONS.clear()
    return found


def pytest_configure(config: pytest.Config) -> None:
    install()


def pytest_unconfigure(config: pytest.Config) -> None:
    uninstall()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Fail the test (or its setup, or teardown) when anything it ran asked for an address off loopback, even
    where the code under test caught the refusal."""
    outcome = yield
    found = taken()
    if found:
        report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
        report.outcome = "failed"
        report.longrepr = "traffic off loopback: " + "; ".join(found)
