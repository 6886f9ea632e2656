"""Sweeps and searches as they run: the grid, the parent and child runs in MLflow, a
pipeline task's training config, its line in a local run's account, its KFP reports."""
