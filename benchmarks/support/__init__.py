"""What the benchmark entry points share: fresh engines, a local registry and wheel index, synthetic ROCm-scale
wheels, the old and new image layouts, the model of a scheduled night, and the tables they print."""
