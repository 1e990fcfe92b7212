"""SBOMs: the CycloneDX document (pure), attaching it as an OCI 1.1 referrer in a real registry, `builder diff`,
and (engine) a published image whose attached SBOM lists exactly what pip and dpkg say is inside it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import docker
import pytest

from builder.audit import diff
from builder.pipeline import lifecycle
from builder.publish.promote import EMPTY_DIGEST, OCI_MANIFEST, Target
from builder.publish.record import ImageReport
from builder.registry.client import Manifest, RegistryClient, referrers_tag
from builder.validate import sbom
from tests.fakes.checkout import builder_cli
from tests.fakes.faultproxy import FaultProxy

DEB = [sbom.Package("deb", "libc6", "2.36-9+deb12u1", "amd64"), sbom.Package("deb", "tzdata", "2024a-0+deb12u1", "all"),
       sbom.Package("deb", "perl-base", "5.36.0-7", "amd64")]
PY = [sbom.Package("pypi", "numpy", "2.1.0", None, "ab" * 32), sbom.Package("pypi", "typing_extensions", "4.12.2"),
      sbom.Package("pypi", "pip", "24.0")]
OS = {"ID": "debian", "VERSION_ID": "12"}


def doc(packages: list[sbom.Package], image_id: str = "sha256:" + "1" * 64) -> dict[str, object]:
    return dict(json.loads(sbom.document(sorted(packages), image_id, "pytorch:x", OS)))


# -- the document -------------------------------------------------------------------------------------------

def test_the_document_is_cyclonedx_1_5_with_a_purl_per_package() -> None:
    found = doc(DEB + PY)
    assert (found["bomFormat"], found["specVersion"], found["version"]) == ("CycloneDX", "1.5", 1)
    assert str(found["serialNumber"]).startswith("urn:uuid:")
    metadata = found["metadata"]
    assert isinstance(metadata, dict) and metadata["component"]["type"] == "container"
    assert metadata["tools"]["components"][0]["name"] == "rocm-image-factory"
    components = {c["name"]: c for c in found["components"]}  # type: ignore[attr-defined]
    assert len(components) == 6 and all(c["type"] == "library" and c["bom-ref"] == c["purl"]
                                        for c in components.values())
    assert components["libc6"]["purl"] == "pkg:deb/debian/libc6@2.36-9%2Bdeb12u1?arch=amd64&distro=debian-12"
    assert components["typing_extensions"]["purl"] == "pkg:pypi/typing-extensions@4.12.2"
    numpy = {p["name"]: p["value"] for p in components["numpy"]["properties"]}
    assert numpy == {"rif:ecosystem": "pypi", sbom.RECORD_PROPERTY: "ab" * 32}
    assert "timestamp" not in metadata  # deterministic: the same image gives the same bytes
    assert sbom.document(sorted(DEB + PY), "sha256:" + "1" * 64, "pytorch:x", OS) == \
        sbom.document(sorted(PY + DEB), "sha256:" + "1" * 64, "pytorch:x", OS)


def test_a_version_with_an_epoch_is_percent_encoded_and_parses_back() -> None:
    epoch = sbom.Package("deb", "libgcc-s1", "1:12.2.0-14", "amd64")
    assert sbom.purl(epoch, OS) == "pkg:deb/debian/libgcc-s1@1%3A12.2.0-14?arch=amd64&distro=debian-12"
    body = sbom.document(sorted([*DEB, *PY, epoch]), "sha256:" + "1" * 64, "x", OS)
    assert sbom.parse(body) == sorted([*DEB, *PY, epoch])


def test_an_rpm_inventory_becomes_rpm_packages_and_purls_and_reads_back() -> None:
    facts = {"os_packages": {"type": "rpm", "lines": "glibc 0:2.34-100.el9 x86_64\n"}, "python": []}
    [package] = sbom.packages_of(facts)
    assert package == sbom.Package("rpm", "glibc", "0:2.34-100.el9", "x86_64")
    rocky = {"ID": "rocky", "VERSION_ID": "9.4"}
    assert sbom.purl(package, rocky) == "pkg:rpm/rocky/glibc@0%3A2.34-100.el9?arch=x86_64&distro=rocky-9.4"
    assert sbom.parse(sbom.document([package, *PY], "sha256:" + "1" * 64, "x", rocky)) == sorted([package, *PY])


def test_an_unknown_inventory_type_lists_no_os_package() -> None:
    assert sbom.packages_of({"os_packages": {"type": "apk", "lines": "musl 1.2 x86_64\n"}}) == []


def test_the_packages_of_raw_facts() -> None:
    facts = {"os_packages": {"type": "deb", "lines": "libc6 2.36-9 amd64\nbroken line\ntzdata 2024a all\n"},
             "python": [{"name": "numpy", "version": "2.1.0", "record_sha256": "cd" * 32},
                        {"name": None, "version": "1"}, "junk"]}
    assert sbom.packages_of(facts) == [sbom.Package("deb", "libc6", "2.36-9", "amd64"),
                                       sbom.Package("deb", "tzdata", "2024a", "all"),
                                       sbom.Package("pypi", "numpy", "2.1.0", None, "cd" * 32)]


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"bomFormat": "SPDX"}'])
def test_parse_refuses_what_is_no_cyclonedx(body: bytes) -> None:
    with pytest.raises(sbom.SbomError):
        sbom.parse(body)


# -- the registry ---------------------------------------------------------------------------------------

def fake_image(api: RegistryClient, repo: str, tag: str) -> Manifest:
    """An image manifest (a config and one layer of random bytes) pushed with the registry client alone."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                         "config": {"Labels": {"n": uuid.uuid4().hex}}}).encode()
    layer = uuid.uuid4().bytes * 8
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": api.push_blob(repo, config), "size": len(config)},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                   "digest": api.push_blob(repo, layer), "size": len(layer)}]}).encode()
    manifest, _ = api.put_manifest(repo, tag, body, OCI_MANIFEST)
    return manifest


def attach(target: Target, repo_name: str, manifest: Manifest, packages: list[sbom.Package]) -> ImageReport:
    """The SBOM attached, and the record lifecycle assembles from the attach's result."""
    report = ImageReport(tag="t", repository=repo_name, tags=("t",), immutable_tag="t-0", content_hash="sha256:0")
    document = sbom.Sbom(sbom.document(sorted(packages), "sha256:" + "2" * 64, repo_name, OS), sorted(packages))
    return lifecycle.assemble(report, target.attach_sbom(repo_name, manifest, document))


def test_the_sbom_is_an_oci_referrer_of_the_image_digest(registry: str) -> None:
    ns = f"sbom{uuid.uuid4().hex[:8]}"
    proxy = FaultProxy(registry)
    try:
        api = RegistryClient(proxy.address)
        repo = f"{ns}/pytorch"
        image = fake_image(api, repo, "a")
        proxy.clear()
        report = attach(Target(f"{proxy.address}/{ns}", api, None), "pytorch", image, [*DEB, *PY])
        writes = [f"{r.method} {r.path.split('?')[0]}" for r in proxy.writes]
    finally:
        proxy.close()
    artifact = report.sbom_artifact
    assert artifact is not None and report.sbom_digest is not None
    # Blobs, the artifact manifest by digest, then the fallback index under sha256-<hex>; no tag moved.
    assert writes[-2:] == [f"PUT /v2/{repo}/manifests/{artifact}",
                           f"PUT /v2/{repo}/manifests/{referrers_tag(image.digest)}"]
    assert all("/blobs/uploads/" in w for w in writes[:-2])
    direct = RegistryClient(registry)
    found = direct.manifest(repo, artifact)
    assert found is not None
    body = json.loads(found.body)
    assert body["artifactType"] == sbom.MEDIA_TYPE and body["config"]["digest"] == EMPTY_DIGEST
    assert body["subject"] == {"mediaType": image.media_type, "digest": image.digest, "size": len(image.body)}
    assert [layer["digest"] for layer in body["layers"]] == [report.sbom_digest]
    assert sbom.parse(direct.blob(repo, report.sbom_digest)) == sorted([*DEB, *PY])
    assert [d.model_dump(by_alias=True, exclude_none=True)
            for d in direct.referrers(repo, image.digest, sbom.MEDIA_TYPE)] == [
        {"mediaType": OCI_MANIFEST, "digest": artifact, "size": len(found.body), "artifactType": sbom.MEDIA_TYPE}]
    assert direct.digest(repo, "a") == image.digest  # the image itself is untouched
    # Attaching the same SBOM again adds nothing to the index.
    attach(Target(f"{registry}/{ns}", direct, None), "pytorch", image, [*DEB, *PY])
    assert len(direct.referrers(repo, image.digest)) == 1


def test_builder_diff_between_two_published_images(registry: str, tmp_path: Path) -> None:
    ns = f"sbom{uuid.uuid4().hex[:8]}"
    api, repo = RegistryClient(registry), f"{ns}/pytorch"
    target = Target(f"{registry}/{ns}", api, None)
    old, new, bare = fake_image(api, repo, "old"), fake_image(api, repo, "new"), fake_image(api, repo, "bare")
    attach(target, "pytorch", old, [*DEB, *PY])
    attach(target, "pytorch", new, [DEB[0], DEB[1], sbom.Package("pypi", "numpy", "2.2.0"), PY[1], PY[2],
                                    sbom.Package("pypi", "torch", "2.13.0")])
    a, b = f"{registry}/{repo}:old", f"{registry}/{repo}@{new.digest}"

    table = builder_cli("diff", a, b)
    assert table.returncode == 0, table.stdout + table.stderr
    assert f"A: {a}@{old.digest} (6 packages)" in table.stdout and f"B: {b} (6 packages)" in table.stdout
    assert "1 added, 1 removed, 1 changed" in table.stdout
    lines = {" ".join(line.replace("│", " ").split()) for line in table.stdout.splitlines()}
    assert {"~ python numpy 2.1.0 2.2.0", "+ python torch - 2.13.0", "- os perl-base 5.36.0-7 -"} <= lines

    as_json = builder_cli("diff", a, b, "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert (data["a"]["digest"], data["b"]["digest"]) == (old.digest, new.digest)
    assert data["changed"] == [{"ecosystem": "pypi", "name": "numpy", "before": "2.1.0", "after": "2.2.0"}]
    assert [r["name"] for r in data["added"]] == ["torch"] and [r["name"] for r in data["removed"]] == ["perl-base"]

    same = builder_cli("diff", a, a)
    assert same.returncode == 0 and "no package changed" in same.stdout

    none = builder_cli("diff", a, f"{registry}/{repo}:bare")
    assert none.returncode == 1 and f"{bare.digest}) has no SBOM attached" in none.stderr, none.stderr
    bad = builder_cli("diff", a, "pytorch:latest")
    assert bad.returncode == 2 and "is no image reference" in bad.stderr, bad.stderr


# -- a real image ---------------------------------------------------------------------------------------

@pytest.mark.docker
def test_a_published_image_has_an_sbom_that_matches_pip_and_dpkg(namespace: str, base_image: str,
                                                                wheelhouse: Path, tmp_path: Path,
                                                                docker_client: docker.DockerClient) -> None:
    from tests.publish.test_promote import MATRIX, RUNTIME, publish

    run = publish(MATRIX, namespace, wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert run.proc.returncode == 0, run.output
    cell = run.record[RUNTIME]
    assert cell["state"] == "published" and cell["sbom_artifact"] and cell["sbom_digest"], cell
    inventory = diff.fetch(diff.parse_ref(f"{namespace}/pytorch:{RUNTIME}", "A"))
    assert inventory.digest == cell["digest"] and inventory.sbom_artifact == cell["sbom_artifact"]
    assert len(inventory.packages) == cell["sbom_packages"]

    image = str(cell["image_id"])
    pip = docker_client.containers.run(image, ["/opt/venv/bin/python", "-m", "pip", "list", "--format=json",
                                               "--disable-pip-version-check"], entrypoint=[], remove=True)
    dpkg = docker_client.containers.run(image, ["dpkg-query", "-W", "-f", "${Package} ${Version}\n"],
                                        entrypoint=[], remove=True)
    expected_py = {(p["name"].lower(), p["version"]) for p in json.loads(pip)}
    expected_os = {tuple(line.split()) for line in dpkg.decode().splitlines()}
    assert {(p.name.lower(), p.version) for p in inventory.packages if p.ecosystem == "pypi"} == expected_py
    assert {(p.name, p.version) for p in inventory.packages if p.ecosystem == "deb"} == expected_os
    assert any(p.name == "torch" and p.record_sha256 for p in inventory.packages)


@pytest.mark.docker
def test_a_failed_attach_moves_no_tag_and_a_rerun_attaches_then_promotes(registry: str, base_image: str,
                                                                         wheelhouse: Path, tmp_path: Path) -> None:
    from tests.fakes.faultproxy import Fault
    from tests.publish.test_promote import MATRIX, RUNTIME, publish

    ns = f"sbom{uuid.uuid4().hex[:8]}"
    api, repo = RegistryClient(registry), f"{ns}/pytorch"
    proxy = FaultProxy(registry)
    try:
        refused = Fault.error(400, "MANIFEST_INVALID", "injected: no referrers index here")
        proxy.inject(refused, "PUT", r"/manifests/sha256-", times=None)
        failed = publish(MATRIX, f"{proxy.address}/{ns}", wheelhouse, tmp_path, None, "--cell", RUNTIME)
    finally:
        proxy.close()
    assert failed.proc.returncode == 1, failed.output
    cell = failed.record[RUNTIME]
    assert (cell["state"], cell["failed_stage"], cell["moved"]) == ("failed", "sbom", [])
    assert "cannot attach the SBOM" in str(cell["failure"]) and "no tag moved" in str(cell["failure"])
    assert api.tags(repo) == [cell["immutable_tag"]]  # pushed, never promoted

    rerun = publish(MATRIX, f"{registry}/{ns}", wheelhouse, tmp_path, None, "--cell", RUNTIME)
    assert rerun.proc.returncode == 0, rerun.output
    again = rerun.record[RUNTIME]
    assert again["moved"] == [RUNTIME, "latest"] and again["sbom_artifact"], again
    assert "==> build" not in rerun.proc.stdout
    image = api.manifest(repo, RUNTIME)
    assert image is not None and image.digest == cell["digest"]
    assert [d.digest for d in api.referrers(repo, image.digest, sbom.MEDIA_TYPE)] == [again["sbom_artifact"]]
