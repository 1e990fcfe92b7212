"""builder.buildkit.rootfs: a root filesystem whose tar and image depend on its files and snapshot alone."""

from __future__ import annotations

import os
from pathlib import Path

from builder.buildkit import rootfs

EPOCH = rootfs.epoch_of("20261101T000000Z")


def make_root(root: Path, when: int) -> None:
    """A tiny root as two debootstrap runs would leave it: the same packages' files, different moments."""
    for rel, text in {"usr/bin/tool": "x", "etc/shadow": "root:*:20420:0:99999:7:::\nnobody:*:20421:0:99999:7:::\n",
                      "var/log/dpkg.log": f"{when}", "etc/machine-id": f"{when}", "var/cache/ldconfig/aux-cache": "?",
                      "etc/resolv.conf": f"nameserver {when}", "var/lib/dpkg/status-old": f"{when}",
                      "var/lib/apt/lists/x_Packages": f"{when}"}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    os.utime(root / "usr/bin/tool", (100, 100))  # a packaged file keeps the .deb's mtime


def test_two_runs_from_one_snapshot_give_one_layer_and_one_image_id(tmp_path: Path) -> None:
    ids = []
    for run, when in (("a", EPOCH + 3600), ("b", EPOCH + 7200)):
        root = tmp_path / run / "rootfs"
        make_root(root, when)
        for path in root.rglob("*"):
            if path.name != "tool":
                os.utime(path, (when, when))
        rootfs.scrub(root, EPOCH)
        assert not (root / "etc" / "machine-id").exists() and not any((root / "var" / "log").iterdir())
        day = EPOCH // 86400
        assert (root / "etc" / "shadow").read_text() == f"root:*:{day}:0:99999:7:::\nnobody:*:{day}:0:99999:7:::\n"
        diff_id = rootfs.tar(root, EPOCH, tmp_path / run / "layer.tar")
        ids.append((diff_id, rootfs.image_archive(tmp_path / run / "layer.tar", diff_id, EPOCH, "debian:12", "note",
                                                  tmp_path / run / "image.tar")))
        assert (tmp_path / run / "image.tar").stat().st_size > 0
    assert ids[0] == ids[1]
    assert (tmp_path / "a" / "image.tar").read_bytes() == (tmp_path / "b" / "image.tar").read_bytes()
