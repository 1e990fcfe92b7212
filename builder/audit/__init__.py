"""Published images read back: diff two images, reproduce one."""
