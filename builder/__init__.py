"""rocm-image-factory: a YAML matrix in, validated PyTorch images for AMD GPUs (and CPU) out."""

__version__ = "0.1.0"
