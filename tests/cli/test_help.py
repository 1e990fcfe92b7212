"""`builder --help` and every command's help fit 80 columns without cutting an option name or a word of help."""

from __future__ import annotations

import os

import pytest
import typer

from builder.cli.app import app
from tests.fakes.checkout import builder_cli

COMMAND = typer.main.get_command(app)
NAMES = sorted(getattr(COMMAND, "commands", {}))


def _help(*args: str, columns: int = 80) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    proc = builder_cli(*args, "--help", env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_there_are_commands_to_check() -> None:
    assert {"build", "publish", "reproduce", "wheelhouse", "base"} <= set(NAMES)


@pytest.mark.parametrize("command", ["", *NAMES])
def test_help_fits_80_columns_and_names_every_option_whole(command: str) -> None:
    text = _help(*([command] if command else []))
    assert "…" not in text, text
    assert all(len(line) <= 80 for line in text.splitlines()), max(text.splitlines(), key=len)
    cmd = COMMAND.commands[command] if command else COMMAND  # type: ignore[attr-defined]
    for param in cmd.params:
        if getattr(param, "hidden", False) or param.param_type_name != "option":
            continue
        for name in [*param.opts, *param.secondary_opts]:
            assert name in text, f"{command or 'builder'}: {name} missing or cut"
