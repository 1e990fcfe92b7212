"""`builder reproduce REF`: is a published image exactly what this repository builds? Where not, what differs.

Images are byte-reproducible (an OCI layout with rewritten timestamps, SOURCE_DATE_EPOCH fixed), so a cold
rebuild of the same inputs must give the same manifest digest. When it does not, the first layer that differs
is named and both versions of it are read as tar streams: the files added, removed or changed (content, mode,
owner, time, link target) are listed, so a tampered layer or a build step that is not deterministic shows
where it is.

The published side is a registry's data, read as hostile: its manifest must name its blobs by sha256 digests
(never a path), its layer is read as a stream with its extended headers capped (tarfile reads a pax or GNU
long-name header whole into memory, and follows a GNU sparse map block after block), at most MAX_ENTRIES paths,
MAX_TAR_BYTES and LAYER_DEADLINE_S, and every line printed from it is made printable first (a file name is any
bytes: an escape sequence, a newline that forges a line).

A locked image was published with the lock it was built from (an artifact referring to its manifest,
builder.render.lockrecord): the rebuild uses that lock, not the checkout's, so an image published from an older
lock still reproduces. The artifact must refer to this very manifest, hold one blob of the lock's media type
within its size, and pass lockrecord's checks (digest, names, every file's grammar), or nothing is rebuilt.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from builder.audit.layers import Entry, entries
from builder.buildkit import ocilayout
from builder.core import tags
from builder.core.scratch import scratch_dir
from builder.core.text import printable
from builder.registry import models
from builder.registry.client import RegistryClient
from builder.registry.errors import RegistryError
from builder.registry.transport import MAX_BLOB_BYTES, is_digest
from builder.render import lockrecord

MAX_FILES_SHOWN = 20


class ReproduceError(RuntimeError):
    """The image cannot be rebuilt from here: not found, not the factory's, other inputs, or the build failed."""


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
        """What is printed: names from a layer or config are anyone's bytes, shown printable, one per line."""
        if self.identical:
            return [f"{self.ref}: identical: the cold rebuild's manifest is {self.rebuilt}"]
        out = [f"{self.ref}: differs: published {self.published}, rebuilt {self.rebuilt}", f"  {self.what}"]
        out += [f"    {f}" for f in self.files[:MAX_FILES_SHOWN]]
        if len(self.files) > MAX_FILES_SHOWN:
            out.append(f"    ... and {len(self.files) - MAX_FILES_SHOWN} more")
        return [printable(line) for line in out]


def compression_of(manifest: bytes) -> str:
    """The layers' compression of a published manifest, which a rebuild must use to give the same bytes."""
    layers = _manifest(manifest, "published").layers
    return "zstd" if any((layer.media_type or "").endswith("+zstd") for layer in layers) else "gzip"


Blobs = Callable[[str], IO[bytes]]  # a blob by digest, seekable (a file: a multi-GB layer is never held in memory)


def compare(ref: str, published: tuple[str, bytes], rebuilt: tuple[str, bytes], published_blob: Blobs,
            rebuilt_blob: Blobs) -> Verdict:
    """published/rebuilt: (manifest digest, manifest bytes)."""
    verdict = Verdict(ref, published[0], rebuilt[0])
    if verdict.identical:
        return verdict
    a_layers, a_config = _blobs_of(published[1], "published")
    b_layers, b_config = _blobs_of(rebuilt[1], "rebuilt")
    for index, (x, y) in enumerate(zip(a_layers, b_layers, strict=False)):
        if x != y:
            verdict.layer = index
            verdict.files = diff_layers(published_blob(x), rebuilt_blob(y))
            verdict.what = (f"layer {index} of {len(a_layers)} differs (published {x}, rebuilt {y}): "
                            f"{len(verdict.files)} path(s) differ" +
                            (":" if verdict.files else " (same files: the archive's order or compression differs)"))
            return verdict
    if len(a_layers) != len(b_layers):
        verdict.layer = min(len(a_layers), len(b_layers))
        verdict.what = f"the published image has {len(a_layers)} layers, the rebuild {len(b_layers)}"
    elif a_config != b_config:
        verdict.what = "every layer is the same; the image config differs:"
        verdict.files = diff_configs(published_blob(a_config).read(MAX_BLOB_BYTES),
                                     rebuilt_blob(b_config).read(MAX_BLOB_BYTES))
    else:
        verdict.what = "the same config and layers; the manifests differ (annotations or media types)"
    return verdict


def _blobs_of(manifest: bytes, which: str) -> tuple[list[str], str]:
    """A manifest's layer digests and config digest: sha256 digests only (one is a file name under a scratch
    folder: `/etc/shadow` or `../x` named as a layer would be read as one)."""
    data = _manifest(manifest, which)
    layers, config = [layer.digest for layer in data.layers], data.config.digest if data.config else ""
    if not all(is_digest(d) for d in [*layers, config]):
        raise ReproduceError(f"the {which} manifest names no config, or a layer or config by no sha256 digest: refused")
    return layers, config


def _manifest(body: bytes, which: str) -> models.ManifestDoc:
    try:
        return models.parse(models.ManifestDoc, body, f"the {which} manifest")
    except models.ShapeError as exc:
        raise ReproduceError(f"{exc} (not an image manifest)") from None


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
    try:
        x, y = json.loads(a), json.loads(b)
        return [f"~ {key}" for key in sorted(x.keys() | y.keys()) if x.get(key) != y.get(key)]
    except (ValueError, AttributeError, RecursionError):
        raise ReproduceError("an image config is not a JSON object") from None


@dataclass(frozen=True)
class Published:
    """What a rebuild needs to know of the published image."""

    tag: str  # its cell's tag (label)
    content_hash: str  # its content hash (label)
    compression: str  # its layers' compression
    lock: lockrecord.Recorded | None = None  # the lock it was built from, as recorded with it; None: none recorded
    lock_artifact: str = ""  # the digest of the artifact that records it


Rebuild = Callable[[Published, Path], str]  # (the published image, layout) -> the rebuild's manifest digest


def recorded_lock(ref: str, repository: str, digest: str,
                  api: RegistryClient) -> tuple[str, lockrecord.Recorded] | None:
    """The lock recorded with the image of manifest digest (its artifact's digest and the lock); None when none is."""
    try:
        listed = api.referrers(repository, digest, lockrecord.MEDIA_TYPE)
        if not listed:
            return None
        artifact = listed[-1].digest
        if not is_digest(artifact):
            raise ReproduceError(f"{ref}: its lock record is listed under no sha256 digest: refused")
        found = api.manifest(repository, artifact)  # checked against that digest by the client
        if found is None:
            raise ReproduceError(f"{ref}: its lock record {artifact} is listed but missing")
        doc = models.parse(models.ManifestDoc, found.body, f"{ref}: its lock record {artifact}")
        blobs = [layer for layer in doc.layers if layer.media_type == lockrecord.MEDIA_TYPE]
        if doc.subject is None or doc.subject.digest != digest or len(blobs) != 1 or not is_digest(blobs[0].digest):
            raise ReproduceError(f"{ref}: its lock record {artifact} is not one lock blob referring to {digest}: "
                                 "refused")
        if (blobs[0].size or 0) > lockrecord.MAX_BYTES:
            raise ReproduceError(f"{ref}: its lock record {artifact} says {blobs[0].size} bytes, over the "
                                 f"{lockrecord.MAX_BYTES} a lock record may have: refused")
        body = api.blob(repository, blobs[0].digest, lockrecord.MAX_BYTES)
        return artifact, lockrecord.parse(body, blobs[0].digest, f"{ref}: its lock record {artifact}")
    except lockrecord.RecordError as exc:
        raise ReproduceError(f"{exc}: refused") from None
    except RegistryError as exc:  # a shape error, a blob over the cap, a digest that does not match
        raise ReproduceError(f"{ref}: its lock record cannot be read: {exc}") from None


def check(ref: str, repository: str, reference: str, api: RegistryClient, rebuild: Rebuild) -> Verdict:
    """Rebuild the published image ref cold (rebuild) and compare it with what the registry holds."""
    manifest = api.manifest(repository, reference)
    if manifest is None:
        raise ReproduceError(f"{ref}: no such image in the registry")
    try:
        labels = api.config(repository, manifest).labels
    except models.ShapeError as exc:
        raise ReproduceError(f"{ref}: {exc}") from None
    tag, content_hash = labels.get(tags.TAG_LABEL), labels.get(tags.HASH_LABEL)
    if not tag or not content_hash:
        raise ReproduceError(f"{ref} was not built by rocm-image-factory (no {tags.TAG_LABEL} label)")
    lock = recorded_lock(ref, repository, manifest.digest, api)
    published = Published(str(tag), str(content_hash), compression_of(manifest.body), lock[1] if lock else None,
                          lock[0] if lock else "")
    with scratch_dir("rif-reproduce-") as tmp:
        layout = tmp / "layout"
        digest = rebuild(published, layout)
        image = ocilayout.by_digest(layout, digest)

        def published_blob(blob: str) -> IO[bytes]:  # blob: a sha256 digest (compare's _blobs_of checked it)
            path = tmp / blob.replace(":", "-")
            if not path.exists():
                api.blob_to(repository, blob, path)
            return path.open("rb")

        return compare(ref, (manifest.digest, manifest.body), (image.digest, image.manifest), published_blob,
                       lambda blob: image.blob_path(blob).open("rb"))
