"""Benchmark for issue 28: the registry-aware plan (`builder plan`) of a 10x production matrix.

The production matrix (matrix.yaml) ten times over, under ten image names (pytorch0 ... pytorch9: ten times its
images and combinations, each rendered as `builder publish` renders them), planned against a scripted loopback
registry (tests/fakes) that holds every answer back by --delay-ms (50 by default) before sending it. Two states:
a namespace where everything is published and every tag in place (the no-op night), and an empty one.
Prints seconds (render, then the plan's look-ups; wall, and this process's CPU: a loaded machine stretches the wall
time, the CPU time much less) and registry requests per image. Target: under 30 s.
Usage: python benchmarks/bench_plan.py [--copies 10] [--delay-ms 50] [--workers 16]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from builder.pipeline.jobs import Job, by_combination, matrix_jobs
from builder.publish import planner
from builder.publish.promote import Target
from builder.registry.client import RegistryClient
from builder.render.sources import WheelSource
from testkit.scripted_registry import Reply, Seen, serve
from testkit.stored_registry import Store, publish_all

ROOT = Path(__file__).resolve().parents[1]

TARGET_S = 30.0


def copies_of_production(n: int, tmp: Path) -> list[Job]:
    """matrix.yaml's images n times, each copy under its own image name (its own repository)."""
    text = (ROOT / "matrix.yaml").read_text()
    assert text.count("image: pytorch\n") == 1, "matrix.yaml names its image once"
    todo: list[Job] = []
    for k in range(n):
        path = tmp / f"matrix{k}.yaml"
        path.write_text(text.replace("image: pytorch\n", f"image: pytorch{k}\n"))
        todo += matrix_jobs(path, None, None, WheelSource())
    return todo


def _serve(store: Store, delay_s: float, conn: Connection) -> None:
    """The registry, in a process of its own (as a real one is): its address out, then its request count."""
    def answer(seen: Seen) -> Reply:
        time.sleep(delay_s)
        return store.answer(seen)

    scripted, httpd = serve(answer)
    conn.send(scripted.address)
    conn.recv()
    httpd.shutdown()
    conn.send(len(scripted.seen))


def measure(store: Store, todo: list[Job], delay_s: float, workers: int) -> tuple[float, float, int, dict[str, int]]:
    """Seconds of the plan (wall, then this process's CPU: the client's share), requests, actions."""
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    registry = multiprocessing.get_context("fork").Process(target=_serve, args=(store, delay_s, theirs), daemon=True)
    registry.start()
    try:
        address = ours.recv()
        target = Target(f"{address}/bench", RegistryClient(address), None)
        start, cpu = time.perf_counter(), time.process_time()
        decisions = planner.plan(target, todo, workers=workers)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        ours.send("stop")
        requests = int(ours.recv())
    finally:
        registry.join(timeout=30)
    actions = {a: sum(d.action == a for d in decisions) for a in ("build", "move-tags", "skip", "error")}
    return seconds, cpu, requests, actions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--workers", type=int, default=planner.WORKERS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rif-bench-plan-") as tmp:
        start, cpu = time.perf_counter(), time.process_time()
        todo = copies_of_production(args.copies, Path(tmp))
        render_s, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{args.copies}x production: {len(todo)} images, {len(by_combination(todo))} combinations; "
          f"rendered in {render_s:.1f} s ({cpu:.1f} s CPU); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    published = Store()
    publish_all(published, todo, "bench")
    worst = 0.0
    for name, store in (("everything published (a no-op night)", published), ("empty namespace", Store())):
        seconds, cpu, requests, actions = measure(store, todo, args.delay_ms / 1000, args.workers)
        worst = max(worst, seconds)
        print(f"{name}: plan {seconds:.1f} s, {cpu:.1f} s client CPU ({args.workers} workers, {args.delay_ms:g} ms "
              "per answer), "
              f"{requests} requests, {requests / len(todo):.2f} per image; {actions}")
    verdict = "under" if worst + render_s < TARGET_S else "OVER"
    print(f"render + slowest plan: {render_s + worst:.1f} s: {verdict} the {TARGET_S:g} s target")


if __name__ == "__main__":
    main()
