"""Searching for a recipe: a grid sweep and a search (Katib on the cluster, Optuna here),
one parent MLflow run each with a child run per trial."""
