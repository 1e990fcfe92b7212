"""Two publishes at once on one engine and one registry: every tag still names validated content."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from builder.core.tags import HASH_LABEL, IMMUTABLE_SUFFIX_RE, REFERRERS_TAG_RE, short_hash
from builder.registry.client import RegistryClient
from testkit.matrices import BARE_TORCH, cpu_matrix
from tests.fakes.checkout import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.registry]

RUNTIME = "cpu_debian12_py3.11_torch2.13.0_runtime"
TORCH = BARE_TORCH


def matrix(user: str | None) -> str:
    base = cpu_matrix(TORCH, image="pytorch")
    if user is None:
        return base
    return (base + "exclude:\n  - {flavor: runtime}\ninclude:\n"
            f"  - {{os: debian-12, platform: cpu, torch: {TORCH}, flavor: runtime, user: {user}}}\n")


def test_two_publishes_at_once_leave_every_tag_on_validated_content(
        namespace: str, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    procs = []
    for i, user in enumerate([None, f"u{uuid.uuid4().hex[:8]}"]):  # same tag, different content
        m = tmp_path / f"m{i}.yaml"
        m.write_text(matrix(user))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "builder", "publish", "--matrix", str(m), "--registry", namespace,
             "--wheelhouse", str(wheelhouse), "--record", str(tmp_path / f"r{i}.json"), "--progress", "plain"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=dict(os.environ)))
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    records = [json.loads((tmp_path / f"r{i}.json").read_text())["images"][0] for i in range(2)]
    for proc, out, rec in zip(procs, outputs, records, strict=True):
        assert "Traceback" not in out
        assert proc.returncode in (0, 1), out
        assert rec["state"] in ("published", "skipped", "failed"), out
        if proc.returncode == 1:  # a lost race fails cleanly; it never leaves a tag on unvalidated content
            assert rec["failed_stage"] in ("push", "registry"), out
    assert any(r["state"] == "published" for r in records)
    address, ns = namespace.split("/", 1)
    api = RegistryClient(address)
    repo = f"{ns}/pytorch"
    validated = {r["content_hash"]: r for r in records if r["validation"] and not r["failed_checks"]}
    for tag in api.tags(repo):
        if REFERRERS_TAG_RE.fullmatch(tag):
            continue  # the index of an image's SBOM, no image
        labels = api.config_labels(repo, tag)
        assert labels[HASH_LABEL] in validated, f"{tag} names content no run validated"
        if IMMUTABLE_SUFFIX_RE.search(tag):
            assert tag.endswith("-" + short_hash(labels[HASH_LABEL])), f"{tag} holds other content than it names"
    assert api.digest(repo, RUNTIME) in {r["digest"] for r in records if r["digest"]}
