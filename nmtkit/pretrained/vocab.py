"""An imported model's vocabulary in nmtkit's id layout.

nmtkit's ids are its SentencePiece model's (PAD 0, UNK 1, BOS 2, EOS 3, then the pieces), while a Hugging Face
tokenizer maps SentencePiece's pieces to ids of its own (Marian's vocab.json, fairseq's dictionary for M2M100 and
NLLB). So the importer writes new SentencePiece models whose piece i is the piece of nmtkit id i, each scored and
typed as in the model it came from (segmentation depends on the scores, not on the order), and reorders the
embedding rows to match (`Layout.rows`): translating with them segments text as the tokenizer did and gives the
model the same ids.

A piece of the vocabulary that the side's SentencePiece model lacks (a piece of the other language's model, in a
shared vocabulary) is UNUSED there: SentencePiece never produces it. A piece of the SentencePiece model that the
vocabulary lacks (the tokenizer would give <unk> for it) is kept after the vocabulary's pieces where the model
reads it (Marian's source side: its embedding row is <unk>'s, so the model reads what it read) and left out where
the model would write it (SentencePiece then segments around it); the importer counts these. Language tokens and
other special tokens are CONTROL pieces: no text encodes to them, as nmtkit's target-language tags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nmtkit.data.subword import BOS, EOS, PAD, UNK
from nmtkit.errors import NmtkitError


@dataclass
class Layout:
    """nmtkit id i is piece `pieces[i]`, and its embedding row is the Hugging Face model's row `rows[i]`."""

    pieces: list[str]
    rows: list[int]
    control: set[str] = field(default_factory=set)  # language tokens and other specials: CONTROL pieces


def layout(vocab: dict[str, int], specials: dict[int, int], bos_piece: str, control: set[str],
           rows: int) -> Layout:
    """The nmtkit order of a Hugging Face vocabulary `vocab` (piece -> id) for an embedding of `rows` rows:
    `specials` maps nmtkit's PAD, UNK, BOS and EOS to the Hugging Face ids whose rows they take (BOS may repeat
    another's: Marian's decoder starts with its padding row), `bos_piece` names BOS; the other ids follow in their
    order. A row no piece names (M2M100's "madeup words") gets a CONTROL piece of its own, so that the output
    layer keeps every row and the log-probabilities their normalisation."""
    names = {index: piece for piece, index in vocab.items()}
    if len(names) != len(vocab):
        raise NmtkitError("the vocabulary gives two pieces one id")
    if (beyond := max(names, default=0)) >= rows:
        raise NmtkitError(f"the vocabulary has an id {beyond} beyond the model's {rows} embedding rows")
    for index in specials.values():
        if index not in names and not 0 <= index < rows:
            raise NmtkitError(f"config.json names a special token of id {index}, beyond the {rows} embedding rows")
    control = set(control)
    for index in range(rows):
        if index not in names:
            names[index] = f"<row{index}>"
            control.add(names[index])
    special_ids = {specials[PAD], specials[UNK], specials[EOS]}
    rest = [index for index in range(rows) if index not in special_ids and index != specials[BOS]]
    pieces = [names[specials[PAD]], names[specials[UNK]], bos_piece, names[specials[EOS]]] + [names[i] for i in rest]
    if len(set(pieces)) != len(pieces):
        raise NmtkitError(f"the vocabulary already has a piece {bos_piece!r} that is not its start token")
    return Layout(pieces, [specials[PAD], specials[UNK], specials[BOS], specials[EOS]] + rest, control)


def nmtkit_proto(spm_model: bytes, pieces: list[str], control: set[str], where: str,
                 keep_rest: bool = False) -> tuple[bytes, list[str]]:
    """A SentencePiece model whose piece i is `pieces[i]`, scored and typed as in `spm_model`, with nmtkit's
    special ids; and `spm_model`'s pieces that `pieces` lacks, which it leaves out or, with `keep_rest`, keeps
    after `pieces` as they were (see the module docstring)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    try:
        model = pb.ModelProto.FromString(spm_model)
    except Exception as error:  # protobuf's DecodeError and friends
        raise NmtkitError(f"{where} is not a SentencePiece model") from error
    Type = pb.ModelProto.SentencePiece.Type
    original = {piece.piece: piece for piece in model.pieces}
    if not original:
        raise NmtkitError(f"{where} is not a SentencePiece model (it has no pieces)")
    kept_types = (Type.NORMAL, Type.USER_DEFINED, Type.BYTE)
    wanted = set(pieces)
    rest = [piece.piece for piece in model.pieces if piece.type in kept_types and piece.piece not in wanted]
    proto = pb.ModelProto()
    proto.CopyFrom(model)
    del proto.pieces[:]
    for index, piece in enumerate(pieces):
        item = proto.pieces.add(piece=piece, score=0.0)
        source = original.get(piece)
        if index == UNK:
            item.type = Type.UNKNOWN
        elif index in (PAD, BOS, EOS) or piece in control:
            item.type = Type.CONTROL
        elif source is not None and source.type in kept_types:
            item.type, item.score = source.type, source.score
        else:
            item.type = Type.UNUSED
    for piece in rest if keep_rest else ():
        proto.pieces.add().CopyFrom(original[piece])
    spec = proto.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = PAD, UNK, BOS, EOS
    spec.pad_piece, spec.unk_piece, spec.bos_piece, spec.eos_piece = (pieces[PAD], pieces[UNK], pieces[BOS],
                                                                      pieces[EOS])
    spec.vocab_size = len(proto.pieces)
    return proto.SerializeToString(), rest
