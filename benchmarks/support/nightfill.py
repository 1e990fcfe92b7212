"""bench_night's registry, filled by the factory: what `builder publish` leaves there for each image, without an engine.

Per image, the registry side of a publish with the factory's own client code: the blobs (RegistryClient.push_blob),
the manifest under the immutable tag `<cell>-<hash12>` (RegistryClient.put_manifest), then the moving tags (the
cell's readable tag, `latest`) moved to that manifest by digest (Target.promote, as a publish does after its push).
The config carries the image's labels as rendered (org.rocm-image-factory.content-hash among them). Only the layers
are synthetic and small (a build is not what is measured): one per combination, standing in for the shared stages,
and one per image holding its cell.json, gzip tars made byte-reproducibly (testkit/layers.py).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from builder.pipeline.jobs import Job
from builder.publish.promote import OCI_MANIFEST, Target
from builder.render import labels
from testkit.layers import layer

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"


def image_blobs(job: Job) -> tuple[list[tuple[bytes, str]], bytes]:
    """The image's layers (bytes, diff ID) and its config: the rendered labels, the layers' diff IDs."""
    assert job.rendered is not None and job.labels is not None
    rendered = job.rendered
    layers = [layer({f"opt/rif/stages/{job.combination}.Dockerfile": rendered.dockerfile.encode()}),
              layer({labels.cell_path(rendered.cell): labels.cell_json(rendered.cell)})]
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": job.labels, "Env": ["PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff for _, diff in layers]},
        "history": [{"created_by": "bench_night: the combination's shared stages (synthetic)"},
                    {"created_by": "bench_night: the image's cell.json (synthetic)"}],
    }, sort_keys=True, separators=(",", ":")).encode()
    return layers, config


def publish_one(target: Target, job: Job) -> str:
    """Push job's image as `builder publish` leaves it: immutable tag, then its moving tags by digest; its digest."""
    repo = target.repository(job.repository)
    layers, config = image_blobs(job)
    descriptors = [{"mediaType": LAYER_TYPE, "digest": target.api.push_blob(repo, data), "size": len(data)}
                   for data, _ in layers]
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "config": {"mediaType": CONFIG_TYPE, "digest": target.api.push_blob(repo, config),
                                  "size": len(config)},
                       "layers": descriptors}, separators=(",", ":")).encode()
    manifest, _ = target.api.put_manifest(repo, job.immutable_tag, body, OCI_MANIFEST)
    target.promote(job.repository, job.tags, manifest, own=job.tag)
    return manifest.digest


def fill(target: Target, todo: list[Job], workers: int = 8) -> None:
    """Publish every job's image (a few at a time; the first of each repository alone, then the rest)."""
    firsts: dict[str, Job] = {}
    for job in todo:
        firsts.setdefault(job.repository, job)
    for job in firsts.values():
        publish_one(target, job)
    rest = [job for job in todo if firsts[job.repository] is not job]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda job: publish_one(target, job), rest))
