"""ROCm-scale benchmark (issue 16, item 8): the old layout and the BuildKit layout side by side, in one run.

Why synthetic: a real ROCm environment is 10-20 GB and needs a GPU index; what the layout costs depends only
on the bytes, how they split into layers and how they compress. So the environment is made of synthetic
wheels of realistic size and compressibility (synthwheels.py): a common package of several GB that torch
depends on, one ~1 GB device package per GPU target (pulled by `torch[device-<target>]`, as on TheRock's
index) and a small numpy whose version the update scenario bumps. They are served from the host over HTTP
(wheelindex.py), so every wheel download is counted.

Both layouts build runtime + devel for three single-target families of builder/data/gfx.yaml, local
channel, debian-12, and push them to a fresh local registry each:
- old: the template of 4a75d66^ (oldlayout.py), one classic build per image, pip --no-cache-dir;
- new: `builder render` of the same matrix, built with plain `docker buildx bake`.
Then, per layout: a numpy update of one family's pair (rebuild, push, count what the registry gained), and
for the new layout a build of a changed cell (another user: a new combination, every pip step runs again)
to show the pip cache mount serving what was downloaded before. Last, `builder build` against plain
`docker buildx bake` of the same file, both fully cached.

Usage: python benchmarks/bench_scale.py [--common-gb 3 --device-gb 1 --torch-gb 0.25 --numpy-mb 16]
Needs: Docker with buildx, debian:12, docker-registry, apt reachable from builds (devel's toolchain), and
disk: the old layout alone holds about 12x one environment (venv stages, six copies, the registry).
Everything it creates is tagged rif-bench* (builder's own tags: rocm-image-factory/rif-bench-pytorch) and
removed at the end, Ctrl-C included. BuildKit's cache records are left: pruning is not this script's to do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import quote

import docker
import enginestore
import floor
import oldlayout
import synthwheels
from localregistry import Image, LocalRegistry, kill_pushes
from synthwheels import Sizes, WheelSet
from wheelindex import WheelIndex

from builder.build.bake import host_network
from builder.core import facts as catalog
from builder.core.spec import CellSpec
from builder.matrix.expand import expand_matrix
from builder.render import tree as imagetree
from builder.render.dockerfile import RenderedCell, render_all
from builder.render.wheels import WheelSource

ROOT = Path(__file__).resolve().parent.parent
WHEEL_CACHE = Path("/tmp/rif-bench-wheels")
IMAGE = "rif-bench-pytorch"  # the matrix's image: builder's own tags are rocm-image-factory/rif-bench-pytorch
BUILDER_REPO = f"rocm-image-factory/{IMAGE}"
FAMILIES = ("gfx94X-dcgpu", "gfx1151", "gfx950-dcgpu")
FLAVORS = ("runtime", "devel")
BASE = "debian:12"
PIP_CACHE_ID = "rif-pip"  # the new template's cache mount (builder/render/wheels.py PIP_CACHE)
MB, GB = 1e6, 1e9
PUSH_WORKERS = 2


# ---------------------------------------------------------------- resources, cleaned up whatever happens


@dataclass
class Resources:
    """Everything the run creates, so the end (or Ctrl-C) removes exactly that."""

    client: docker.DockerClient
    work: Path
    refs: list[str] = field(default_factory=list)  # image references this run tagged
    ids: list[str] = field(default_factory=list)  # untagged images it left (the classic builder's stages)
    built: list[str] = field(default_factory=list)  # IDs of the images it built
    registries: list[LocalRegistry] = field(default_factory=list)
    index: WheelIndex | None = None

    def tag(self, ref: str) -> str:
        self.refs.append(ref)
        return ref

    def drop_images(self, refs: list[str] | None = None) -> None:
        """Remove images (all of this run's when refs is None): tags first, then the stages they kept."""
        chosen = list(self.refs) if refs is None else refs
        enginestore.remove_images(self.client, chosen)
        self.refs = [r for r in self.refs if r not in chosen]
        if refs is None:
            enginestore.remove_built(self.client, self.built)
            enginestore.remove_images(self.client, list(reversed(self.ids)))
            self.ids.clear()
            self.built.clear()
            builder_tags = [t for image in self.client.images.list(name=BUILDER_REPO) for t in image.tags
                            if t.startswith(BUILDER_REPO + ":")]
            enginestore.remove_images(self.client, builder_tags)

    def drop_stages(self) -> None:
        """Remove the classic builder's step images that no built image stands on (the venv stages): a step
        under a built image refuses (it has children), and a built image itself is never named here."""
        built = tuple(i.removeprefix("sha256:") for i in self.built)
        steps = [s for s in reversed(self.ids) if not any(b.startswith(s) for b in built)]
        enginestore.remove_images(self.client, steps)

    def discard(self, tags: list[str]) -> None:
        """Remove built images early (disk), by ID: their pushed references go with them."""
        ids = [str(self.client.images.get(tag).id) for tag in tags]
        enginestore.remove_built(self.client, ids)
        self.refs = [r for r in self.refs if r not in tags]

    def close(self) -> None:
        for step in (self.drop_images, self._stop_registries, self._stop_index):
            try:
                step()
            except Exception as exc:  # cleanup goes on: one failed step must not leave the rest behind
                print(f"  cleanup: {step.__name__}: {exc}", file=sys.stderr)
        shutil.rmtree(self.work, ignore_errors=True)

    def _stop_registries(self) -> None:
        for registry in self.registries:
            registry.stop()

    def _stop_index(self) -> None:
        if self.index is not None:
            self.index.stop()


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


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
                overridden: list[str]) -> str:
    """The benchmark's matrix: local channel, ROCm 7.2, debian-12, torch 2.13.0 without companions. Families a
    compatibility rule drops come back as includes with an override (the wheels are synthetic anyway)."""
    torch = '{version: "2.13.0", torchvision: null, torchaudio: null}'
    lines = [f"image: {IMAGE}", *([f"user: {user}"] if user else []),
             f'index_urls: {{rocm7.2: "{index_url}"}}', "matrix:", "  os: [debian-12]", "  platform: [rocm7.2]",
             f"  torch: [{torch}]", f"  gfx: [{', '.join(families)}]", "  channel: [local]",
             f"  flavor: [{', '.join(flavors)}]"]
    if overridden:
        lines += ["exclude:", *(f"  - {{gfx: {f}}}" for f in overridden), "include:"]
        lines += [f"  - {{os: debian-12, platform: rocm7.2, torch: {torch}, gfx: {f}, flavor: {flavor}, "
                  "channel: local, override: {reason: synthetic wheels of the ROCm-scale benchmark}}"
                  for f in overridden for flavor in flavors]
    return "\n".join(lines) + "\n"


def write_matrix(path: Path, families: list[str], flavors: list[str], index_url: str,
                 user: str | None = None) -> list[CellSpec]:
    path.write_text(matrix_yaml(families, flavors, index_url, user, []))
    dropped = sorted({d.cell.gfx for d in expand_matrix(path).dropped if d.cell.gfx})
    if dropped:
        path.write_text(matrix_yaml(families, flavors, index_url, user, dropped))
    return expand_matrix(path).cells


def image_key(cell: CellSpec) -> str:
    return f"{cell.gfx}-{cell.flavor}"


# ---------------------------------------------------------------- engine and registry steps


@contextmanager
def polled() -> Iterator[enginestore.StorePoller]:
    poller = enginestore.StorePoller().start()
    try:
        yield poller
    finally:
        poller.stop()


def push_all(registry: LocalRegistry, res: Resources, repo: str, images: dict[str, str]) -> dict[str, Image]:
    """Push each local image as repo:key and read back what the registry holds for it.

    The first goes alone (it brings the layers the others share), the rest two at a time: dockerd gzips a
    layer on one core, and this is what takes a push of GBs so long on a small machine."""
    keys = list(images)
    if keys:
        res.tag(registry.push(images[keys[0]], repo, keys[0]))
    pool = ThreadPoolExecutor(max_workers=PUSH_WORKERS)
    try:
        for ref in pool.map(lambda key: registry.push(images[key], repo, key), keys[1:]):
            res.tag(ref)
    except BaseException:
        kill_pushes()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return {key: registry.image(repo, key) for key in keys}


def start_registry(res: Resources, name: str) -> LocalRegistry:
    registry = LocalRegistry(res.work / name)
    res.registries.append(registry)
    registry.start()
    return registry


def run_logged(cmd: list[str], log: Path, cwd: Path | None = None) -> float:
    """Run a build command with its output in log; its wall time, or an error with the log's tail."""
    start = time.perf_counter()
    with log.open("w") as fh:
        code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, check=False).returncode
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed (exit {code}); log {log}:\n{tail}")
    return time.perf_counter() - start


# ---------------------------------------------------------------- one layout's results


@dataclass
class Layout:
    """What one layout cost: store, registry, downloads, floors."""

    name: str
    peak: int = 0
    final: int = 0
    images: dict[str, Image] = field(default_factory=dict)
    pair_bytes: int = 0
    repush: int = 0
    downloads: Counter[str] = field(default_factory=Counter)
    floors: dict[str, floor.Floor] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Timer:
    def __init__(self, layout: Layout, phase: str) -> None:
        self.layout, self.phase = layout, phase

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        print(f"[{self.layout.name}] {self.phase} ...", flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.layout.seconds[self.phase] = time.perf_counter() - self.start


def measure_images(res: Resources, layout: Layout, registry: LocalRegistry, repo: str,
                   local: dict[str, str], pair: str) -> None:
    """Registry figures and floors, while the images are still in the engine."""
    layout.images = push_all(registry, res, repo, local)
    for flavor in FLAVORS:
        layout.floors[flavor] = floor.floor(res.client, local[f"{pair}-{flavor}"])


def update(res: Resources, layout: Layout, registry: LocalRegistry, repo: str, pair: str,
           build: Callable[[], dict[str, str]]) -> None:
    """The small-dependency update: rebuild one family's pair with the bumped numpy, push, count the growth."""
    keys = [f"{pair}-{flavor}" for flavor in FLAVORS]
    layout.pair_bytes = union_bytes([layout.images[k] for k in keys])
    before = registry.stored_bytes()
    known = {layer.digest for image in layout.images.values() for layer in image.layers}
    rebuilt = push_all(registry, res, repo, build())
    layout.repush = registry.stored_bytes() - before
    uploaded = {layer.digest: layer for image in rebuilt.values() for layer in image.layers
                if layer.digest not in known}
    layout.notes.append("numpy update uploaded: " + "; ".join(
        f"{size(layer.size)} {instruction(layer.created_by)}" for layer in uploaded.values()))


def instruction(created_by: str, width: int = 70) -> str:
    """A history line, short: the instruction and the end of its command (where the packages are named)."""
    text = " ".join(created_by.replace("/bin/sh -c", "").replace("#(nop)", "").replace("# buildkit", "").split())
    return text if len(text) <= width else text[:24] + " ... " + text[-(width - 29):]


def store_figures(res: Resources, layout: Layout, poller: enginestore.StorePoller, refs: list[str],
                  stages: list[str]) -> None:
    """Peak and final bytes of the build's own folders (see enginestore), and what the peak held beyond the
    final layers: layers still being written (a RUN's files before its own cleanup) and folders that are no
    final layer (kept build stages, the classic builder's containers)."""
    final_layers = enginestore.image_folders(res.client, refs) - poller.before
    stage_layers = enginestore.image_folders(res.client, stages) - poller.before
    at_peak, others = poller.peak(final_layers | stage_layers)
    final = {Path(k).name: v for k, v in enginestore.du_each([enginestore.OVERLAY / n for n in final_layers]).items()}
    layout.peak, layout.final = sum(at_peak.values()), sum(final.values())
    growing = sum(v - final.get(n, 0) for n, v in at_peak.items() if n in final_layers)
    stray = sum(v for n, v in at_peak.items() if n not in final_layers)
    layout.notes.append(f"at the peak: {size(growing)} in final layers beyond what they keep, {size(stray)} in "
                        f"folders that are no final layer; {size(others)} of other builds left out; "
                        f"{len(poller.samples)} samples")


# ---------------------------------------------------------------- the old layout


def old_layout(res: Resources, supply: Supply, cells: list[CellSpec]) -> Layout:
    layout = Layout("old")
    registry = start_registry(res, "registry-old")
    source = old_source(supply)
    first = supply.downloads()
    with Timer(layout, "build"), polled() as poller:
        local = {image_key(c): old_build(res, c, source, "numpy") for c in cells}
    store_figures(res, layout, poller, list(local.values()), res.ids)
    res.drop_stages()  # the venv stages: measured, now only disk
    with Timer(layout, "push"):
        measure_images(res, layout, registry, "rif-bench-old", local, cells[0].gfx or "")
    pair = [c for c in cells if c.gfx == cells[0].gfx]
    res.discard([tag for key, tag in local.items() if not key.startswith(f"{cells[0].gfx}-")])
    bumped = f"numpy=={supply.wheels.numpy(1).version}"
    supply.show_numpy(bumped=True)
    with Timer(layout, "numpy update"):
        update(res, layout, registry, "rif-bench-old", cells[0].gfx or "",
               lambda: {image_key(c): old_build(res, c, source, bumped, "-update") for c in pair})
    supply.show_numpy(bumped=False)
    layout.downloads = supply.downloads() - first
    res.drop_images()
    registry.stop()
    shutil.rmtree(registry.root, ignore_errors=True)
    return layout


def old_source(supply: Supply) -> oldlayout.OldSource:
    if supply.index is None:
        return oldlayout.OldSource(wheelhouse=supply.wheelhouse)
    return oldlayout.OldSource(supply.index.url, trusted_host(supply.index.host))


def trusted_host(host: str) -> str | None:
    """pip ignores a plain-HTTP index unless it is on loopback or named by --trusted-host."""
    return None if host.startswith("127.") or host == "localhost" else host


def old_build(res: Resources, cell: CellSpec, source: oldlayout.OldSource, numpy: str, suffix: str = "") -> str:
    key = image_key(cell) + suffix
    context = oldlayout.write_context(cell, source, res.work / "old" / key, numpy)
    tag = res.tag(f"rif-bench/old:{key}")
    result = oldlayout.build(res.client, context, tag)
    res.ids.extend(result.steps)
    res.built += [result.image_id] if result.image_id else []
    if result.error is not None:
        raise RuntimeError(f"old layout, {key}: {result.error}\n" + "\n".join(result.tail))
    return tag


# ---------------------------------------------------------------- the new layout


def new_layout(res: Resources, supply: Supply, matrix: Path, family: str) -> Layout:
    layout = Layout("new")
    registry = start_registry(res, "registry-new")
    tree = res.work / "tree"
    rendered = render_tree(supply, matrix, tree)
    first = supply.downloads()
    targets = {r.target: image_key(r.cell) for r in rendered}
    with Timer(layout, "build"), polled() as poller:
        local = bake(res, tree, targets, "")
    store_figures(res, layout, poller, list(local.values()), [])
    with Timer(layout, "push"):
        measure_images(res, layout, registry, "rif-bench-new", local, family)
    pin_numpy(tree, supply.wheels.numpy(1).version)
    supply.show_numpy(bumped=True)
    pair = {t: k for t, k in targets.items() if k.startswith(family + "-")}
    with Timer(layout, "numpy update"):
        update(res, layout, registry, "rif-bench-new", family, lambda: bake(res, tree, pair, "-update"))
    with Timer(layout, "changed cell"):
        changed_cell(res, supply, layout, matrix.parent, family)
    layout.downloads = supply.downloads() - first
    supply.show_numpy(bumped=False)
    res.drop_images()
    registry.stop()
    shutil.rmtree(registry.root, ignore_errors=True)
    return layout


def render_tree(supply: Supply, matrix: Path, tree: Path) -> list[RenderedCell]:
    """builder's own rendering of the matrix (what `builder render --out` writes), made buildable here."""
    source = WheelSource(supply.wheelhouse if supply.index is None else None)
    rendered = render_all(expand_matrix(matrix).cells, source)
    imagetree.write(tree, rendered, prune=False, source=source)
    if supply.index is not None and trust_index(tree, supply.index.url, supply.index.host):
        supply.patched = True
    return rendered


def trust_index(tree: Path, url: str, host: str) -> bool:
    """pip ignores a plain-HTTP index off loopback unless told `--trusted-host`; where builder's render does
    not say it, add it after the index URL (the one edit to builder's output). True when it had to."""
    trusted = trusted_host(host)
    edited = False
    for dockerfile in tree.glob("*/Dockerfile") if trusted else []:
        text = dockerfile.read_text()
        if f"--index-url {url} " in text and f"--trusted-host {trusted}" not in text:
            dockerfile.write_text(text.replace(f"--index-url {url} ", f"--index-url {url} --trusted-host {trusted} "))
            edited = True
    return edited


def pin_numpy(tree: Path, version: str) -> None:
    """The update: the small layer's `numpy` becomes `numpy==<new>` (a bumped pin, as a matrix change would)."""
    for dockerfile in tree.glob("*/Dockerfile"):
        text = dockerfile.read_text()
        dockerfile.write_text(re.sub(r"(?m)^(\s+torch==\S+) numpy$", rf"\1 numpy=={version}", text))


def bake(res: Resources, tree: Path, targets: dict[str, str], suffix: str) -> dict[str, str]:
    """Plain `docker buildx bake` of targets (bake target -> image key), tagged rif-bench/new:<key><suffix>."""
    tags = {target: res.tag(f"rif-bench/new:{key}{suffix}") for target, key in targets.items()}
    sets = [arg for target, tag in tags.items() for arg in ("--set", f"{target}.tags={tag}")]
    run_logged(["docker", "buildx", "bake", "--file", str(tree / imagetree.BAKE_FILE), "--progress", "plain",
                *host_network(tree / imagetree.BAKE_FILE, res.work, list(targets)), *sets, *targets],
               res.work / f"bake{suffix or '-build'}.log")
    res.built += [str(res.client.images.get(tag).id) for tag in tags.values()]
    return {targets[t]: tag for t, tag in tags.items()}


def changed_cell(res: Resources, supply: Supply, layout: Layout, folder: Path, family: str) -> None:
    """A cell of another combination (another user): every pip step runs again, from the pip cache mount."""
    matrix = folder / "matrix-user.yaml"
    write_matrix(matrix, [family], ["runtime"], supply.index.url if supply.index else "http://unused.invalid/simple",
                 user="rifbench")
    tree = res.work / "tree-user"
    rendered = render_tree(supply, matrix, tree)
    before = supply.downloads()
    bake(res, tree, {r.target: image_key(r.cell) for r in rendered}, "-user")
    fetched = supply.downloads() - before
    layout.notes.append(f"changed cell (user rifbench, {family} runtime): {sum(fetched.values())} wheel downloads")


# ---------------------------------------------------------------- builder build vs plain bake


@dataclass
class Timing:
    builder: list[float] = field(default_factory=list)
    plain: list[float] = field(default_factory=list)
    startup: list[float] = field(default_factory=list)  # `builder --version`: interpreter and imports
    cold: float = 0.0  # the first builder build (cold from the wheelhouse; warm against the index)
    source: str = ""

    @property
    def ratio(self) -> float:
        return statistics.median(self.builder) / statistics.median(self.plain)


def timing(res: Resources, supply: Supply, matrix: Path, family: str, repeats: int) -> Timing:
    """`builder build --no-validate` and plain bake of `builder render`'s file of the same matrix, both warm
    (a warm-up run of each first), alternated.

    Against the index when builder's own render reaches it: the images built above are the cache. Else (an
    edited render, or no index) from the wheelhouse, one family's pair, built cold once first."""
    folder = res.work / "timing"
    folder.mkdir()
    source: list[str] = []
    if supply.index is None or supply.patched:
        matrix = folder / "matrix.yaml"
        write_matrix(matrix, [family], list(FLAVORS), "http://unused.invalid/simple")
        source = ["--wheelhouse", str(supply.wheelhouse)]
    builder = [str(ROOT / ".venv" / "bin" / "builder"), "build", "--matrix", str(matrix), *source,
               "--no-validate", "--quiet"]
    run_logged([builder[0], "render", "--matrix", str(matrix), "--out", str(folder / "images"), *source],
               folder / "render.log", cwd=folder)
    plain = ["docker", "buildx", "bake", "--file", str(folder / "images" / imagetree.BAKE_FILE), "--progress",
             "plain", *host_network(folder / "images" / imagetree.BAKE_FILE, folder)]
    result = Timing(source="wheelhouse, one pair" if source else "index, the images above")
    print(f"[new] timing ({result.source}) ...", flush=True)
    result.cold = run_logged(builder, folder / "builder-first.log", cwd=folder)
    run_logged(plain, folder / "plain-warmup.log", cwd=folder)
    for i in range(repeats):
        result.builder.append(run_logged(builder, folder / f"builder-{i}.log", cwd=folder))
        result.plain.append(run_logged(plain, folder / f"plain-{i}.log", cwd=folder))
        result.startup.append(run_logged([builder[0], "--version"], folder / "version.log", cwd=folder))
    res.drop_images()
    return result


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


# ---------------------------------------------------------------- figures


@dataclass(frozen=True)
class Row:
    figure: str
    old: str
    new: str
    target: str
    old_met: bool | None
    new_met: bool | None


def union_bytes(images: list[Image]) -> int:
    sizes = {layer.digest: layer.size for image in images for layer in image.layers}
    return sum(sizes.values())


def missing_bytes(image: Image, present: Image) -> int:
    """What pulling image transfers when present is already there: its layers present does not have."""
    have = present.digests()
    return sum({layer.digest: layer.size for layer in image.layers if layer.digest not in have}.values())


def device_bytes(new: Layout, family: str) -> int:
    """A family's device layer(s), from the new layout where they are layers of their own."""
    return sum(layer.size for layer in new.images[f"{family}-runtime"].layers if "[device-" in layer.created_by)


def size(n: float) -> str:
    return f"{n / GB:.3f} GB" if abs(n) >= GB else f"{n / MB:.1f} MB"


def ratio(num: float, den: float) -> str:
    return f"{num / den:.3f}x ({size(num)} / {size(den)})" if den else "n/a"


def rows(old: Layout, new: Layout, families: list[str], timed: Timing | None) -> list[Row]:
    a, b = families[0], families[1]
    devices = {f: device_bytes(new, f) for f in families}
    result = [Row("peak store during build / final images", ratio(old.peak, old.final), ratio(new.peak, new.final),
                  "<= 1.15x", old.peak <= 1.15 * old.final, new.peak <= 1.15 * new.final)]
    result += pair_rows(old, new, a) + family_rows(old, new, families, devices, b)
    result.append(downloads_row(old, new))
    result.append(Row("re-pushed after numpy update / pair bytes", pct(old.repush, old.pair_bytes),
                      pct(new.repush, new.pair_bytes), "< 5%", old.repush < 0.05 * old.pair_bytes,
                      new.repush < 0.05 * new.pair_bytes))
    worst = {name: max(lay.floors.values(), key=lambda f: f.ratio) for name, lay in (("old", old), ("new", new))}
    result.append(Row(f"size over the floor, {a} runtime / devel", floor_text(old), floor_text(new), "< 3%",
                      worst["old"].ratio < 0.03, worst["new"].ratio < 0.03))
    if timed is not None:
        builder, plain = statistics.median(timed.builder), statistics.median(timed.plain)
        result.append(Row("builder build / plain bake, warm (median)", "n/a (no bake)",
                          f"{timed.ratio:.3f}x ({builder:.2f} s / {plain:.2f} s)", "<= 1.05x", None,
                          timed.ratio <= 1.05))
    return result


def pct(num: int, den: int) -> str:
    return f"{num / den:.2%} ({size(num)} / {size(den)})" if den else "n/a"


def pair_rows(old: Layout, new: Layout, family: str) -> list[Row]:
    """Pair storage / (runtime + devel's own), devel's own = devel - runtime; devel pull after runtime / own."""
    def figures(lay: Layout) -> tuple[int, int, int]:
        rt, dv = lay.images[f"{family}-runtime"], lay.images[f"{family}-devel"]
        return union_bytes([rt, dv]), dv.size, missing_bytes(dv, rt)

    (os_, oi, op), (ns, ni, np_) = figures(old), figures(new)
    oown = old.images[f"{family}-devel"].size - old.images[f"{family}-runtime"].size
    nown = new.images[f"{family}-devel"].size - new.images[f"{family}-runtime"].size
    return [Row(f"registry, {family} runtime+devel / (runtime + devel own)", ratio(os_, oi), ratio(ns, ni),
                "<= 1.02x", os_ <= 1.02 * oi, ns <= 1.02 * ni),
            Row("devel pull with runtime present / devel own", ratio(op, oown), ratio(np_, nown),
                "own only (<= 1.02x)", op <= 1.02 * oown, np_ <= 1.02 * nown)]


def family_rows(old: Layout, new: Layout, families: list[str], devices: dict[str, int], second: str) -> list[Row]:
    """Three family runtimes / (common + device layers), common = mean(image - its device bytes); second
    family's pull after the first / its device bytes."""
    def figures(lay: Layout) -> tuple[int, int, int]:
        runtimes = [lay.images[f"{f}-runtime"] for f in families]
        common = statistics.mean(img.size - devices[f] for img, f in zip(runtimes, families, strict=True))
        return union_bytes(runtimes), int(common + sum(devices.values())), missing_bytes(runtimes[1], runtimes[0])

    (os_, oi, op), (ns, ni, np_) = figures(old), figures(new)
    dev = devices[second]
    return [Row("registry, 3 family runtimes / (common + device layers)", ratio(os_, oi), ratio(ns, ni),
                "<= 1.05x", os_ <= 1.05 * oi, ns <= 1.05 * ni),
            Row(f"pull of {second} with {families[0]} present / its device", ratio(op, dev), ratio(np_, dev),
                "device only (<= 1.05x)", op <= 1.05 * dev, np_ <= 1.05 * dev)]


def downloads_row(old: Layout, new: Layout) -> Row:
    def text(lay: Layout) -> str:
        if not lay.downloads:
            return "0 (no index)"
        return f"max {max(lay.downloads.values())} over {len(lay.downloads)} wheels"

    return Row("wheel downloads per distinct wheel, all runs", text(old), text(new), "once per wheel",
               max(old.downloads.values(), default=0) <= 1, max(new.downloads.values(), default=0) <= 1)


def floor_text(lay: Layout) -> str:
    return " / ".join(f"{f.ratio:.2%}" for f in lay.floors.values())


def print_table(table: list[Row]) -> None:
    widths = [max(len(getattr(r, name)) for r in table) for name in ("figure", "old", "new", "target")]
    head = ("figure", "old layout", "new layout", "target")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + "  met old/new")
    for r in table:
        cells = (r.figure, r.old, r.new, r.target)
        met = "/".join("-" if m is None else ("yes" if m else "NO") for m in (r.old_met, r.new_met))
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + "  " + met)


def print_notes(old: Layout, new: Layout, supply: Supply, wheels: WheelSet, timed: Timing | None) -> None:
    names = {w.filename: f"{w.project} {w.version}" for w in wheels.wheels}
    for lay in (old, new):
        counts = ", ".join(f"{names.get(f, f)}: {n}" for f, n in sorted(lay.downloads.items()))
        print(f"downloads, {lay.name}: {counts or 'none'}")
        print(f"phases, {lay.name}: " + ", ".join(f"{k} {v:.0f} s" for k, v in lay.seconds.items()))
        for note in lay.notes:
            print(f"{lay.name}: {note}")
        print(f"floor, {lay.name}: " + "; ".join(
            f"{k}: image {size(f.image)}, base {size(f.base)}, venv {size(f.venv)}, packages {size(f.packages)}, "
            f"over {size(f.over)}" for k, f in lay.floors.items()))
    if timed is not None:
        print(f"timing runs (s): builder {[round(x, 2) for x in timed.builder]}, plain "
              f"{[round(x, 2) for x in timed.plain]}, first builder build {timed.cold:.1f} ({timed.source}); "
              "`builder --version` "
              f"(interpreter + imports) {statistics.median(timed.startup):.2f} s")
    for note in supply.notes:
        print(note)


# ---------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--common-gb", type=float, default=3.0, help="installed size of the common package")
    parser.add_argument("--device-gb", type=float, default=1.0, help="installed size of each device package")
    parser.add_argument("--torch-gb", type=float, default=0.25, help="installed size of torch itself")
    parser.add_argument("--numpy-mb", type=float, default=16.0, help="installed size of the small dependency")
    parser.add_argument("--families", nargs=3, default=list(FAMILIES), metavar="FAMILY",
                        help="three single-target gfx families of builder/data/gfx.yaml")
    parser.add_argument("--repeats", type=int, default=3, help="warm timing runs of each command")
    parser.add_argument("--no-timing", action="store_true", help="skip builder build vs plain bake")
    return parser.parse_args()


def targets_of(families: list[str]) -> list[str]:
    known = catalog.gfx_families()
    for family in families:
        if family not in known or len(known[family].targets) != 1:
            raise SystemExit(f"{family}: not a single-target family of builder/data/gfx.yaml")
    return [known[f].targets[0] for f in families]


def check_disk(sizes: Sizes) -> None:
    """The old layout's peak: 9 environments in the store (3 venv stages, 6 copies), then 6 pushed (about 3
    compressed) once the stages are gone; and the wheels themselves (about half their installed size)."""
    env = sizes.common + sizes.device + sizes.torch + sizes.numpy
    wheels = (sizes.common + 3 * sizes.device + sizes.torch) // 2
    need = 9 * env + (0 if (WHEEL_CACHE / sizes.key()).is_dir() else wheels)
    free = shutil.disk_usage("/var/lib/docker").free
    print(f"environment {size(env)}; the old layout needs about {size(need)} of disk at its peak; {size(free)} free")
    if need > free - 5 * GB:
        raise SystemExit("not enough disk for these sizes: lower --common-gb / --device-gb")


def main() -> None:
    args = parse_args()
    sizes = Sizes(common=int(args.common_gb * GB), device=int(args.device_gb * GB), torch=int(args.torch_gb * GB),
                  numpy=int(args.numpy_mb * MB))
    families = list(args.families)
    check_disk(sizes)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C cleans up, even if started with it ignored
    started = time.perf_counter()
    print(f"synthetic wheels under {WHEEL_CACHE} ({sizes.key()}) ...", flush=True)
    wheels = synthwheels.ensure(WHEEL_CACHE, sizes, targets_of(families))
    print(f"  ready after {time.perf_counter() - started:.0f} s: " + ", ".join(
        f"{w.project} {w.version} {size(w.size)} (installed {size(w.installed)})" for w in wheels.wheels))
    res = Resources(docker.from_env(timeout=3600), Path(tempfile.mkdtemp(prefix="rif-bench-scale-")))
    try:
        run(res, wheels, families, args)
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        res.close()
    print(f"total {time.perf_counter() - started:.0f} s")


def run(res: Resources, wheels: WheelSet, families: list[str], args: argparse.Namespace) -> None:
    supply = make_supply(res, wheels, "rb" + uuid.uuid4().hex[:12])
    url = supply.index.url if supply.index else "http://unused.invalid/simple"
    print(f"wheels from {url if supply.index else supply.wheelhouse}", flush=True)
    matrix = res.work / "matrix.yaml"
    cells = write_matrix(matrix, families, list(FLAVORS), url)
    cells.sort(key=lambda c: (families.index(c.gfx or ""), FLAVORS.index(c.flavor)))
    old = old_layout(res, supply, cells)
    new = new_layout(res, supply, matrix, families[0])
    timed = None if args.no_timing else timing(res, supply, matrix, families[0], args.repeats)
    supply.notes.append(forget_wheels(res, supply))
    if supply.patched:
        supply.notes.append(f"pip refuses a plain-HTTP index off loopback and builder's render does not say "
                            f"--trusted-host {supply.index.host if supply.index else ''}: added to its pip lines "
                            "(the only edit to builder's render; the old layout gets it too)")
    print()
    print_table(rows(old, new, families, timed))
    print()
    print_notes(old, new, supply, wheels, timed)


if __name__ == "__main__":
    main()
