"""Corpus metrics. BLEU and chrF come from sacrebleu, so scores and signatures are sacrebleu's own."""
