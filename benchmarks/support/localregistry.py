"""A fresh, throw-away distribution registry on a free loopback port, with its storage under /tmp.

The benchmark's registry figures come from two places that must agree: the manifests (which blobs an image
names, with their compressed sizes: what a pull transfers) and the storage folder (what the registry
really keeps: what a push uploaded). A registry of its own per layout keeps either from counting the other.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST_TYPES = ", ".join([
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
])
INDEX_TYPES = ", ".join([  # what `docker push` of the containerd image store sends: an index (+ attestations)
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
])
CONFIG = """version: 0.1
log:
  level: error
  accesslog:
    disabled: {quiet}
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: 127.0.0.1:{port}
"""


@dataclass(frozen=True)
class Layer:
    digest: str
    size: int  # compressed bytes, as stored and pulled
    created_by: str  # the history line that made it (which instruction)


@dataclass(frozen=True)
class Image:
    """An image as the registry holds it: its layers in order."""

    ref: str
    layers: tuple[Layer, ...]

    @property
    def size(self) -> int:
        return sum(layer.size for layer in self.layers)

    def digests(self) -> set[str]:
        return {layer.digest for layer in self.layers}


_PUSHES: set[subprocess.Popen[str]] = set()  # pushes running in worker threads, for kill_pushes()
_LOCK = threading.Lock()


def kill_pushes() -> None:
    """End every push still running (an interrupted run must not wait minutes for a GB upload to finish)."""
    with _LOCK:
        running = list(_PUSHES)
    for proc in running:
        proc.kill()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalRegistry:
    """`docker-registry serve` on 127.0.0.1:<free port>; stop() ends it (the folder is the caller's)."""

    def __init__(self, root: Path, access_log: bool = False) -> None:
        self.root = root
        self.port = free_port()
        self.access_log = access_log  # one line per request in root/access.log: what requests() counts
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        (self.root / "storage").mkdir(parents=True, exist_ok=True)
        config = self.root / "config.yml"
        config.write_text(CONFIG.format(root=self.root / "storage", port=self.port,
                                        quiet="false" if self.access_log else "true"))
        out = (self.root / "access.log").open("wb") if self.access_log else subprocess.DEVNULL
        self._proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=out,
                                      stderr=(self.root / "registry.log").open("wb"), start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{self.address}/v2/", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                if self._proc.poll() is not None:
                    break
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"docker-registry did not start on {self.address}: see {self.root / 'registry.log'}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def requests(self) -> int:
        """Requests the registry has answered so far (its access log, one line each; needs access_log=True)."""
        log = self.root / "access.log"
        with log.open("rb") as fh:
            return sum(1 for line in fh if b'"' in line and b" /v2/" in line)

    @property
    def blobs(self) -> Path:
        """Where the registry's filesystem driver keeps blobs: blobs/<algorithm>/<2 hex>/<hex>/data."""
        return self.root / "storage" / "docker" / "registry" / "v2" / "blobs"

    def blob_path(self, digest: str) -> Path:
        algorithm, _, hexa = digest.partition(":")
        return self.blobs / algorithm / hexa[:2] / hexa / "data"

    def stored_bytes(self) -> int:
        """Bytes of every blob the registry keeps (layers, configs, manifests): a push's growth is its upload."""
        blobs = self.blobs
        return sum(p.stat().st_size for p in blobs.rglob("data") if p.is_file()) if blobs.is_dir() else 0

    def push(self, source: str, repo: str, tag: str) -> str:
        """docker tag + docker push (the engine's own upload, layer reuse included); returns the pushed ref."""
        ref = f"{self.address}/{repo}:{tag}"
        subprocess.run(["docker", "tag", source, ref], check=True, capture_output=True)
        proc = subprocess.Popen(["docker", "push", ref], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with _LOCK:
            _PUSHES.add(proc)
        try:
            _, err = proc.communicate()
        finally:
            with _LOCK:
                _PUSHES.discard(proc)
        if proc.returncode != 0:
            raise RuntimeError(f"docker push {ref} failed: {err.strip()[-500:]}")
        return ref

    def image(self, repo: str, tag: str) -> Image:
        """The image's layers with compressed sizes (manifest) and the instruction of each (config history)."""
        manifest = self._get_json(f"/v2/{repo}/manifests/{tag}", f"{MANIFEST_TYPES}, {INDEX_TYPES}")
        if "manifests" in manifest:  # an index: the image's own manifest, not an attestation's (unknown/unknown)
            [chosen] = [m for m in manifest["manifests"]
                        if (m.get("platform") or {}).get("os") not in (None, "unknown")]
            manifest = self._get_json(f"/v2/{repo}/manifests/{chosen['digest']}", MANIFEST_TYPES)
        config = self._get_json(f"/v2/{repo}/blobs/{manifest['config']['digest']}", "*/*")
        made = [str(h.get("created_by", "")) for h in config.get("history", []) if not h.get("empty_layer")]
        layers = manifest["layers"]
        if len(made) != len(layers):
            made = [""] * len(layers)
        return Image(f"{repo}:{tag}", tuple(Layer(str(layer["digest"]), int(layer["size"]), line)
                                            for layer, line in zip(layers, made, strict=True)))

    def _get_json(self, path: str, accept: str) -> dict[str, Any]:
        request = urllib.request.Request(f"http://{self.address}{path}", headers={"Accept": accept})
        with urllib.request.urlopen(request, timeout=60) as response:
            data: dict[str, Any] = json.loads(response.read())
        return data
