"""Deploying a registered model as a KServe InferenceService and seeing it Ready."""
