"""The `builder` command: one subcommand per stage, exit 0 on success, 1 when an image failed, 2 on bad input.

Each command parses its options, calls one function of the package and prints; the work lives in the
stage modules (see README, "How it works").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from builder.cli import audit, build, catalog, matrix, planning, publish, render, spellings, stages, which
from builder.cli.kit import flags_as_flags, show_version


class Commands(TyperGroup):
    """The subcommands, with the old spellings of publish's modes routed to the commands that now do them."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name != "publish":
            return name, command, rest
        takes_value = frozenset(opt for cmd in ("publish", "plan", "stages") for param in self.commands[cmd].params
                                if param.param_type_name == "option" and not getattr(param, "is_flag", True)
                                for opt in param.opts)
        name, rest = spellings.route(rest, takes_value)
        return name, self.commands[name], rest


app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  cls=Commands)

# Each command lives with its printers in the module of its group (`builder/cli/<group>.py`); this is the
# order `builder --help` lists them in.
COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("matrix", matrix.matrix_cmd),
    ("render", render.render),
    ("build", build.build),
    ("plan", planning.plan),
    ("stages", stages.stages),
    ("publish", publish.publish),
    ("push", publish.push),
    ("test", build.test_cmd),
    ("base", build.base),
    ("prune", build.prune_cmd),
    ("lock", render.lock_cmd),
    ("wheelhouse", render.wheelhouse_cmd),
    ("catalog", catalog.catalog_cmd),
    ("diff", audit.diff_cmd),
    ("reproduce", audit.reproduce_cmd),
    ("which", which.which_cmd),
)
for _name, _command in COMMANDS:
    app.command(_name)(_command)


@app.callback()
def _options(show_version: Annotated[bool, typer.Option(
        "--version", callback=show_version, is_eager=True, help="Print the version and exit.")] = False) -> None:
    """Builds, validates and publishes PyTorch images for AMD GPUs (ROCm) from a YAML matrix."""


def main() -> None:
    os.environ.setdefault("DOCKER_BUILDKIT", "0")
    command = typer.main.get_command(app)
    flags_as_flags(command)
    sys.exit(command(prog_name="builder"))
