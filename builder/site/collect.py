"""Read the registry (tags, manifests, configs) and join it with the run records into a Catalog."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from builder.core import safefs, tags
from builder.registry import models
from builder.registry.client import Manifest
from builder.registry.errors import AuthError, DeadlineError, RegistryError
from builder.registry.transport import is_digest
from builder.render.dockerfile import bake_target
from builder.render.imagetree import BAKE_FILE
from builder.site.model import Catalog, ImageEntry, Layer, Published
from builder.site.records import (
    MAX_BAKE_BYTES,
    MAX_DOCKERFILE_BYTES,
    MAX_STEP_CHARS,
    RecordRow,
    RegistryReader,
    _int,
)

MAX_HISTORY_CHARS = 16 << 10
MAX_TAGS = 5000  # per repository: each is a few requests; the factory's matrix publishes about 200
# what hostile registry data can raise while one tag is read: it costs that tag's page, with a warning
TAG_FAULTS = (RegistryError, ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError,
              MemoryError)


def _fault(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "too big to read in memory"
    return str(exc) if isinstance(exc, RegistryError) else f"unreadable data ({type(exc).__name__})"


def _step(created_by: str) -> str:
    """A history line as the Dockerfile said it: `RUN apt-get ...`, not `|1 ARG=v /bin/sh -c apt-get ...`."""
    created_by = created_by[:MAX_HISTORY_CHARS]  # the step is cut to MAX_STEP_CHARS anyway
    nop = re.match(r"^/bin/sh -c #\(nop\)\s*(.*)$", created_by, re.S)
    if nop:
        return nop.group(1).strip()
    # an ARG's name holds no `=`, so each `NAME=value ` splits one way only: no backtracking (ReDoS)
    run = re.match(r"^(?:\|\d{1,4} (?:[^\s=]+=\S* )*)?/bin/sh -c (.*)$", created_by, re.S)
    if run:
        return "RUN " + run.group(1).strip()
    return created_by.strip()


def _image_manifest(reader: RegistryReader, repository: str, tag: str) -> tuple[Manifest, Manifest] | None:
    """(what the tag points at, the linux/amd64 image manifest): the same unless the tag names an index."""
    found = reader.manifest(repository, tag)
    if found is None:
        return None
    top = models.parse(models.ManifestDoc, found.body, f"manifest of {tag}")
    if not top.is_index:
        return found, found
    entry = top.platform("linux", "amd64")
    if entry is None:
        return None
    if not is_digest(entry.digest):
        raise RegistryError(f"the index of {tag} names its linux/amd64 image by no sha256 digest")
    inner = reader.manifest(repository, entry.digest)
    return (found, inner) if inner is not None else None


def _published(reader: RegistryReader, repository: str, top: Manifest, image: Manifest) -> Published:
    for digest in (top.digest, image.digest):
        if not is_digest(digest):  # the registry client computes it from the bytes; a reader must too
            raise RegistryError(f"manifest digest {digest[:80]!r} is not a sha256 digest")
    config = reader.config(repository, image)
    manifest = models.parse(models.ManifestDoc, image.body, f"manifest {image.digest}")
    history = [h for h in config.history if not h.empty_layer]
    layers = []
    for index, layer in enumerate(manifest.layers):
        entry = history[index] if index < len(history) else models.HistoryStep()
        step = _step(entry.created_by or "") or entry.comment or ""
        layers.append(Layer(step[:MAX_STEP_CHARS] + ("…" if len(step) > MAX_STEP_CHARS else ""), layer.size))
    platform = "/".join(v for v in (config.os, config.architecture) if v)
    sizes = [manifest.config.size if manifest.config else None, *(layer.size for layer in manifest.layers)]
    compressed = None if None in sizes else sum(s or 0 for s in sizes)
    return Published(top.digest, config.labels, _int(compressed), config.created,
                     platform or "unknown", layers)


def _best_row(rows: list[RecordRow], tag: str, digest: str, content_hash: str | None) -> RecordRow | None:
    """The newest row for this build: same digest, or (a row from a run that did not push) same content hash.

    Fields a newer row lacks (a `skipped` image was not built again, so it has no size or smoke report)
    are taken from the newest older row of the same build."""
    same = [r for r in rows if r.digest == digest or (r.digest is None and content_hash and
                                                        r.content_hash == content_hash)]
    same = [r for r in same if tag in r.tags or r.tag == tag] or same
    if not same:
        return None
    same.sort(key=lambda r: (r.digest == digest, r.finished), reverse=True)
    best = same[0]
    if best.digest != digest:
        best = RecordRow(**{**best.__dict__, "published_at": None})  # another build's push is not this one's
    for older in same[1:]:
        updates: dict[str, Any] = {}
        if best.image_bytes is None and older.image_bytes is not None:
            updates["image_bytes"] = older.image_bytes
        if not best.validation and older.validation:
            updates["validation"] = older.validation
        if not best.packages and older.packages:
            updates["packages"] = older.packages
        if older.digest == digest and older.published_time and (
                not best.published_time or older.published_time < best.published_time):
            updates["published_at"] = older.published_time  # the first push of this manifest
        if updates:
            best = RecordRow(**{**best.__dict__, **updates})
    return best


def _dockerfile(dirs: list[Path], names: list[str], content_hash: str | None) -> tuple[str, str, str | None] | None:
    """The committed Dockerfile that builds a tag (its bake target's), with the content hash the bake file
    gives that target: the one that rendered exactly this image's content if there is one."""
    found = [f for directory in dirs for name in names if tags.TAG_RE.fullmatch(name)
             for f in [_bake_target_file(directory, name)] if f]
    exact = [f for f in found if content_hash and f[2] == content_hash]
    chosen = exact or found
    return chosen[0] if chosen else None


def _bake_target_file(directory: Path, tag: str) -> tuple[str, str, str | None] | None:
    """Files are read as builder.core.safefs reads a tree: regular files inside it, never through a link."""
    bake_file = directory / BAKE_FILE
    try:
        target = json.loads(safefs.read_regular(bake_file, MAX_BAKE_BYTES))["target"][bake_target(tag)]
        dockerfile, stage = str(target["dockerfile"]), str(target["target"])
        content_hash = target.get("labels", {}).get(tags.HASH_LABEL)
        path = directory / dockerfile
        if not all(tags.TAG_RE.fullmatch(part) for part in Path(dockerfile).parts) \
                or not safefs.inside(directory, path):
            return None
        text = safefs.read_regular(path, MAX_DOCKERFILE_BYTES).decode("utf-8", errors="replace")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return text, f"{path} (target {stage})", content_hash if isinstance(content_hash, str) else None


def _join(entry: ImageEntry, rows: list[RecordRow], repository: str, immutable: set[str],
          by_digest: dict[str, list[str]], dockerfile_dirs: list[Path]) -> None:
    """An entry's record, immutable tags, aliases and Dockerfile."""
    labels = entry.published.labels
    own, content_hash = labels.get(tags.TAG_LABEL), labels.get(tags.HASH_LABEL)
    entry.record = _best_row([r for r in rows if r.repository == repository], entry.tag, entry.digest,
                             content_hash)
    candidates = [tags.immutable_tag(own, content_hash)] if own and content_hash else []
    if entry.record and entry.record.immutable_tag:
        candidates.append(entry.record.immutable_tag)
    entry.immutable_tag = next((c for c in candidates if c in immutable), None)
    entry.also_tagged = [t for t in by_digest.get(entry.digest, []) if t != entry.tag]
    entry.earlier = sorted(t for t in immutable if t != entry.immutable_tag
                           and tags.IMMUTABLE_SUFFIX_RE.sub("", t) == entry.tag)
    found_file = _dockerfile(dockerfile_dirs, [entry.tag, *([own] if own else [])], content_hash)
    if found_file:
        entry.dockerfile, entry.dockerfile_source, entry.dockerfile_hash = found_file


def collect(reader: RegistryReader, registry: str, repositories: list[str], rows: list[RecordRow],
            dockerfile_dirs: list[Path], now: str | None = None) -> Catalog:
    """Read every readable tag of each repository under registry's namespace, joined with the records."""
    host, _, namespace = registry.partition("/")
    warnings: list[str] = []
    images: list[ImageEntry] = []
    for repository in repositories:
        path = f"{namespace}/{repository}" if namespace else repository
        try:
            listed = [t for t in reader.tags(path) if isinstance(t, str)]
        except (AuthError, DeadlineError):  # the whole catalog stops: no tag can be read
            raise
        except TAG_FAULTS as exc:  # a repository whose tag list cannot be read costs its pages only
            warnings.append(f"{registry}/{repository}: tags unreadable: {_fault(exc)}: no pages")
            continue
        if len(listed) > MAX_TAGS:
            warnings.append(f"{registry}/{repository}: {len(listed)} tags: only the first {MAX_TAGS} are read")
        all_tags = sorted(t for t in set(listed[:MAX_TAGS]) if not tags.REFERRERS_TAG_RE.fullmatch(t))
        valid = [t for t in all_tags if tags.TAG_RE.fullmatch(t) and len(t) <= tags.MAX_TAG_CHARS]
        warnings += [f"{registry}/{repository}: tag {t!r} is not a valid tag: no page" for t in all_tags
                     if t not in valid]
        immutable = {t for t in valid if tags.IMMUTABLE_SUFFIX_RE.search(t)}
        by_digest: dict[str, list[str]] = {}
        entries = []
        configs: dict[str, Published] = {}
        for tag in valid:
            if tag in immutable:
                continue
            try:
                found = _image_manifest(reader, path, tag)
                if found is None:
                    warnings.append(f"{registry}/{repository}:{tag}: no linux/amd64 image: no page")
                    continue
                top, image = found
                published = configs.get(top.digest)
                if published is None:
                    published = configs[top.digest] = _published(reader, path, top, image)
            except (AuthError, DeadlineError):
                raise
            except TAG_FAULTS as exc:  # one unreadable or hostile tag costs its page, not the catalog
                warnings.append(f"{registry}/{repository}:{tag}: {_fault(exc)}: no page")
                continue
            by_digest.setdefault(top.digest, []).append(tag)
            if tag != tags.LATEST:
                entries.append(ImageEntry(tag, repository, f"{host}/{path}", published))
        for entry in list(entries):
            try:
                _join(entry, rows, repository, immutable, by_digest, dockerfile_dirs)
            except TAG_FAULTS as exc:
                warnings.append(f"{registry}/{repository}:{entry.tag}: {_fault(exc)}: no page")
                entries.remove(entry)
        images += entries
    on_site = {(i.repository, t) for i in images for t in (i.tag, *i.also_tagged)}
    newest: dict[tuple[str, str], RecordRow] = {}
    for row in sorted(rows, key=lambda r: r.finished):
        if row.repository in repositories:
            newest[(row.repository, row.tag)] = row
    failed = [r for key, r in sorted(newest.items()) if r.state == "failed" and key not in on_site]
    return Catalog(registry, sorted(images, key=lambda i: (i.repository, i.tag)), failed,
                   now or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), warnings)
