"""The catalog of published images: a static site, one page per image with a Markdown twin, and an index.

What users of AMD's images ask (where is the Dockerfile, why is the image 54 GB, what is in it, does it run on
my GPU) is answered per image from two sources: the registry (its tags, each tag's manifest and config:
labels, layer sizes, build history) and the run records every command writes (builder/record.py: installed
size, the smoke-test report). The site is plain files: no external resource, the index filters with a little
inline script, so it works offline, from file:// and on GitHub Pages.

Everything that comes from a registry or a record is data: HTML pages are rendered with Jinja2 autoescaping on,
Markdown pages escape every value (code blocks are fenced longer than any backtick run inside), tags that are
not valid tags get no page, and a Content-Security-Policy allows only the site's own inline script and style.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jinja2
from markupsafe import Markup, escape

from builder import tags
from builder.catalog import gfx_families
from builder.errors import InputError, Problem
from builder.plan import COMMAND_LINE, check_registry, usage_error
from builder.publish import Target, compressed_size
from builder.registry import Manifest
from builder.render import template_dir
from builder.retry import AuthError, RegistryError
from builder.validate import Check

DEFAULT_REPOSITORY = "pytorch"
MARKER = ".rif-catalog.json"  # names the files a previous catalog wrote into --out, so a rerun replaces them
MAX_DOCKERFILE_BYTES = 1 << 20
MAX_STEP_CHARS = 400  # a build step's command, as the image's history records it, is cut here
CHECK_STATUSES = frozenset({"pass", "fail", "skip", "warn", "info"})
REPOSITORY_RE = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")
CHART_WIDTH = 520  # px of the longest bar
HASH_IN_DOCKERFILE = re.compile(re.escape(tags.HASH_LABEL) + r'="?(sha256:[0-9a-f]{64})')


@dataclass(frozen=True)
class Reference:
    """A published size of one of AMD's rocm/pytorch images, for comparison, with where it was reported."""

    label: str
    size_bytes: int
    kind: str  # compressed | installed
    source: str
    url: str


# AMD's rocm/pytorch images as their users measured them (decimal GB).
REFERENCES = (
    Reference("rocm/pytorch ROCm 7.2.4, PyTorch 2.10", 10_390_000_000, "compressed", "ROCm/ROCm-docker#166",
              "https://github.com/ROCm/ROCm-docker/issues/166"),
    Reference("rocm/pytorch ROCm 7.14, PyTorch 2.10", 19_140_000_000, "compressed", "ROCm/ROCm-docker#166",
              "https://github.com/ROCm/ROCm-docker/issues/166"),
    Reference("rocm/pytorch ROCm 10.0, PyTorch 2.12", 20_190_000_000, "compressed", "ROCm/ROCm-docker#166",
              "https://github.com/ROCm/ROCm-docker/issues/166"),
    Reference("rocm/pytorch (2023 tags, smallest)", 29_200_000_000, "installed", "ROCm/ROCm-docker#104",
              "https://github.com/ROCm/ROCm-docker/issues/104"),
    Reference("rocm/pytorch rocm5.4.2 pytorch 2.0.0 preview", 37_500_000_000, "installed", "ROCm/ROCm-docker#104",
              "https://github.com/ROCm/ROCm-docker/issues/104"),
    Reference("rocm/pytorch:latest (Dec 2023)", 54_000_000_000, "installed", "ROCm/ROCm-docker#120",
              "https://github.com/ROCm/ROCm-docker/issues/120"),
)


class RegistryReader(Protocol):
    """What the catalog reads from a registry (builder.registry.RegistryClient; a fake in tests)."""

    def tags(self, repository: str) -> list[str]: ...

    def manifest(self, repository: str, reference: str) -> Manifest | None: ...

    def config(self, repository: str, manifest: Manifest) -> dict[str, Any]: ...


# -- run records ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RecordRow:
    """One image of one run record, every field checked for its type (a record is data from outside)."""

    tag: str
    repository: str
    tags: tuple[str, ...]
    state: str
    finished: str  # when its record was written: the newest row wins
    registry: str | None = None
    immutable_tag: str | None = None
    content_hash: str | None = None
    digest: str | None = None
    failed_stage: str | None = None
    failure: str | None = None
    image_bytes: int | None = None
    compressed_bytes: int | None = None
    build_seconds: float | None = None
    validation: tuple[Check, ...] = ()
    packages: tuple[str, ...] = ()  # `name==version` lines, where a record carries them
    source: str = ""  # the record file

    def as_json(self) -> dict[str, Any]:
        """Back into the record's own row format, so a catalog's records.json can be read as a record."""
        return {"tag": self.tag, "repository": self.repository, "tags": list(self.tags), "state": self.state,
                "immutable_tag": self.immutable_tag, "content_hash": self.content_hash, "digest": self.digest,
                "failed_stage": self.failed_stage, "failure": self.failure, "image_bytes": self.image_bytes,
                "compressed_bytes": self.compressed_bytes, "build_seconds": self.build_seconds,
                "validation": [c.__dict__ for c in self.validation], "packages": list(self.packages),
                "finished": self.finished}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _strs(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _checks(value: object) -> tuple[Check, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(Check(str(c.get("suite", "")), str(c.get("name", "")), str(c.get("status", "")),
                       str(c.get("detail", "") or ""), str(c.get("fix", "") or ""))
                 for c in value if isinstance(c, dict))


def _packages(value: object) -> tuple[str, ...]:
    """`["torch==2.13.0", ...]` or `[{"name": ..., "version": ...}, ...]`."""
    if not isinstance(value, list):
        return ()
    found = []
    for p in value:
        if isinstance(p, str):
            found.append(p)
        elif isinstance(p, dict) and isinstance(p.get("name"), str):
            found.append(f"{p['name']}=={p.get('version', '?')}")
    return tuple(found)


def parse_record(data: object, source: str) -> list[RecordRow]:
    """The rows of one record (builder/record.py's format); rows without a tag are dropped."""
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise ValueError("not a run record (no `images` list)")
    finished, registry = _str(data.get("finished")) or "", _str(data.get("registry"))
    rows = []
    for row in data["images"]:
        if not isinstance(row, dict) or not isinstance(row.get("tag"), str):
            continue
        rows.append(RecordRow(
            tag=row["tag"], repository=_str(row.get("repository")) or DEFAULT_REPOSITORY,
            tags=_strs(row.get("tags")), state=_str(row.get("state")) or "unknown",
            finished=_str(row.get("finished")) or finished, registry=registry,
            immutable_tag=_str(row.get("immutable_tag")), content_hash=_str(row.get("content_hash")),
            digest=_str(row.get("digest")), failed_stage=_str(row.get("failed_stage")),
            failure=_str(row.get("failure")), image_bytes=_int(row.get("image_bytes")),
            compressed_bytes=_int(row.get("compressed_bytes")), build_seconds=_float(row.get("build_seconds")),
            validation=_checks(row.get("validation")), packages=_packages(row.get("packages")), source=source))
    return rows


def record_files(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a directory stands for every *.json under it."""
    found: list[Path] = []
    for path in paths:
        found += sorted(p for p in path.rglob("*.json") if p.is_file()) if path.is_dir() else [path]
    return found


def load_records(paths: Iterable[Path]) -> tuple[list[RecordRow], list[str]]:
    """Every row of every record, and a warning per file that is not one (a catalog is still worth making)."""
    rows: list[RecordRow] = []
    warnings = []
    for path in record_files(paths):
        try:
            rows += parse_record(json.loads(path.read_text(encoding="utf-8")), str(path))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            warnings.append(f"{path}: skipped: {exc}")
    return rows, warnings


# -- what the registry holds ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Layer:
    step: str  # the build step that made it, as the image's history has it
    size: int | None  # compressed, from the manifest


@dataclass(frozen=True)
class GpuFamily:
    name: str
    targets: tuple[str, ...]
    gpus: tuple[str, ...]
    complete: bool  # the image carries every target of the family
    present: tuple[str, ...]  # the family's targets the image carries


@dataclass
class Published:
    """One manifest in the registry, as the tags that point at it share it."""

    digest: str
    labels: dict[str, str]
    compressed_bytes: int | None
    created: str | None
    platform: str
    layers: list[Layer]


@dataclass
class ImageEntry:
    """One readable tag of the registry: one page of the catalog."""

    tag: str
    repository: str
    reference: str  # HOST/NS/REPO
    published: Published
    immutable_tag: str | None = None
    also_tagged: list[str] = field(default_factory=list)  # other tags on the same digest (latest, aliases)
    earlier: list[str] = field(default_factory=list)  # immutable tags of older builds of this tag
    record: RecordRow | None = None
    dockerfile: str | None = None
    dockerfile_source: str | None = None

    @property
    def dockerfile_matches(self) -> bool | None:
        """Whether the committed Dockerfile rendered exactly this image (its content hash); None: cannot tell."""
        if self.dockerfile is None:
            return None
        theirs, ours = dockerfile_hash(self.dockerfile), self.published.labels.get(tags.HASH_LABEL)
        return None if theirs is None or ours is None else theirs == ours

    @property
    def digest(self) -> str:
        return self.published.digest

    def label(self, name: str) -> str | None:
        value = self.published.labels.get(tags.LABEL_PREFIX + name)
        return None if value in (None, "", "none") else value

    @property
    def page(self) -> str:
        """The page's path under the site, without its extension."""
        return f"images/{self.repository}/{self.tag}"

    @property
    def rocm(self) -> str:
        return self.label("rocm") or ("CPU" if self.label("platform") == "cpu" else "unknown")

    @property
    def os(self) -> str:
        return self.label("os") or "unknown"

    @property
    def gfx_targets(self) -> tuple[str, ...]:
        value = self.label("gfx-targets")
        return tuple(t for t in value.split(",") if t) if value else ()

    @property
    def gpu_families(self) -> list[GpuFamily]:
        """Known families the image's targets belong to: complete ones run on its GPUs, partial ones are noted."""
        own, targets, found = self.label("gfx-family"), set(self.gfx_targets), []
        for name, family in gfx_families().items():
            present = tuple(t for t in family.targets if t in targets)
            if present or name == own:
                found.append(GpuFamily(name, family.targets, family.gpus, set(family.targets) <= targets, present))
        return found

    @property
    def gpus(self) -> list[str]:
        """GPUs this image has kernels for (families it carries completely)."""
        return [g for f in self.gpu_families if f.complete for g in f.gpus]

    @property
    def installed_bytes(self) -> int | None:
        return self.record.image_bytes if self.record else None

    @property
    def checks(self) -> tuple[Check, ...]:
        return self.record.validation if self.record else ()

    @property
    def pull(self) -> str:
        return f"docker pull {self.reference}:{self.tag}"

    @property
    def pull_by_digest(self) -> str:
        return f"docker pull {self.reference}@{self.digest}"

    @property
    def run(self) -> str:
        ref = f"{self.reference}:{self.tag}"
        if self.label("platform") == "cpu":
            return f"docker run -it --rm {ref}"
        return ("docker run -it --rm --device=/dev/kfd --device=/dev/dri --group-add video \\\n"
                f'  --group-add "$(getent group render | cut -d: -f3)" {ref}')

    @property
    def smoke(self) -> str:
        return self.run.replace(f"{self.reference}:{self.tag}", f"{self.reference}:{self.tag} torch-smoke")

    @property
    def smoke_line(self) -> str:
        return self.smoke.replace("\\\n  ", "")

    @property
    def facts(self) -> list[tuple[str, str]]:
        """The page's summary table, in one place for the HTML and the Markdown page."""
        record = self.record
        rows = [
            ("Image", f"{self.reference}:{self.tag}"),
            ("Digest", self.digest),
            ("Immutable tag", self.immutable_tag or "not found in the registry"),
            ("Also tagged", ", ".join(self.also_tagged) or "-"),
            ("Compressed size (pull)", human_size(self.published.compressed_bytes)),
            ("Installed size (on disk)", human_size(self.installed_bytes) if self.installed_bytes
             else "not recorded (no run record of this build)"),
            ("Built", self.published.created or "unknown"),
            ("Platform", self.published.platform),
            ("OS", self.os),
            ("Python", self.label("python") or "unknown"),
            ("PyTorch", self.label("torch") or "unknown"),
            ("torchvision", self.label("torchvision") or "not installed"),
            ("torchaudio", self.label("torchaudio") or "not installed"),
            ("ROCm", self.rocm),
            ("GPU family", self.label("gfx-family") or "-"),
            ("gfx targets", ", ".join(self.gfx_targets) or "none (CPU only)"),
            ("Wheel channel", self.label("channel") or "unknown"),
            ("Flavor", self.label("flavor") or "unknown"),
            ("Default user", self.label("user") or "unknown"),
            ("Content hash", self.published.labels.get(tags.HASH_LABEL) or "unknown"),
        ]
        if record is not None:
            rows.append(("Run record", f"{record.state}, {record.finished or 'unknown time'}"))
        return rows

    @property
    def search_text(self) -> str:
        words = [self.tag, *self.also_tagged, self.os, self.rocm, *self.gpus, *self.gfx_targets,
                 self.label("torch") or "", self.label("flavor") or "", self.label("gfx-family") or ""]
        return " ".join(words).lower()


@dataclass
class Catalog:
    registry: str  # HOST/NAMESPACE
    images: list[ImageEntry]
    failed: list[RecordRow]  # images whose newest record says they failed and that the registry lacks
    generated: str
    warnings: list[str] = field(default_factory=list)

    @property
    def oses(self) -> list[str]:
        return sorted({i.os for i in self.images})

    @property
    def rocms(self) -> list[str]:
        return sorted({i.rocm for i in self.images}, key=_version_key, reverse=True)

    @property
    def gpu_options(self) -> list[tuple[str, str]]:
        """(GPU, its family's targets) for the GPU filter."""
        seen: dict[str, str] = {}
        for image in self.images:
            for family in image.gpu_families:
                if family.complete:
                    for gpu in family.gpus:
                        seen.setdefault(gpu, ", ".join(family.targets))
        return sorted(seen.items(), key=lambda kv: kv[0].lower())


def _version_key(value: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", value)) or (-1,)


def human_size(n: int | None) -> str:
    """Decimal units, as registries and `docker images` report them."""
    if n is None:
        return "unknown"
    for unit, scale, digits in (("GB", 1e9, 2), ("MB", 1e6, 0), ("kB", 1e3, 0)):
        if n >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{n} B"


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise RegistryError("the registry's manifest is not JSON") from None
    if not isinstance(data, dict):
        raise RegistryError("the registry's manifest is not a JSON object")
    return data


def _step(created_by: str) -> str:
    """A history line as the Dockerfile said it: `RUN apt-get ...`, not `|1 ARG=v /bin/sh -c apt-get ...`."""
    nop = re.match(r"^/bin/sh -c #\(nop\)\s*(.*)$", created_by, re.S)
    if nop:
        return nop.group(1).strip()
    run = re.match(r"^(?:\|\d+ (?:\S+=\S* )*)?/bin/sh -c (.*)$", created_by, re.S)
    if run:
        return "RUN " + run.group(1).strip()
    return created_by.strip()


def _image_manifest(reader: RegistryReader, repository: str, tag: str) -> tuple[Manifest, Manifest] | None:
    """(what the tag points at, the linux/amd64 image manifest): the same unless the tag names an index."""
    found = reader.manifest(repository, tag)
    if found is None:
        return None
    entries = _json(found.body).get("manifests")
    if not isinstance(entries, list):
        return found, found
    for entry in entries:
        platform = (entry.get("platform") or {}) if isinstance(entry, dict) else {}
        if platform.get("os") == "linux" and platform.get("architecture") == "amd64":
            inner = reader.manifest(repository, str(entry.get("digest")))
            return (found, inner) if inner is not None else None
    return None


def _published(reader: RegistryReader, repository: str, top: Manifest, image: Manifest) -> Published:
    config = reader.config(repository, image)
    manifest = _json(image.body)
    container = config.get("config")
    raw_labels = container.get("Labels") if isinstance(container, dict) else None
    labels = {str(k): str(v) for k, v in raw_labels.items()} if isinstance(raw_labels, dict) else {}
    sizes = [_int(layer.get("size")) for layer in manifest.get("layers") or [] if isinstance(layer, dict)]
    history = [h for h in config.get("history") or [] if isinstance(h, dict) and not h.get("empty_layer")]
    layers = []
    for index, size in enumerate(sizes):
        entry = history[index] if index < len(history) else {}
        step = _step(str(entry.get("created_by") or "")) or str(entry.get("comment") or "")
        layers.append(Layer(step[:MAX_STEP_CHARS] + ("…" if len(step) > MAX_STEP_CHARS else ""), size))
    platform = "/".join(str(config.get(k)) for k in ("os", "architecture") if config.get(k))
    return Published(top.digest, labels, compressed_size(image.body), _str(config.get("created")),
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
    for older in same[1:]:
        updates: dict[str, Any] = {}
        if best.image_bytes is None and older.image_bytes is not None:
            updates["image_bytes"] = older.image_bytes
        if not best.validation and older.validation:
            updates["validation"] = older.validation
        if not best.packages and older.packages:
            updates["packages"] = older.packages
        if updates:
            best = RecordRow(**{**best.__dict__, **updates})
    return best


def dockerfile_hash(text: str) -> str | None:
    """The content hash a rendered Dockerfile labels its image with."""
    found = HASH_IN_DOCKERFILE.search(text)
    return found.group(1) if found else None


def _dockerfile(dirs: list[Path], names: list[str], content_hash: str | None) -> tuple[str, str] | None:
    """The committed Dockerfile: the one that rendered exactly this image's content if there is one."""
    found = []
    for directory in dirs:
        for name in names:
            path = directory / name / "Dockerfile"
            if tags.TAG_RE.fullmatch(name) and path.is_file() and path.stat().st_size <= MAX_DOCKERFILE_BYTES:
                found.append((path.read_text(encoding="utf-8", errors="replace"), str(path)))
    exact = [f for f in found if content_hash and dockerfile_hash(f[0]) == content_hash]
    chosen = exact or found
    return chosen[0] if chosen else None


def collect(reader: RegistryReader, registry: str, repositories: list[str], rows: list[RecordRow],
            dockerfile_dirs: list[Path], now: str | None = None) -> Catalog:
    """Read every readable tag of each repository under registry's namespace, joined with the records."""
    host, _, namespace = registry.partition("/")
    warnings: list[str] = []
    images: list[ImageEntry] = []
    for repository in repositories:
        path = f"{namespace}/{repository}" if namespace else repository
        all_tags = sorted(set(reader.tags(path)))
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
            except AuthError:
                raise
            except RegistryError as exc:  # one unreadable tag costs its page, not the catalog
                warnings.append(f"{registry}/{repository}:{tag}: {exc}: no page")
                continue
            by_digest.setdefault(top.digest, []).append(tag)
            if tag != tags.LATEST:
                entries.append(ImageEntry(tag, repository, f"{host}/{path}", published))
        for entry in entries:
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
                entry.dockerfile, entry.dockerfile_source = found_file
        images += entries
    on_site = {(i.repository, t) for i in images for t in (i.tag, *i.also_tagged)}
    newest: dict[tuple[str, str], RecordRow] = {}
    for row in sorted(rows, key=lambda r: r.finished):
        if row.repository in repositories:
            newest[(row.repository, row.tag)] = row
    failed = [r for key, r in sorted(newest.items()) if r.state == "failed" and key not in on_site]
    return Catalog(registry, sorted(images, key=lambda i: (i.repository, i.tag)), failed,
                   now or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), warnings)


# -- rendering ------------------------------------------------------------------------------------------------

class Verbatim(str):
    """Text a Markdown template prints as it is (it built it safely itself: a fenced block, a URL)."""


MD_SPECIAL = re.compile(r"[\\`*\[\]<>|~]|&(?=#?\w+;)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_escape(value: object) -> str:
    """Plain text in Markdown: no markup, no HTML, no line break that would end a table row or heading."""
    if isinstance(value, Verbatim):
        return str(value)
    text = "" if value is None else str(value)
    text = re.sub(r"[\r\n\t]+", " ", text)
    return MD_SPECIAL.sub(lambda m: "\\" + m.group(), text)


def md_fence(text: str, lang: str = "") -> Verbatim:
    """A fenced code block longer than any backtick run inside it: its content can never close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return Verbatim(f"{fence}{lang}\n{text.rstrip()}\n{fence}")


def md_url(path: str) -> Verbatim:
    return Verbatim(urllib.parse.quote(path, safe="/:#?&=%~+@"))


@dataclass(frozen=True)
class Bar:
    label: str
    size: int
    width: int  # px
    kind: str  # ours | amd
    href: str = ""
    note: str = ""
    image: ImageEntry | None = None


def chart(catalog: Catalog, kind: str) -> list[Bar]:
    """Bars of one size (compressed or installed): AMD's published sizes first, then each image's."""
    refs = [r for r in REFERENCES if r.kind == kind]
    ours = [(i, i.published.compressed_bytes if kind == "compressed" else i.installed_bytes) for i in catalog.images]
    scale = max([r.size_bytes for r in REFERENCES] + [size or 0 for _, size in ours])

    def width(size: int) -> int:
        return max(1, round(CHART_WIDTH * size / scale))

    bars = [Bar(r.label, r.size_bytes, width(r.size_bytes), "amd", r.url, r.source) for r in refs]
    bars += [Bar(i.tag, size, width(size), "ours", image=i) for i, size in ours if size]
    return bars


def wrap_tag(tag: object) -> Markup:
    """A long tag that may break after its underscores (each part escaped)."""
    return Markup("_<wbr>").join(escape(part) for part in str(tag).split("_"))


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _environments() -> tuple[jinja2.Environment, jinja2.Environment]:
    loader = jinja2.FileSystemLoader(template_dir() / "site")
    html = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)
    md = jinja2.Environment(loader=loader, autoescape=False, undefined=jinja2.StrictUndefined,
                            trim_blocks=True, lstrip_blocks=True, finalize=md_escape)
    for env in (html, md):
        env.globals.update(human_size=human_size, references=REFERENCES, CHECK_STATUSES=CHECK_STATUSES,
                           content_hash_label=tags.HASH_LABEL)
        env.filters["dockerfile_hash"] = dockerfile_hash
    html.filters["wbr"] = wrap_tag
    html.filters["basename"] = lambda path: Path(str(path)).name
    md.filters.update(fence=md_fence, url=md_url)
    return html, md


def _assets() -> tuple[str, str]:
    folder = template_dir() / "site"
    return (folder / "site.css").read_text(encoding="utf-8"), (folder / "filter.js").read_text(encoding="utf-8")


def _csp(style: str, script: str | None) -> str:
    scripts = _csp_hash(script) if script is not None else "'none'"
    return (f"default-src 'none'; style-src {_csp_hash(style)}; script-src {scripts}; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def _counts(checks: Iterable[Check]) -> str:
    names = {"pass": "passed", "fail": "failed", "warn": "warnings", "skip": "skipped", "info": "info"}
    checks = list(checks)
    if not checks:
        return "not recorded"
    counts = {s: sum(c.status == s for c in checks) for s in names}
    return ", ".join(f"{n} {names[s]}" for s, n in counts.items() if n) or f"{len(checks)} checks"


def render_pages(catalog: Catalog) -> dict[str, str]:
    """Every file of the site, by its path under the site (pure: no I/O but reading the templates)."""
    html, md = _environments()
    style, script = _assets()
    common = {"catalog": catalog, "style": Markup(style), "counts": _counts}
    files = {
        "index.html": html.get_template("index.html").render(
            **common, script=Markup(script), csp=_csp(style, script), root="",
            compressed=chart(catalog, "compressed"), installed=chart(catalog, "installed")),
        "index.md": md.get_template("index.md").render(**common),
    }
    for image in catalog.images:
        root = "../" * image.page.count("/")
        files[image.page + ".html"] = html.get_template("image.html").render(
            **common, image=image, csp=_csp(style, None), root=root)
        files[image.page + ".md"] = md.get_template("image.md").render(**common, image=image, root=root)
    merged = [i.record.as_json() for i in catalog.images if i.record] + [r.as_json() for r in catalog.failed]
    files["records.json"] = json.dumps({"registry": catalog.registry, "complete": True, "finished": catalog.generated,
                                        "images": merged}, indent=1) + "\n"
    return files


def write_site(out: Path, files: dict[str, str]) -> list[Path]:
    """Write the files; a catalog written there before is replaced, nothing else in out is ever touched."""
    marker = out / MARKER
    if out.exists() and not out.is_dir():
        raise usage_error("--out", f"{out} is not a directory")
    if out.is_dir() and any(out.iterdir()) and not marker.is_file():
        raise usage_error("--out", f"{out} is not empty and holds no catalog written by builder: give an empty "
                                   "or new directory")
    try:
        previous = json.loads(marker.read_text(encoding="utf-8")).get("files", []) if marker.is_file() else []
    except (OSError, ValueError, AttributeError):
        previous = []
    for name in previous:
        old = out / str(name)
        if isinstance(name, str) and ".." not in Path(name).parts and old.is_file() and name not in files:
            old.unlink()
    written = []
    for name, text in sorted(files.items()):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    marker.write_text(json.dumps({"files": sorted(files)}, indent=1) + "\n", encoding="utf-8")
    return written


def repositories_of(rows: list[RecordRow], given: list[str] | None) -> list[str]:
    """--repository names, else those the records name, else the factory's default image name."""
    names = list(given or []) or sorted({r.repository for r in rows}) or [DEFAULT_REPOSITORY]
    bad = [n for n in names if not REPOSITORY_RE.fullmatch(n)]
    if bad:
        raise InputError([Problem(COMMAND_LINE, None, "--repository", f"{n!r} is not a repository name")
                          for n in bad])
    return names


def build_catalog(registry: str, out: Path, records: list[Path] | None = None,
                  repositories: list[str] | None = None, images_dirs: list[Path] | None = None,
                  reader: RegistryReader | None = None) -> tuple[Catalog, list[Path]]:
    """`builder catalog`: read the registry and the records, write the site into out."""
    registry = check_registry(registry)
    if reader is None:
        reader = Target.of(registry).api
    rows, warnings = load_records(records or [])
    names = repositories_of(rows, repositories)
    dirs = [*(images_dirs or []), Path("images")]
    catalog = collect(reader, registry, names, rows, dirs)
    catalog.warnings[:0] = warnings
    return catalog, write_site(out, render_pages(catalog))
