"""Scoring a model: metrics and plots."""
