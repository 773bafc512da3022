"""What an architecture's importer hands the import command: an nmtkit model with its weights set, its
SentencePiece models in nmtkit's id layout, the target-language tags and the search defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from nmtkit.models.transformer import Transformer


@dataclass
class Imported:
    model: Transformer
    src_proto: bytes
    tgt_proto: bytes
    tags: dict[str, int] = field(default_factory=dict)  # target language -> its tag's nmtkit id
    langs: tuple[str | None, str | None] = (None, None)
    decode: dict = field(default_factory=dict)  # DecodeConfig fields from generation_config.json
    notes: list[str] = field(default_factory=list)  # what the import could not carry over exactly, for the log
    architecture: str = ""  # config.json's model_type

    @property
    def joint(self) -> bool:
        return self.src_proto == self.tgt_proto
