"""Verdicts on an image: the runner, the shipped testinfra suite, the SBOM."""
