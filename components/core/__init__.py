"""Shared by every step: the config schema, atomic outputs, logging, MLflow."""
