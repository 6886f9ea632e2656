"""Using a trained model: scoring it (metrics, plots) and classifying photos with it."""
