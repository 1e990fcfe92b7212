"""Which stages BuildKit executed in a bake, read from its plain progress log (for bench_stages.py).

A RUN, COPY or ADD step is executed unless BuildKit says it took it from cache: `CACHED`, or, for a step
imported from a registry cache, the layer downloads and `extracting` lines of its result (an imported step may
end with DONE, then CACHED, or DONE alone). Process output (`#12 0.351 ...`) is always an executed step. Each
step's line names its target and stage (`#12 [target base 2/3] RUN ...`; a bake of one target leaves the target
out); a stage is executed when one of its own steps was, counted by its sharedstages key, so the same OS base
in two Dockerfiles is one stage. Two stages whose first steps are identical (the OS base of two users) share
those steps: the second counts only when a step of its own ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from builder.render.contenthash import stage_chains
from builder.render.sharedstages import key_of

_STEP = re.compile(r"^#(\d+) \[([^\]]+)\] (RUN|COPY|ADD)\b")
_OUTPUT = re.compile(r"^#(\d+) \d+\.\d+ ")
_ERROR = re.compile(r"^#(\d+) ERROR: ")
_FROM_CACHE = re.compile(r"^#(\d+) (CACHED$|sha256:|extracting )")
_COUNT = re.compile(r"^\d+/\d+$")


def executed(lines: Iterable[tuple[str | None, str]], dockerfiles: dict[str, str]) -> set[str]:
    """The keys of the stages that ran a step, from (bake target the line was routed to, line) pairs, given each
    target's Dockerfile text. Step numbers restart with each bake; the target keeps them apart (a bake of one
    target leaves it out of its step names, and the bake's reader routes the lines to it)."""
    steps: dict[tuple[str | None, str], tuple[str, str]] = {}
    ran: set[tuple[str | None, str]] = set()
    cached: set[tuple[str | None, str]] = set()
    for hint, line in lines:
        found = _STEP.match(line)
        if found:
            words = found.group(2).split()
            if words and _COUNT.match(words[-1]):
                words = words[:-1]
            if len(words) == 2:
                steps.setdefault((hint, found.group(1)), (words[0], words[1]))
            elif len(words) == 1 and hint is not None:
                steps.setdefault((hint, found.group(1)), (hint, words[0]))
            continue
        output = _OUTPUT.match(line) or _ERROR.match(line)
        if output:
            ran.add((hint, output.group(1)))
        elif (hit := _FROM_CACHE.match(line)) is not None:
            cached.add((hint, hit.group(1)))
    ran |= set(steps) - cached
    keys: set[str] = set()
    chains = {target: stage_chains(text) for target, text in dockerfiles.items()}
    for step in ran:
        if step in steps:
            target, stage = steps[step]
            chain = chains.get(target, {}).get(stage)
            if chain is not None:
                keys.add(key_of(chain.text))
    return keys


def distinct(dockerfiles: dict[str, str], stages: dict[str, str]) -> set[str]:
    """The keys of every stage the targets (-> their Dockerfile's stage) are built through."""
    keys: set[str] = set()
    for target, stage in stages.items():
        chains = stage_chains(dockerfiles[target])
        keys |= {key_of(chains[name].text) for name in chains[stage].names}
    return keys
