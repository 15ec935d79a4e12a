"""The one model configuration, frozen, and its config.json round-trip."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

FORMAT_VERSION = 1  # of the checkpoint folder (config.json, model.safetensors, vocab.*.json)


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of an encoder-decoder Transformer (names as in the paper)."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = field(default=256, metadata={"help": "width of the residual stream and the embeddings"})
    n_heads: int = field(default=4, metadata={"help": "attention heads per sub-layer (d_model must divide by it)"})
    n_encoder_layers: int = field(default=3, metadata={"help": "encoder layers"})
    n_decoder_layers: int = field(default=3, metadata={"help": "decoder layers"})
    d_ff: int = field(default=1024, metadata={"help": "inner width of the position-wise feed-forward"})
    dropout: float = field(default=0.2, metadata={"help": "on embeddings, sub-layer outputs and inside the feed-forward"})
    attn_dropout: float = field(default=0.1, metadata={"help": "on attention probabilities"})
    max_len: int = field(default=256, metadata={"help": "positions of the sinusoidal table, so the longest sequence"})
    norm_first: bool = field(default=True, metadata={"help": "pre-norm + final LayerNorm; off = post-norm as in the paper"})
    tie_weights: bool = field(default=True, metadata={"help": "the generator shares the target embedding matrix"})
    pad_idx: int = 1

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return {"format_version": FORMAT_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        d = dict(d)
        version = d.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"format_version {version} is not supported (this code reads {FORMAT_VERSION})")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown config fields: {', '.join(unknown)}")
        return cls(**d)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "ModelConfig":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
