"""The bytes of the images/ tree: Dockerfiles, bake file, build tree, locks, wheel sources, content hash."""
