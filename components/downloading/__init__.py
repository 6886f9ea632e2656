"""The download step: its schema (``config``) and its work (``fetch``)."""
