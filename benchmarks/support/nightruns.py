"""The night model's build and signing costs, from the runs the benchmarks recorded (benchmarks/results/).

Each figure names the run it came from (`results.Run.cite`): the row benchmark's cold publishes of the largest row
(benchmarks/bench_row.py), its warm rebuild after a numpy bump and its shared stages alone (`--rebuild`,
`--stages`), and cosign's key-based calls against a loopback registry (benchmarks/bench_sign.py). What no run here
can measure (the keyless round trips to Sigstore from a hosted runner) is added as an assumption and says so. A
figure whose run was never recorded is an error naming the command that records it, never a constant.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.support import results
from benchmarks.support.nightmodel import Figure

SIGSTORE_RTT_S = 0.3  # assumed: one request from a hosted runner to Sigstore's public Fulcio or Rekor, or to the OIDC
# token endpoint. cosign 3 (the workflow's v3.0.6) gets its signer per digest, not per call (sign.go: SignCmd calls
# signDigestBundle for each image; each gets a key pair and token, and bundle.SignData a Fulcio certificate): keyless,
# each digest costs an OIDC token, a certificate and a Rekor entry.
KEYLESS_REQUESTS = 3
REGISTRY_RTT_S = 0.05  # assumed: one request from a hosted runner to ghcr.io (GitHub's own network)
PUSH_REQUESTS = 4  # a signature attached: its blob (upload started, then put), its manifest, its referrers tag


class NotMeasured(Exception):
    """A figure the model needs whose run is not in benchmarks/results/."""


def row_wall_real(walls: dict[float, float]) -> float:
    """The row's wall at real size: the line through the runs in 1/scale (a part that grows with the bytes and one
    that does not: validation, apt, small blobs), at 1. Taking time as bytes (x scale) over-counted the fixed part
    scale times: 595 s an image from the 1/16 run, where the line gives under a tenth of that."""
    (s1, w1), (s2, w2) = sorted(walls.items())[:2]
    per_byte = (w2 - w1) / (1 / s2 - 1 / s1)
    return w1 + per_byte * (1 - 1 / s1)


def cold_rows(runs: list[results.Run]) -> dict[float, results.Run]:
    """The newest complete cold publish of the largest row at each scale, all made the same way: incompressible
    wheels, unlocked (a --rebuild run locks its row first, so its cold publish is another measure; its ratio of
    rebuild to cold is what it gives)."""
    largest = max((r.figures.get("images", 0) for r in runs), default=0)
    by_scale: dict[float, results.Run] = {}
    for run in runs:
        f = run.figures
        if f.get("images") == largest > 0 and f.get("published") == largest and f.get("installed_ratio", 1.0) == 1.0 \
                and "rebuild_wall_s" not in f:
            by_scale[f["scale"]] = run
    return by_scale


def build_image(runs: list[results.Run]) -> Figure:
    rows = cold_rows(runs)
    if len(rows) < 2:
        raise NotMeasured("a cold image's build needs the largest row at two scales: python benchmarks/bench_row.py "
                          "--scale 2, then --scale 4")
    two = dict(sorted(rows.items())[:2])
    images = int(next(iter(two.values())).figures["images"])
    real = row_wall_real({scale: run.figures["wall_s"] for scale, run in two.items()})
    return Figure(real / images, f"the largest row ({images} images) at real size, {real:.0f} s, on the line through "
                  + ", ".join(f"1/{s:g} ({r.figures['wall_s']:.0f} s: {r.cite()})" for s, r in two.items()))


def rebuild_image(runs: list[results.Run], build: Figure) -> Figure:
    """A numpy bump's rebuild on a cold runner importing the cache, as a share of the same run's cold publish: the
    ratio is measured in one run; the real-size cold build it multiplies is build_image's."""
    run = next((r for r in reversed(runs) if "rebuild_wall_s" in r.figures), None)
    if run is None:
        raise NotMeasured("a warm rebuild: python benchmarks/bench_row.py --scale 4 --stages --rebuild")
    f = run.figures
    ratio = (f["rebuild_wall_s"] / f["rebuild_images"]) / (f["wall_s"] / f["images"])
    return Figure(build.value * ratio, f"build_image_s x {ratio:.3f}: a cold runner rebuilt {f['rebuild_images']:.0f} "
                  f"images after a numpy bump in {f['rebuild_wall_s']:.0f} s, the same row cold in {f['wall_s']:.0f} s "
                  f"(1/{f['scale']:g} of the bytes: {run.cite()})")


def stage(runs: list[results.Run]) -> Figure:
    run = next((r for r in reversed(runs) if r.figures.get("stages_count", 0) > 0), None)
    if run is None:
        raise NotMeasured("a shared stage alone: python benchmarks/bench_row.py --scale 4 --stages --rebuild")
    f = run.figures
    return Figure(f["stages_s"] / f["stages_count"], f"`builder stages` on a cold engine: {f['stages_count']:.0f} "
                  f"shared stages in {f['stages_s']:.0f} s ({run.cite()})")


def signing(folder: Path = results.FOLDER) -> tuple[Figure, Figure]:
    """cosign's own cost per call and per digest, measured key-based and offline, plus keyless's round trips: per
    digest, as cosign 3 signs (the measured per-digest key decryption is left out: a keyless signer has no key file)."""
    run = results.latest("bench_sign", "call_s_both", "digest_s_both", "key_load_s", folder=folder)
    if run is None:
        raise NotMeasured("cosign's signing: python benchmarks/bench_sign.py")
    f = run.figures
    call, made = max(f["call_s_both"], 0.0), max(f["digest_s_both"] - f["key_load_s"], 0.0)
    network = KEYLESS_REQUESTS * SIGSTORE_RTT_S + PUSH_REQUESTS * REGISTRY_RTT_S
    return (Figure(call, f"measured: a cosign call's own cost, key-based against a loopback registry ({run.cite()})"),
            Figure(made + network, f"measured {made:.2f} s a digest signed and attached (`{run.command}`: "
                   f"{f['digest_s_both']:.2f} s "
                   f"less the key's decryption, {f['key_load_s']:.2f} s, that keyless signing has not), + "
                   f"{KEYLESS_REQUESTS} Sigstore requests at {SIGSTORE_RTT_S} s and {PUSH_REQUESTS} to the registry "
                   f"at {REGISTRY_RTT_S} s (assumed)"))


def install(folder: Path = results.FOLDER) -> tuple[Figure, Figure]:
    """The factory's install, uncached and from the cached environment, as bench_night's last full run measured it
    (its --quick mode measures neither)."""
    run = results.latest("bench_night", "install_uncached_s", "install_cached_s", folder=folder)
    if run is None:
        raise NotMeasured("the factory's install: python benchmarks/bench_night.py (without --quick)")
    return (Figure(run.figures["install_uncached_s"], f"pip install . into a fresh venv, no pip cache ({run.cite()})"),
            Figure(run.figures["install_cached_s"], f"the cached environment unpacked and the factory reinstalled "
                   f"offline ({run.cite()})"))
