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

from builder.cli import audit, build, catalog, matrix, publish, render, which
from builder.cli.kit import flags_as_flags, show_version

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

# Each command lives with its printers in the module of its group (`builder/cli/<group>.py`); this is the
# order `builder --help` lists them in.
COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("matrix", matrix.matrix_cmd),
    ("render", render.render),
    ("build", build.build),
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
