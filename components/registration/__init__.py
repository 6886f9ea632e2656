"""The register step: its schema (``config``) and its work (``decision``)."""
