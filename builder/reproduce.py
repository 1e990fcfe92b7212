"""`builder reproduce REF`: is a published image exactly what this repository builds? Where not, what differs.

Images are byte-reproducible (an OCI layout with rewritten timestamps, SOURCE_DATE_EPOCH fixed), so a cold
rebuild of the same inputs must give the same manifest digest. When it does not, the first layer that differs
is named and both versions of it are read as tar streams: the files added, removed or changed (content, mode,
owner, time, link target) are listed, so a tampered layer or a build step that is not deterministic shows
where it is.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import zstandard

from builder import ocilayout, tags
from builder.registry import RegistryClient
from builder.scratch import scratch_dir

MAX_FILES_SHOWN = 20


@dataclass(frozen=True)
class Entry:
    """What a layer says of one path: enough to tell two versions apart."""

    kind: str
    mode: int
    owner: str
    mtime: int
    size: int
    link: str
    sha256: str


@dataclass
class Verdict:
    ref: str
    published: str  # manifest digest in the registry
    rebuilt: str  # manifest digest of the cold rebuild
    layer: int | None = None  # index of the first differing layer; None: the layers agree
    what: str = ""  # what differs, in words
    files: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.published == self.rebuilt

    def lines(self) -> list[str]:
        if self.identical:
            return [f"{self.ref}: identical: the cold rebuild's manifest is {self.rebuilt}"]
        out = [f"{self.ref}: differs: published {self.published}, rebuilt {self.rebuilt}", f"  {self.what}"]
        out += [f"    {f}" for f in self.files[:MAX_FILES_SHOWN]]
        if len(self.files) > MAX_FILES_SHOWN:
            out.append(f"    ... and {len(self.files) - MAX_FILES_SHOWN} more")
        return out


def compression_of(manifest: dict[str, Any]) -> str:
    """The layers' compression of a published manifest, which a rebuild must use to give the same bytes."""
    types = {str(layer.get("mediaType", "")) for layer in manifest.get("layers") or []}
    return "zstd" if any(t.endswith("+zstd") for t in types) else "gzip"


Blobs = Callable[[str], IO[bytes]]  # a blob by digest, seekable (a file: a multi-GB layer is never held in memory)


def compare(ref: str, published: tuple[str, bytes], rebuilt: tuple[str, bytes], published_blob: Blobs,
            rebuilt_blob: Blobs) -> Verdict:
    """published/rebuilt: (manifest digest, manifest bytes)."""
    verdict = Verdict(ref, published[0], rebuilt[0])
    if verdict.identical:
        return verdict
    a, b = json.loads(published[1]), json.loads(rebuilt[1])
    a_layers, b_layers = a.get("layers") or [], b.get("layers") or []
    for index, (x, y) in enumerate(zip(a_layers, b_layers, strict=False)):
        if x.get("digest") != y.get("digest"):
            verdict.layer = index
            verdict.files = diff_layers(published_blob(str(x["digest"])), rebuilt_blob(str(y["digest"])))
            verdict.what = (f"layer {index} of {len(a_layers)} differs (published {x['digest']}, rebuilt "
                            f"{y['digest']}): {len(verdict.files)} path(s) differ" +
                            (":" if verdict.files else " (same files: the archive's order or compression differs)"))
            return verdict
    if len(a_layers) != len(b_layers):
        verdict.layer = min(len(a_layers), len(b_layers))
        verdict.what = f"the published image has {len(a_layers)} layers, the rebuild {len(b_layers)}"
    elif (a.get("config") or {}).get("digest") != (b.get("config") or {}).get("digest"):
        verdict.what = "every layer is the same; the image config differs:"
        verdict.files = diff_configs(published_blob(str(a["config"]["digest"])).read(),
                                     rebuilt_blob(str(b["config"]["digest"])).read())
    else:
        verdict.what = "the same config and layers; the manifests differ (annotations or media types)"
    return verdict


def diff_layers(a: IO[bytes], b: IO[bytes]) -> list[str]:
    """Paths whose entries differ between two layer blobs, each with the way it differs."""
    x, y = entries(a), entries(b)
    out = []
    for path in sorted(x.keys() | y.keys()):
        if path not in y:
            out.append(f"- {path} (only in the published layer)")
        elif path not in x:
            out.append(f"+ {path} (only in the rebuild)")
        elif x[path] != y[path]:
            fields = [f for f in Entry.__dataclass_fields__ if getattr(x[path], f) != getattr(y[path], f)]
            out.append(f"~ {path} ({', '.join(fields)})")
    return out


def diff_configs(a: bytes, b: bytes) -> list[str]:
    x, y = json.loads(a), json.loads(b)
    return [f"~ {key}" for key in sorted(x.keys() | y.keys()) if x.get(key) != y.get(key)]


def entries(blob: IO[bytes]) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    with tarfile.open(fileobj=_decompressed(blob), mode="r|") as tar:
        for member in tar:
            digest = ""
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                sha = hashlib.sha256()
                while chunk := handle.read(1 << 20):
                    sha.update(chunk)
                digest = sha.hexdigest()
            kind = "file" if member.isfile() else "dir" if member.isdir() else "link" if member.issym() else \
                "hardlink" if member.islnk() else "other"
            out[member.name.removeprefix("./")] = Entry(kind, member.mode, f"{member.uid}:{member.gid}",
                                                         int(member.mtime), member.size, member.linkname, digest)
    return out


def _decompressed(blob: IO[bytes]) -> IO[bytes]:
    """The layer's tar stream, gzip or zstd by its magic bytes (blob: seekable, a file or a buffer)."""
    magic = blob.read(4)
    blob.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=blob)  # type: ignore[return-value]
    if magic == b"\x28\xb5\x2f\xfd":
        return zstandard.ZstdDecompressor().stream_reader(blob)
    return blob


class ReproduceError(RuntimeError):
    """The image cannot be rebuilt from here: not found, not the factory's, other inputs, or the build failed."""


Rebuild = Callable[[str, str, Path, str], str]  # (cell tag, content hash, layout, compression) -> manifest digest


def check(ref: str, repository: str, reference: str, api: RegistryClient, rebuild: Rebuild) -> Verdict:
    """Rebuild the published image ref cold (rebuild) and compare it with what the registry holds."""
    manifest = api.manifest(repository, reference)
    if manifest is None:
        raise ReproduceError(f"{ref}: no such image in the registry")
    labels = api.config(repository, manifest).get("config", {}).get("Labels") or {}
    tag, content_hash = labels.get(tags.TAG_LABEL), labels.get(tags.HASH_LABEL)
    if not tag or not content_hash:
        raise ReproduceError(f"{ref} was not built by rocm-image-factory (no {tags.TAG_LABEL} label)")
    with scratch_dir("rif-reproduce-") as tmp:
        layout = tmp / "layout"
        digest = rebuild(str(tag), str(content_hash), layout, compression_of(json.loads(manifest.body)))
        image = ocilayout.by_digest(layout, digest)

        def published_blob(blob: str) -> IO[bytes]:
            path = tmp / blob.replace(":", "-")
            if not path.exists():
                api.blob_to(repository, blob, path)
            return path.open("rb")

        return compare(ref, (manifest.digest, manifest.body), (image.digest, image.manifest), published_blob,
                       lambda blob: image.blob_path(blob).open("rb"))
