"""Translation: a torch-free `Translator` (`translator.py`: subwords, target-language tags, truncation, batching,
output) over an engine that searches batches of subword ids (`engine.py`): `torch_engine.py` for a checkpoint,
`ctranslate2_engine.py` for a directory written by `nmtkit export` (calling CTranslate2 through
`ctranslate2_model.py`); `stream.py` translates a stream of lines."""

from nmtkit.translate.stream import format_hypotheses, translate_stream
from nmtkit.translate.translator import Translator, translate_html

__all__ = ["Translator", "format_hypotheses", "translate_html", "translate_stream"]
