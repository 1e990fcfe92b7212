"""Plain values and files every room uses; imports nothing of the package."""
