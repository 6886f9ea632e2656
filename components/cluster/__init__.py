"""Running training on a cluster across nodes."""
