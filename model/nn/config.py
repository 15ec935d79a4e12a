"""The one model configuration, frozen, and its config.json round-trip."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

FORMAT_VERSION = 5  # of the checkpoint folder (config.json, model.safetensors, vocab.*.json)
# Version 1 folders predate the fields below `pad_idx`; they load with those fields' defaults, which
# describe exactly the model version 1 could express (ReLU, interleaved sin/cos, <bos> = 2, <eos> = 3, ...).
# Version 3 adds the fields below `tokenizer` (other model families); a version-2 file gets their defaults.
# Version 4 stores the weights under the modules' names as hook points name them (encoder.0.attn, mlp,
# decoder_final_ln); an older folder's keys are renamed as it loads (model.nn.transformer.renamed_state), and an
# older copy of the app refuses a version-4 folder by its version rather than by missing keys.
# Version 5 adds the fields below `lang_tokens` (T5Gemma: rotary positions, grouped-query attention, sliding windows,
# soft-capping, Gemma's norms); a version 1-4 file gets their defaults, which are the model it describes.
READABLE_VERSIONS = (1, 2, 3, 4, 5)
# gelu: exact (erf); gelu_new: its tanh approximation (T5 v1.1); swish and silu are the same function
ACTIVATIONS = ("relu", "gelu", "gelu_new", "swish", "silu")
PE_LAYOUTS = ("interleaved", "sin_then_cos", "fairseq")
NORMS = ("layer", "rms", "gemma_rms")
POSITIONS = ("sinusoidal", "learned", "relative", "rotary")
TOKENIZERS = ("spacy", "sentencepiece", "moses_bpe")


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
        "help": "spacy (words, Moses detokenizer), sentencepiece (source.spm / target.spm in the folder) or "
                "moses_bpe (Moses + byte-pair merges with </w>: merges.txt / moses_bpe.json; FSMT)"})
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
    # Format version 5: what T5Gemma is (Gemma 2's layers in an encoder and a decoder), each today's model by default.
    n_kv_heads: int = field(default=0, metadata={
        "help": "key/value heads; 0: n_heads. Fewer: grouped-query attention, query heads g·k .. g·k + k − 1 "
                "(k = n_heads / n_kv_heads) read key/value head g (Hugging Face's repeat_kv)"})
    rope_base: float = field(default=10000.0, metadata={
        "help": "positions rotary: θ_i = rope_base^(−2i/d_head); dimension i turns with i + d_head/2 (Hugging "
                "Face's rotate_half, as Gemma pairs them)"})
    encoder_windows: str = field(default="", metadata={
        "help": "one window per encoder layer, comma-separated, 0 = full attention ('' = all full); a query at p "
                "sees the keys at |p − k| ≤ window (T5Gemma's bidirectional sliding window)"})
    decoder_windows: str = field(default="", metadata={
        "help": "one window per decoder layer, as encoder_windows; a query at p sees the keys p − window < k ≤ p "
                "(causal sliding window); cross-attention is always full"})
    attn_softcap: float = field(default=0.0, metadata={
        "help": "attention scores become cap·tanh(score/cap) before the mask (Gemma 2); 0: none"})
    final_softcap: float = field(default=0.0, metadata={
        "help": "the generator's logits become cap·tanh(logit/cap) (Gemma 2); 0: none"})
    sublayer_post_norm: bool = field(default=False, metadata={
        "help": "a norm after each sub-layer too, before it joins the stream (Gemma 2's post_*_layernorm)"})
    query_pre_attn_scalar: float = field(default=0.0, metadata={
        "help": "scores × query_pre_attn_scalar^−0.5 instead of ÷ √d_head (Gemma 2); 0: the usual scaling"})
    src_bos: bool = field(default=False, metadata={"help": "the source starts with <bos> (Gemma's tokenizer)"})
    src_eos: bool = field(default=True, metadata={
        "help": "the source ends with the end token; Gemma's tokenizer appends none"})

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
        self._check_version_5()
        for name in ("decoder_start_idx", "eos_idx", "pad_idx"):
            if not 0 <= getattr(self, name) < self.tgt_vocab_size:
                raise ValueError(f"{name} {getattr(self, name)} is outside the target vocabulary "
                                 f"(size {self.tgt_vocab_size})")

    def _check_version_5(self) -> None:
        kv = self.n_kv_heads or self.n_heads
        if kv < 0 or self.n_heads % kv:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.positions == "rotary" and (self.d_k % 2 or self.rope_base <= 0):
            raise ValueError(f"rotary positions need an even d_head (got {self.d_k}) and rope_base > 0")
        for name in ("attn_softcap", "final_softcap", "query_pre_attn_scalar"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 (none) or positive, got {getattr(self, name)}")
        for side in ("encoder", "decoder"):
            self.windows(side)

    def windows(self, side: str) -> tuple[int, ...]:
        """The sliding window of each layer of "encoder" or "decoder", 0 = full attention."""
        text, n = getattr(self, f"{side}_windows"), getattr(self, f"n_{side}_layers")
        try:
            out = tuple(int(w) for w in text.split(",")) if text else (0,) * n
        except ValueError:
            raise ValueError(f"{side}_windows holds comma-separated integers, got {text!r}") from None
        if len(out) != n or min(out, default=0) < 0:
            raise ValueError(f"{side}_windows needs {n} windows of 0 or more (one per layer), got {text!r}")
        return out

    @property
    def position_table(self) -> bool:
        """A position vector is added to the embeddings (no: relative positions, T5; rotary, T5Gemma)."""
        return self.positions in ("sinusoidal", "learned")

    @property
    def kv_heads(self) -> int:
        """Key/value heads of every attention (n_heads unless grouped-query attention)."""
        return self.n_kv_heads or self.n_heads

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
        if version < 5:  # a file before version 5 cannot describe the version-5 fields: their defaults
            known -= set(V5_FIELDS)
        if version == 2:  # a version-2 file cannot describe the version-3 fields: their defaults are its model
            known -= set(V3_FIELDS)
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
V5_FIELDS = ("n_kv_heads", "rope_base", "encoder_windows", "decoder_windows", "attn_softcap", "final_softcap",
             "sublayer_post_norm", "query_pre_attn_scalar", "src_bos", "src_eos")
