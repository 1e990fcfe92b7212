"""The first wave of a publish split into jobs: each stage several combinations share, built once into the registry
cache; and, in every job, the shared stages its images import from there.

builder.render.sharedstages names the stages. `builder stages` (the workflow's `stages` job,
before the per-combination jobs) builds those the selected images share, cache only (no image, no push), and
exports each under `<cache>:stage-<key>`. A job then imports, beside its images' own cache, every stage key of
their chains that the registry holds: one manifest look-up per key, and a key it cannot look up is left out
(the job builds that stage itself), so a failed first wave costs time, never a publish.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from builder.buildkit.bake import BuildResult, OnLine, bake, waves
from builder.buildkit.builders import CURRENT, BuildKit
from builder.buildkit.export import Cache
from builder.core.safefs import replace_file
from builder.core.scratch import scratch_dir
from builder.registry import credentials, retry
from builder.registry.client import RegistryClient
from builder.registry.errors import RegistryError
from builder.render import imagetree, sharedstages
from builder.render.dockerfile import RenderedCell
from builder.render.sharedstages import SharedStage
from builder.render.sources import WheelSource

LOOKUP_WORKERS = 8
LOOKUP_DEADLINE_S = 60.0
STAGE_FILE = "shared-stages.json"


@dataclass(frozen=True)
class StageOutcome:
    stage: SharedStage
    result: BuildResult


def build(rendered: list[RenderedCell], source: WheelSource, cache: Cache, compression: str,
          on_line: OnLine = lambda target, line: None, kit: BuildKit = CURRENT,
          row_of: Mapping[str, str] | None = None) -> list[StageOutcome]:
    """Build every stage two or more of the rendered combinations (or rows: row_of, image tag -> its row, where a
    combination is split across rows) share, once, on kit's builder (which the caller checked:
    lifecycle.shared_stages), into cache's registry."""
    stages = sharedstages.shared(rendered, row_of)
    if not stages:
        return []
    with imagetree.run_tree(source, kit.identity()) as tree, scratch_dir("rif-stages-") as tmp:
        imagetree.write(tree, rendered, prune=True, source=source)
        definition = sharedstages.bake_definition(stages, str(tree.resolve()))
        for key, target in definition["target"].items():
            target["cache-from"] = [cache.attributes(key, False, compression)]
            if cache.write:
                target["cache-to"] = [cache.attributes(key, True, compression)]
        stage_file = tmp / STAGE_FILE
        replace_file(stage_file, json.dumps(definition, indent=2).encode())
        results: dict[str, BuildResult] = {}
        for wave in waves(sharedstages.chains(rendered, stages), cache.write):
            results.update(bake(stage_file, wave, on_line, cwd=tree.parent, images=False, kit=kit))
    return [StageOutcome(s, results[s.key]) for s in stages]


def with_stages(cache: Cache, rendered: list[RenderedCell], policy: retry.Policy = retry.DEFAULT) -> Cache:
    """cache, with each target importing the shared stages of its chain that the registry holds. An image's own
    stage is never looked up: the wave builds only stages under images (an image's stage names its cell)."""
    chains = {r.target: sharedstages.stage_keys(r) for r in rendered}
    images = {chains[r.target][r.stage] for r in rendered}
    wanted = {t: [k for k in keys.values() if k not in images] for t, keys in chains.items()}
    held = present(cache, sorted({k for keys in wanted.values() for k in keys}), policy)
    return replace(cache, stages={t: tuple(k for k in keys if k in held) for t, keys in wanted.items()})


def present(cache: Cache, keys: list[str], policy: retry.Policy = retry.DEFAULT) -> set[str]:
    """The keys whose stage the cache registry holds; one that cannot be looked up counts as absent."""
    if not keys:
        return set()
    host, _, repository = cache.ref.partition("/")
    insecure = frozenset({host}) if cache.insecure else frozenset()
    client = RegistryClient(host, credentials.lookup(cache.ref), policy=policy, insecure=insecure)
    client.until(LOOKUP_DEADLINE_S)

    def held(key: str) -> bool:
        try:
            return client.digest(repository, key) is not None
        except RegistryError:
            return False

    with ThreadPoolExecutor(max_workers=min(LOOKUP_WORKERS, len(keys))) as pool:
        return {key for key, ok in zip(keys, pool.map(held, keys), strict=True) if ok}


def to_build(rendered: list[RenderedCell], cache: Cache, policy: retry.Policy = retry.DEFAULT) -> list[SharedStage]:
    """The shared stages of these images that the cache registry does not hold yet: what a first wave (the `stages`
    job) would build. A stage it cannot look up counts as not held (the wave then runs, as it always did)."""
    stages = sharedstages.shared(rendered)
    held = present(cache, [s.key for s in stages], policy)
    return [s for s in stages if s.key not in held]
