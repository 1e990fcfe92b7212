"""promote.Target.attach_lock on a real registry (distribution: no referrers API, so the referrers tag's index
lists it): the lock record refers to the image's manifest, carries its identity as annotations, sits beside other
referrers, and is what `builder reproduce` finds (builder.audit.reproduce.recorded_lock)."""

from __future__ import annotations

import hashlib
import json

import pytest

from builder.audit import reproduce
from builder.core import tags
from builder.publish.promote import Target
from builder.registry import models
from builder.render import lockfile, lockrecord

pytestmark = pytest.mark.registry

SNAP = "20261101T000000Z"
OCI = "application/vnd.oci.image.manifest.v1+json"


def recorded() -> lockrecord.Recorded:
    base = lockfile.base_text(lockfile.Step("base.txt", ("debian:12",)), "debian:12@sha256:" + "b" * 64, snapshot=SNAP)
    torch = lockfile.pip_text(lockfile.Step("torch.txt", ("torch==2.13.0",), "3.11"),
                              [lockfile.Pin("torch", "2.13.0", "c" * 64), lockfile.Pin("numpy", "2.4.6", "d" * 64)])
    return lockrecord.Recorded({"base.txt": base, "torch.txt": torch})


def test_a_lock_record_refers_to_its_image_and_reads_back(namespace: str) -> None:
    target = Target.of(namespace)
    repo = target.repository("pytorch")
    config = json.dumps({"config": {"Labels": {tags.HASH_LABEL: "sha256:" + "1" * 64}}}).encode()
    config_digest = target.api.push_blob(repo, config)
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI, "layers": [],
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                                  "size": len(config)}}).encode()
    target.api.put_manifest(repo, "t1", body, OCI)
    image = target.api.manifest(repo, "t1")
    assert image is not None and image.digest == "sha256:" + hashlib.sha256(body).hexdigest()

    attached = target.attach_lock("pytorch", image, recorded())
    artifact = attached.artifact
    assert attached.kind == "lock"
    assert target.attach_lock("pytorch", image, recorded()).artifact == artifact  # the same lock: listed once
    assert [d.digest for d in target.api.referrers(repo, image.digest, lockrecord.MEDIA_TYPE)] == [artifact]
    assert target.has_referrer("pytorch", image, lockrecord.MEDIA_TYPE) and not target.has_sbom("pytorch", image)

    found = target.api.manifest(repo, artifact)
    assert found is not None
    doc = models.parse(models.ManifestDoc, found.body, "artifact")
    assert doc.artifact_type == lockrecord.MEDIA_TYPE and doc.subject is not None
    assert doc.subject.digest == image.digest
    assert json.loads(found.body)["annotations"] == {"org.rocm-image-factory.lock.base-snapshot": SNAP,
                                                     "org.rocm-image-factory.lock.wheels": "2",
                                                     "org.rocm-image-factory.lock.os-packages": "0"}
    assert reproduce.recorded_lock("ref", repo, image.digest, target.api) == (artifact, recorded())
