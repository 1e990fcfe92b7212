"""Where the ROCm-scale benchmark's builds take wheels from (bench_scale.py): the counting index or the
wheelhouse, the matrices that name it, and taking this run's wheels out of the shared pip cache again."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from benchmarks.support.rocmwheels import WheelSet
from benchmarks.support.scaleplumbing import BASE, IMAGE, PIP_CACHE_ID, Resources
from benchmarks.support.wheelindex import WheelIndex
from builder.core.spec import CellSpec
from builder.matrix.expand import expand_matrix

# ---------------------------------------------------------------- wheels, index, matrices


@dataclass
class Supply:
    """Where builds take wheels from: the counting index, or (when builds cannot reach it) the wheelhouse."""

    wheels: WheelSet
    index: WheelIndex | None
    wheelhouse: Path  # the wheels visible now, as hard links (the fallback's --wheelhouse, and timing's)
    notes: list[str] = field(default_factory=list)
    patched: bool = False  # builder's render needed --trusted-host added to reach the index

    def show_numpy(self, bumped: bool) -> None:
        """Only the first numpy is there until the update scenario bumps it; then the index lists both (an
        index keeps old releases), the wheelhouse only the new one (find-links would take the newest anyway)."""
        for i, visible in ((0, not bumped), (1, bumped)):
            wheel = self.wheels.numpy(i)
            if self.index is not None:
                self.index.show(wheel, visible or i == 0)
            link = self.wheelhouse / wheel.filename
            link.unlink(missing_ok=True)
            if visible:
                link.hardlink_to(wheel.path)

    def downloads(self) -> Counter[str]:
        return self.index.snapshot() if self.index is not None else Counter()


def make_supply(res: Resources, wheels: WheelSet, prefix: str) -> Supply:
    """Serve the wheels on loopback (builds run on the host network) and prove a BuildKit RUN step reaches them;
    else fall back to a wheelhouse."""
    wheelhouse = res.work / "wheelhouse"
    wheelhouse.mkdir()
    for wheel in wheels.wheels:
        if wheel.project != "numpy":
            (wheelhouse / wheel.filename).hardlink_to(wheel.path)
    index = WheelIndex(wheels.wheels, "127.0.0.1", prefix)
    index.start()
    res.index = index
    for wheel in wheels.wheels:
        index.show(wheel, wheel.project != "numpy")
    supply = Supply(wheels, index, wheelhouse)
    supply.show_numpy(bumped=False)
    if not reaches(res, index):
        supply.notes.append(f"a BuildKit RUN step could not reach {index.url}: wheels came from the wheelhouse "
                            "(bind mount / COPY), so downloads read 0")
        index.stop()
        res.index, supply.index = None, None
    return supply


def reaches(res: Resources, index: WheelIndex) -> bool:
    """A one-line BuildKit build that fetches /ping from the index (bash's /dev/tcp: the base has no curl)."""
    context = res.work / "probe"
    context.mkdir()
    request = f"GET /{index.prefix}/ping HTTP/1.0\\r\\n\\r\\n"
    script = (f"exec 3<>/dev/tcp/{index.host}/{index.port} && printf '{request}' >&3 && "
              "head -1 <&3 | grep -q ' 200 '")
    (context / "Dockerfile").write_text(f"FROM {BASE}\nRUN {json.dumps(['bash', '-c', script])}\n")
    tag = res.tag(f"rif-bench/probe:{index.prefix}")
    proc = subprocess.run(["docker", "buildx", "build", "--network", "host", "--progress", "plain", "-t", tag,
                           str(context)], capture_output=True, text=True, check=False)
    res.drop_images([tag])
    return proc.returncode == 0 and index.pings > 0


def matrix_yaml(families: list[str], flavors: list[str], index_url: str, user: str | None,
                overridden: list[str], lines_of: dict[str, str] | None = None) -> str:
    """The benchmark's matrix: local channel, ROCm 7.2 from index_url (or the platforms of lines_of, each from
    its index), debian-12, torch 2.13.0 without companions. Families a compatibility rule drops come back as
    includes with an override (the wheels are synthetic anyway)."""
    torch = '{version: "2.13.0", torchvision: null, torchaudio: null}'
    lines_of = lines_of or {"rocm7.2": index_url}
    platforms = list(lines_of)
    urls = ", ".join(f'{p}: "{url}"' for p, url in lines_of.items())
    lines = [f"image: {IMAGE}", *([f"user: {user}"] if user else []),
             f"index_urls: {{{urls}}}", "matrix:", "  os: [debian-12]", f"  platform: [{', '.join(platforms)}]",
             f"  torch: [{torch}]", f"  gfx: [{', '.join(families)}]", "  channel: [local]",
             f"  flavor: [{', '.join(flavors)}]"]
    if overridden:
        lines += ["exclude:", *(f"  - {{gfx: {f}}}" for f in overridden), "include:"]
        lines += [f"  - {{os: debian-12, platform: {p}, torch: {torch}, gfx: {f}, flavor: {flavor}, "
                  "channel: local, override: {reason: synthetic wheels of the ROCm-scale benchmark}}"
                  for p in platforms for f in overridden for flavor in flavors]
    return "\n".join(lines) + "\n"


def write_matrix(path: Path, families: list[str], flavors: list[str], index_url: str,
                 user: str | None = None, lines_of: dict[str, str] | None = None) -> list[CellSpec]:
    path.write_text(matrix_yaml(families, flavors, index_url, user, [], lines_of))
    dropped = sorted({d.cell.gfx for d in expand_matrix(path).dropped if d.cell.gfx})
    if dropped:
        path.write_text(matrix_yaml(families, flavors, index_url, user, dropped, lines_of))
    return expand_matrix(path).cells


def image_key(cell: CellSpec) -> str:
    return f"{cell.gfx}-{cell.flavor}"


def trusted_host(host: str) -> str | None:
    """pip ignores a plain-HTTP index unless it is on loopback or named by --trusted-host."""
    return None if host.startswith("127.") or host == "localhost" else host


# ---------------------------------------------------------------- pip cache: take this run's wheels out again


def forget_wheels(res: Resources, supply: Supply) -> str:
    """Delete this run's entries from the shared pip cache mount (a RUN with the same mount; no prune)."""
    if supply.index is None:
        return "pip cache: nothing fetched from the index"
    context = res.work / "forget"
    context.mkdir()
    (context / "paths").write_text("\n".join(pip_cache_paths(supply.index)) + "\n")
    mounts = f"--mount=type=cache,id={PIP_CACHE_ID},target=/tmp --mount=type=bind,target=/ctx"
    (context / "Dockerfile").write_text(f"FROM {BASE}\nRUN {mounts} xargs -a /ctx/paths rm -f\n")
    tag = res.tag(f"rif-bench/forget:{supply.index.prefix}")
    proc = subprocess.run(["docker", "buildx", "build", "--network", "host", "--no-cache", "--progress", "plain",
                           "-t", tag, str(context)], capture_output=True, text=True, check=False)
    res.drop_images([tag])
    if proc.returncode != 0:
        return "pip cache: could not remove this run's wheels from the cache mount: " + proc.stdout[-300:]
    return "pip cache: this run's wheels removed from the rif-pip cache mount again"


def pip_cache_paths(index: WheelIndex) -> list[str]:
    """Where pip keeps each response of this index in its HTTP cache: sha224 of the URL, in 5 folder levels
    (pip <23.3: http/; newer: http-v2/ with a .body beside)."""
    urls = []
    for wheel in index.wheels.values():
        for name in {quote(wheel.filename), wheel.filename}:
            urls.append(f"http://{index.host}:{index.port}/{index.prefix}/files/{name}")
    paths = []
    for url in urls:
        digest = hashlib.sha224(url.encode()).hexdigest()
        rel = "/".join(digest[:5]) + "/" + digest
        paths += [f"/tmp/pip/http/{rel}", f"/tmp/pip/http-v2/{rel}", f"/tmp/pip/http-v2/{rel}.body"]
    return paths
