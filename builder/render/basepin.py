"""A lock's base image: its digest in a registry, its compressed size, and the snapshot `builder base --snapshot` made
it from (read from its label), for base.txt to record.

Registry answers are read through the registry client's typed models; a label that is not a UTC timestamp is
refused, so the lock never records what it cannot read back.
"""

from __future__ import annotations

from builder.core import ospins, tags
from builder.registry import credentials, models
from builder.registry.client import RegistryClient
from builder.render import wheelsizes

SIZES: dict[str, int] = {}  # pinned base reference -> its compressed bytes, as resolve.pin_base found them


class BaseError(RuntimeError):
    """The base cannot be pinned: no such tag, or a snapshot label that is not a timestamp."""


def pin_sized(ref: str, base_registry: str | None, insecure: frozenset[str]) -> tuple[str, int | None]:
    """The pinned reference (resolve.pin_base), with the base's compressed size (its linux/amd64 manifest's config
    and layers; None where the registry's answer does not say)."""
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    full = f"{base_registry.rstrip('/')}/{name}" if base_registry else name
    first = full.split("/", 1)[0]
    if "/" in full and ("." in first or ":" in first or first == "localhost"):
        host, repository = first, full.split("/", 1)[1]
    else:  # Docker Hub: official images live under library/
        host, repository = "registry-1.docker.io", full if "/" in full else f"library/{full}"
    api = RegistryClient(host, credentials.lookup(host) if base_registry else None, insecure=insecure)
    found = api.manifest(repository, tag)
    if found is None:
        raise BaseError(f"base image {full}:{tag}: no such tag in {host}")
    return f"{full}:{tag}@{found.digest}", wheelsizes.image_size(api, repository, found.body)


def snapshot(pinned: str, insecure: frozenset[str]) -> str | None:
    """The snapshot a digest-pinned base on a mirror was made from (its SNAPSHOT_LABEL, which `builder base
    --snapshot` sets); None for an image without it or an index (no config of its own). A label that is not a UTC
    timestamp is a LockError: the lock never records what it cannot read back."""
    name, _, digest = pinned.partition("@")
    host, _, rest = name.partition("/")
    repository = rest.rpartition(":")[0] if ":" in rest.rsplit("/", 1)[-1] else rest
    api = RegistryClient(host, credentials.lookup(host), insecure=insecure)
    manifest = api.manifest(repository, digest)
    if manifest is None or models.parse(models.ManifestDoc, manifest.body, f"base image {pinned}").is_index:
        return None
    found = api.config(repository, manifest).labels.get(tags.SNAPSHOT_LABEL)
    if found is not None and not ospins.TIMESTAMP.fullmatch(found):
        raise BaseError(f"base image {pinned}: its {tags.SNAPSHOT_LABEL} label {found[:40]!r} is not a UTC "
                        "timestamp like 20261101T000000Z")
    return found
