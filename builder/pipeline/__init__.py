"""What every command runs: jobs, the one lifecycle (bake -> validate -> SBOM -> push), its steps, stage waves."""
