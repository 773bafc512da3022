"""Data preparation: corpus cleaning, subwords, binarized datasets and batching."""
