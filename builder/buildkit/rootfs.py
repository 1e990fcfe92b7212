"""A debootstrap root filesystem made byte-reproducible, and an image of it whose digest depends on its files alone.

What debuerreotype does for Docker's official Debian images (github.com/debuerreotype/debuerreotype, scripts
debuerreotype-fixup and debuerreotype-tar): drop what records the machine or the moment (logs, caches,
machine-id, ldconfig's aux-cache, the host's resolv.conf and hostname, dpkg's and debconf's -old backups), set
/etc/shadow's last-change days to the snapshot's, and write the tar sorted by name, every mtime clamped to the
snapshot's time, no atime or ctime. The image is loaded from a docker-save archive written here, its config
dated at the snapshot too: the same snapshot gives the same image ID on any day and machine.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from datetime import UTC, datetime
from pathlib import Path

# Relative to the root; globs. Nothing here is in an image made from a snapshot.
SCRUB = ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb",
         "var/cache/apt/archives/partial/*", "var/log/*", "debootstrap", "var/cache/ldconfig/aux-cache",
         "etc/machine-id", "var/lib/dbus/machine-id", "etc/hostname", "etc/resolv.conf", "var/lib/dpkg/*-old",
         "var/cache/debconf/*-old", "run/*", "tmp/*", "var/tmp/*")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def epoch_of(timestamp: str) -> int:
    """20261101T000000Z -> seconds since the epoch."""
    return int(datetime.strptime(timestamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp())


def scrub(root: Path, epoch: int) -> None:
    """Remove what differs between two runs from one snapshot; shadow's change dates become the snapshot's day."""
    for pattern in SCRUB:
        for path in root.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    shadow = root / "etc" / "shadow"
    if shadow.is_file():
        day = str(epoch // 86400)
        lines = [_dated(line, day) for line in shadow.read_text(encoding="utf-8").splitlines()]
        shadow.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _dated(line: str, day: str) -> str:
    fields = line.split(":")
    if len(fields) > 2 and fields[2]:
        fields[2] = day
    return ":".join(fields)


def tar(root: Path, epoch: int, out: Path) -> str:
    """The root as a reproducible tar at out; its sha256 (the layer's diff ID)."""
    cmd = ["tar", "--sort=name", f"--mtime=@{epoch}", "--clamp-mtime", "--numeric-owner", "--format=posix",
           "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime", "-C", str(root), "-cf", str(out),
           "."]
    subprocess.run(cmd, check=True, env={"LC_ALL": "C", "PATH": PATH})
    digest = hashlib.sha256()
    with out.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def image_archive(layer: Path, diff_id: str, epoch: int, ref: str, note: str, out: Path,
                  labels: dict[str, str] | None = None) -> str:
    """A docker-save archive of one layer, its config dated at epoch (and carrying labels); the config's digest
    (the image ID)."""
    created = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": created,
        "config": {"Env": [f"PATH={PATH}"], "Cmd": ["bash"], **({"Labels": labels} if labels else {})},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": created, "created_by": note}],
    }, sort_keys=True, separators=(",", ":")).encode()
    config_id = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{config_id}.json", "RepoTags": [ref], "Layers": [f"{diff_id}/layer.tar"]}])
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as archive:
        _add(archive, f"{config_id}.json", config)
        _add(archive, "manifest.json", manifest.encode())
        info = archive.gettarinfo(str(layer), f"{diff_id}/layer.tar")
        info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
        with layer.open("rb") as fh:
            archive.addfile(info, fh)
    return f"sha256:{config_id}"


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))
