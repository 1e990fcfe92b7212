"""Offline input: an OS base image made with debootstrap and `docker import`, for hosts that cannot pull.

The image is tagged with the same reference the Dockerfiles start FROM (e.g. debian:12), so a
rendered Dockerfile builds unchanged here and on a machine that pulls from Docker Hub.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
from pathlib import Path

from builder.buildkit import rootfs
from builder.core import aptwords, facts, osfamilies, ospins, tags
from builder.core.errors import InputError, Problem
from builder.core.logfiles import LOG_DIR, logged_run
from builder.core.scratch import scratch_dir

APT_SOURCES = Path("/etc/apt")
# debootstrap's own default mirrors, used when the host's apt sources name none for the distro.
DEFAULT_KEYRING = {"debian": "/usr/share/keyrings/debian-archive-keyring.gpg",
                   "ubuntu": "/usr/share/keyrings/ubuntu-archive-keyring.gpg"}


def host_mirror(distro: str, apt_dir: Path = APT_SOURCES) -> str | None:
    """The first plain mirror in the host's apt sources that serves `distro` (both apt source formats)."""
    for uri, suites in _apt_sources(apt_dir):
        path = uri.rstrip("/").rsplit("/", 1)[-1]
        if path == distro and not any(s.endswith("-security") for s in suites):
            return uri
    return None


def _apt_sources(apt_dir: Path) -> list[tuple[str, list[str]]]:
    files = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*"))]
    found: list[tuple[str, list[str]]] = []
    for file in files:
        if not file.is_file():
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        if file.suffix == ".sources":
            found += _deb822(text)
        elif file.suffix == ".list" or file.name == "sources.list":
            found += _one_line(text)
    return found


def _deb822(text: str) -> list[tuple[str, list[str]]]:
    found = []
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, flags=re.MULTILINE))
        if "deb" not in fields.get("Types", "").split():
            continue
        for uri in fields.get("URIs", "").split():
            found.append((uri, fields.get("Suites", "").split()))
    return found


def _one_line(text: str) -> list[tuple[str, list[str]]]:
    found = []
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb":
            found.append((words[1], [words[2]]))
    return found


def build_base(os_name: str, mirror: str | None, tag: str | None = None, snapshot: str | None = None, *,
               trusted: bool = False) -> str:
    """Debootstrap a minimal root filesystem for os_name and import it; returns the image reference. With a snapshot
    timestamp it is made from the OS's snapshot archive (or mirror, a snapshot mirror), byte-reproducibly."""
    releases = facts.os_releases()
    if os_name not in releases:
        close = difflib.get_close_matches(os_name, list(releases), n=1, cutoff=0.6)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise InputError([Problem(Path("(command line)"), None, "os",
                                  f"unknown os {os_name!r}; {guess}known: {', '.join(sorted(releases))}")])
    release = releases[os_name]
    if osfamilies.of(release.family).BASE_TOOL != "debootstrap":
        raise InputError([Problem(Path("(command line)"), None, "os",
                                  f"{os_name} is a {release.family} distro; debootstrap builds apt distros only")])
    if snapshot is not None:
        return _from_snapshot(os_name, release, mirror, snapshot, tag or release.base, trusted)
    mirror = mirror or host_mirror(release.distro)
    if mirror is None:
        raise InputError([Problem(APT_SOURCES, None, "mirror",
                                  f"no {release.distro} mirror in the host's apt sources; pass --mirror URL")])
    ref = tag or release.base
    with scratch_dir("rif-rootfs-") as tmp:
        root = tmp / "rootfs"
        _debootstrap(os_name, release, root, mirror, [])
        _slim(root)
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import", "--change", 'CMD ["bash"]', "-", ref], stdin=tar.stdout, check=True)
        if tar.wait() != 0:
            raise RuntimeError("tar of the root filesystem failed")
    return ref


def _debootstrap(os_name: str, release: facts.OsRelease, root: Path, mirror: str, extra: list[str],
                 env: dict[str, str] | None = None) -> None:
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed (apt-get install debootstrap)")
    cmd = ["debootstrap", "--variant=minbase", *extra]
    keyring = DEFAULT_KEYRING.get(release.distro)
    if keyring and Path(keyring).exists() and "--no-check-gpg" not in extra:
        cmd.append(f"--keyring={keyring}")
    logged_run([*cmd, release.codename, str(root), mirror], LOG_DIR / f"base-{os_name}.log",
               env={**os.environ, **(env or {})})


def snapshot_mirror(release: facts.OsRelease, mirror: str | None, snapshot: str) -> str:
    """The archive at the snapshot: the mirror the command line gives (--mirror, else RIF_APT_SNAPSHOT), else the OS's
    first snapshot archive."""
    base = mirror or (release.snapshot[0].archive if release.snapshot else None)
    if base is None or base == "off":
        raise InputError([Problem(Path("(command line)"), None, "--snapshot",
                                  "this OS has no snapshot archive in builder/data/os.yaml; pass --mirror URL")])
    return f"{base.rstrip('/')}/{snapshot}/"


def _from_snapshot(os_name: str, release: facts.OsRelease, mirror: str | None, snapshot: str, ref: str,
                   unsigned: bool) -> str:
    """unsigned: the person running the command trusts a loopback archive unsigned (RIF_APT_SNAPSHOT_TRUSTED=yes,
    read by the command line): a test's archive."""
    if not ospins.TIMESTAMP.fullmatch(snapshot):
        raise InputError([Problem(Path("(command line)"), None, "--snapshot",
                                  f"{snapshot!r} is not a UTC timestamp like 20261101T000000Z")])
    url, epoch = snapshot_mirror(release, mirror, snapshot), rootfs.epoch_of(snapshot)
    if unsigned and not aptwords.is_loopback_url(url):  # never an archive off this machine, unsigned
        raise InputError([Problem(Path("(environment)"), None, aptwords.TRUST_SETTING,
                                  f"yes trusts a loopback archive only, not {aptwords.shown(url)}: refused")])
    with scratch_dir("rif-rootfs-") as tmp:
        root = tmp / "rootfs"
        _debootstrap(os_name, release, root, url, ["--no-check-gpg"] if unsigned else [],
                     {"SOURCE_DATE_EPOCH": str(epoch)})
        rootfs.scrub(root, epoch)
        (root / "etc" / "apt" / "sources.list").write_text(
            f"deb [check-valid-until=no{' trusted=yes' if unsigned else ''}] {url} {release.codename} main\n")
        diff_id = rootfs.tar(root, epoch, tmp / "layer.tar")
        image_id = rootfs.image_archive(tmp / "layer.tar", diff_id, epoch, ref,
                                        f"builder base {os_name} --snapshot {snapshot} ({url})", tmp / "image.tar",
                                        labels={tags.SNAPSHOT_LABEL: snapshot})  # `builder lock` records it
        subprocess.run(["docker", "load", "-q", "-i", str(tmp / "image.tar")], check=True, stdout=subprocess.DEVNULL)
    return f"{ref} ({image_id})"


def _slim(root: Path) -> None:
    """Drop what an image never needs: apt lists and caches, debootstrap's logs."""
    for pattern in ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb",
                    "var/log/bootstrap.log", "debootstrap"):
        for path in root.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
