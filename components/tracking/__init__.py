"""MLflow tracking: the only package that imports mlflow, a module a job."""
