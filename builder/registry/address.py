"""Registry addresses: what --registry and --insecure-registry may say, and who may get plain HTTP."""

from __future__ import annotations

import contextlib
import ipaddress
import re
import urllib.parse

from builder.core import aptwords
from builder.core.errors import COMMAND_LINE, InputError, Problem, usage_error


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1 or exactly `localhost` (with or without a port): nothing else is plain-HTTP safe."""
    return aptwords.is_loopback_host(urllib.parse.urlsplit(f"//{address}").hostname or "")


def host_port(address: str) -> str:
    """'HOST[:PORT]' as a registry or a realm URL's netloc names it, normalised (user info dropped, IPs canonical).

    What an --insecure-registry entry is compared with: exactly, port included, as Docker compares its
    insecure-registries; "" when address names no host.
    """
    parts = urllib.parse.urlsplit(f"//{address}")
    try:
        host, port = parts.hostname or "", parts.port
    except ValueError:  # a port that is no number
        return ""
    with contextlib.suppress(ValueError):
        ip = ipaddress.ip_address(host)
        host = f"[{ip}]" if ip.version == 6 else str(ip)
    return f"{host}:{port}" if host and port is not None else host


def checked_url(value: str) -> urllib.parse.SplitResult:
    """A URL a registry sent (a redirect's or an upload's Location, a token realm), split with its port and a
    bracketed host read too (urlsplit leaves those for later): ValueError when it is no URL."""
    parts = urllib.parse.urlsplit(value)
    _ = parts.port
    if (parts.scheme or parts.netloc) and not parts.hostname:  # `http:///x`: an absolute URL names a host
        raise ValueError(f"no host in {value!r}")
    host = parts.netloc.rpartition("@")[2]
    if "[" in host or "]" in host:  # `[::1]]`: urlsplit checks that the brackets pair, not what they hold
        bracketed = BRACKETED_RE.fullmatch(host)
        ipaddress.IPv6Address(bracketed[1] if bracketed else "")
    return parts


def plain_http_ok(address: str, insecure: frozenset[str] = frozenset()) -> bool:
    """May address (a registry, a token realm) be spoken to, and sent credentials, over plain HTTP?"""
    host = host_port(address)
    return is_loopback(address) or (bool(host) and host in insecure)


BRACKETED_RE = re.compile(r"\[([^\]]*)\](?::[0-9]*)?")
HOST = r"(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:]+\])(?::[0-9]{1,5})?"
HOST_RE = re.compile(HOST)
REGISTRY_RE = re.compile(HOST + r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")


def check_registry(value: str, option: str = "--registry") -> str:
    """--registry is HOST[:PORT][/NAMESPACE], lower case, no scheme and no credentials; never echo a password."""
    if "@" in value:
        raise usage_error(option, "must not hold credentials (user:password@): use RIF_REGISTRY_USER/"
                                  "RIF_REGISTRY_PASSWORD or docker login")
    if "://" in value:
        raise usage_error(option, f"{value!r} has a scheme: give HOST[:PORT]/NAMESPACE, e.g. ghcr.io/org")
    if not REGISTRY_RE.fullmatch(value):
        raise usage_error(option, f"{value!r} is not HOST[:PORT]/NAMESPACE in lower case (e.g. ghcr.io/org, "
                                  "127.0.0.1:5000/rocm)")
    return value


def check_insecure(values: list[str] | None) -> frozenset[str]:
    """--insecure-registry is HOST[:PORT], lower case, no scheme, credentials or path; never echo a password.

    Exactly what Docker's insecure-registries holds: a host the factory may speak plain HTTP to (a registry
    or a token realm), and send credentials over it. Checked before anything runs, every bad value at once.
    """
    problems = []
    for value in values or []:
        if "@" in value:
            why = "must not hold credentials (user:password@): name HOST[:PORT] only"
        elif "://" in value:
            why = f"{value!r} has a scheme: give HOST[:PORT] only, e.g. registry.lan:5000 (plain HTTP is implied)"
        elif "/" in value:
            why = f"{value!r} has a path: give HOST[:PORT] only, e.g. registry.lan:5000"
        elif not HOST_RE.fullmatch(value):
            why = f"{value!r} is not HOST[:PORT] in lower case (e.g. registry.lan:5000, 10.0.0.7:5000)"
        else:
            continue
        problems.append(Problem(COMMAND_LINE, None, "--insecure-registry", why))
    if problems:
        raise InputError(problems)
    return frozenset(values or [])
