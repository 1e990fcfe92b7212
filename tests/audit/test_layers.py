"""builder.audit.layers: what a layer holds, path by path, from a gzip, zstd or plain tar; bounded, never a traceback.

Layers built to exhaust memory or time (gzip bombs, endless headers): tests/hostile.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile

import pytest
import zstandard

from builder.audit import layers


def tar(members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for info in members:
            body = (data or {}).get(info.name)
            if body is not None:
                info.size = len(body)
            archive.addfile(info, io.BytesIO(body) if body is not None else None)
    return out.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


LAYER = tar([member("./etc", tarfile.DIRTYPE, mode=0o755), member("./etc/os-release", mtime=5, uid=0, gid=0),
             member("opt/link", tarfile.SYMTYPE, linkname="/etc/os-release"),
             member("opt/hard", tarfile.LNKTYPE, linkname="etc/os-release"), member("dev/null", tarfile.CHRTYPE)],
            {"./etc/os-release": b"debian"})


@pytest.mark.parametrize("pack", [lambda b: b, lambda b: gzip.compress(b, mtime=0),
                                  lambda b: zstandard.ZstdCompressor().compress(b)], ids=["tar", "gzip", "zstd"])
def test_every_path_with_its_kind_owner_time_and_content_digest(pack: object) -> None:
    found = layers.entries(io.BytesIO(pack(LAYER)))  # type: ignore[operator]
    assert found["etc/os-release"] == layers.Entry("file", 0o644, "0:0", 5, 6, "",
                                                   hashlib.sha256(b"debian").hexdigest())
    assert {name: e.kind for name, e in found.items()} == {"etc": "dir", "etc/os-release": "file", "opt/link": "link",
                                                           "opt/hard": "hardlink", "dev/null": "other"}
    assert found["opt/link"].link == "/etc/os-release" and found["etc"].sha256 == ""


@pytest.mark.parametrize("blob", [b"not a tar at all" * 100, gzip.compress(b"x" * 10_000, mtime=0),
                                  b"\x1f\x8b\x08broken"], ids=["text", "gzip-of-text", "broken-gzip"])
def test_what_is_no_tar_is_a_layer_error(blob: bytes) -> None:
    with pytest.raises(layers.LayerError, match="a layer that is not a readable tar archive"):
        layers.entries(io.BytesIO(blob))


def test_a_sparse_member_is_refused() -> None:
    with pytest.raises(layers.LayerError, match="a GNU sparse member"):
        layers.entries(io.BytesIO(tar([member("big", tarfile.GNUTYPE_SPARSE)])))


def test_past_the_byte_cap_or_the_deadline_the_layer_is_not_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layers, "MAX_TAR_BYTES", 1024)
    with pytest.raises(layers.LayerError, match="more than 1024 bytes unpacked"):
        layers.entries(io.BytesIO(LAYER))
    monkeypatch.setattr(layers, "MAX_TAR_BYTES", 1 << 30)
    with pytest.raises(layers.LayerError, match="not read within"):
        layers.entries(io.BytesIO(LAYER), deadline_s=-1)


def test_past_the_entry_cap_the_layer_is_not_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layers, "MAX_ENTRIES", 2)
    with pytest.raises(layers.LayerError, match="more than 2 paths"):
        layers.entries(io.BytesIO(LAYER))
