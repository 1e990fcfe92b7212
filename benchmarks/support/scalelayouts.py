"""The ROCm-scale benchmark's two layouts (bench_scale.py): the old one (one classic build per image) and the
new one (builder's render, plain bake), each built, pushed, measured and updated."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from benchmarks.support import enginestore, floor, oldlayout
from benchmarks.support.localregistry import LocalRegistry
from benchmarks.support.scaleplumbing import (
    BASE,
    FLAVORS,
    Layout,
    Resources,
    Timer,
    polled,
    push_all,
    run_logged,
    size,
    start_registry,
    union_bytes,
)
from benchmarks.support.scalesupply import Supply, image_key, trusted_host, write_matrix
from builder.buildkit.bake import host_network
from builder.core.spec import CellSpec
from builder.matrix.expand import expand_matrix
from builder.render import imagetree
from builder.render.dockerfile import RenderedCell, render_all
from builder.render.sources import WheelSource


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


def store_figures(res: Resources, layout: Layout, poller: enginestore.StorePoller, refs: list[str]) -> None:
    """Peak and final bytes of the build's own folders (see enginestore), and what the peak held beyond the
    final layers: layers still being written (a RUN's files before its own cleanup) and folders that are no
    final image layer (kept build stages, the classic builder's containers, BuildKit's own snapshots of the
    steps beside the image's unpacked layers on the containerd store)."""
    final_layers = enginestore.image_folders(res.engine, res.client, refs) - poller.before
    at_peak = poller.peak()
    final = {Path(k).name: v for k, v in
             enginestore.du_each([res.engine.snapshots / n for n in final_layers]).items()}
    layout.peak, layout.final = sum(at_peak.values()), sum(final.values())
    growing = sum(v - final.get(n, 0) for n, v in at_peak.items() if n in final_layers)
    stray = sum(v for n, v in at_peak.items() if n not in final_layers)
    layout.notes.append(f"at the peak: {size(growing)} in final layers beyond what they keep, {size(stray)} in "
                        f"folders that are no final layer; {len(poller.samples)} samples")


# ---------------------------------------------------------------- the old layout


def old_layout(res: Resources, supply: Supply, cells: list[CellSpec]) -> Layout:
    layout = Layout("old")
    registry = start_registry(res, "registry-old")
    source = old_source(supply)
    first = supply.downloads()
    with Timer(layout, "build"), polled(res.engine) as poller:
        local = {image_key(c): old_build(res, c, source, "numpy") for c in cells}
    store_figures(res, layout, poller, list(local.values()))
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


def old_build(res: Resources, cell: CellSpec, source: oldlayout.OldSource, numpy: str, suffix: str = "") -> str:
    key = image_key(cell) + suffix
    context = oldlayout.write_context(cell, source, res.work / "old" / key, numpy)
    tag = res.tag(f"rif-bench/old:{key}")
    result = oldlayout.build(res.client, context, tag)
    base = str(res.client.images.get(BASE).id).removeprefix("sha256:")
    res.ids.extend(s for s in result.steps if not base.startswith(s))  # FROM's step is the base: never ours
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
    with Timer(layout, "build"), polled(res.engine) as poller:
        local = bake(res, tree, targets, "")
    store_figures(res, layout, poller, list(local.values()))
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
    """The update: the small layer's `numpy` becomes `numpy==<new>` (a bumped pin, as a matrix change would). A
    render that no longer has the line is an error: an update that changes nothing would measure nothing."""
    changed = 0
    for dockerfile in tree.glob("*/Dockerfile"):
        text = dockerfile.read_text()
        new, count = re.subn(r"(?m)^(\s+torch==\S+) numpy(?=( \\)?$)", rf"\1 numpy=={version}", text)
        dockerfile.write_text(new)
        changed += count
    if not changed:
        raise RuntimeError(f"no `torch==... numpy` line in the Dockerfiles under {tree}: the numpy update found "
                           "nothing to bump (has the render changed?)")


def bake(res: Resources, tree: Path, targets: dict[str, str], suffix: str) -> dict[str, str]:
    """Plain `docker buildx bake` of targets (bake target -> image key), tagged rif-bench/new:<key><suffix>."""
    tags = {target: res.tag(f"rif-bench/new:{key}{suffix}") for target, key in targets.items()}
    sets = [arg for target, tag in tags.items() for arg in ("--set", f"{target}.tags={tag}")]
    run_logged(["docker", "buildx", "bake", "--file", str(tree / imagetree.BAKE_FILE), "--progress", "plain",
                *host_network(tree / imagetree.BAKE_FILE, res.work, list(targets)), *sets, *targets],
               res.work / f"bake{suffix or '-build'}.log", cwd=res.work)  # buildx reads contexts under its cwd
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
