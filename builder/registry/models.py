"""The shapes of what a registry answers, parsed with limits that fit real images: a wrong shape is one error.

Every JSON document from a registry (a manifest or index, an image config, a referrers answer, a tag list, a
token answer) is parsed here into a typed model before any code looks at it, so a `config` that is a string,
a `manifests` that is a number or a label that is a list ends as a ShapeError (a RegistryError) naming the
document and the key, never as an AttributeError/TypeError deep inside a command.

The limits are far beyond any real image and far below what costs memory or output:
- MAX_LAYERS: Docker runs no image of more than 125 layers (overlayfs stacks at most 128); BuildKit and
  every other builder stay under it. 500 leaves room for OCI images no engine runs yet.
- MAX_HISTORY: a config's history has a step per layer plus the empty ones (ENV, LABEL, ARG...): a few
  hundred at most for a long Dockerfile.
- MAX_CONFIG_BYTES: a real config is kilobytes (ROCm's largest, with its full history and labels, is under
  50 kB); 4 MiB is the size the distribution spec has registries accept for a manifest, and the cap of
  every config read, so a 60 MiB config is refused before one byte of it is parsed.
- Every other document read whole is capped likewise (MAX_SBOM_BYTES, MAX_TAG_LIST_BYTES): JSON of tiny
  objects takes ~30 times its size in memory, so a cap of a few MiB keeps one answer under ~256 MB.
- Strings: a label or a history step of a few kB; MAX_TEXT_CHARS (256 kB) admits a RUN heredoc of a
  whole script. Nesting is cut by the JSON parser's own depth limit.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from builder.core.text import printable
from builder.registry.errors import RegistryError

MAX_LAYERS = 500
MAX_HISTORY = 2000
MAX_LABELS = 1000
MAX_DESCRIPTORS = 1000  # entries of an index or a referrers answer: platforms, or artifacts of one image
MAX_TAGS_LISTED = 100_000  # one tag list answer (the catalog reads the first few thousand)
MAX_CONFIG_BYTES = 4 << 20
MAX_SBOM_BYTES = 8 << 20  # the factory's SBOMs: ~3,000 packages at ~400 bytes, ~1 MB; 8 MiB admits 20,000
MAX_TAG_LIST_BYTES = 8 << 20  # MAX_TAGS_LISTED tags of ~80 characters
MAX_TEXT_CHARS = 256 << 10
MAX_NAME_CHARS = 1024  # media types, digests, label keys, tags, platform fields
MAX_SIZE = 1 << 53  # a blob's size: exact in a float, far beyond any layer

Name = Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)]
Text = Annotated[StrictStr, Field(max_length=MAX_TEXT_CHARS)]
Size = Annotated[StrictInt, Field(ge=0, le=MAX_SIZE)]

M = TypeVar("M", bound=BaseModel)


class ShapeError(RegistryError):
    """A registry's JSON document that is not the shape its kind has (or past a limit): refused, named."""


class Model(BaseModel):
    """Fields a spec adds later are ignored; the ones read must have their type (no coercion: "5" is no 5)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True, populate_by_name=True)


class Platform(Model):
    os: Name | None = None
    architecture: Name | None = None
    variant: Name | None = None


class Descriptor(Model):
    """An OCI content descriptor: what a manifest, an index or a referrers answer points at."""

    media_type: Name | None = Field(None, alias="mediaType")
    digest: Name
    size: Size | None = None
    artifact_type: Name | None = Field(None, alias="artifactType")
    platform: Platform | None = None
    annotations: dict[Name, Text] | None = Field(None, max_length=MAX_LABELS)


class ManifestDoc(Model):
    """An image manifest or an index (the same endpoint answers both; OCI and Docker media types alike)."""

    schema_version: StrictInt | None = Field(None, alias="schemaVersion")
    media_type: Name | None = Field(None, alias="mediaType")
    artifact_type: Name | None = Field(None, alias="artifactType")
    config: Descriptor | None = None
    layers: list[Descriptor] = Field(default_factory=list, max_length=MAX_LAYERS)
    manifests: list[Descriptor] | None = Field(None, max_length=MAX_DESCRIPTORS)
    subject: Descriptor | None = None

    @property
    def is_index(self) -> bool:
        return self.manifests is not None

    def platform(self, os: str, architecture: str) -> Descriptor | None:
        """The index entry for os/architecture, if any."""
        return next((m for m in self.manifests or [] if m.platform is not None and m.platform.os == os
                     and m.platform.architecture == architecture), None)


class Referrers(Model):
    """The referrers API's answer (an OCI image index) or the referrers tag's index."""

    manifests: list[Descriptor] = Field(default_factory=list, max_length=MAX_DESCRIPTORS)


class ContainerConfig(Model):
    labels: dict[Name, Text] | None = Field(None, alias="Labels", max_length=MAX_LABELS)


class HistoryStep(Model):
    created_by: Text | None = None
    comment: Text | None = None
    empty_layer: StrictBool | None = None


class ImageConfig(Model):
    """An image config blob (OCI image-spec config.md): what the catalog, promote and reproduce read of it."""

    architecture: Name | None = None
    os: Name | None = None
    created: Name | None = None
    config: ContainerConfig | None = None
    history: list[HistoryStep] = Field(default_factory=list, max_length=MAX_HISTORY)

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.config.labels or {}) if self.config is not None else {}


class TagList(Model):
    """A tag list: each tag is its own unit (a page), so an entry that is no tag is left out, not the list."""

    tags: list[Any] | None = Field(None, max_length=MAX_TAGS_LISTED)

    @property
    def names(self) -> list[str]:
        return [t for t in self.tags or [] if isinstance(t, str) and len(t) <= MAX_NAME_CHARS]


class TokenAnswer(Model):
    """A token server's answer (distribution's token spec): `token` or OAuth2's `access_token`."""

    token: Text | None = None
    access_token: Text | None = None
    expires_in: Any = None  # a positive int of seconds; anything else means the spec's default


def parse(model: type[M], body: bytes | str, what: str) -> M:
    """body as model, or a ShapeError naming what (the registry and reference, or the file) and the key."""
    try:
        return model.model_validate_json(body)
    except pydantic.ValidationError as exc:
        if not any(e.get("type") == "json_invalid" for e in exc.errors(include_url=False, include_input=False)):
            raise ShapeError(f"{what}: {describe(exc)}") from None
    try:  # JSON the fast parser refuses but Python's reads: a lone surrogate ("\\udcff") in some string
        value = json.loads(body)
    except (ValueError, RecursionError):
        raise ShapeError(f"{what}: not JSON (or nested too deeply)") from None
    return parse_value(model, value, what)


def parse_value(model: type[M], value: object, what: str) -> M:
    """An already parsed JSON value as model (a record row, a document from a fake); errors as parse's."""
    try:
        try:
            return model.model_validate(value)
        except pydantic.ValidationError as exc:
            if not any(e.get("type") == "string_unicode" for e in exc.errors(include_url=False)):
                raise
        return model.model_validate(_scrubbed(value))  # lone surrogates, shown as their escapes
    except pydantic.ValidationError as exc:
        raise ShapeError(f"{what}: {describe(exc)}") from None
    except RecursionError:
        raise ShapeError(f"{what}: nested too deeply") from None


def _scrubbed(value: object) -> object:
    """value with every lone surrogate ("\\udcff", which no UTF-8 encodes) written as its escape: visible text."""
    if isinstance(value, str):
        return value.encode("utf-8", errors="backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    if isinstance(value, dict):
        return {_scrubbed(k): _scrubbed(v) for k, v in value.items()}
    return value


def describe(exc: pydantic.ValidationError) -> str:
    """The first problem of a validation error, one printable line: `config.Labels: Input should be ...`."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "not the expected shape"
    first = errors[0]
    where = ".".join(str(part)[:60] for part in first.get("loc", ()))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = str(first.get("msg", "invalid"))
    if first.get("type") == "json_invalid":
        message = "not JSON (or nested too deeply)"
    return printable(f"{where + ': ' if where else ''}{message}{more}")[:300]
