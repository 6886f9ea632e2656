"""The Kubeflow Pipelines layer: thin component wrappers and the pipeline's wiring."""
