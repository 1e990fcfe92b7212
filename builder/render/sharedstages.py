"""Stages several combinations share (the OS base of one OS, Python and user; torch of one torch and channel),
named by what they are made of.

One bake builds a shared stage once, but a publish split into one job per combination would build it in every
job: each cold runner imports only its own images' cache. So each stage gets a key, a hash of its instructions
from its base image up (comments and stage names left out), which two Dockerfiles share exactly when BuildKit
would build the same steps; a first wave builds each stage several combinations need once and exports it to
the registry cache as `stage-<key>`, and every job imports the stages its images are built through. A key that
two different stages happen to share (the same text over other context files) costs a cache miss, never a
wrong layer: BuildKit checks its own cache keys on import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from builder.render.contenthash import runs_on_context, stage_chains
from builder.render.dockerfile import RenderedCell

PREFIX = "stage-"
KEY_HEX = 24


@dataclass(frozen=True)
class SharedStage:
    """A stage built through by images of several combinations, and where one Dockerfile holding it is."""

    key: str  # stage-<hex>: the cache tag it is exported under
    group: str  # the first combination (render order) holding it: images/<group>/Dockerfile
    stage: str  # its name in that Dockerfile
    groups: tuple[str, ...]  # every combination built through it


def key_of(chain_text: str) -> str:
    return PREFIX + hashlib.sha256(chain_text.encode()).hexdigest()[:KEY_HEX]


def stage_keys(rendered: RenderedCell) -> dict[str, str]:
    """The stages this image is built through (base first, its own last) -> their keys."""
    chains = stage_chains(rendered.dockerfile)
    own = chains[rendered.stage]
    return {name: key_of(chains[name].text) for name in own.names}


def shared(rendered: list[RenderedCell], row_of: Mapping[str, str] | None = None) -> list[SharedStage]:
    """Every stage that images of two or more combinations are built through, in render order; with row_of
    (image tag -> its workflow row), of two or more rows: a combination split across rows shares its torch stage."""
    found: dict[str, tuple[str, str]] = {}
    groups: dict[str, list[str]] = {}
    rows: dict[str, set[str]] = {}
    for r in rendered:
        for name, key in stage_keys(r).items():
            found.setdefault(key, (r.group, name))
            members = groups.setdefault(key, [])
            if r.group not in members:
                members.append(r.group)
            rows.setdefault(key, set()).add((row_of or {}).get(r.cell.tag, r.group))
    return [SharedStage(key, group, name, tuple(groups[key])) for key, (group, name) in found.items()
            if len(rows[key]) > 1]


def bake_definition(stages: list[SharedStage], context: str) -> dict[str, Any]:
    """bake's JSON for building the stages alone: one target per stage (named by its key), cache as output."""
    return {"group": {"default": {"targets": [s.key for s in stages]}},
            "target": {s.key: {"context": context, "dockerfile": f"{s.group}/Dockerfile", "target": s.stage,
                               "output": ["type=cacheonly"]} for s in stages}}


def chains(rendered: list[RenderedCell], stages: list[SharedStage]) -> dict[str, list[tuple[str, bool]]]:
    """Each stage target's chain in the form `bake.waves` orders by (a stage holding another waits for it)."""
    by_group = {r.group: r.dockerfile for r in rendered}
    out: dict[str, list[tuple[str, bool]]] = {}
    for s in stages:
        all_chains = stage_chains(by_group[s.group])
        out[s.key] = [(key_of(all_chains[n].text), runs_on_context(all_chains[n].text))
                      for n in all_chains[s.stage].names]
    return out
