"""The sizes `builder lock` records beside its pins: each wheel's bytes and the base image's compressed bytes.

A wheel's size is what its index says: a file of a wheelhouse by its length, a wheel on an index by the
Content-Length of a HEAD request (the number a PEP 700 index serves as `size` too). A base image's size is its
linux/amd64 manifest's config and layers. A size nobody gives is None: the lock then records none, and the plan
takes the cited figures of builder/data/sizes.yaml for that part.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlsplit

from builder.registry.client import RegistryClient
from builder.registry.errors import RegistryError

WORKERS = 8
TIMEOUT_S = 30.0
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")


def sizes(urls: list[str]) -> list[int | None]:
    """Each URL's size in bytes (None where it cannot be learnt), looked up side by side."""
    if not urls:
        return []
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(urls))) as pool:
        return list(pool.map(size_of, urls))


def size_of(url: str) -> int | None:
    parts = urlsplit(url)
    if parts.scheme == "file":
        try:
            return Path(unquote(parts.path)).stat().st_size
        except OSError:
            return None
    if parts.scheme not in ("http", "https"):
        return None
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:  # http(s) only, above
            length = answer.headers.get("Content-Length", "")
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return int(length) if length.isdigit() and int(length) > 0 else None


def image_size(api: RegistryClient, repository: str, body: bytes) -> int | None:
    """An image's compressed bytes from its manifest (an index: its linux/amd64 manifest's); None if unsaid."""
    try:
        data = json.loads(body)
        if data.get("mediaType") in _INDEX_TYPES or "manifests" in data:
            chosen = [m for m in data["manifests"] if (m.get("platform") or {}).get("os") == "linux"
                      and (m.get("platform") or {}).get("architecture") == "amd64"]
            if not chosen:
                return None
            found = api.manifest(repository, str(chosen[0]["digest"]))
            if found is None:
                return None
            data = json.loads(found.body)
        total = int(data["config"]["size"]) + sum(int(layer["size"]) for layer in data["layers"])
    except (ValueError, KeyError, TypeError, OverflowError, AttributeError, RegistryError):
        return None
    return total if total > 0 else None
