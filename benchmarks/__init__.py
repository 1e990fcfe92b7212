"""The benchmark entry points (bench_*.py), run from the checkout as `python benchmarks/bench_x.py` (or
`python -m benchmarks.bench_x`); their helpers are the package benchmarks.support.

They import `benchmarks.support` and `testkit` (the fakes they share with the tests; nothing from tests/) as
packages: the editable install (`pip install -e`, as
scripts/setup.sh does) puts the checkout on the path (pyproject.toml: dev-mode-dirs), so no script edits sys.path.
"""
