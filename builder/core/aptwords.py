"""The words an apt lock and an apt index are made of, parsed by Debian's grammar, and whom apt may trust unsigned.

Package names: Debian Policy 5.6.1 / 5.6.7 (https://www.debian.org/doc/debian-policy/ch-controlfields.html#package:
"at least two characters long", lower case letters, digits, `+ - .`, "must start with an alphanumeric character").
Versions: Debian Policy 5.6.12 (#version: `[epoch:]upstream_version[-debian_revision]`, the epoch "a single
(generally small) unsigned integer", upstream_version "alphanumerics and the characters . + - ~" and "should start
with a digit", hyphens only with a debian_revision, which holds "only alphanumerics and the characters + . ~";
dpkg's deb-version(7) still takes colons in upstream_version when there is an epoch). Lengths are capped: Debian
bookworm's main index (2026-11-28) has names of at most 75 characters and versions of at most 52.

Trust: apt installs without a signature only from an archive on this machine's loopback (a test's archive made by
scripts/apt_snapshot_archive.py), and only when the person running the command says so; never because a lock file
or a lock record read from a registry says so.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from datetime import UTC, datetime

MAX_NAME = 128  # a package name
MAX_VERSION = 128  # a version
MAX_WORD = 64  # an architecture, a suite, a component, an OS name
MAX_URL = 2048  # an archive's address
SHOWN = 80  # a refused value is echoed cut to this many characters

NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+", re.ASCII)
ARCH = re.compile(r"[a-z0-9][a-z0-9-]*", re.ASCII)
SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
TIMESTAMP = re.compile(r"[0-9]{8}T[0-9]{6}Z", re.ASCII)
_EPOCH = re.compile(r"[0-9]+", re.ASCII)
_REVISION = re.compile(r"[A-Za-z0-9+.~]+", re.ASCII)
# A host as apt and a shell word take it: a DNS name of ASCII labels, or an IP literal (checked by ipaddress).
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)", re.ASCII)
# An archive's path: the characters an archive's address needs, never a quote, space, `$` or backquote (the
# address goes into a Dockerfile's RUN line).
_PATH = re.compile(r"(?:/[A-Za-z0-9._~%+-]*)*", re.ASCII)


def shown(value: str) -> str:
    """A refused value as an error echoes it: quoted, cut to SHOWN characters (with how long it was)."""
    if len(value) <= SHOWN:
        return repr(value)
    return f"{value[:SHOWN]!r}... ({len(value):,} characters)"


def is_name(value: str) -> bool:
    return len(value) <= MAX_NAME and NAME.fullmatch(value) is not None


def is_version(value: str) -> bool:
    """Debian Policy 5.6.12's version grammar (see the module's docstring)."""
    if not value or len(value) > MAX_VERSION:
        return False
    epoch, colon, rest = value.partition(":")
    if not colon:
        epoch, rest = "", value
    elif not _EPOCH.fullmatch(epoch):
        return False
    upstream, hyphen, revision = rest.rpartition("-")
    if not hyphen:
        upstream, revision = rest, ""
    elif not _REVISION.fullmatch(revision):
        return False
    allowed = r"[0-9][A-Za-z0-9.+~" + (":" if colon else "") + ("-" if hyphen else "") + "]*"  # `-` last
    return re.fullmatch(allowed, upstream, re.ASCII) is not None


def is_arch(value: str) -> bool:
    return len(value) <= MAX_WORD and ARCH.fullmatch(value) is not None


def utc_time(value: str, *, not_after_now: bool = True) -> datetime:
    """A snapshot's `YYYYMMDDTHHMMSSZ` as a real UTC time (month 13 or hour 25 is none), not after now; a
    ValueError saying what is wrong."""
    if len(value) > 16 or not TIMESTAMP.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a UTC timestamp like 20261101T000000Z")
    try:
        when = datetime.strptime(value, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"{shown(value)} is no real time (a month 01-12, a day of that month, hours 00-23, "
                         "minutes and seconds 00-59)") from None
    if not_after_now and when > datetime.now(UTC):
        raise ValueError(f"{shown(value)} is in the future: a snapshot is an archive's state at a past time")
    return when


def archive_url(value: str) -> str:
    """An archive's address parsed (http or https, a host, a port in 1-65535, a path of plain characters; no user,
    query or fragment), returned without a trailing slash; a ValueError saying what is wrong."""
    if not value:
        raise ValueError("an empty value: name an http(s) archive URL like https://snapshot.debian.org/archive/"
                         "debian (or off)")
    if len(value) > MAX_URL:
        raise ValueError(f"{shown(value)} is longer than the {MAX_URL} characters an archive URL may have")
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"{shown(value)} is not a plain ASCII URL")
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", a port that is no number
        raise ValueError(f"{shown(value)} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{shown(value)} is not an http(s) URL like https://snapshot.debian.org/archive/debian")
    if port == 0 or parts.username is not None or parts.password is not None or parts.query or parts.fragment \
            or "?" in value or "#" in value:
        raise ValueError(f"{shown(value)}: an archive URL has no user, port 0, query or fragment")
    if not _host_ok(parts.hostname, "[" in parts.netloc) or not _PATH.fullmatch(parts.path):
        raise ValueError(f"{shown(value)} is not an http(s) URL of a host and a plain path (letters, digits, "
                         "`._~%+-/`)")
    return value.rstrip("/")


def _host_ok(host: str, bracketed: bool) -> bool:
    if bracketed:
        try:
            return ipaddress.ip_address(host).version == 6
        except ValueError:
            return False
    return all(_LABEL.fullmatch(label) for label in host.split("."))


def is_loopback_url(url: str) -> bool:
    """Whether an archive URL names this machine's loopback: 127.0.0.0/8, ::1 or exactly `localhost`."""
    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return False
    return is_loopback_host(host)


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or exactly `localhost`: the one test of a host an archive or a registry may use unsigned."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


TRUST_SETTING = "RIF_APT_SNAPSHOT_TRUSTED"  # yes: the person running the command trusts loopback archives unsigned


def trust_setting(value: str | None) -> bool:
    """RIF_APT_SNAPSHOT_TRUSTED's value: yes, no or unset; a ValueError for anything else."""
    if value in (None, "", "no"):
        return False
    if value == "yes":
        return True
    raise ValueError(f"{TRUST_SETTING}={shown(value or '')}: yes (trust loopback archives unsigned) or no")
