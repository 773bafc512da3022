"""Models written for other engines: a Transformer as a CTranslate2 directory (ctranslate2.py) and the vocabulary
shortlist such a directory can carry (shortlist.py)."""
