"""Words for a person: one module per command group with its printers, progress and errors."""
