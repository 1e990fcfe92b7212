"""Input errors that point a maintainer at the exact file, line and key to fix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file; line is None when the key is absent from the file."""

    file: Path
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        return f"{where}: {self.key}: {self.message}"


class InputError(Exception):
    """Bad user input: the CLI prints every problem and exits 2, before anything is built."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


COMMAND_LINE = Path("(command line)")


def usage_error(option: str, message: str) -> InputError:
    """A bad option value: blamed on the command line, not on a file."""
    return InputError([Problem(COMMAND_LINE, None, option, message)])
