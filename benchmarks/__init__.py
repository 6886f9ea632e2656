"""Benchmarks: the project against the classic tutorial's loops, side by side, same data."""
