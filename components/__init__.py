"""The steps of the Dogs-vs-Cats pipeline as plain Python: no kfp import anywhere here."""
