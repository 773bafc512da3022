"""Building blocks shared by the models: attention, embeddings."""
