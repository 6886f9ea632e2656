"""Getting photos in: sources, safe extraction, the folder layouts, decoding, the arrays."""
