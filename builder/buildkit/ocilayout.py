"""An OCI image layout (what BuildKit's `type=oci,tar=false` exporter writes): find an image, load it, list it.

Images are baked into one layout folder per run, their timestamps rewritten to SOURCE_DATE_EPOCH, so the same
inputs give the same manifest digest on any engine. The engine's containerd image store keeps a loaded
manifest as it is: the image validated is the manifest digest that is pushed, byte for byte. Several targets of
one bake share the folder, so a layer common to them (torch) is written once, and is streamed into the engine
once: an image's archive leaves out the blobs of the layout's images the engine already holds (dockerd's
containerd store takes such an archive and finds them in its content store).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException
from docker.utils import parse_repository_tag

from builder.buildkit.engine import EngineUnavailable

INDEX = "index.json"
LAYOUT_FILE = "oci-layout"
NAME_ANNOTATION = "io.containerd.image.name"  # containerd's name for an index entry; docker load tags it
REF_ANNOTATION = "org.opencontainers.image.ref.name"
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
_CHUNK = 1 << 20
# manifest digest -> its config and layers, for every image this process loaded: a later bake's layout (publish
# --by-family bakes one GPU family at a time) lacks the manifests of the earlier ones the engine still holds
LOADED: dict[str, frozenset[str]] = {}


class LayoutError(RuntimeError):
    """The layout lacks the image asked for, or holds something unreadable."""


@dataclass(frozen=True)
class Blob:
    digest: str
    size: int
    media_type: str


@dataclass(frozen=True)
class Image:
    """One image of a layout: its manifest (as bytes: the digest is of these bytes), config and layers."""

    layout: Path
    digest: str
    manifest: bytes
    media_type: str

    @property
    def parsed(self) -> dict[str, Any]:
        data = json.loads(self.manifest)
        return data if isinstance(data, dict) else {}

    @property
    def config(self) -> Blob:
        c = self.parsed.get("config") or {}
        return Blob(str(c.get("digest")), int(c.get("size") or 0), str(c.get("mediaType")))

    @property
    def layers(self) -> list[Blob]:
        return [Blob(str(x.get("digest")), int(x.get("size") or 0), str(x.get("mediaType")))
                for x in self.parsed.get("layers") or []]

    def blob_path(self, digest: str) -> Path:
        algorithm, _, hexdigest = digest.partition(":")
        return self.layout / "blobs" / algorithm / hexdigest


def full_name(ref: str) -> str:
    """containerd's normalised name of a local ref (`rif/x:1` -> `docker.io/rif/x:1`), as the engine tags it."""
    first = ref.split("/", 1)[0]
    if "/" not in ref:
        return f"docker.io/library/{ref}"
    return ref if "." in first or ":" in first or first == "localhost" else f"docker.io/{ref}"


def find(layout: Path, name: str) -> Image:
    """The image that bake exported under name (its output's `name=`) into layout."""
    try:
        index = json.loads((layout / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LayoutError(f"no OCI layout at {layout}: {exc}") from exc
    wanted = {name, full_name(name)}
    found = [m for m in index.get("manifests") or [] if isinstance(m, dict)
             and (m.get("annotations") or {}).get(NAME_ANNOTATION) in wanted]
    if not found:
        raise LayoutError(f"{layout} holds no image named {name}")
    entry = found[-1]  # a later export of the same name comes last
    digest = str(entry.get("digest"))
    body = (layout / "blobs" / digest.replace(":", "/", 1)).read_bytes()
    media_type = str(entry.get("mediaType"))
    if media_type not in MANIFEST_TYPES:
        raise LayoutError(f"{name} in {layout} is a {media_type}, not one image manifest")
    return Image(layout, digest, body, media_type)


def by_digest(layout: Path, digest: str) -> Image:
    """The image whose manifest has digest, from layout's blobs."""
    try:
        body = (layout / "blobs" / digest.replace(":", "/", 1)).read_bytes()
        media_type = str(json.loads(body).get("mediaType") or MANIFEST_TYPES[0])
    except (OSError, ValueError, AttributeError) as exc:
        raise LayoutError(f"{layout} holds no manifest {digest}: {exc}") from exc
    return Image(layout, digest, body, media_type)


@dataclass(frozen=True)
class Loaded:
    """An image in the engine: its ID there, and the bytes of the archive streamed into the engine for it."""

    image_id: str
    streamed: int


def load_tar(image: Image, refs: list[str], held: frozenset[str] = frozenset()) -> Iterator[bytes]:
    """A `docker load` archive of image alone (an OCI layout of its blobs but those in held, which the engine
    has), named refs, streamed in chunks: a multi-GB layer is read from the layout as it is sent, never copied
    into a second archive on disk."""
    reader, writer = os.pipe()
    failed: list[BaseException] = []

    def write() -> None:
        try:
            with os.fdopen(writer, "wb") as out, tarfile.open(fileobj=out, mode="w|") as tar:
                _add_bytes(tar, LAYOUT_FILE, json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
                entries = [{"mediaType": image.media_type, "digest": image.digest, "size": len(image.manifest),
                            "annotations": {NAME_ANNOTATION: full_name(ref), REF_ANNOTATION: ref.rsplit(":", 1)[-1]}}
                           for ref in refs]
                _add_bytes(tar, INDEX, json.dumps({"schemaVersion": 2, "mediaType":
                                                   "application/vnd.oci.image.index.v1+json",
                                                   "manifests": entries}).encode())
                for digest in dict.fromkeys([image.digest, image.config.digest, *(b.digest for b in image.layers)]):
                    if digest in held and digest != image.digest:
                        continue
                    tar.add(image.blob_path(digest), arcname=f"blobs/{digest.replace(':', '/', 1)}")
        except (OSError, tarfile.TarError) as exc:  # the reader sees the archive end early; the caller sees why
            failed.append(exc)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    with os.fdopen(reader, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            yield chunk
    thread.join()
    if failed:
        raise LayoutError(f"cannot read {image.digest} from {image.layout}: {failed[0]}")


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def load(client: docker.DockerClient, image: Image, refs: list[str]) -> Loaded:
    """Load image into the engine under refs; its ID there, which is its manifest digest (containerd store).

    An engine that already holds that very manifest (a rerun, a warm rebuild) only gets the names: the ID is
    the digest of the bytes, so nothing is sent again (a ROCm image is GBs to stream and unpack). Otherwise the
    archive leaves out the blobs the engine holds (held_blobs: a row's torch and base layers go in once); an
    image the engine then cannot read whole (a blob gone meanwhile) is loaded again with every blob."""
    try:
        if _holds(client, image.digest):
            for ref in refs:
                repository, tag = parse_repository_tag(ref)
                client.api.tag(image.digest, repository, tag or "latest")
            return Loaded(image.digest, 0)
        held = held_blobs(client, image.layout)
        streamed = _send(client, image, refs, held)
        if held and not _whole(client, refs[0], image):
            streamed += _send(client, image, refs, frozenset())
        loaded = client.images.get(refs[0]).id
    except DockerException as exc:
        raise EngineUnavailable(f"cannot load {refs[0]} into the engine: {exc}") from exc
    if loaded != image.digest:
        raise LayoutError(f"the engine holds {refs[0]} as {loaded}, not the built manifest {image.digest}: its image "
                          "store is not containerd's (features.containerd-snapshotter), run scripts/setup.sh")
    LOADED[image.digest] = frozenset([image.config.digest, *(b.digest for b in image.layers)])
    return Loaded(loaded, streamed)


def held_blobs(client: docker.DockerClient, layout: Path) -> frozenset[str]:
    """The blobs (configs, layers) of the layout's images, and of the images this process loaded, that the
    engine holds whole: their manifests are the IDs of its images, so their content is in its store."""
    held: set[str] = set()
    for row in client.api.images(all=True):
        if str(row.get("Id")) in LOADED:
            held.update(LOADED[str(row.get("Id"))])
            continue
        try:
            found = by_digest(layout, str(row.get("Id")))
        except LayoutError:
            continue  # not one of this layout's images (a base pulled before, another run's image)
        held.update([found.config.digest, *(b.digest for b in found.layers)])
    return frozenset(held)


def _send(client: docker.DockerClient, image: Image, refs: list[str], held: frozenset[str]) -> int:
    streamed = 0

    def counted() -> Iterator[bytes]:
        nonlocal streamed
        for chunk in load_tar(image, refs, held):
            streamed += len(chunk)
            yield chunk

    for answer in client.api.load_image(counted()):  # type: ignore[no-untyped-call]
        if isinstance(answer, dict) and answer.get("error"):
            raise LayoutError(f"the engine refused {refs[0]}: {answer['error']}")
    return streamed


def _whole(client: docker.DockerClient, ref: str, image: Image) -> bool:
    """Whether the engine reads ref's config and every layer (an archive short of a blob the engine lacks loads
    without an error, as a broken image)."""
    try:
        layers = (client.api.inspect_image(ref).get("RootFS") or {}).get("Layers") or []  # type: ignore[no-untyped-call]
    except DockerException:
        return False
    return len(layers) == len(image.layers)


def _holds(client: docker.DockerClient, digest: str) -> bool:
    try:
        return str(client.images.get(digest).id) == digest
    except docker.errors.ImageNotFound:
        return False
