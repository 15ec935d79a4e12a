"""Word vocabulary with the specials <unk> <pad> <bos> <eos>, saved as JSON."""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

UNK, PAD, BOS, EOS = "<unk>", "<pad>", "<bos>", "<eos>"
SPECIALS = (UNK, PAD, BOS, EOS)  # indices 0..3; config.pad_idx is 1
N_SPECIALS = len(SPECIALS)  # ids below this are specials, in every vocabulary


class Vocab:
    """Maps tokens to ids and back; unknown tokens map to <unk>."""

    def __init__(self, itos: list[str]):
        if list(itos[: len(SPECIALS)]) != list(SPECIALS):
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {itos[:N_SPECIALS]}")
        if len(set(itos)) != len(itos):
            raise ValueError("a vocabulary must not repeat tokens")
        self.itos = list(itos)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.unk_idx, self.pad_idx, self.bos_idx, self.eos_idx = (self.stoi[t] for t in SPECIALS)

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_freq: int = 2, max_size: int | None = None) -> "Vocab":
        """Tokens seen at least min_freq times, most frequent first (ties alphabetical, so builds repeat)."""
        counts = Counter(tok for sent in sentences for tok in sent)
        ranked = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS), key=lambda t: (-counts[t], t))
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
        Path(path).write_text(json.dumps({"itos": self.itos}, ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("itos"), list):
            raise ValueError('expected a JSON object {"itos": [token, ...]}')
        return cls([str(t) for t in data["itos"]])
