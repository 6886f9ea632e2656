"""The preprocess step: its schema (``config``) and its work (``build``)."""
