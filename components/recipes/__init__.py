"""The recipes: the named presets, and recipe files checked against the same schemas."""
