"""Token vocabulary that knows its special ids, saved as JSON.

A vocabulary built here (words) starts with the specials <unk> <pad> <bos> <eos> at ids 0..3. An
imported one (Marian's SentencePiece vocabulary) names its own: `specials` maps each role to a token,
e.g. {"unk": "<unk>", "pad": "<pad>", "bos": "<pad>", "eos": "</s>"}: Marian has no <bos> and its
decoder starts from <pad>, so the "bos" role (the decoder's start token) is <pad> there.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

UNK, PAD, BOS, EOS = "<unk>", "<pad>", "<bos>", "<eos>"
SPECIALS = (UNK, PAD, BOS, EOS)  # indices 0..3 of a word vocabulary; config.pad_idx is 1
N_SPECIALS = len(SPECIALS)  # ids below this are specials in a word vocabulary (see Vocab.special_ids for any)
ROLES = ("unk", "pad", "bos", "eos")
DEFAULT_SPECIALS = dict(zip(ROLES, SPECIALS))


class Vocab:
    """Maps tokens to ids and back; unknown tokens map to <unk>."""

    def __init__(self, itos: list[str], specials: dict[str, str] | None = None):
        """`specials` (role -> token, roles unk pad bos eos) is for imported vocabularies; without it the
        vocabulary must start with <unk> <pad> <bos> <eos>."""
        if specials is None and list(itos[: len(SPECIALS)]) != list(SPECIALS):
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {itos[:N_SPECIALS]}")
        if len(set(itos)) != len(itos):
            raise ValueError("a vocabulary must not repeat tokens")
        self.itos = list(itos)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.specials = dict(DEFAULT_SPECIALS if specials is None else specials)
        if sorted(self.specials) != sorted(ROLES):
            raise ValueError(f"specials must name the roles {', '.join(ROLES)}, got {sorted(self.specials)}")
        missing = [t for t in self.specials.values() if t not in self.stoi]
        if missing:
            raise ValueError(f"special tokens missing from the vocabulary: {', '.join(missing)}")
        self.unk_idx, self.pad_idx, self.bos_idx, self.eos_idx = (self.stoi[self.specials[r]] for r in ROLES)

    @property
    def special_ids(self) -> list[int]:
        """Sorted ids of every special token (a word vocabulary's are 0..3; Marian's e.g. 0, 1 and the last)."""
        return sorted({self.unk_idx, self.pad_idx, self.bos_idx, self.eos_idx})

    @property
    def n_leading_specials(self) -> int:
        """How many ids at the start are specials (4 for a word vocabulary)."""
        ids = set(self.special_ids)
        n = 0
        while n in ids:
            n += 1
        return n

    def token(self, role: str) -> str:
        """The special token of a role: 'unk', 'pad', 'bos' (the decoder's start) or 'eos'."""
        return self.specials[role]

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_freq: int = 2, max_size: int | None = None) -> Vocab:
        """Tokens seen at least min_freq times, most frequent first (ties alphabetical, so builds repeat)."""
        counts = Counter(tok for sent in sentences for tok in sent)
        ranked = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS),
                        key=lambda t: (-counts[t], t))
        if max_size is not None:
            ranked = ranked[: max(0, max_size - len(SPECIALS))]
        return cls(list(SPECIALS) + ranked)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.stoi.get(t, self.unk_idx) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def save(self, path: str | Path) -> None:
        data = {"itos": self.itos}
        # word vocabularies keep the file they always had; one with our specials elsewhere (Gemma's <pad> <eos> <bos>
        # <unk> at 0..3) names them, or it would load as a word vocabulary
        if self.specials != DEFAULT_SPECIALS or list(self.itos[: len(SPECIALS)]) != list(SPECIALS):
            data["specials"] = self.specials
        Path(path).write_text(json.dumps(data, ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("itos"), list):
            raise ValueError('expected a JSON object {"itos": [token, ...]}')
        specials = data.get("specials")
        if specials is not None and not (isinstance(specials, dict)
                                         and all(isinstance(v, str) for v in specials.values())):
            raise ValueError('"specials" must map the roles unk, pad, bos, eos to tokens')
        return cls([str(t) for t in data["itos"]], specials)
