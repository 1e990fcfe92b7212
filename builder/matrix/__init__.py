"""The matrix file: YAML source, schema, compatibility rules, expansion, selection, explanations."""
