"""The in-image smoke test (torch_smoke.py) ships as package data and is baked into every image."""
