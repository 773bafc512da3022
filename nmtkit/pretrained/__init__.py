"""Models trained elsewhere, imported as nmtkit checkpoints (`nmtkit import`): OPUS-MT (Marian), M2M100, NLLB-200."""
