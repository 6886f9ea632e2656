"""The networks: the classifier's architectures, its views, its weights file."""
