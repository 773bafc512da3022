"""Scoring sentence pairs with the user's own models: dual conditional cross-entropy (`nmtkit score-pairs`)."""
