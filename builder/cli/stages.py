"""`builder stages`: the first wave of a publish split into jobs (publish-cells.yml's `stages` job).

The stages that several of the selected combinations share are built once, cache only, into --cache-registry;
the per-combination jobs then import them instead of each building the same OS base. BuildKit's log goes to
`.rif/logs/shared-stages.log`; the terminal gets one line per stage.
"""

from __future__ import annotations

import typer

from builder.cli import console, flags, planning
from builder.cli.kit import (
    EXIT_FAILED,
    EXIT_OK,
    BuilderOpt,
    BuildNetworkOpt,
    InsecureOpt,
    RunnerDiskOpt,
    RunnerOpt,
    buildkit,
    handles_errors,
)
from builder.core.errors import usage_error
from builder.core.logfiles import LOG_DIR, log_path, strip_ansi
from builder.core.safefs import open_log
from builder.core.text import safe
from builder.pipeline import baking, jobs
from builder.pipeline.options import BakeOptions
from builder.publish import runners
from builder.registry.address import check_insecure

LOG_NAME = "shared-stages"


@handles_errors
@flags.grouped
def stages(selection: flags.Selection, cache_registry: flags.CacheRegistryOpt = None, insecure: InsecureOpt = None,
           compression: flags.CompressionOpt = "gzip", runner_disk: RunnerDiskOpt = None, runner: RunnerOpt = None,
           builder: BuilderOpt = None, build_network: BuildNetworkOpt = "default") -> None:
    """Build the stages several of the selected combinations share (the OS base, torch) once, into
    --cache-registry, for the per-combination `publish` jobs to import; push no image."""
    insecure_hosts = check_insecure(insecure)
    kit = buildkit(builder, build_network)
    where = runners.resolve(selection.matrix, runner, runner_disk)
    todo = selection.jobs()
    bake = BakeOptions(source=selection.source(), compression=flags.compression(compression),
                       cache=flags.cache(cache_registry, insecure_hosts), buildkit=kit,
                       row_of=planning.row_of(todo, where))
    raise typer.Exit(run_stages(todo, bake))


def run_stages(todo: list[jobs.Job], options: BakeOptions) -> int:
    """Build the shared stages and print one line each; the exit code is 1 when one failed (the jobs then build it
    themselves)."""
    if options.cache is None:
        raise usage_error("--cache-registry", "the stages are built into the registry cache: pass HOST/NS")
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    path = log_path(LOG_DIR, LOG_NAME)
    with open_log(path) as log:
        outcomes = baking.shared_stages(todo, options, lambda target, line: print(strip_ansi(line), file=log))
    if not outcomes:
        console.out.print(f"no stage is shared by two of the {len(jobs.by_combination(todo))} combinations: "
                       "nothing to build")
        return EXIT_OK
    for o in outcomes:
        state = "[green]built[/green]" if o.result.ok else "[red]failed[/red]"
        console.out.print(f"{state} {o.stage.key} ({o.stage.stage} of {len(o.stage.groups)} combinations, "
                       f"from {safe(o.stage.group)}) -> {safe(options.cache.ref)}:{o.stage.key}", soft_wrap=True)
        if not o.result.ok:
            console.out.print(f"  {safe(o.result.error or 'the build failed')}", soft_wrap=True)
    failed = [o for o in outcomes if not o.result.ok]
    if failed:
        console.err.print(f"{len(failed)} shared stage(s) failed; the jobs that need them build them: log {safe(path)}",
                       soft_wrap=True)
    return EXIT_FAILED if failed else EXIT_OK
