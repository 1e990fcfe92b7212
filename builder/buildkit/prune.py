"""Local images a newer build has superseded: the engine side of "every byte counts" (a ROCm image is 10-20 GB).

Every build leaves two local names: the readable tag (`rocm-image-factory/pytorch:<tag>`, moved by the next
build) and the content name (`<tag>-<hash12>`, which lets a rerun find its own build). Once the readable tag has
moved to other content, the old content name holds a multi-GB image nobody will use again. `stale` picks those
names, and only those: a name this factory wrote (its namespace, its labels, the hash it states), whose image
is no longer the one its readable tag names. An image a container uses, or whose readable tag is gone, stays.
Removing a name untags it; the engine deletes the image only when no other name (a user's own) holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

import docker
from docker.errors import APIError, ImageNotFound

from builder.core import tags


@dataclass(frozen=True)
class LocalName:
    """One local name of an image: the reference and what the image says about itself."""

    ref: str  # repository:tag
    image_id: str
    labels: dict[str, str]
    size: int = 0


@dataclass
class Pruned:
    removed: list[LocalName]
    deleted_bytes: int  # images the engine deleted (no other name held them); their layers may be shared
    kept: list[tuple[LocalName, str]]  # a stale name the engine refused to remove, and why


def _content_name(name: LocalName) -> tuple[str, str] | None:
    """(repository, readable tag) when the name is a content name this factory wrote, else None."""
    repository, _, tag = name.ref.rpartition(":")
    if not repository.startswith(tags.LOCAL_NAMESPACE + "/"):
        return None
    readable, content_hash = name.labels.get(tags.TAG_LABEL), name.labels.get(tags.HASH_LABEL)
    if not readable or not content_hash or tag != tags.immutable_tag(readable, content_hash):
        return None
    return repository, readable


def stale(names: list[LocalName], in_use: set[str]) -> list[LocalName]:
    """The content names whose readable tag now names another image, and whose image no container uses."""
    current = {tuple(n.ref.rpartition(":")[::2]): n.image_id for n in names}
    out = []
    for name in names:
        found = _content_name(name)
        if found is None or name.image_id in in_use:
            continue
        holder = current.get(found)
        if holder is not None and holder != name.image_id:
            out.append(name)
    return sorted(out, key=lambda n: n.ref)


def local_names(client: docker.DockerClient, image_name: str | None = None) -> list[LocalName]:
    """Every name in the factory's local namespace (of one image repository, if given), one row per tag."""
    prefix = tags.LOCAL_NAMESPACE + "/" + (f"{image_name}:" if image_name else "")
    rows = []
    for image in client.images.list(filters={"label": tags.HASH_LABEL}):
        for ref in image.tags:
            if ref.startswith(prefix):
                rows.append(LocalName(ref, str(image.id), dict(image.labels or {}), int(image.attrs.get("Size") or 0)))
    return rows


def containers_images(client: docker.DockerClient) -> set[str]:
    """Image IDs of every container, running or stopped: an image one of them needs is never touched."""
    return {str(c.attrs.get("Image")) for c in client.containers.list(all=True)}


def prune(client: docker.DockerClient, dry_run: bool = False, image_name: str | None = None) -> Pruned:
    found = stale(local_names(client, image_name), containers_images(client))
    if dry_run:
        return Pruned(found, 0, [])
    result = Pruned([], 0, [])
    deleted: set[str] = set()
    for name in found:
        try:
            answer = client.api.remove_image(name.ref, noprune=False)
        except ImageNotFound:
            continue
        except APIError as exc:  # a container created meanwhile, say: the engine's refusal is the reason
            result.kept.append((name, str(exc.explanation or exc)))
            continue
        result.removed.append(name)
        if any(row.get("Deleted") == name.image_id for row in answer or []) and name.image_id not in deleted:
            deleted.add(name.image_id)
            result.deleted_bytes += name.size
    return result
