"""What baking in waves costs and buys (builder/buildkit/bake.py `waves`), measured in one run on the real engine.

A step that reads the build context (a wheelhouse or lock bind mount) is a separate BuildKit vertex per bake
target; targets that share it are merged by cache key, and that merge can lose a race, leaving two images that
should share a layer with a copy each. Waves let one target build such a step and the others take it from cache.

Both modes bake the same tree shape, cold (each gets wheels of its own bytes, so nothing of the other's cache
applies; the OS base stage is warmed first): three GPU families of one combination, runtime and devel each,
local channel, synthetic TheRock-shaped wheels. Printed per mode: wall time, whether each devel image starts
with its runtime's layers, and how many distinct torch layers the families hold (1 = shared). Then the ratio
of the wall times (waves / one bake).

Usage: python benchmarks/bench_waves.py [--torch-mb 256 --device-mb 64 --repeats 1]   (after scripts/setup.sh;
needs debian:12 and docker buildx). Every image it makes is removed at the end; BuildKit's cache is left.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import docker

from builder.buildkit.bake import HOST, bake, waves
from builder.matrix.expand import load_matrix
from builder.render import imagetree
from builder.render.dockerfile import RenderedCell, render_images
from builder.render.sources import WheelSource
from testkit.synthwheels import TORCH, therock_like

TARGETS = ["gfx942", "gfx1151", "gfx1200", "gfx1201"]
MATRIX = ("image: {image}\nmatrix:\n  os: [debian-12]\n  platform: [rocm7.2]\n"
          "  torch:\n    - {{version: '{torch}', torchvision: null, torchaudio: null}}\n"
          "  gfx: [gfx94X-dcgpu, gfx1151, gfx120X-all]\n  channel: [local]\n  flavor: [runtime, devel]\n")


def wheels(dest: Path, salt: str, torch_mb: int, device_mb: int) -> None:
    """TheRock-shaped wheels whose payloads start with the salt: other bytes, other cache keys, a cold build."""
    therock_like(dest, TARGETS, payload=torch_mb << 20, salt=salt.encode(), device_bytes=device_mb << 20)


def rendered_for(tmp: Path, name: str, wheelhouse: Path) -> list[RenderedCell]:
    matrix = tmp / f"{name}.yaml"
    matrix.write_text(MATRIX.format(image=name, torch=TORCH))
    return render_images(load_matrix(matrix), WheelSource(wheelhouse=wheelhouse))


def build(tmp: Path, name: str, rendered: list[RenderedCell], in_waves: bool) -> tuple[float, dict[str, str]]:
    """Bake every image (in waves, or all in one bake): seconds, tag -> image ID."""
    tree = tmp / f"tree-{name}"
    imagetree.write(tree, rendered, prune=False, source=rendered[0].source)
    targets = [r.target for r in rendered]
    plan = waves({r.target: r.chain for r in rendered}) if in_waves else [targets]
    start = time.perf_counter()
    results = {}
    for wave in plan:
        results.update(bake(tree / imagetree.BAKE_FILE, wave, cwd=tmp, kit=HOST))  # setup.sh's engine: no bridge
    seconds = time.perf_counter() - start
    failed = [t for t, r in results.items() if not r.ok]
    if failed:
        raise SystemExit(f"bake failed for {failed}: {results[failed[0]].error}")
    by_target = {r.target: r.cell.tag for r in rendered}
    return seconds, {by_target[t]: str(r.image_id) for t, r in results.items()}


def sharing(client: docker.DockerClient, ids: dict[str, str]) -> tuple[int, int, int]:
    """(devel images that start with their runtime's layers, devel images, distinct torch layers)."""
    layers = {tag: list(client.images.get(i).attrs["RootFS"]["Layers"]) for tag, i in ids.items()}
    devels = [t for t in layers if t.endswith("_devel")]
    good = sum(1 for t in devels if layers[t][:len(layers[t.replace("_devel", "_runtime")])]
               == layers[t.replace("_devel", "_runtime")])
    base = len(client.images.get("debian:12").attrs["RootFS"]["Layers"])
    torch = {layers[t][base + 2] for t in layers if t.endswith("_runtime")}  # above apt/venv and groups
    return good, len(devels), len(torch)


def cleanup(client: docker.DockerClient, names: list[str]) -> None:
    for name in names:
        for image in client.images.list(name=f"rocm-image-factory/{name}"):
            client.images.remove(str(image.id), force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--torch-mb", type=int, default=256)
    parser.add_argument("--device-mb", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    client = docker.from_env(timeout=3600)
    stamp = f"{time.time_ns():x}"
    names: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rif-bench-waves-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            names.append(f"rif-bench-waves-warm{stamp}")
            wheels(tmp / "wh-warm", f"warm{stamp}", 1, 1)
            build(tmp, names[-1], rendered_for(tmp, names[-1], tmp / "wh-warm"), True)  # the OS base, apt
            totals = {"one bake": 0.0, "waves": 0.0}
            print(f"{'mode':<10}{'seconds':>10}{'devel over runtime':>22}{'torch layers':>15}")
            for round_ in range(args.repeats):
                for mode in ("one bake", "waves"):
                    name = f"rif-bench-waves-{mode.replace(' ', '')}{round_}x{stamp}"
                    names.append(name)
                    wheels(tmp / f"wh-{name}", name, args.torch_mb, args.device_mb)
                    seconds, ids = build(tmp, name, rendered_for(tmp, name, tmp / f"wh-{name}"), mode == "waves")
                    good, devels, torch = sharing(client, ids)
                    totals[mode] += seconds
                    print(f"{mode:<10}{seconds:>10.1f}{f'{good}/{devels}':>22}{torch:>15}")
            ratio = totals["waves"] / totals["one bake"]
            print(f"ratio (waves / one bake, cold, {args.repeats} round(s)): {ratio:.3f}")
        finally:
            cleanup(client, names)


if __name__ == "__main__":
    main()
