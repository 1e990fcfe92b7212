"""A night of the workflows in runner-minutes: which jobs start (benchmarks/support/nightjobs.py), what each costs.

Each job costs its runner's start (billed set-up, checkout, post steps), the factory's install (cached or not),
and its own work: the plan's render and registry look-ups, the lock refresh, the shared stages, each row's
engine set-up and builds, the signatures, the catalog. GitHub bills each job's minutes rounded up to the whole
minute ("About billing for GitHub Actions", docs.github.com), so a night is the sum of its jobs' rounded minutes.
Every input is a Figure that says where it came from: measured here, taken from a recorded run of a benchmark
(benchmarks/support/nightruns.py: builds, stages, signing), or assumed (with why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

TARGET_MIN = 5.0  # issue 37: a night with nothing new costs at most 5 runner-minutes
LOCK_WORKERS = 8  # lock-refresh.yml: builder lock --jobs 8
RUNNER_CPUS = 4  # GitHub's ubuntu-24.04 for public repositories: 4 CPUs (pip resolution is partly CPU)
SIGN_BATCH = 50  # publish-cells.yml: 50 digests to a cosign call
MEAN_REUSE_DAYS = 10.0  # builder/render/lockcache.py: an entry is reused for 7 to 13 days


@dataclass(frozen=True)
class Figure:
    value: float
    source: str


@dataclass(frozen=True)
class Inputs:
    job_start_s: Figure  # billed set-up + checkout + post steps of one job
    install_uncached_s: Figure
    install_cached_s: Figure
    lock_quiet_s: Figure  # a production lock refresh with nothing new (pip resolves only the expiring steps)
    lock_step_s: Figure  # one production pip step resolved
    row_setup_s: Figure  # .github/actions/build-runner: disk freed, engine restarted
    stage_s: Figure  # one shared stage built (an OS base)
    build_image_s: Figure  # one image built whole (cold)
    rebuild_image_s: Figure  # one image rebuilt over cached torch (a numpy bump)
    sign_call_s: Figure  # one cosign call's own cost (its start and login)
    sign_digest_s: Figure  # one digest (cosign 3): ephemeral key, OIDC token, certificate, signature, Rekor entry, push
    catalog_s: Figure
    pages_s: Figure


@dataclass(frozen=True)
class Scenario:
    name: str
    plan_s: float  # the plan job's render + look-ups, measured (bench_night's registry nights)
    rows: int
    images: int  # images built (and signed)
    stages: int  # shared stages the build cache lacks
    cold: bool  # images built whole, else rebuilt over cached layers
    lock_resolved: int  # pip steps the lock refresh resolves again
    pip_steps: int  # every pip step (what a refresh without the index cache resolves, one after another)


def billed(seconds: float) -> int:
    return math.ceil(seconds / 60) if seconds > 0 else 0


def jobs(s: Scenario, i: Inputs, before: bool = False) -> dict[str, float]:
    """Seconds of each job (name -> seconds, a row job per row) the night starts; before: as the workflows were
    (an uncached install, every pip step resolved one after another, the stages job on every night of two rows or
    more, one cosign call per digest)."""
    start = i.job_start_s.value
    install = (i.install_uncached_s if before else i.install_cached_s).value
    if before:
        lock = s.pip_steps * i.lock_step_s.value
    else:
        lock = i.lock_quiet_s.value + s.lock_resolved * i.lock_step_s.value / min(LOCK_WORKERS, RUNNER_CPUS)
    out = {"lock-refresh": start + install + lock, "plan": start + install + s.plan_s}
    if s.stages or (before and s.rows > 1):
        out["stages"] = start + install + i.row_setup_s.value + s.stages * i.stage_s.value
    per_image = (i.build_image_s if s.cold else i.rebuild_image_s).value
    for row in range(s.rows):
        images = s.images // s.rows + (1 if row < s.images % s.rows else 0)
        out[f"publish {row + 1}"] = start + install + i.row_setup_s.value + images * per_image
    if s.rows:
        calls = s.images if before else math.ceil(s.images / SIGN_BATCH)
        out["sign"] = start + calls * i.sign_call_s.value + s.images * i.sign_digest_s.value
        out["catalog"] = start + install + i.catalog_s.value
        out["pages"] = start + i.pages_s.value
    return out


def minutes(s: Scenario, i: Inputs, before: bool = False) -> int:
    return sum(billed(v) for v in jobs(s, i, before).values())


def fixed_minutes(s: Scenario, i: Inputs) -> int:
    """The night with every build free: what the jobs cost by being jobs."""
    free = replace(i, build_image_s=Figure(0, ""), rebuild_image_s=Figure(0, ""), stage_s=Figure(0, ""))
    return minutes(s, free)


def table(scenarios: list[Scenario], i: Inputs) -> str:
    head = ("| night | rows | images built | shared stages | lock steps resolved | jobs | runner-minutes before "
            "(uncached install, serial lock refresh, stages job always, a cosign call per digest) | runner-minutes "
            "now | of which fixed cost |"
            "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for s in scenarios:
        lines.append(f"| {s.name} | {s.rows} | {s.images} | {s.stages} | {s.lock_resolved} | {len(jobs(s, i))} "
                     f"| {minutes(s, i, before=True)} | {minutes(s, i)} | {fixed_minutes(s, i)} |")
    return "\n".join(lines)


def inputs_table(i: Inputs) -> str:
    lines = ["| input | seconds | source |", "|---|---:|---|"]
    for name, figure in vars(i).items():
        lines.append(f"| {name} | {figure.value:.1f} | {figure.source} |")
    return "\n".join(lines)


def quiet_line(quiet: Scenario, i: Inputs) -> str:
    got = minutes(quiet, i)
    parts = ", ".join(f"{k} {v:.0f} s -> {billed(v)} min" for k, v in jobs(quiet, i).items())
    return (f"quiet night: {got} runner-minutes ({parts}); target {TARGET_MIN:.0f}: ratio {got / TARGET_MIN:.2f} "
            f"({'met' if got <= TARGET_MIN else 'MISSED'}); before: {minutes(quiet, i, before=True)}")
