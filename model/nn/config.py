"""The one model configuration, frozen, and its config.json round-trip."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

FORMAT_VERSION = 4  # of the checkpoint folder (config.json, model.safetensors, vocab.*.json)
# Version 1 folders predate the fields below `pad_idx`; they load with those fields' defaults, which
# describe exactly the model version 1 could express (ReLU, interleaved sin/cos, <bos> = 2, <eos> = 3, ...).
# Version 3 adds the fields below `tokenizer` (other model families); a version-2 file gets their defaults.
# Version 4 stores the weights under the modules' names as hook points name them (encoder.0.attn, mlp,
# decoder_final_ln); an older folder's keys are renamed as it loads (model.nn.transformer.renamed_state), and an
# older copy of the app refuses a version-4 folder by its version rather than by missing keys.
READABLE_VERSIONS = (1, 2, 3, 4)
# gelu: exact (erf); gelu_new: its tanh approximation (T5 v1.1); swish and silu are the same function
ACTIVATIONS = ("relu", "gelu", "gelu_new", "swish", "silu")
PE_LAYOUTS = ("interleaved", "sin_then_cos", "fairseq")
NORMS = ("layer", "rms")
POSITIONS = ("sinusoidal", "learned", "relative")
TOKENIZERS = ("spacy", "sentencepiece")


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
    dropout: float = field(default=0.2, metadata={
        "help": "on embeddings, sub-layer outputs and inside the feed-forward"})
    attn_dropout: float = field(default=0.1, metadata={"help": "on attention probabilities"})
    max_len: int = field(default=256, metadata={"help": "positions of the sinusoidal table, so the longest sequence"})
    norm_first: bool = field(default=True, metadata={
        "help": "pre-norm + final LayerNorm; off = post-norm as in the paper"})
    tie_weights: bool = field(default=True, metadata={"help": "the generator shares the target embedding matrix"})
    pad_idx: int = 1
    # Format version 2: what the model is, so that imported models (Marian) can be described.
    activation: str = field(default="relu", metadata={
        "help": "feed-forward non-linearity: relu, gelu or swish (= silu)"})
    pe_layout: str = field(default="interleaved", metadata={
        "help": "sinusoidal table: interleaved sin/cos (the paper) or sin_then_cos "
                "(Marian: all sines, then all cosines)"})
    scale_embedding: bool = field(default=True, metadata={"help": "multiply token embeddings by √d_model"})
    share_embeddings: bool = field(default=False, metadata={
        "help": "source and target embeddings are one matrix (one shared vocabulary)"})
    final_logits_bias: bool = field(default=True, metadata={"help": "the generator adds a bias to its logits"})
    decoder_start_idx: int = field(default=2, metadata={
        "help": "target id the decoder starts from: <bos>; Marian starts from <pad>"})
    eos_idx: int = field(default=3, metadata={"help": "target id that ends a translation"})
    src_lang: str = field(default="de", metadata={"help": "source language code"})
    tgt_lang: str = field(default="en", metadata={"help": "target language code"})
    tokenizer: str = field(default="spacy", metadata={
        "help": "spacy (words, Moses detokenizer) or sentencepiece (source.spm / target.spm in the folder)"})
    # Format version 3: what other translation families are (M2M100/NLLB, mBART, T5), each today's model by default.
    norm: str = field(default="layer", metadata={"help": "layer (LayerNorm) or rms (RMSNorm: no mean, no bias; T5)"})
    norm_eps: float = field(default=1e-5, metadata={"help": "epsilon of every norm"})
    positions: str = field(default="sinusoidal", metadata={
        "help": "sinusoidal (a fixed table), learned (a trained table; mBART) or relative (no table: a learned "
                "bias per head and bucket of relative distance in the scores; T5)"})
    pos_offset: int = field(default=0, metadata={
        "help": "row of the position table that position 0 reads (M2M100 and mBART: 2)"})
    rel_buckets: int = field(default=32, metadata={"help": "relative positions: buckets of distance (T5)"})
    rel_max_distance: int = field(default=128, metadata={"help": "relative positions: distance of the last bucket"})
    embed_norm: bool = field(default=False, metadata={"help": "a norm after the positions are added (mBART)"})
    scale_attention: bool = field(default=True, metadata={"help": "scores divided by √d_k; off in T5"})
    ff_gated: bool = field(default=False, metadata={
        "help": "gated feed-forward act(x W_gate) ⊙ (x W_1) W_2 (T5 v1.1, mT5, Flan-T5)"})
    bias: bool = field(default=True, metadata={"help": "the attention and feed-forward projections have biases"})
    generator_scale: float = field(default=1.0, metadata={
        "help": "the decoder's output is multiplied by this before the generator (T5 v1.0, tied: d_model^-0.5)"})
    src_prefix: str = field(default="", metadata={
        "help": "text put before every source sentence, read with it (T5: 'translate German to English: ')"})
    d_head: int = field(default=0, metadata={
        "help": "width of one head's queries, keys and values; 0: d_model / n_heads (T5's d_kv may differ: mT5-small, "
                "Flan-T5-small, MADLAD-400)"})
    lang_tokens: bool = field(default=False, metadata={
        "help": "many-to-many: the source starts with its language's token and the target's is forced first "
                "(NLLB, M2M100, mBART-50; the codes are in languages.json)"})

    def __post_init__(self) -> None:
        if self.d_head < 0:
            raise ValueError(f"d_head must be 0 (d_model / n_heads) or positive, got {self.d_head}")
        if not self.d_head and self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name, allowed in (("activation", ACTIVATIONS), ("pe_layout", PE_LAYOUTS), ("tokenizer", TOKENIZERS),
                              ("norm", NORMS), ("positions", POSITIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(f"share_embeddings needs one vocabulary size, got {self.src_vocab_size} and "
                             f"{self.tgt_vocab_size}")
        for name in ("decoder_start_idx", "eos_idx", "pad_idx"):
            if not 0 <= getattr(self, name) < self.tgt_vocab_size:
                raise ValueError(f"{name} {getattr(self, name)} is outside the target vocabulary "
                                 f"(size {self.tgt_vocab_size})")

    @property
    def d_k(self) -> int:
        return self.d_head or self.d_model // self.n_heads

    @property
    def kind_layers(self) -> dict[str, int]:
        """Layers of each attention kind: the encoder's for enc_self, the decoder's for dec_self and cross."""
        return {"enc_self": self.n_encoder_layers, "dec_self": self.n_decoder_layers, "cross": self.n_decoder_layers}

    def to_dict(self) -> dict:
        return {"format_version": FORMAT_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        d = dict(d)
        version = d.pop("format_version", FORMAT_VERSION)
        if version not in READABLE_VERSIONS:
            raise ValueError(f"format_version {version} is not supported "
                             f"(this code reads {', '.join(map(str, READABLE_VERSIONS))})")
        known = {f.name for f in dataclasses.fields(cls)}
        if version == 2:  # a version-2 file cannot describe the version-3 fields: their defaults are its model
            known = {f.name for f in dataclasses.fields(cls)} - set(V3_FIELDS)
        if version == 1:  # a version-1 file cannot describe the later fields: their defaults are its model
            known = {f.name for f in dataclasses.fields(cls) if f.name in V1_FIELDS}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown config fields: {', '.join(unknown)}")
        return cls(**d)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


V1_FIELDS = ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff",
             "dropout", "attn_dropout", "max_len", "norm_first", "tie_weights", "pad_idx")
V3_FIELDS = ("norm", "norm_eps", "positions", "pos_offset", "rel_buckets", "rel_max_distance", "embed_norm",
             "scale_attention", "ff_gated", "bias", "generator_scale", "src_prefix", "lang_tokens", "d_head")
