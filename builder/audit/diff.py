"""`builder diff A B`: which OS and Python packages changed between two published images, from their SBOMs.

Each image is named `REGISTRY/NAMESPACE/REPO:TAG` or `...@sha256:<hex>`; its SBOM is the CycloneDX artifact
attached to its manifest digest (builder.publish.promote.Target.attach_sbom), found through the referrers API or the
referrers tag schema's fallback tag. Nothing is pulled: a few manifest and blob reads per image.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from builder.core.errors import usage_error
from builder.registry import credentials, models
from builder.registry.client import RegistryClient
from builder.registry.transport import is_digest
from builder.validate import sbom

REF_RE = re.compile(r"^(?P<registry>[A-Za-z0-9.-]+(?::[0-9]{1,5})?|\[[0-9A-Fa-f:]+\](?::[0-9]{1,5})?)/"
                    r"(?P<repo>[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*)"
                    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})|@(?P<digest>sha256:[0-9a-f]{64}))$")


DEADLINE_S = 600.0  # every registry read for one image (a few manifests and blobs), together


class NoSbom(Exception):
    """The image is there, with no SBOM attached."""


@dataclass(frozen=True)
class ImageRef:
    registry: str  # HOST[:PORT]
    repository: str  # NAMESPACE/REPO
    reference: str  # a tag or a digest

    def __str__(self) -> str:
        sep = "@" if self.reference.startswith("sha256:") else ":"
        return f"{self.registry}/{self.repository}{sep}{self.reference}"


def parse_ref(text: str, what: str) -> ImageRef:
    """REGISTRY/NS/REPO:TAG or REGISTRY/NS/REPO@sha256:HEX; an InputError (exit 2) otherwise."""
    if len(text) > 600:
        raise usage_error(what, "an image reference of more than 600 characters")
    found = REF_RE.match(text)
    if found is None:
        raise usage_error(what, f"{text!r} is no image reference: REGISTRY/NAMESPACE/REPO:TAG or "
                                "REGISTRY/NAMESPACE/REPO@sha256:<64 hex>")
    return ImageRef(found["registry"], found["repo"], found["tag"] or found["digest"])


@dataclass
class Inventory:
    ref: ImageRef
    digest: str  # the image's manifest digest
    sbom_artifact: str  # the SBOM artifact's manifest digest
    packages: list[sbom.Package]
    skipped: int = 0  # components of its SBOM that are not a package this diff can read: left out, warned

    @property
    def warnings(self) -> list[str]:
        return [f"{self.ref}: {self.skipped} SBOM component(s) of no readable shape left out of the diff"] \
            if self.skipped else []


def fetch(ref: ImageRef, insecure: frozenset[str] = frozenset()) -> Inventory:
    """The image's digest and the packages its attached SBOM lists. RegistryError, or NoSbom."""
    api = RegistryClient(ref.registry, credentials.lookup(ref.registry), insecure=insecure).until(DEADLINE_S)
    manifest = api.manifest(ref.repository, ref.reference)
    if manifest is None:
        raise NoSbom(f"{ref}: no such image in the registry")
    found = api.referrers(ref.repository, manifest.digest, sbom.MEDIA_TYPE)
    if not found:
        raise NoSbom(f"{ref} ({manifest.digest}) has no SBOM attached (no {sbom.MEDIA_TYPE} referrer, and no "
                     "referrers tag listing one): was it published before SBOMs were attached?")
    listed = found[-1].digest
    if not is_digest(listed):
        raise NoSbom(f"{ref}: its SBOM artifact is listed under no sha256 digest")
    artifact = api.manifest(ref.repository, listed)  # checked against that digest by the client
    if artifact is None:
        raise NoSbom(f"{ref}: its SBOM artifact {listed} is listed but missing")
    try:
        body = models.parse(models.ManifestDoc, artifact.body, f"{ref}: its SBOM artifact {artifact.digest}")
    except models.ShapeError as exc:
        raise NoSbom(f"{exc} (not a manifest)") from None
    layers = [layer.digest for layer in body.layers if layer.media_type == sbom.MEDIA_TYPE and is_digest(layer.digest)]
    if not layers:
        raise NoSbom(f"{ref}: its SBOM artifact {artifact.digest} holds no {sbom.MEDIA_TYPE} layer")
    try:
        found_sbom = sbom.read(api.blob(ref.repository, layers[0], models.MAX_SBOM_BYTES))
    except sbom.SbomError as exc:
        raise NoSbom(f"{ref}: its SBOM cannot be read: {exc}") from None
    return Inventory(ref, manifest.digest, artifact.digest, found_sbom.packages, found_sbom.skipped)


@dataclass
class Change:
    ecosystem: str
    name: str
    before: str | None  # None: added
    after: str | None  # None: removed

    @property
    def kind(self) -> str:
        return "added" if self.before is None else "removed" if self.after is None else "changed"


@dataclass
class Diff:
    changes: list[Change] = field(default_factory=list)

    def of(self, kind: str) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]


def diff(a: list[sbom.Package], b: list[sbom.Package]) -> Diff:
    """Packages added, removed or at another version from a to b, keyed by ecosystem and (normalised) name.

    A package installed at several versions (rare: dpkg multiarch) compares as its sorted set of versions.
    """
    def index(packages: list[sbom.Package]) -> dict[tuple[str, str], str]:
        found: dict[tuple[str, str], set[str]] = {}
        for p in packages:
            name = p.name.lower().replace("_", "-").replace(".", "-") if p.ecosystem == "pypi" else p.name
            arch = f":{p.arch}" if p.ecosystem == "deb" and p.arch not in (None, "all", "amd64", "arm64") else ""
            found.setdefault((p.ecosystem, name + arch), set()).add(p.version)
        return {k: ", ".join(sorted(v)) for k, v in found.items()}

    before, after = index(a), index(b)
    changes = [Change(eco, name, before.get((eco, name)), after.get((eco, name)))
               for eco, name in sorted(before.keys() | after.keys())
               if before.get((eco, name)) != after.get((eco, name))]
    return Diff(changes)


def as_json(a: Inventory, b: Inventory, found: Diff) -> dict[str, Any]:
    def side(inv: Inventory) -> dict[str, Any]:
        return {"ref": str(inv.ref), "digest": inv.digest, "sbom": inv.sbom_artifact, "packages": len(inv.packages)}

    rows = [{"ecosystem": c.ecosystem, "name": c.name, "before": c.before, "after": c.after}
            for c in found.changes]
    return {"a": side(a), "b": side(b), **{kind: [r for r, c in zip(rows, found.changes, strict=True)
                                                  if c.kind == kind] for kind in ("added", "removed", "changed")}}
