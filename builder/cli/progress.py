"""Watching a run: a live view, plain lines for CI logs, or JSON lines for automation; full logs to files.

Build logs never scroll past on the terminal: every line goes, ANSI escapes stripped, to
`.rif/logs/<tag>.log`, and the terminal shows one line per image and stage. A failure prints the last lines
of the log and its path (runs.print_reports). Tools that write their own logs (debootstrap, pip) go
through `logged_run`, which does the same for one command.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from rich.console import Console
from rich.live import Live
from rich.table import Table

from builder.core.logfiles import LOG_DIR, log_path, strip_ansi
from builder.core.safefs import open_log
from builder.pipeline.lifecycle import Events

Mode = Literal["auto", "plain", "json"]


@dataclass
class _Row:
    stage: str = "waiting"
    started: float = 0.0
    stage_started: float = 0.0


@dataclass
class RunView:
    """The display of one run over images `tags`; its `events` feed it from the pipeline."""

    tags: list[str]
    mode: Mode = "auto"
    log_dir: Path = LOG_DIR
    console: Console = field(default_factory=lambda: Console(highlight=False))
    rows: dict[str, _Row] = field(default_factory=dict)
    _logs: dict[str, IO[str]] = field(default_factory=dict)
    _live: Live | None = None

    @property
    def live(self) -> bool:
        return self.mode == "auto" and self.console.is_terminal

    def events(self) -> Events:
        return Events(self.stage, self.line)

    @contextmanager
    def running(self) -> Iterator[RunView]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for tag in self.tags:
            log_path(self.log_dir, tag).unlink(missing_ok=True)
        try:
            if self.live:
                with Live(self._table(), console=self.console, refresh_per_second=4, transient=False) as live:
                    self._live = live
                    yield self
            else:
                yield self
        finally:
            self._live = None
            for fh in self._logs.values():
                fh.close()

    def stage(self, tag: str, name: str) -> None:
        now = time.monotonic()
        row = self.rows.setdefault(tag, _Row(started=now))
        row.stage, row.stage_started = name, now
        self._log(tag, f"==> {name}")
        index = self.tags.index(tag) + 1 if tag in self.tags else 0
        if self.mode == "json":
            print(json.dumps({"event": "stage", "tag": tag, "stage": name, "index": index, "total": len(self.tags),
                              "elapsed": round(now - row.started, 1)}), flush=True)
        elif self._live is not None:
            self._live.update(self._table())
        else:
            self.console.print(f"==> {name} {tag} ({index}/{len(self.tags)})", markup=False, highlight=False,
                               soft_wrap=True)

    def line(self, tag: str, text: str) -> None:
        self._log(tag, text)
        if self._live is not None:
            self._live.update(self._table())

    def _log(self, tag: str, text: str) -> None:
        fh = self._logs.get(tag)
        if fh is None:
            fh = self._logs[tag] = open_log(log_path(self.log_dir, tag), append=True)
        fh.write(strip_ansi(text).rstrip("\n") + "\n")
        fh.flush()

    def _table(self) -> Table:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column("n", no_wrap=True)
        table.add_column("stage", no_wrap=True)
        table.add_column("s", justify="right", no_wrap=True)
        table.add_column("image", overflow="fold")
        now = time.monotonic()
        for i, tag in enumerate(self.tags, 1):
            row = self.rows.get(tag)
            elapsed = f"{now - row.started:5.0f}s" if row else ""
            table.add_row(f"{i}/{len(self.tags)}", row.stage if row else "waiting", elapsed, tag)
        return table
