"""What the tests share: stand-ins for the cluster's APIs (each built from its project's own
documents and code), the real servers they start, and helpers."""
