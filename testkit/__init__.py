"""Stand-ins that tests and benchmarks share: synthetic wheels (synthwheels), a PEP 503/691 index (simpleindex), a
scripted registry and a stored one (scripted_registry, stored_registry), and matrix files (matrices).

A package of its own beside tests/ and benchmarks/, so the benchmarks import nothing from tests/; the fakes only
tests use stay in tests/fakes. Each fake is written once, here or there. The editable install puts the checkout on
the path (pyproject.toml: dev-mode-dirs); a built wheel holds builder only.
"""
