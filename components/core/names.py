"""Names every step agrees on, kept here so that none of them is a second literal."""

DEFAULT_EXPERIMENT = "dogs-vs-cats"  # the MLflow experiment
REGISTERED_MODEL_NAME = "dogs-vs-cats"  # the MLflow Model Registry entry
CLASSES = ("cat", "dog")  # label 0, label 1
