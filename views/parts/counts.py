"""The counts the pages state, said one way everywhere: source tokens, vocabulary sizes and where a BLEU was measured.

Source tokens are what the encoder reads: the sentence's tokens (a many-to-many model's language token included)
and the end token the model appends. That is the length of every source axis (attention, Decoding's cross-attention,
Positional encoding, Embeddings), so the header counts the same and says that the end token is in the count.
A vocabulary's size counts its special tokens, named from the vocabulary itself (a word model's four, Marian's
three: its decoder starts from <pad>); a BLEU is named with the sentences it was measured on. Tokens come back in
backticks (Markdown); a set's name as it is, for the caller to escape.
"""
from __future__ import annotations

from collections.abc import Sequence


def _code(token: str) -> str:
    """A token in backticks: Markdown shows `<eos>` literally there (outside them it would be read as HTML)."""
    return "`" + token.replace("`", "'") + "`"


def source_count(n: int, end_token: str) -> str:
    """"10 source tokens incl. `<eos>`": `n` counts what the encoder reads, the end token `end_token` included; ""
    where the source has none (T5Gemma: "10 source tokens, no end token")."""
    return f"{n:,} source token{'s' * (n != 1)}" + (f" incl. {_code(end_token)}" if end_token else ", no end token")


def specials_phrase(specials: Sequence[str]) -> str:
    """"4 specials: `<unk>` `<pad>` `<bos>` `<eos>`", from the vocabulary's own special tokens."""
    n = len(specials)
    return f"{n} special{'s' * (n != 1)}: " + " ".join(map(_code, specials)) if n else "no specials"


def vocabulary_sizes(sides: Sequence[tuple[str, int, Sequence[str]]]) -> str:
    """The vocabularies as the Overview states them, from (language tag, size, its special tokens) per side:
    "DE 8,000 / EN 7,931 tokens, each incl. its 4 specials: …", or each side's own specials where they differ."""
    if len({tuple(s) for _, _, s in sides}) == 1:
        specials = sides[0][2]
        each = "each " if len(sides) > 1 else ""
        return (" / ".join(f"{tag} {size:,}" for tag, size, _ in sides)
                + f" tokens, {each}incl. {'its ' if specials else ''}{specials_phrase(specials)}")
    return " / ".join(f"{tag} {size:,} tokens (incl. {specials_phrase(s)})" for tag, size, s in sides)


def without_specials(kept: int, total: int, specials: Sequence[str]) -> str:
    """Why a vocabulary map holds fewer entries than the vocabulary: "the vocabulary's 8,000 entries less its
    4 specials: `<unk>` …, which are no words"."""
    if kept == total:
        return f"all {total:,} entries of the vocabulary"
    return f"the vocabulary's {total:,} entries less its {specials_phrase(specials)}, which are no words"


def measured_on(split: str, sentences: int | None, first: bool = False) -> str:
    """Where a BLEU was measured: "test_2016_flickr, 1,000 sentences", or with `first` "the first 500 sentences of
    multi30k/val.de.gz" (a sample: the first lines of that set); says so when the size was not recorded."""
    if not isinstance(sentences, int) or isinstance(sentences, bool):
        return f"{split} (number of sentences not recorded)"
    n = f"{sentences:,} sentence" + "s" * (sentences != 1)
    return f"the first {n} of {split}" if first else f"{split}, {n}"


def split_name(file: str | None) -> str:
    """The set a corpus file holds, as metrics.json names splits: "multi30k/val.de.gz" -> "val"."""
    if not file:
        return "the given sentences"
    return file.replace("\\", "/").rsplit("/", 1)[-1].split(".", 1)[0] or file


def embedding_rows(side: str, n: int, end_token: str, start_token: str) -> str:
    """What the rows of the Embeddings page's figures are: on the source side what the encoder reads (the header's
    count), on the target side the decoder's inputs, the start token first."""
    if side == "src":
        return f"One row per token the encoder reads: {source_count(n, end_token)}, as in the header."
    return f"One row per decoder input: {n:,}, the start token {_code(start_token)} first."
