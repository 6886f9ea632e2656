"""Scoring photos with a trained classifier: eager torch or ONNX Runtime."""
