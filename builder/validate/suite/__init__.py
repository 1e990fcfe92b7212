"""The pytest-testinfra suite run against a container of every image before it may be pushed.

It ships inside the package so `builder test IMAGE` works from an installed copy, not only a checkout.
"""

from pathlib import Path

SUITE_DIR = Path(__file__).resolve().parent
