"""The old spellings of one release ago, still understood: `publish --plan` (and its old name `--dry-run`) is
`builder plan`, `publish --shared-stages` is `builder stages`, `publish --quiet` is no longer needed, and
`publish --release` (one GPU family at a time, a name that read as a ROCm or torch release) is `--by-family`.

Each old spelling costs one line on stderr naming the new one, and is routed before the command parses its
arguments, so neither `plan`, `stages` nor `publish` carries a flag of another mode (nor shows one in --help).
The options the old mode accepted and ignored are dropped with it; any other stays and is refused as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.cli import console


@dataclass(frozen=True)
class Route:
    command: str  # the command the old spelling means now
    ignored: frozenset[str]  # options the old mode accepted but never used: dropped, with their value


_BUILDING = frozenset({"--gpu", "--apptainer", "--compression", "--release", "--builder", "--build-network",
                       "--progress"})
OLD: dict[str, Route] = {
    "--plan": Route("plan", _BUILDING),
    "--dry-run": Route("plan", _BUILDING),
    "--shared-stages": Route("stages", frozenset({"--registry", "--gpu", "--apptainer", "--release", "--progress",
                                                  "--record"})),
}
QUIET = ("--quiet", "-q")
RENAMED = {"--release": "--by-family"}  # publish's options by their old name -> the name they have now


def route(args: list[str], takes_value: frozenset[str]) -> tuple[str, list[str]]:
    """The command and arguments `publish ARGS` means today (`publish` itself when ARGS spell no old mode);
    takes_value: publish's options of old that take a value (so a value like `--match --plan` is never read as an
    option). Says each old spelling on stderr."""
    units = _units(args, takes_value)
    old = [u[0] for u in units if u[0] in OLD or u[0] in QUIET]
    modes = {OLD[t].command for t in old if t in OLD}
    if len(modes) > 1:
        return "publish", args  # two modes at once: refused as unknown options
    kept = [u for u in units if u[0] not in OLD and u[0] not in QUIET]
    if not modes:
        if old:
            _notice("`builder publish --quiet`", "`builder publish` (build logs always go to .rif/logs)")
        return "publish", [t for u in _renamed(kept) for t in u]
    mode = next(t for t in old if t in OLD)
    command = OLD[mode].command
    _notice(f"`builder publish {mode}`", f"`builder {command}`")
    return command, [t for u in kept if u[0].split("=", 1)[0] not in OLD[mode].ignored for t in u]


def _renamed(units: list[list[str]]) -> list[list[str]]:
    """publish's units with each renamed option under its name of today, said once per old name."""
    said: set[str] = set()
    out: list[list[str]] = []
    for unit in units:
        name, eq, value = unit[0].partition("=")
        if name not in RENAMED:
            out.append(unit)
            continue
        if name not in said:
            _notice(f"`builder publish {name}`", f"`builder publish {RENAMED[name]}`")
            said.add(name)
        out.append([RENAMED[name] + eq + value, *unit[1:]])
    return out


def _units(args: list[str], takes_value: frozenset[str]) -> list[list[str]]:
    """ARGS cut into an option with its value, a flag, or an argument each; everything after `--` is one unit."""
    units: list[list[str]] = []
    i = 0
    while i < len(args):
        if args[i] == "--":
            units.append(args[i:])
            break
        width = 2 if args[i] in takes_value else 1  # `--option=value` is one token
        units.append(args[i:i + width])
        i += width
    return units


def _notice(old: str, new: str) -> None:
    console.err.print(f"notice: {old} is now {new}; the old spelling goes in the next release", soft_wrap=True,
                      highlight=False, markup=False)
