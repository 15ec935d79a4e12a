"""Text in, translation and trace out: what the app and the command line use.

A Translator holds one model in eval mode and keeps no per-request state, so one instance
can serve many threads at once.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from .config import ModelConfig
from .decode import GreedyResult, Step, beam_search, greedy_decode, greedy_decode_batch
from .tokenize import clean_text, detokenize, tokenize
from .trace import SentenceTrace, Trace, to_sentence_trace
from .transformer import EncoderDecoder, HeadMask, make_src_mask
from .vocab import EOS, UNK, Vocab

MAX_SRC_TOKENS = 100  # longer input is cut, with a notice; protects a shared server
MAX_CHARS = 2000  # characters looked at before tokenizing (tokenizing 1 MB of text is slow too)


@dataclass
class Source:
    """A cleaned, tokenized and possibly truncated source sentence."""

    tokens: list[str]  # the words the model reads, without <eos>
    ids: list[int]  # with <eos> appended
    unknown: list[bool]  # per token: not in the source vocabulary
    dropped: list[str] = field(default_factory=list)  # tokens cut off by the length limit
    chars_cut: int = 0  # characters beyond MAX_CHARS ignored before tokenizing

    @property
    def truncated(self) -> bool:
        return bool(self.dropped) or self.chars_cut > 0

    @property
    def axis_tokens(self) -> list[str]:
        """Labels of the source axis: the tokens and the final <eos>."""
        return self.tokens + [EOS]


@dataclass
class Translation:
    """A translation and, for greedy decoding with a trace, everything it computed."""

    text: str
    tokens: list[str]  # output tokens after <unk> replacement
    raw_tokens: list[str]  # as the model produced them
    source: Source
    finished: bool  # stopped at <eos>, not at the length limit
    seconds: float
    steps: list[Step] | None = None
    trace: Trace | None = None

    @property
    def decoder_input(self) -> list[str]:
        """Decoder query/key labels: <bos> followed by the raw output tokens."""
        return ["<bos>"] + self.raw_tokens

    def sentence_trace(self) -> SentenceTrace | None:
        """The trace as NumPy with token labels (None when there is no trace)."""
        if self.trace is None:
            return None
        return to_sentence_trace(self.trace, self.source.axis_tokens, self.decoder_input)

    def detached(self) -> "Translation":
        """A copy whose trace is a SentenceTrace (NumPy): picklable and cacheable."""
        return dataclasses.replace(self, trace=self.sentence_trace())


class Translator:
    """A model with its vocabularies and tokenizers (German in, English out)."""

    def __init__(self, model: EncoderDecoder, src_vocab: Vocab, tgt_vocab: Vocab, metrics: dict | None = None,
                 src_lang: str = "de", tgt_lang: str = "en"):
        self.model = model.eval()
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.metrics = metrics or {}
        self.src_lang, self.tgt_lang = src_lang, tgt_lang

    @classmethod
    def from_checkpoint(cls, folder: str | Path = DEFAULT_CHECKPOINT) -> "Translator":
        """Load a checkpoint folder; raises CheckpointError with a clear message."""
        model, src_vocab, tgt_vocab, metrics = load_checkpoint(folder)
        return cls(model, src_vocab, tgt_vocab, metrics)

    def untrained_twin(self, seed: int = 0) -> "Translator":
        """The same architecture and vocabularies with random weights (fixed seed)."""
        gen_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(seed)
            model = EncoderDecoder(self.model.cfg)
        finally:
            torch.random.set_rng_state(gen_state)
        return Translator(model, self.src_vocab, self.tgt_vocab, {"note": "untrained: random weights, seed %d" % seed})

    @property
    def cfg(self) -> ModelConfig:
        return self.model.cfg

    def prepare(self, text: str, max_tokens: int = MAX_SRC_TOKENS) -> Source:
        """Clean, tokenize and truncate; the model's own max_len is never exceeded."""
        text = clean_text(text)
        chars_cut = max(0, len(text) - MAX_CHARS)
        tokens = tokenize(text[:MAX_CHARS], self.src_lang)
        limit = min(max_tokens, self.cfg.max_len - 1)  # room for <eos>
        kept, dropped = tokens[:limit], tokens[limit:]
        ids = self.src_vocab.encode(kept) + [self.src_vocab.eos_idx]
        unknown = [t not in self.src_vocab for t in kept]
        return Source(kept, ids, unknown, dropped, chars_cut)

    def max_steps(self, source: Source, max_len: int | None) -> int:
        limit = self.cfg.max_len - 1
        auto = 2 * len(source.ids) + 10  # translations of image captions are never much longer
        return max(1, min(limit, max_len if max_len is not None else auto))

    def _src_tensor(self, source: Source) -> torch.Tensor:
        return torch.tensor([source.ids], dtype=torch.long)

    def _finish(self, raw_ids: list[int], source: Source, finished: bool, t0: float, cross: np.ndarray | None,
                replace_unk: bool, **extra) -> Translation:
        raw = self.tgt_vocab.decode(raw_ids)
        tokens = list(raw)
        if replace_unk and cross is not None and source.tokens:
            tokens = replace_unknown(raw, cross, source.tokens)
        return Translation(detokenize(tokens, self.tgt_lang), tokens, raw, source, finished, time.perf_counter() - t0, **extra)

    def translate(self, text: str, beam: int = 1, max_len: int | None = None, replace_unk: bool = True,
                  alpha: float = 0.6, head_mask: HeadMask | None = None) -> Translation:
        """Translate one sentence; beam 1 is greedy decoding (the only one that takes a head mask)."""
        t0 = time.perf_counter()
        source = self.prepare(text)
        if not source.tokens:
            return Translation("", [], [], source, True, time.perf_counter() - t0)
        src = self._src_tensor(source)
        steps = self.max_steps(source, max_len)
        v = self.tgt_vocab
        if beam > 1:
            ids = beam_search(self.model, src, v.bos_idx, v.eos_idx, steps, beam, alpha)
            finished = True
        else:
            res = greedy_decode(self.model, src, v.bos_idx, v.eos_idx, steps, head_mask=head_mask)
            ids, finished = res.ids, res.finished
        cross = self.cross_attention(src, ids) if replace_unk and v.unk_idx in ids else None
        return self._finish(ids, source, finished, t0, cross, replace_unk)

    def trace(self, text: str, max_len: int | None = None, prefix: list[str] | None = None, top_k: int = 5,
              head_mask: HeadMask | None = None, replace_unk: bool = True) -> Translation:
        """Greedy decoding with every step recorded and the full trace of the final pass."""
        t0 = time.perf_counter()
        source = self.prepare(text)
        if not source.tokens:
            return Translation("", [], [], source, True, time.perf_counter() - t0, steps=[], trace=None)
        v = self.tgt_vocab
        forced = v.encode(prefix) if prefix else None
        res: GreedyResult = greedy_decode(self.model, self._src_tensor(source), v.bos_idx, v.eos_idx,
                                          self.max_steps(source, max_len), forced, record=True, top_k=top_k,
                                          head_mask=head_mask)
        cross = np.stack([s.cross for s in res.steps[: len(res.ids)]]) if res.ids else None  # (t, L, h, s)
        return self._finish(res.ids, source, res.finished, t0, cross, replace_unk, steps=res.steps, trace=res.trace)

    @torch.inference_mode()
    def teacher_forced(self, text: str, tgt_tokens: list[str], use_causal_mask: bool = True) -> SentenceTrace:
        """Traced teacher-forced pass over <bos> + tgt_tokens; the causal mask can be switched off."""
        source = self.prepare(text)
        tgt = torch.tensor([[self.tgt_vocab.bos_idx] + self.tgt_vocab.encode(tgt_tokens)], dtype=torch.long)
        _, trace = self.model(self._src_tensor(source), tgt, trace=True, use_causal_mask=use_causal_mask)
        return to_sentence_trace(trace, source.axis_tokens, ["<bos>"] + list(tgt_tokens))

    @torch.inference_mode()
    def score(self, text: str, tgt_tokens: list[str], head_mask: HeadMask | None = None) -> float:
        """Log-probability of tgt_tokens + <eos> as the translation of text (teacher forced)."""
        source = self.prepare(text)
        ids = self.tgt_vocab.encode(tgt_tokens)
        tgt = torch.tensor([[self.tgt_vocab.bos_idx] + ids], dtype=torch.long)
        log_probs, _ = self.model(self._src_tensor(source), tgt, head_mask=head_mask)
        gold = torch.tensor(ids + [self.tgt_vocab.eos_idx])
        return float(log_probs[0].gather(-1, gold[:, None]).sum())

    @torch.inference_mode()
    def padded_batch(self, text: str, longer: str, use_padding_mask: bool = True) -> dict:
        """`text` padded in one batch with a longer sentence, as in training.

        Returns the padded sentence's SentenceTrace (its source axis ends in <pad> tokens),
        how far its encoder output moved from the unpadded run, and its greedy translation.
        """
        a, b = self.prepare(text), self.prepare(longer)
        width = max(len(a.ids), len(b.ids))
        pad = self.cfg.pad_idx
        src = torch.full((2, width), pad, dtype=torch.long)
        src[0, : len(a.ids)], src[1, : len(b.ids)] = torch.tensor(a.ids), torch.tensor(b.ids)
        v = self.tgt_vocab
        alone = greedy_decode(self.model, self._src_tensor(a), v.bos_idx, v.eos_idx, self.max_steps(a, None))
        tgt = torch.tensor([[v.bos_idx] + alone.ids] * 2, dtype=torch.long)
        tgt[1] = v.bos_idx  # the longer sentence's decoder input does not matter here
        _, trace = self.model(src, tgt, trace=True, use_src_padding_mask=use_padding_mask)
        memory = lambda s, m: self.model.encode(s, make_src_mask(s, pad, m))  # noqa: E731
        n = len(a.ids)
        shift = float((memory(src, use_padding_mask)[0, :n] - memory(self._src_tensor(a), True)[0]).abs().max())
        padded = greedy_decode(self.model, src[:1], v.bos_idx, v.eos_idx, self.max_steps(a, None),
                               use_src_padding_mask=use_padding_mask)
        src_axis = a.axis_tokens + ["<pad>"] * (width - n)
        return {
            "trace": to_sentence_trace(trace, src_axis, ["<bos>"] + v.decode(alone.ids), index=0),
            "longer_tokens": b.axis_tokens,
            "encoder_shift": shift,  # max |memory(padded) - memory(alone)| over the real positions
            "alone": detokenize(v.decode(alone.ids), self.tgt_lang),
            "padded": detokenize(v.decode(padded.ids), self.tgt_lang),
        }

    @torch.inference_mode()
    def cross_attention(self, src: torch.Tensor, ids: list[int]) -> np.ndarray:
        """(t, L, h, s): cross-attention of a teacher-forced pass over <bos> + ids."""
        tgt = torch.tensor([[self.tgt_vocab.bos_idx] + ids], dtype=torch.long)
        _, trace = self.model(src, tgt, trace=True)
        return trace.probs("cross").transpose(2, 0, 1, 3)  # (L, h, t, s) -> (t, L, h, s)

    def translate_batch(self, texts: list[str], beam: int = 1, batch_size: int = 64, replace_unk: bool = True,
                        alpha: float = 0.6, progress=None, head_mask: HeadMask | None = None) -> list[str]:
        """Translate many sentences (for evaluation); greedy runs batched and takes a head mask."""
        if head_mask is not None and beam != 1:
            raise ValueError("head masks are supported with greedy decoding (beam 1) only")
        out: list[str] = [""] * len(texts)
        sources = [self.prepare(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(sources[i].ids))
        v = self.tgt_vocab
        step = batch_size if beam == 1 else 1  # beam search decodes one sentence at a time
        for start in range(0, len(order), step):
            idx = [i for i in order[start : start + step] if sources[i].tokens]
            if not idx:
                continue
            width = max(len(sources[i].ids) for i in idx)
            src = torch.full((len(idx), width), self.cfg.pad_idx, dtype=torch.long)
            for r, i in enumerate(idx):
                src[r, : len(sources[i].ids)] = torch.tensor(sources[i].ids)
            steps = self.max_steps(sources[idx[-1]], None)
            if beam == 1:
                hyps = greedy_decode_batch(self.model, src, v.bos_idx, v.eos_idx, steps, head_mask)
            else:
                hyps = [beam_search(self.model, src, v.bos_idx, v.eos_idx, steps, beam, alpha)]
            for r, i in enumerate(idx):
                ids = hyps[r]
                cross = None
                if replace_unk and v.unk_idx in ids:
                    cross = self.cross_attention(self._src_tensor(sources[i]), ids)
                out[i] = self._finish(ids, sources[i], True, 0.0, cross, replace_unk).text
            if progress is not None:
                progress(len(idx))
        return out


def replace_unknown(tokens: list[str], cross: np.ndarray, src_tokens: list[str]) -> list[str]:
    """Replace each <unk> by the source word it attended to most (mean over layers and heads).

    `cross` is (t, L, h, s) with s = len(src_tokens) + 1 (the source <eos>, never copied).
    """
    out = list(tokens)
    for i, tok in enumerate(tokens):
        if tok == UNK and i < cross.shape[0]:
            weights = cross[i].mean(axis=(0, 1))[: len(src_tokens)]  # (s,) without <eos>
            out[i] = src_tokens[int(weights.argmax())]
    return out
