"""The training loop and what it needs: config, nets, batches, checkpoints, processes."""
