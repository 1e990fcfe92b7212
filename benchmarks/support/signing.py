"""bench_sign's parts: small images to sign in a loopback registry, and cosign driven key-based and offline.

The images are pushed with the factory's registry client (one small gzip layer each, as nightfill makes them), so
every digest is new: production signs digests a night just pushed, never ones already signed. cosign runs with a
key pair of its own (generate-key-pair; COSIGN_PASSWORD only in the environment of its own calls), a signing config
that names no service (no Fulcio, Rekor or timestamp authority: `cosign signing-config create --no-default-*`,
cosign 3's replacement for the deprecated --tlog-upload=false) and an empty trusted root (so it fetches no
trusted_root.json over TUF), in a HOME of its own (no ~/.docker credentials, no ~/.sigstore cache). cosign 3
writes each signature as a Sigstore bundle referring to its image (the default --new-bundle-format, as in
production): on a registry without the referrers API, as docker-registry 2.8 is, a manifest plus the referrers tag
`sha256-<hex>` (an index listing it).

cosign 3 gets its signer once per digest, not once per call (sigstore/cosign v3.0.6, f1ad3ee9:
cmd/cosign/cli/sign/sign.go SignCmd calls signDigestBundle for each image, and signcommon/common.go
WriteNewBundleWithSigningConfig calls GetKeypairAndToken each time; v2.5.0 called SignerFromKeyOpts once before the
loop). Key-based, that is one scrypt decryption of the key per digest; keyless, a new key, an OIDC token and a
Fulcio certificate per digest (pkg/cosign/bundle/sign.go SignData). key_load() measures the decryption, so a
reader can take it out of a digest's cost.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.nightfill import CONFIG_TYPE, LAYER_TYPE
from builder.publish.promote import OCI_MANIFEST
from builder.registry.client import RegistryClient, referrers_tag
from testkit.layers import layer

REPOSITORY = "bench/sign"
PASSWORD = "bench-sign"  # the throw-away key's, only in the environment of cosign's calls here
TRUSTED_ROOT = '{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}\n'
CALL_LIMIT_S = 600.0  # one cosign call; 50 digests take seconds here


@dataclass(frozen=True)
class Call:
    """One timed cosign call: wall seconds, and the CPU seconds cosign used (user + system, its children too)."""

    digests: int
    wall_s: float
    cpu_s: float


def push_images(api: RegistryClient, first: int, count: int, repository: str = REPOSITORY) -> list[str]:
    """count new images (numbered from first) as REGISTRY/REPO@sha256:HEX: a layer, a config, a manifest each."""
    refs = []
    for number in range(first, first + count):
        data, diff = layer({f"opt/bench-sign/{number}": f"image {number}\n".encode()})
        config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [diff]},
                             "history": [{"created_by": "bench_sign: one small layer (synthetic)"}]},
                            sort_keys=True, separators=(",", ":")).encode()
        body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": CONFIG_TYPE, "digest": api.push_blob(repository, config),
                                      "size": len(config)},
                           "layers": [{"mediaType": LAYER_TYPE, "digest": api.push_blob(repository, data),
                                       "size": len(data)}]}, separators=(",", ":")).encode()
        manifest, _ = api.put_manifest(repository, f"image-{number}", body, OCI_MANIFEST)
        refs.append(f"{api.address}/{repository}@{manifest.digest}")
    return refs


def signature_tags(api: RegistryClient, refs: list[str], repository: str = REPOSITORY) -> int:
    """How many of refs have their referrers tag (`sha256-<hex>`, where cosign attaches a signature) in the repo."""
    tags = set(api.tags(repository))
    return sum(referrers_tag(ref.rpartition("@")[2]) in tags for ref in refs)


def stored_manifests(storage: Path, repository: str = REPOSITORY) -> int:
    """Manifests the registry keeps for the repository (docker-registry's filesystem layout: one revision each)."""
    revisions = storage / "docker" / "registry" / "v2" / "repositories" / repository / "_manifests" / "revisions"
    return sum(1 for _ in revisions.glob("*/*")) if revisions.is_dir() else 0


class Cosign:
    """One cosign binary with its own HOME, key pair, service-less signing config and empty trusted root."""

    def __init__(self, binary: Path, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.home = folder / "home"
        self.key = folder / "cosign.key"
        self.public = folder / "cosign.pub"
        self.config = folder / "signing-config.json"
        self.root = folder / "trusted-root.json"

    def prepare(self) -> None:
        """The key pair, the signing config without services and the empty trusted root."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.run(["generate-key-pair"], password=True)
        self.run(["signing-config", "create", "--no-default-fulcio", "--no-default-oidc", "--no-default-rekor",
                  "--no-default-tsa", "--out", str(self.config)])
        self.root.write_text(TRUSTED_ROOT)
        if not (self.key.is_file() and self.public.is_file()):
            raise RuntimeError(f"cosign generate-key-pair wrote no cosign.key/cosign.pub in {self.folder}")

    def sign_flags(self) -> list[str]:
        return ["sign", "--yes", "--key", str(self.key), "--signing-config", str(self.config), "--trusted-root",
                str(self.root), "--allow-http-registry"]

    def sign(self, refs: list[str]) -> Call:
        """One `cosign sign` of every ref, timed."""
        return self.timed([*self.sign_flags(), *refs], len(refs))

    def key_load(self) -> tuple[Call, Call]:
        """cosign started and stopped (`cosign version`), then started with its key decrypted (`cosign public-key
        --key`): cosign 3 decrypts the key (scrypt) once per digest it signs, where keyless makes a new key."""
        return self.timed(["version"], 0), self.timed(["public-key", "--key", str(self.key)], 0)

    def timed(self, args: list[str], digests: int) -> Call:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        self.run(args, password=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return Call(digests, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))

    def verify(self, ref: str) -> bool:
        """`cosign verify --key`: is a signature by our key attached to ref (no transparency log to consult)."""
        done = self.run(["verify", "--key", str(self.public), "--insecure-ignore-tlog=true", "--trusted-root",
                         str(self.root), "--allow-http-registry", ref], check=False)
        return done.returncode == 0

    def run(self, args: list[str], password: bool = False, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "DOCKER_CONFIG": str(self.home / ".docker"), "TUF_ROOT": str(self.home / ".sigstore" / "root")}
        if password:
            env["COSIGN_PASSWORD"] = PASSWORD
        done = subprocess.run([str(self.binary), *args], cwd=self.folder, env=env, capture_output=True, text=True,
                              check=False, timeout=CALL_LIMIT_S)
        if check and done.returncode != 0:
            raise RuntimeError(f"cosign {' '.join(args[:2])}: exit {done.returncode}: {done.stderr.strip()[-600:]}")
        return done
