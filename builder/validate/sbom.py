"""What is inside an image, from the image itself: a CycloneDX 1.5 SBOM of its OS and Python packages.

One container of the image (entrypoint cleared) runs a small script with the image's own venv Python: the OS
packages come from `dpkg-query -W`, the Python packages from `python -m pip inspect` over /opt/venv. Hashes:
what an installed environment knows is not a wheel's hash (the wheel is gone); each Python component carries,
as the property `rif:dist-info-record-sha256`, the SHA-256 of its installed `*.dist-info/RECORD`, the file
that lists the SHA-256 of every file the wheel installed. So two images whose property agrees for a package
have the same installed files; it is not comparable with the wheel's own hash on an index.

The document is deterministic (no timestamp; the serial number derives from the image ID and the packages),
so the same image always yields the same bytes, and the same blob digest in the registry.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
import uuid
from dataclasses import dataclass
from importlib.metadata import version as dist_version
from typing import Any, Literal, cast

import docker
from docker.errors import DockerException

from builder.buildkit.engine import run_captured
from builder.core import osfamilies, tags
from builder.registry import models
from builder.validate import cyclonedx

MEDIA_TYPE = "application/vnd.cyclonedx+json"
SPEC_VERSION = "1.5"
RECORD_PROPERTY = "rif:dist-info-record-sha256"
TIMEOUT_S = 300

Ecosystem = Literal["deb", "rpm", "pypi"]  # the OS families' PURL_TYPEs, and pypi
OS_TYPES: tuple[str, ...] = tuple(variant.PURL_TYPE for variant in osfamilies.FAMILIES.values())

# Run with the image's venv Python: one JSON object on stdout, or an exit status and a message on stderr.
_SCRIPT = r"""
import hashlib, json, os, subprocess, sys
pip = subprocess.run([sys.executable, "-m", "pip", "inspect", "--disable-pip-version-check"],
                     capture_output=True, text=True)
if pip.returncode:
    sys.exit("pip inspect failed (%d): %s" % (pip.returncode, pip.stderr[-500:]))
installed = []
for dist in json.loads(pip.stdout).get("installed", []):
    meta = dist.get("metadata") or {}
    record = os.path.join(dist.get("metadata_location") or "", "RECORD")
    digest = None
    if os.path.isfile(record):
        with open(record, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
    installed.append({"name": meta.get("name"), "version": meta.get("version"), "record_sha256": digest})
import shutil
kind, argv = next(((k, a) for k, a in json.loads(sys.argv[1]) if shutil.which(a[0])), (None, None))
if argv is None:
    sys.exit("no package manager's inventory command in the image")
deb = subprocess.run(argv, capture_output=True, text=True)
if deb.returncode:
    sys.exit("%s failed (%d): %s" % (argv[0], deb.returncode, deb.stderr[-500:]))
release = {}
if os.path.isfile("/etc/os-release"):
    for line in open("/etc/os-release"):
        key, _, value = line.strip().partition("=")
        release[key] = value.strip('"')
print(json.dumps({"python": installed, "os_packages": {"type": kind, "lines": deb.stdout}, "os": release}))
"""


class SbomError(RuntimeError):
    """The image could not say what is inside it."""


@dataclass(frozen=True, order=True)
class Package:
    ecosystem: Ecosystem
    name: str
    version: str
    arch: str | None = None
    record_sha256: str | None = None

    def key(self) -> tuple[str, str, str, str, str]:
        """Sort order: a package listed with and without an arch (or record hash) compares, never None < str."""
        return self.ecosystem, self.name, self.version, self.arch or "", self.record_sha256 or ""


@dataclass(frozen=True)
class Parsed:
    packages: list[Package]
    skipped: int  # components of no readable shape


@dataclass(frozen=True)
class Sbom:
    """An SBOM document as bytes (the registry blob), with what the run record says of it."""

    body: bytes
    packages: list[Package]

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.body).hexdigest()


def inspect(client: docker.DockerClient, image: str) -> dict[str, Any]:
    """The raw facts, from one container of the image (removed afterwards)."""
    python = f"{tags.VENV_DIR}/bin/python"
    try:
        code, out, err = run_captured(client, image, [python, "-c", _SCRIPT, _inventories()], timeout=TIMEOUT_S,
                                      entrypoint=[])
    except (TimeoutError, DockerException) as exc:
        raise SbomError(f"cannot run {python} in {image}: {exc}") from exc
    if code != 0:
        raise SbomError(f"{python} in {image} exited {code}: {err.strip()[-500:]}")
    try:
        facts = json.loads(out)
    except ValueError:
        raise SbomError(f"{python} in {image} printed no JSON: {out[-200:]!r}") from None
    if not isinstance(facts, dict):
        raise SbomError(f"{python} in {image} printed no JSON object")
    return facts


def _inventories() -> str:
    """Every OS family's inventory command with its package type: the image runs the first it has."""
    return json.dumps([[variant.PURL_TYPE, list(variant.INVENTORY)] for variant in osfamilies.FAMILIES.values()])


def python_packages(facts: dict[str, Any]) -> list[str]:
    """`name==version` of each Python distribution the facts name, sorted (what `pip list --format=freeze` says)."""
    return sorted({f"{p.name}=={p.version}" for p in packages_of(facts) if p.ecosystem == "pypi"})


def packages_of(facts: dict[str, Any]) -> list[Package]:
    """The OS and Python packages the facts name, sorted (OS first)."""
    found = set()
    listed = facts.get("os_packages")
    kind = listed.get("type") if isinstance(listed, dict) else None
    for line in str(listed.get("lines", "") if isinstance(listed, dict) else "").splitlines():
        parts = line.split()
        if len(parts) == 3 and kind in OS_TYPES:
            found.add(Package(kind, parts[0], parts[1], parts[2]))
    for dist in facts.get("python") or []:
        if isinstance(dist, dict) and dist.get("name") and dist.get("version"):
            found.add(Package("pypi", str(dist["name"]), str(dist["version"]), None,
                              str(dist["record_sha256"]) if dist.get("record_sha256") else None))
    return sorted(found, key=Package.key)


def generate(client: docker.DockerClient, image_id: str, name: str) -> Sbom:
    """The SBOM of a local image; name: what the document calls the image (its repository and tag)."""
    return from_facts(inspect(client, image_id), image_id, name)


def from_facts(facts: dict[str, Any], image_id: str, name: str) -> Sbom:
    """The SBOM from facts inspect() read from a container of the image (validation reads them beside its checks)."""
    packages = packages_of(facts)
    if not any(p.ecosystem == "pypi" for p in packages):
        raise SbomError(f"{image_id}: pip inspect listed no Python package in {tags.VENV_DIR}")
    os_release = facts.get("os") if isinstance(facts.get("os"), dict) else {}
    return Sbom(document(packages, image_id, name, os_release or {}), packages)


def purl(package: Package, os_release: dict[str, str] | None = None) -> str:
    """The package URL (github.com/package-url/purl-spec) of a package."""
    name = urllib.parse.quote(package.name, safe="")
    version = urllib.parse.quote(package.version, safe=".-_~")
    if package.ecosystem == "pypi":
        return f"pkg:pypi/{_pypi_name(package.name)}@{version}"
    distro = (os_release or {}).get("ID") or "debian"
    qualifiers = {"arch": package.arch or ""}
    if (os_release or {}).get("VERSION_ID"):
        qualifiers["distro"] = f"{distro}-{(os_release or {})['VERSION_ID']}"
    query = "&".join(f"{k}={urllib.parse.quote(v, safe='.-_~')}" for k, v in sorted(qualifiers.items()) if v)
    return (f"pkg:{package.ecosystem}/{urllib.parse.quote(distro, safe='')}/{name}@{version}"
            + (f"?{query}" if query else ""))


def _pypi_name(name: str) -> str:
    """PEP 503 normalisation, as purl asks for pypi names."""
    out = "".join("-" if c in "._" else c for c in name.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return urllib.parse.quote(out, safe="-")


def document(packages: list[Package], image_id: str, name: str, os_release: dict[str, str]) -> bytes:
    """CycloneDX 1.5 JSON (https://cyclonedx.org/docs/1.5/json/), deterministic for the same inputs."""
    components = []
    for p in packages:
        ref = purl(p, os_release)
        component: dict[str, Any] = {"type": "library", "bom-ref": ref, "name": p.name, "version": p.version,
                                     "purl": ref}
        properties = [{"name": "rif:ecosystem", "value": p.ecosystem}]
        if p.record_sha256:
            properties.append({"name": RECORD_PROPERTY, "value": p.record_sha256})
        component["properties"] = properties
        components.append(component)
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"rif-sbom:{image_id}:" + "\n".join(c["bom-ref"] for c in components))
    doc = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "rocm-image-factory",
                                      "version": dist_version("rocm-image-factory")}]},
            "component": {"type": "container", "bom-ref": image_id, "name": name, "version": image_id},
        },
        "components": components,
    }
    return json.dumps(doc, indent=1, sort_keys=False).encode()


def parse(body: bytes) -> list[Package]:
    """The packages of a CycloneDX JSON document (one this factory wrote, or any with deb/pypi purls)."""
    return read(body).packages


def read(body: bytes) -> Parsed:
    """The packages of a CycloneDX JSON document, and how many components were of no readable shape.

    The document must be CycloneDX with a list of components (else SbomError); each component is checked on
    its own (builder.validate.cyclonedx): one odd entry costs that entry, counted, never the document."""
    try:
        doc = models.parse(cyclonedx.Document, body, "the SBOM")
    except models.ShapeError as exc:
        raise SbomError(str(exc)) from None
    if doc.bom_format != "CycloneDX":
        raise SbomError("the SBOM is not a CycloneDX document")
    found, skipped = set(), 0
    for raw in doc.components:
        component = cyclonedx.component(raw)
        if component is None:
            skipped += 1
            continue
        ref = component.purl or ""
        kind = ref.removeprefix("pkg:").partition("/")[0] if ref.startswith("pkg:") else ""
        ecosystem = cast(Ecosystem, kind) if kind in (*OS_TYPES, "pypi") else None
        if ecosystem is None or not component.name or component.version is None:
            continue
        arch = urllib.parse.parse_qs(urllib.parse.urlsplit(ref).query).get("arch", [None])[0]
        found.add(Package(ecosystem, component.name, component.version, arch,
                          component.property(RECORD_PROPERTY)))
    return Parsed(sorted(found, key=Package.key), skipped)
