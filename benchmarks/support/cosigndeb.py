"""Debian's cosign for bench_sign, unpacked into a cache folder: nothing is installed system-wide.

The chain of trust is apt's own, over the plain-HTTP mirror the host's apt sources name: the suite's InRelease is
checked with gpgv against Debian's archive keyring and only its signed text is read; that text gives the sha256 of
main/binary-amd64/Packages.xz, whose cosign stanza gives the .deb's path and sha256; the .deb is unpacked with
`dpkg-deb -x` into ~/.cache/rocm-image-factory/cosign-<version>/ beside a record of where it came from, and a
later run reuses that folder without the network (refresh=True looks the suite up again). Everything the mirror
sends is read with a size limit and parsed before use: a stanza's Filename must be a cosign .deb under pool/.
Debian builds cosign without its version stamp (`cosign version` prints GitVersion devel), so the package's
version is the one the record keeps.
"""

from __future__ import annotations

import datetime
import hashlib
import lzma
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.buildkit.baseimage import DEFAULT_KEYRING, host_mirror

CACHE = Path.home() / ".cache" / "rocm-image-factory"
PACKAGE = "cosign"
INDEX = "main/binary-amd64/Packages.xz"
RELEASE_LIMIT = 1 << 20  # sid's InRelease is about 190 KB
INDEX_LIMIT = 64 << 20  # Packages.xz: about 11 MB
INDEX_TEXT_LIMIT = 512 << 20  # Packages, uncompressed: about 65 MB
DEB_LIMIT = 256 << 20  # cosign_3.1.1-2_amd64.deb: 17.7 MB
RECORD = "origin.json"
BINARY = Path("usr/bin/cosign")
VERSION_RE = re.compile(r"[0-9][A-Za-z0-9.+~:-]{0,63}")
SHA256_RE = re.compile(r"[0-9a-f]{64}")


class CosignError(Exception):
    """Debian's cosign could not be fetched, checked or run; the message names the step and the URL or path."""


@dataclass(frozen=True)
class Entry:
    """The package's stanza in Packages, as far as a download needs it."""

    version: str
    filename: str  # pool/main/c/cosign/cosign_<version>_amd64.deb
    sha256: str
    size: int


class Origin(BaseModel):
    """The record kept beside an unpacked .deb: where it came from, so a reused folder still names its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str = Field(pattern=r"^cosign$")
    version: str = Field(pattern=VERSION_RE.pattern)
    suite: str = Field(max_length=40)
    url: str = Field(max_length=500)
    sha256: str = Field(pattern=SHA256_RE.pattern)
    fetched: str = Field(max_length=40)


@dataclass(frozen=True)
class Cosign:
    binary: Path
    origin: Origin


def release_sha256(text: str) -> dict[str, tuple[str, int]]:
    """The SHA256 section of a Release file: path -> (sha256, size); a malformed line is skipped, never guessed."""
    found: dict[str, tuple[str, int]] = {}
    section = False
    for line in text.splitlines():
        if not line.startswith(" "):
            section = line.strip() == "SHA256:"
            continue
        words = line.split()
        if section and len(words) == 3 and SHA256_RE.fullmatch(words[0]) and words[1].isdigit():
            found[words[2]] = (words[0], int(words[1]))
    return found


def entry(packages: str, package: str = PACKAGE) -> Entry:
    """The stanza of `package` in a Packages file (the last one, as apt keeps one per version and sid has one)."""
    stanzas = [s for s in re.split(r"\n\n+", packages) if re.match(rf"Package: {re.escape(package)}\n", s)]
    if not stanzas:
        raise CosignError(f"no {package} in the index")
    fields = dict(re.findall(r"^([A-Za-z0-9-]+): ?(.*)$", stanzas[-1], flags=re.MULTILINE))
    version, filename = fields.get("Version", ""), fields.get("Filename", "")
    sha256, size = fields.get("SHA256", ""), fields.get("Size", "")
    if not VERSION_RE.fullmatch(version):
        raise CosignError(f"{package}: Version {version[:80]!r} is not a Debian version")
    base = re.escape(package)
    if not re.fullmatch(rf"pool/main/[a-z0-9]+/{base}/{base}_[A-Za-z0-9.+~%-]+_amd64\.deb", filename):
        raise CosignError(f"{package}: Filename {filename[:120]!r} is not a {package} .deb under pool/main/")
    if not SHA256_RE.fullmatch(sha256) or not size.isdigit() or not 0 < int(size) <= DEB_LIMIT:
        raise CosignError(f"{package}: SHA256 {sha256[:80]!r} / Size {size[:20]!r} unusable (at most {DEB_LIMIT})")
    return Entry(version, filename, sha256, int(size))


def folder_name(version: str) -> str:
    """cosign-<version>, the epoch's colon spelled as dpkg spells it in a file name (%3a)."""
    if not VERSION_RE.fullmatch(version):
        raise CosignError(f"{version[:80]!r} is not a Debian version")
    return f"{PACKAGE}-{version.replace(':', '%3a')}"


def fetch(url: str, limit: int) -> bytes:
    """A bounded GET: more than limit bytes is an error, never a truncated file."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            data: bytes = response.read(limit + 1)
    except OSError as error:
        raise CosignError(f"GET {url}: {error}") from None
    if len(data) > limit:
        raise CosignError(f"GET {url}: over {limit} bytes")
    return data


def checked(data: bytes, sha256: str, what: str) -> bytes:
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise CosignError(f"{what}: sha256 {got}, the signed index says {sha256}")
    return data


def signed_release(mirror: str, suite: str, keyring: str = DEFAULT_KEYRING["debian"]) -> str:
    """The suite's InRelease as gpgv verified it: only the signed text, never what sits around it."""
    url = f"{mirror.rstrip('/')}/dists/{suite}/InRelease"
    with tempfile.TemporaryDirectory(prefix="cosigndeb-") as tmp:
        signed, out = Path(tmp) / "InRelease", Path(tmp) / "Release"
        signed.write_bytes(fetch(url, RELEASE_LIMIT))
        done = subprocess.run(["gpgv", "--keyring", keyring, "--output", str(out), str(signed)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise CosignError(f"{url}: gpgv found no good signature by {keyring}: {done.stderr.strip()[-300:]}")
        return out.read_text(encoding="utf-8", errors="replace")


def look_up(mirror: str, suite: str) -> Entry:
    """cosign's stanza in the suite's signed index."""
    hashes = release_sha256(signed_release(mirror, suite))
    if INDEX not in hashes:
        raise CosignError(f"{mirror} {suite}: the signed InRelease lists no {INDEX}")
    sha256, _ = hashes[INDEX]
    url = f"{mirror.rstrip('/')}/dists/{suite}/{INDEX}"
    packed = checked(fetch(url, INDEX_LIMIT), sha256, url)
    unpack = lzma.LZMADecompressor()
    text = unpack.decompress(packed, max_length=INDEX_TEXT_LIMIT)
    if not unpack.eof:
        raise CosignError(f"{url}: over {INDEX_TEXT_LIMIT} bytes unpacked")
    return entry(text.decode("utf-8", errors="replace"))


def unpacked(folder: Path) -> Cosign | None:
    """The cosign unpacked in folder: its record read and its binary present, else None."""
    try:
        origin = Origin.model_validate_json((folder / RECORD).read_bytes()[:4096])
    except (OSError, ValidationError):
        return None
    binary = folder / BINARY
    ok = folder.name == folder_name(origin.version) and binary.is_file() and os.access(binary, os.X_OK)
    return Cosign(binary, origin) if ok else None


def cached(cache: Path = CACHE) -> Cosign | None:
    """The most recently fetched cosign already unpacked under cache."""
    found = [c for c in map(unpacked, sorted(cache.glob(f"{PACKAGE}-*"))) if c is not None]
    return max(found, key=lambda c: c.origin.fetched, default=None)


def install(mirror: str, suite: str, cache: Path = CACHE) -> Cosign:
    """Look the suite up, download and check the .deb, unpack it into cache/cosign-<version>/ (atomic rename)."""
    found = look_up(mirror, suite)
    final = cache / folder_name(found.version)
    here = unpacked(final)
    if here is not None and here.origin.sha256 == found.sha256:
        return here
    url = f"{mirror.rstrip('/')}/{found.filename}"
    deb = checked(fetch(url, DEB_LIMIT), found.sha256, url)
    if final.exists():
        raise CosignError(f"{final} exists without a usable {RECORD}: not ours to replace; move it away")
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=cache, prefix=f".{final.name}."))
    try:
        (work / "package.deb").write_bytes(deb)
        done = subprocess.run(["dpkg-deb", "-x", str(work / "package.deb"), str(work)], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0 or not (work / BINARY).is_file():
            raise CosignError(f"dpkg-deb -x {url}: {done.stderr.strip()[-300:] or 'no ' + str(BINARY)}")
        (work / "package.deb").unlink()
        origin = Origin(package=PACKAGE, version=found.version, suite=suite, url=url, sha256=found.sha256,
                        fetched=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"))
        (work / RECORD).write_text(origin.model_dump_json(indent=1) + "\n")
        os.rename(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return Cosign(final / BINARY, origin)


def ensure(suite: str = "sid", mirror: str | None = None, refresh: bool = False, cache: Path = CACHE) -> Cosign:
    """The cached cosign, or Debian's from the host's mirror; checked to run here (`cosign version`)."""
    tool = None if refresh else cached(cache)
    if tool is None:
        source = mirror or host_mirror("debian")
        if source is None:
            raise CosignError("no Debian mirror in the host's apt sources; pass --mirror URL")
        tool = install(source, suite, cache)
    done = subprocess.run([str(tool.binary), "version"], capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0 or "GoVersion" not in done.stdout:
        raise CosignError(f"{tool.binary} version: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return tool
