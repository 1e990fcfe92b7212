"""Benchmark for issue 28: what a scheduled night of the publish workflow starts, for the production matrix.

Replays the decisions of .github/workflows/publish.yml (+ publish-cells.yml) against a real registry on loopback
(`docker-registry`, distribution, on 127.0.0.1 and a free port, its own storage) that the factory itself filled
(benchmarks/support/nightfill.py: every image of matrix.yaml as `builder publish` leaves it, pushed with the factory's
registry client, small synthetic layers). The plan is the plan job's: the jobs of the matrix rendered as
`builder plan` renders them (locked, `--locks images`, exactly when the tree has images/*/lock/base.txt),
looked up by builder.publish.planner, rows as `--format github` prints them; the jobs started follow the workflow's
`if:` rules (benchmarks/support/nightjobs.py). Scenarios, each on a copy of the tree:
  (a) nothing changed; (b) one base image's digest changed (every combination pinning it);
  (c) one torch wheel's sha256 changed (every lock pinning that file); (d) the matrix 10x (ten image names), unchanged.
Requests are counted by the registry itself (its access log).

Then a model of a night in runner-minutes (benchmarks/support/nightmodel.py, nightscenarios.py): quiet; one device
wheel; a numpy bump touching every image; a new base digest; a full cold publish. Measured here: the plan (scenario
(a) above), the factory's install uncached and from the cached environment, a lock refresh cold, quiet and after one
page changed against a loopback index answering 304 (benchmarks/support/nightcost.py); the rest is stated as
assumed, modelled or a placeholder. `--quick` measures only the lock refresh on a one-combination matrix and the
plan's render (no registry, no install): the test's mode.
Usage: python benchmarks/bench_night.py [--copies 10] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support import nightcost, nightmodel, nightruns, nightscenarios, results
from benchmarks.support.localregistry import LocalRegistry
from benchmarks.support.nightfill import fill
from benchmarks.support.nightjobs import workflow_jobs, workflow_locks
from benchmarks.support.nighttree import Change, change_base, change_torch_wheel, copies, copy_tree
from builder.buildkit.export import Cache
from builder.cli.planning import github
from builder.pipeline import stagewave
from builder.pipeline.jobs import Job, matrix_jobs
from builder.publish import planner
from builder.publish.promote import OCI_MANIFEST, Target
from builder.publish.rows import Runner
from builder.registry.client import RegistryClient
from builder.render import sharedstages
from builder.render.dockerfile import RenderedCell
from builder.render.sources import WheelSource

NAMESPACE = "rocm"
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Night:
    name: str
    images: int
    rows: list[str]  # the combinations the rows publish (their images/ folder names)
    jobs: dict[str, int]
    requests: int
    render_s: float
    lookup_s: float
    expected: tuple[str, ...] | None  # the combinations the change touched (None: no change)


def jobs_of(tree: Path, matrices: list[Path]) -> list[Job]:
    """The images the plan job plans: locked exactly as the workflow decides (`--locks images`)."""
    source = WheelSource(locks=workflow_locks(tree))
    return [job for matrix in matrices for job in matrix_jobs(matrix, None, None, source)]


def settled(registry: LocalRegistry) -> int:
    """The registry's request count once its access log stops growing (a line lands just after its answer)."""
    count = registry.requests()
    while True:
        time.sleep(0.2)
        now = registry.requests()
        if now == count:
            return count
        count = now


def night(name: str, registry: LocalRegistry, tree: Path, matrices: list[Path], change: Change | None = None) -> Night:
    """One scheduled run's plan job: render, look up (a fresh client, as a fresh runner has), rows and moves."""
    start = time.perf_counter()
    todo = jobs_of(tree, matrices)
    render_s = time.perf_counter() - start
    before = settled(registry)
    target = Target(f"{registry.address}/{NAMESPACE}", RegistryClient(registry.address), None)
    start = time.perf_counter()
    decisions = planner.plan(target, todo)
    lookup_s = time.perf_counter() - start
    requests = settled(registry) - before
    failed = [d for d in decisions if d.action == "error"]
    if failed:
        raise SystemExit(f"{name}: the plan failed for {len(failed)} images, e.g. {failed[0].reason}")
    # Whole combinations (a budget every one fits): the jobs the workflow starts when the runner holds each row.
    rows = json.loads(github(decisions, Runner(disk=10 << 40)))["include"]
    moves = sum(1 for d in decisions if d.action in ("skip", "move-tags") and d.moves)  # would-skip, tags to move
    built = [d.job for d in decisions if d.action == "build"]
    in_rows = {j.combination for j in built}
    stages = stagewave.to_build([d.job.rendered for d in decisions if d.job.rendered is not None
                                 and d.job.combination in in_rows], buildcache(registry))
    folder = {d.job.combination: d.job.rendered.group for d in decisions if d.job.rendered is not None}
    return Night(name, len(todo), sorted({folder[g] for row in rows for g in str(row["groups"]).split()}),
                 workflow_jobs(len(rows), moves, len(stages)), requests, render_s, lookup_s,
                 change.groups if change else None)


def buildcache(registry: LocalRegistry) -> Cache:
    return Cache(f"{registry.address}/{NAMESPACE}/buildcache", insecure=True)


def fill_stages(api: RegistryClient, rendered: list[RenderedCell]) -> None:
    """The shared stages in the build cache, as the last night's `stages` job left them (a tag each)."""
    config = api.push_blob(f"{NAMESPACE}/buildcache", b"{}")
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [],
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config,
                                  "size": 2}}).encode()
    for stage in sharedstages.shared(rendered):
        api.put_manifest(f"{NAMESPACE}/buildcache", stage.key, body, OCI_MANIFEST)


def variant(base: Path, folder: Path) -> Path:
    shutil.copytree(base, folder)
    return folder


def table(nights: list[Night]) -> str:
    head = ("| scenario | images | rows | jobs started | registry requests | plan s (render + look-ups) "
            "| combinations with a row |\n|---|---:|---:|---|---:|---:|---|")
    lines = [head]
    for n in nights:
        jobs = f"{sum(n.jobs.values())} ({', '.join(f'{k} {v}' if v > 1 else k for k, v in n.jobs.items())})"
        got = ", ".join(n.rows) or "none"
        if n.expected is not None:
            got += " (exactly the combinations changed)" if tuple(n.rows) == n.expected else \
                f" (UNEXPECTED: the change touched {', '.join(n.expected)})"
        lines.append(f"| {n.name} | {n.images} | {len(n.rows)} | {jobs} | {n.requests} "
                     f"({n.requests / n.images:.2f}/image) | {n.render_s + n.lookup_s:.1f} "
                     f"({n.render_s:.1f} + {n.lookup_s:.1f}) | {got} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=10, help="how many times the matrix, in scenario (d)")
    parser.add_argument("--quick", action="store_true", help="the model only, with the few quick measurements")
    args = parser.parse_args()
    print("$ python benchmarks/bench_night.py" + (f" --copies {args.copies}" if args.copies != 10 else "")
          + (" --quick" if args.quick else ""))
    load = os.getloadavg()[0]
    if args.quick:
        start = time.perf_counter()
        jobs_of(ROOT, [ROOT / "matrix.yaml"])
        model(time.perf_counter() - start, "the plan's render (--quick: no registry look-ups)", True, load)
        return
    with tempfile.TemporaryDirectory(prefix="rif-bench-night-") as tmp_name:
        tmp = Path(tmp_name)
        registry = LocalRegistry(tmp / "registry", access_log=True)
        registry.start()
        try:
            base = tmp / "tree"
            own = copy_tree(base)
            where = "the repository's" if own else ("synthetic (the repository has none: there the workflow plans "
                                                    "unlocked, and no base or wheel change reaches a content hash)")
            print(f"locks: {where}; registry: docker-registry on {registry.address}")
            nights = [filled(registry, base, [base / "matrix.yaml"], "production")]
            nights.append(night("(a) nothing changed", registry, base, [base / "matrix.yaml"]))
            b = variant(base, tmp / "b")
            change = change_base(b)
            nights.append(night(f"(b) {change.what}", registry, b, [b / "matrix.yaml"], change))
            c = variant(base, tmp / "c")
            change = change_torch_wheel(c)
            nights.append(night(f"(c) {change.what}", registry, c, [c / "matrix.yaml"], change))
            d = variant(base, tmp / "d")
            matrices = copies(d, args.copies)
            filled(registry, d, matrices, f"{args.copies}x production")
            nights.append(night(f"(d) {args.copies}x matrix ({args.copies} image names), nothing changed",
                                registry, d, matrices))
        finally:
            registry.stop()
    print(table(nights[1:]))
    print(f"load average {os.getloadavg()[0]:.1f} (at the start {load:.1f}) on {os.cpu_count()} cores")
    quiet = nights[1]
    model(quiet.render_s + quiet.lookup_s, "scenario (a): render + registry look-ups", False, load)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def model(plan_s: float, plan_source: str, quick: bool, load_at_start: float) -> None:
    """The night in runner-minutes, with the inputs measured here (nightcost) and the rest stated."""
    production = nightscenarios.production(ROOT / "matrix.yaml")
    with nightcost.scratch() as tmp_name:
        lock = nightcost.measure_lock(Path(tmp_name) / "lock", quick)
        install = None if quick else nightcost.measure_install(Path(tmp_name))
    print(f"lock refresh against a loopback index (ETag, 304), {lock.combinations} combinations, {lock.pip_steps} pip "
          f"steps: cold {lock.cold_s:.1f} s (1 worker); quiet {lock.quiet_s:.1f} s (8 workers): {lock.quiet_resolved} "
          f"steps resolved again, {lock.requests} requests to the index, {lock.conditional_304} of them conditional "
          f"and answered 304; numpy's page changed: {lock.changed_s:.1f} s, {lock.changed_resolved} steps resolved")
    inputs = nightinputs(production, lock, install, quick)
    print(f"plan: {plan_s:.1f} s ({plan_source}); production: {sum(production.images.values())} images in "
          f"{len(production.images)} combinations, {sum(len(f) for f in production.steps.values())} pip steps, "
          f"{production.shared} shared stages, {production.indexes} wheel indexes")
    print(nightmodel.inputs_table(inputs))
    nights = nightscenarios.scenarios(production, plan_s)
    print(nightmodel.table(nights, inputs))
    print(nightmodel.quiet_line(nights[0], inputs))
    if not quick:  # --quick (the test's mode) reads the install from here
        results.record("bench_night", {"plan_s": plan_s, "install_uncached_s": inputs.install_uncached_s.value,
                                       "install_cached_s": inputs.install_cached_s.value,
                                       "quiet_minutes": nightmodel.minutes(nights[0], inputs)}, load_at_start)


RTT_S = 0.1  # assumed: one conditional request to download.pytorch.org / PyPI (CDN) from a hosted runner
PROJECTS_PER_INDEX = 40  # assumed: torch's closure, the companions, numpy, a family's device packages, per index
# builder lock --update moves each OS's archive snapshot to now and reads its Packages indexes once per run
# (aptindex keeps them for every combination): measured here 2026-11-28, aptindex.load of the host mirror's bookworm
# main (63,436 packages) 16.0 s; taken twice per OS for its other suites and Ubuntu's larger universe (assumed).
OS_INDEXES_S = 2 * 16.0
STEP_S_ISSUE = 30 * 60 / 321  # issue 37: 321 pip steps in 10-30 minutes one after another; the upper figure


def nightinputs(p: nightscenarios.Production, lock: nightcost.LockRun, install: nightcost.Install | None,
                quick: bool) -> nightmodel.Inputs:
    F = nightmodel.Figure
    pip = sum(len(f) for f in p.steps.values())
    runs = results.load("bench_row")
    build = nightruns.build_image(runs)
    sign_call, sign_digest = nightruns.signing()
    step_s = max(lock.cold_s / max(lock.pip_steps, 1), STEP_S_ISSUE)
    pages = p.indexes * PROJECTS_PER_INDEX
    quiet_s = (lock.quiet_s / max(lock.pip_steps, 1) * pip + pages * RTT_S / nightmodel.LOCK_WORKERS
               + len(set(p.base.values())) * (RTT_S + OS_INDEXES_S)
               + nightscenarios.expiring(p) * step_s / min(nightmodel.LOCK_WORKERS, nightmodel.RUNNER_CPUS))
    if install is None:  # --quick: the install as the last full run of this benchmark measured it
        uncached, cached = nightruns.install()
    else:
        uncached = F(install.uncached_s, "measured here: pip install . into a fresh venv, no pip cache, from PyPI")
        cached = F(install.compressed_bytes / CACHE_BYTES_S + install.unpack_s + install.reinstall_s,
                   f"measured here: {install.compressed_bytes / 1e6:.0f} MB (zstd) at an assumed "
                   f"{CACHE_BYTES_S / 1e6:.0f} MB/s from the Actions cache + unpack {install.unpack_s:.1f} s + the "
                   f"factory reinstalled offline {install.reinstall_s:.1f} s")
    return nightmodel.Inputs(
        job_start_s=F(10.0, "assumed: billed from the job's start (set up job, checkout, post steps); queueing is "
                            "not billed"),
        install_uncached_s=uncached, install_cached_s=cached,
        lock_quiet_s=F(quiet_s, f"measured per step here ({lock.quiet_s / max(lock.pip_steps, 1):.3f} s, warm "
                                f"cache, loopback 304) x {pip} steps + {pages} pages ({p.indexes} indexes x "
                                f"{PROJECTS_PER_INDEX} projects, assumed) x {RTT_S} s RTT (assumed) / "
                                f"{nightmodel.LOCK_WORKERS} workers + {nightscenarios.expiring(p):.0f} expiring "
                                f"steps resolved + {len(set(p.base.values()))} OSes' archive indexes read once "
                                f"({OS_INDEXES_S:.0f} s each: 16 s measured for bookworm main, x2 assumed)"),
        lock_step_s=F(step_s, f"the larger of this machine's cold step on loopback "
                              f"({lock.cold_s / max(lock.pip_steps, 1):.1f} s) and issue 37's 30 min / 321 steps"),
        row_setup_s=F(60.0, "assumed: build-runner frees the disk and restarts the engine"),
        stage_s=nightruns.stage(runs), build_image_s=build,
        rebuild_image_s=nightruns.rebuild_image(runs, build), sign_call_s=sign_call, sign_digest_s=sign_digest,
        catalog_s=F(60.0, "assumed"), pages_s=F(20.0, "assumed"))


CACHE_BYTES_S = 50e6  # assumed: an Actions cache download on a hosted runner


def filled(registry: LocalRegistry, tree: Path, matrices: list[Path], what: str) -> Night:
    """The registry as a finished publish of these matrices leaves it; prints what that took."""
    todo = jobs_of(tree, matrices)
    before, start = settled(registry), time.perf_counter()
    fill(Target(f"{registry.address}/{NAMESPACE}", RegistryClient(registry.address), None), todo, workers=16)
    fill_stages(RegistryClient(registry.address), [j.rendered for j in todo if j.rendered is not None])
    seconds, requests = time.perf_counter() - start, settled(registry) - before
    print(f"filled: {what}, {len(todo)} images published by the factory's registry client (synthetic layers) "
          f"in {seconds:.1f} s, {requests} requests")
    return Night("fill", len(todo), [], {}, requests, 0.0, seconds, None)


if __name__ == "__main__":
    try:
        main()
    except (nightruns.NotMeasured, results.ResultsError) as error:  # a figure's run missing, or its file unreadable
        raise SystemExit(f"bench_night: {error}") from None
