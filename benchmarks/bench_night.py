"""Benchmark for issue 28: what a scheduled night of the publish workflow starts, for the production matrix.

Replays the decisions of .github/workflows/publish.yml (+ publish-cells.yml) against a real registry on loopback
(`docker-registry`, distribution, on 127.0.0.1 and a free port, its own storage) that the factory itself filled
(benchmarks/support/nightfill.py: every image of matrix.yaml as `builder publish` leaves it, pushed with the factory's
registry client, small synthetic layers). The plan is the plan job's: the jobs of the matrix rendered as
`builder publish --plan` renders them (locked, `--locks images`, exactly when the tree has images/*/lock/base.txt),
looked up by builder.publish.planner, rows as `--format github` prints them; the jobs started follow the workflow's
`if:` rules (benchmarks/support/nightjobs.py). Scenarios, each on a copy of the tree:
  (a) nothing changed; (b) one base image's digest changed (every combination pinning it);
  (c) one torch wheel's sha256 changed (every lock pinning that file); (d) the matrix 10x (ten image names), unchanged.
Requests are counted by the registry itself (its access log). Usage: python benchmarks/bench_night.py [--copies 10]
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

from benchmarks.support.localregistry import LocalRegistry
from benchmarks.support.nightfill import fill
from benchmarks.support.nightjobs import workflow_jobs, workflow_locks
from benchmarks.support.nighttree import Change, change_base, change_torch_wheel, copies, copy_tree
from builder.cli.planning import github
from builder.pipeline.jobs import Job, matrix_jobs
from builder.publish import planner
from builder.publish.promote import Target
from builder.publish.rows import Runner
from builder.registry.client import RegistryClient
from builder.render.sources import WheelSource

NAMESPACE = "rocm"


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
    moves = sum(1 for r in planner.reports(decisions) if r.state == "would-skip" and r.moved)
    folder = {d.job.combination: d.job.rendered.group for d in decisions if d.job.rendered is not None}
    return Night(name, len(todo), sorted({folder[g] for row in rows for g in str(row["groups"]).split()}),
                 workflow_jobs(len(rows), moves), requests, render_s, lookup_s,
                 change.groups if change else None)


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
    args = parser.parse_args()
    print("$ python benchmarks/bench_night.py" + (f" --copies {args.copies}" if args.copies != 10 else ""))
    load = os.getloadavg()[0]
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


def filled(registry: LocalRegistry, tree: Path, matrices: list[Path], what: str) -> Night:
    """The registry as a finished publish of these matrices leaves it; prints what that took."""
    todo = jobs_of(tree, matrices)
    before, start = settled(registry), time.perf_counter()
    fill(Target(f"{registry.address}/{NAMESPACE}", RegistryClient(registry.address), None), todo, workers=16)
    seconds, requests = time.perf_counter() - start, settled(registry) - before
    print(f"filled: {what}, {len(todo)} images published by the factory's registry client (synthetic layers) "
          f"in {seconds:.1f} s, {requests} requests")
    return Night("fill", len(todo), [], {}, requests, 0.0, seconds, None)


if __name__ == "__main__":
    main()
