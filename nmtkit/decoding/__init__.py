"""Decoding: requests, beam and greedy search, constraints, the placeholder guard, ensembles."""
