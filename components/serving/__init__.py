"""Serving the classifier with KServe's model server: photos in, classes out."""
