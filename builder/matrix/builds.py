"""Whether a TheRock line's own build defines a family: its CMake target list at the line's tag or branch.

A release workflow's choice list names families that no build of that line defined (rockrel's 7.13 list keeps
gfx90X-dcgpu, split by TheRock#2869 before 7.12 was tagged); what the line's build defines, with the targets
gfx.yaml gives the family, is what decides. Pure functions of builder/data/{therock_builds,gfx}.yaml.
"""

from __future__ import annotations

from builder.core import facts


def build_of(line: str) -> facts.TheRockBuild | None:
    return facts.therock_builds().get(line)


def defines(line: str, family: str) -> bool:
    """The line's build defines the family with every target gfx.yaml gives it (a line without copied lists: yes)."""
    return family_problem(line, family) is None


def replacements(line: str, family: str) -> list[str]:
    """gfx.yaml families the line's build defines that hold part of the family's targets: what replaced it."""
    build, wanted = build_of(line), set(facts.gfx_families()[family].targets)
    if build is None:
        return []
    found = []
    for name, fam in facts.gfx_families().items():
        members = build.members(name)
        if name != family and members is not None and set(fam.targets) <= wanted and set(fam.targets) <= set(members):
            found.append(name)
    return found


def family_problem(line: str, family: str) -> str | None:
    """Why the line's build does not build the family as gfx.yaml means it (citing the copied list); None if it does."""
    build = build_of(line)
    if build is None:
        return None
    members = build.members(family)
    if members is None:
        instead = replacements(line, family)
        tail = f"; its families for those targets are {', '.join(instead)}" if instead else ""
        return f"TheRock {line}'s build does not define {family} ({build.source()}){tail}"
    missing = [t for t in facts.gfx_families()[family].targets if t not in members]
    if missing:
        return (f"TheRock {line}'s build gives {family} only {', '.join(members)}, not {', '.join(missing)} "
                f"({build.source()})")
    ci = build.family_matrix.get(family)
    if ci is not None and not ci.pytorch:
        return (f"TheRock {line}'s family matrix expects its torch build of {family} to fail "
                f"(expect_pytorch_failure, amdgpu_family_matrix.py @ {build.ref})")
    return None


def per_family_served(line: str) -> dict[str, str]:
    """gfx.yaml family -> the name the line's release workflow asked for it by, for every family of that choice list
    the line's build defines with gfx.yaml's targets (rockrel 7.12's `gfx90a` is gfx90a-dcgpu)."""
    build = build_of(line)
    if build is None or build.release_workflow is None:
        return {}
    served: dict[str, str] = {}
    for asked in build.release_workflow.families:
        members = build.members(asked)
        for name, fam in facts.gfx_families().items():
            if members is not None and set(fam.targets) == set(members) and defines(line, name):
                served[name] = asked
    return served
