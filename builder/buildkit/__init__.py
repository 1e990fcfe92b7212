"""Images in a BuildKit/engine: bake, OCI layouts, the engine connection, base images, pruning."""
