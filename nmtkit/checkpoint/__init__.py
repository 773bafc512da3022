"""Checkpoints: what a training run saves and how a saved file is read back."""
