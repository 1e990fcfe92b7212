"""torch-smoke: proves PyTorch works in this image, and says how to fix it when it does not.

The command line: `torch-smoke [--json] [--require-gpu] [--cell FILE] [--only CHECK,...]`; see the package
docstring.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .core import EXIT_FAILED
from .diagnostics import HostView
from .report import as_json, exit_code, report
from .runner import CHECKS, run_all, run_only
from .smoke import Smoke

CELL_FILE = os.environ.get("RIF_CELL_FILE", "/opt/rif/cell.json")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="torch-smoke", description=(__doc__ or "").splitlines()[0],
        epilog="Exit codes: 0 all required checks passed, 1 a check failed, 3 --require-gpu and no GPU visible.")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--require-gpu", action="store_true", help="exit 3 when no GPU is visible")
    parser.add_argument("--cell", default=CELL_FILE, help="expectations file (default: %(default)s)")
    parser.add_argument("--only", action="append", metavar="CHECK[,CHECK]",
                        help="run only these checks (e.g. libs or hip_compile); repeatable")
    parser.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)  # tests: a fake /dev, /sys
    parser.add_argument("--simulate-gpu", metavar="ARCH", help=argparse.SUPPRESS)  # tests: GPU checks on the CPU
    args = parser.parse_args(argv)
    args.only = [n.strip() for value in args.only or [] for n in value.split(",") if n.strip()]
    unknown = sorted(set(args.only) - set(CHECKS))
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}; the checks: {', '.join(CHECKS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with open(args.cell, encoding="utf-8") as fh:
            expect = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"torch-smoke: cannot read the expectations {args.cell}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    smoke = Smoke(expect, HostView.current(args.root), simulate=args.simulate_gpu)
    results, flags = (run_only(smoke, args.only), []) if args.only else run_all(smoke)
    code = exit_code(results, args.require_gpu)
    simulated = bool(args.simulate_gpu)
    print(as_json(results, expect, code, flags, simulated, smoke.view.apptainer) if args.json
          else report(results, expect, code))
    return code


def run() -> None:
    """The program's entry: exits without waiting for threads, since a hung check's must not keep it alive."""
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
