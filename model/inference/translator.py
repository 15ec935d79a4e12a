"""Text in, translation and trace out: what the app and the command line use.

A Translator holds one model in eval mode and keeps no per-request state, so one instance
can serve many threads at once. Its answers are plain data (strings, lists, NumPy arrays and
the dataclasses below): a page never needs the model, a tensor or a vocabulary.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch

from model.inference.decode import Decoded, greedy_decode, search
from model.inference.draft import DRAFT_MAX_SOURCE, DraftSlot
from model.inference.research import Research
from model.inference.unknown import replace_unknown
from model.io.checkpoint import DEFAULT_CHECKPOINT, SRC_SPM, TGT_SPM, CheckpointError, load_checkpoint, read_languages
from model.nn.config import ModelConfig
from model.nn.hooks import FwdHooks, Hooks, check_names, gate_hooks, off_gates
from model.nn.trace import for_trace, patterns, probs, to_sentence_trace
from model.nn.transformer import EncoderDecoder, hook_names
from model.nn.transformer import parameter_counts as _parameter_counts
from model.records import SentenceTrace, Source, Translation
from model.text.language import looks_like_target_language, pieces_look_like_target_language
from model.text.tokenize import clean_text, detokenize, tokenize
from model.text.vocab import DEFAULT_SPECIALS, UNK, Vocab

MAX_SRC_TOKENS = 100  # longer input is cut, with a notice; protects a shared server
MAX_CHARS = 2000  # characters looked at before tokenizing (tokenizing 1 MB of text is slow too)
LONGER_EXAMPLE = "Ein älterer Mann geht mit einem braunen Hund an einer roten Leine im Park spazieren."
OffHeads = Iterable[tuple[str, int, int]]  # (kind, 0-based layer, 0-based head) of heads switched off


class Translator(Research):
    """A model with its vocabularies and tokenizers (languages and tokenizer kind from its config).

    `pieces` (a PieceCodec; FSMT's Moses + BPE: a MosesBpeCodec) is required unless the config's tokenizer is
    "spacy": word models (spaCy + Moses) need none. `languages` (code -> token) are a many-to-many model's
    (config.lang_tokens): the source starts with src_lang's token and every decoding with tgt_lang's, forced, as
    generate() does.
    """

    def __init__(self, model: EncoderDecoder, src_vocab: Vocab, tgt_vocab: Vocab, metrics: dict | None = None,
                 src_lang: str | None = None, tgt_lang: str | None = None, pieces=None, draft: bool | None = None,
                 languages: dict[str, str] | None = None, drafts: DraftSlot | None = None):
        self.model = model.eval()
        # An int8 copy of the decoder that guesses a trace's greedy tokens, which the model then checks
        # (model/inference/draft.py); `draft` as DraftSlot's `want`. Views of this model (with_languages) share it.
        self._drafts = drafts if drafts is not None else DraftSlot(model, draft)
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.metrics = metrics or {}
        self.src_lang = src_lang or model.cfg.src_lang
        self.tgt_lang = tgt_lang or model.cfg.tgt_lang
        self.languages = dict(languages or {})
        self.lead: list[str] = []  # the source's first token: its language's
        self.start_prefix: list[int] = []  # target ids forced before the model chooses: the target language's
        if model.cfg.lang_tokens:
            for code in (self.src_lang, self.tgt_lang):
                if code not in self.languages:
                    raise ValueError(f"{code!r} is not one of this model's languages")
            self.lead = [self.languages[self.src_lang]]
            self.start_prefix = [tgt_vocab.stoi[self.languages[self.tgt_lang]]]
        if model.cfg.src_bos:  # Gemma's tokenizer starts the source with <bos>
            self.lead = [src_vocab.token("bos"), *self.lead]
        if model.cfg.tokenizer != "spacy" and pieces is None:
            raise ValueError(f"a {model.cfg.tokenizer} model needs its codec of pieces: use from_checkpoint")
        self.pieces = pieces if model.cfg.tokenizer != "spacy" else None

    @property
    def draft(self):
        """The int8 draft a trace may use now, or None (not wanted, or not built yet)."""
        return self._drafts.draft

    @property
    def _draft_started(self) -> bool:
        return self._drafts.started

    def with_languages(self, src_lang: str, tgt_lang: str) -> Translator:
        """This model between two other of its languages: a view of the same model, vocabularies and tokenizer."""
        if (src_lang, tgt_lang) == (self.src_lang, self.tgt_lang):
            return self
        return Translator(self.model, self.src_vocab, self.tgt_vocab, self.metrics, src_lang, tgt_lang, self.pieces,
                          languages=self.languages, drafts=self._drafts)

    @classmethod
    def from_checkpoint(cls, folder: str | Path = DEFAULT_CHECKPOINT, draft: bool | None = None) -> Translator:
        """Load a checkpoint folder; raises CheckpointError with a clear message. `draft`: see __init__."""
        model, src_vocab, tgt_vocab, metrics = load_checkpoint(folder)
        languages = read_languages(folder) if model.cfg.lang_tokens else {}
        pieces = None
        if model.cfg.tokenizer == "sentencepiece":
            from model.text.pieces import PieceCodec

            specials = {t for v in (src_vocab, tgt_vocab) for t in v.specials.values()} | set(languages.values())
            # Marian's vocabularies name their own specials (</s> ...) and may see language codes (">>fra<<"); one
            # trained here (model.train --tokenizer sentencepiece) has ours at 0..3 and no codes, nor has another
            # family's import (its languages are tokens of their own).
            family = (metrics.get("imported") or {}).get("family", "marian")
            marian = src_vocab.specials != DEFAULT_SPECIALS and family == "marian"
            try:
                pieces = PieceCodec(Path(folder) / SRC_SPM, Path(folder) / TGT_SPM, specials, language_codes=marian)
            except (OSError, RuntimeError) as e:
                raise CheckpointError(f"{folder}: {SRC_SPM} or {TGT_SPM} is not a SentencePiece model ({e}). "
                                      "Copy both from where the model came from, or import it again.") from e
        if model.cfg.tokenizer == "moses_bpe":  # FSMT: Moses + BPE, a vocabulary per side
            from model.text.moses_bpe import read_codec

            try:
                pieces = read_codec(folder, src_vocab, tgt_vocab)
            except (OSError, ValueError) as e:
                raise CheckpointError(f"{folder}: {e}. Import the model again.") from e
        return cls(model, src_vocab, tgt_vocab, metrics, pieces=pieces, draft=draft, languages=languages)

    def untrained_twin(self, seed: int = 0) -> Translator:
        """The same architecture and vocabularies with random weights (fixed seed)."""
        gen_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(seed)
            model = EncoderDecoder(self.model.cfg)
        finally:
            torch.random.set_rng_state(gen_state)
        return Translator(model, self.src_vocab, self.tgt_vocab, {"note": f"untrained: random weights, seed {seed}"},
                          self.src_lang, self.tgt_lang, self.pieces, languages=self.languages)

    @property
    def cfg(self) -> ModelConfig:
        return self.model.cfg

    @property
    def n_specials(self) -> int:
        """How many ids at the start of the source vocabulary are specials (4 for a word vocabulary:
        <unk> <pad> <bos> <eos>; 2 for Marian's </s> <unk>, whose <pad> is the last id: see special_ids)."""
        return self.src_vocab.n_leading_specials

    def special_ids(self, side: str) -> list[int]:
        """Sorted ids of the special tokens of the 'src' or 'tgt' vocabulary."""
        return (self.src_vocab if side == "src" else self.tgt_vocab).special_ids

    def source_tokens(self, text: str) -> list[str]:
        """Source text -> the tokens the model reads (words, or SentencePiece pieces), without the end token and the
        language token; a T5 prompt (config.src_prefix) is read with the text, as its tokenizer reads both."""
        if self.pieces is None:
            return tokenize(text, self.src_lang)
        return self.pieces.source_pieces(self.cfg.src_prefix + text) if text else []

    def target_tokens(self, text: str) -> list[str]:
        """Target text (a reference translation) -> tokens of the target vocabulary's kind."""
        return self.pieces.target_pieces(clean_text(text)) if self.pieces is not None else tokenize(text, self.tgt_lang)

    def detokenize(self, tokens: list[str]) -> str:
        """Output tokens -> text: SentencePiece's decoding, or Moses for words."""
        return self.pieces.detokenize(tokens) if self.pieces is not None else detokenize(tokens, self.tgt_lang)

    def looks_like_target_language(self, text: str) -> bool:
        """A hint that text is in the model's target language (English typed into a German → English model)."""
        if self.pieces is None:
            source = self.prepare(text)
            return looks_like_target_language(source.tokens, [not u for u in source.unknown], self.tgt_vocab.stoi)
        text = clean_text(text)[:MAX_CHARS]  # what prepare() would read
        n_words = sum(any(c.isalpha() for c in w) for w in text.split())
        return pieces_look_like_target_language(n_words, self.pieces.reading(text, "source"),
                                                self.pieces.reading(text, "target"))

    def parameter_counts(self) -> dict[str, int]:
        """Parameters per top-level module (a tied generator counts only its bias)."""
        return _parameter_counts(self.model)

    def embedding_matrix(self, side: str) -> tuple[np.ndarray, list[str]]:
        """The learned (V, d) float32 embedding table of 'src' or 'tgt' and its tokens. The table is a read-only view
        of the model's weights, not a copy: NLLB's is 1 GB, and a page asks for it several times per visit."""
        if side not in ("src", "tgt"):
            raise ValueError(f"side must be 'src' or 'tgt', got {side!r}")
        embed, vocab = ((self.model.src_embed, self.src_vocab) if side == "src"
                        else (self.model.tgt_embed, self.tgt_vocab))
        table = embed.lut.weight.detach().cpu().float().numpy()
        table = table.view()  # a new view, so the flag below leaves the tensor's own array alone
        table.flags.writeable = False
        return table, list(vocab.itos)

    def gates(self, off_heads: OffHeads | None) -> dict[str, torch.Tensor] | None:
        """kind -> (L, h) head gates with the given (kind, layer, head) at 0 (model/nn/hooks.py); None when no head
        is off. ValueError for a head this model does not have."""
        off = list(off_heads or ())
        if not off:
            return None
        return off_gates(self.cfg, off)

    def hooks(self, off_heads: OffHeads | None = None, fwd_hooks: FwdHooks | None = None) -> list:
        """The forward hooks of one call: the switched-off heads' gates on hook_z, then the caller's own."""
        fwd = list(fwd_hooks or ())
        check_names(hook_names(self.cfg), fwd)
        gates = self.gates(off_heads)
        return (gate_hooks(gates) if gates else []) + fwd

    def prepare(self, text: str, max_tokens: int = MAX_SRC_TOKENS) -> Source:
        """Clean, tokenize and truncate; the model's own max_len is never exceeded."""
        text = clean_text(text)
        chars_cut = max(0, len(text) - MAX_CHARS)
        tokens = self.source_tokens(text[:MAX_CHARS])
        lead = self.lead if tokens else []
        limit = min(max_tokens, self.cfg.max_len - 1) - len(lead)  # room for <eos> and the language token
        kept, dropped = lead + tokens[:limit], tokens[limit:]
        eos = [self.src_vocab.token("eos")] if self.cfg.src_eos else []  # Gemma's tokenizer appends no end token
        ids = self.src_vocab.encode(kept + eos)
        unknown = [t not in self.src_vocab for t in kept]
        return Source(kept, ids, unknown, dropped, chars_cut, eos[0] if eos else "")

    def forced_ids(self, prefix: list[str] | None) -> list[int]:
        """Forced target ids: the target language's token (many-to-many), then `prefix` (which may start with it)."""
        ids = self.tgt_vocab.encode(list(prefix or []))
        start = self.start_prefix
        return ids if ids[: len(start)] == start else start + ids

    def max_steps(self, source: Source, max_len: int | None) -> int:
        limit = self.cfg.max_len - 1
        auto = 2 * len(source.ids) + 10  # translations of image captions are never much longer
        return max(1, min(limit, max_len if max_len is not None else auto))

    def _src_tensor(self, source: Source) -> torch.Tensor:
        return torch.tensor([source.ids], dtype=torch.long)

    def _finish(self, source: Source, dec: Decoded, t0: float, src: torch.Tensor, fwd_hooks: list,
                replace_unk: bool, decoding: str, cross: np.ndarray | None = None,
                use_src_padding_mask: bool = True) -> Translation:
        """The one way decoded ids become a Translation: tokens, <unk> copies, step strings, text."""
        v = self.tgt_vocab
        raw = v.decode(dec.ids)
        tokens = list(raw)
        copyable = source.copyable
        # Only word models copy source words into <unk>: a SentencePiece model (Marian) never did, and its
        # output should stay the original's.
        if replace_unk and self.pieces is None and UNK in raw and any(copyable):
            if cross is None:
                cross = self.cross_attention(src, dec.ids, fwd_hooks, use_src_padding_mask)
            tokens = replace_unknown(raw, cross, source.tokens, copyable)
        for step in dec.steps:
            step.prefix_tokens, step.top_tokens = v.decode(step.prefix), v.decode(step.top_ids)
            step.chosen_token = v.itos[step.chosen]
        steps = dec.steps if dec.trace is not None else None
        start = v.token("bos")
        trace = (None if dec.trace is None
                 else to_sentence_trace(dec.trace, dec.log_probs, source.axis_tokens, [start] + raw))
        said = tokens[len(self.start_prefix):] if dec.ids[: len(self.start_prefix)] == self.start_prefix else tokens
        return Translation(self.detokenize(said), tokens, raw, source, dec.finished,
                           time.perf_counter() - t0, steps=steps, trace=trace, decoding=decoding, start_token=start)

    def translate(self, text: str, beam: int = 1, max_len: int | None = None, replace_unk: bool = True,
                  alpha: float = 0.6, off_heads: OffHeads | None = None,
                  fwd_hooks: FwdHooks | None = None) -> Translation:
        """Translate one sentence; beam 1 is greedy decoding. `off_heads` switches heads off; `fwd_hooks`
        (model/nn/hooks.py) hold in every pass (during decoding a hook sees the new position only)."""
        t0 = time.perf_counter()
        decoding = "greedy" if beam <= 1 else f"beam {beam}"
        hm = self.hooks(off_heads, fwd_hooks)
        source = self.prepare(text)
        if not source.tokens:
            return Translation("", [], [], source, True, time.perf_counter() - t0, decoding=decoding,
                               start_token=self.tgt_vocab.token("bos"))
        src = self._src_tensor(source)
        v = self.tgt_vocab
        dec = search(self.model, src, v.bos_idx, v.eos_idx, self.max_steps(source, max_len), max(beam, 1),
                     alpha if beam > 1 else 0.0, self.start_prefix, fwd_hooks=hm)[0]
        return self._finish(source, dec, t0, src, hm, replace_unk, decoding)

    def trace(self, text: str, max_len: int | None = None, prefix: list[str] | None = None, top_k: int = 5,
              off_heads: OffHeads | None = None, replace_unk: bool = True,
              fwd_hooks: FwdHooks | None = None) -> Translation:
        """Greedy decoding with every step recorded (ids and strings) and the full trace of the final pass, read
        from its activation cache.

        `prefix` forces the first output words (a user picked another candidate). `off_heads` and `fwd_hooks`
        as in translate; the trace shows the activations as the hooks left them.
        """
        t0 = time.perf_counter()
        forced = self.forced_ids(prefix)
        n = len(forced) - len(self.start_prefix)  # the target language's token is how decoding starts, not a choice
        decoding = f"greedy after a forced prefix of {n} token{'s' if n != 1 else ''}" if n else "greedy"
        hm = self.hooks(off_heads, fwd_hooks)
        source = self.prepare(text)
        if not source.tokens:
            return Translation("", [], [], source, True, time.perf_counter() - t0, steps=[], decoding=decoding,
                               start_token=self.tgt_vocab.token("bos"))
        v = self.tgt_vocab
        src = self._src_tensor(source)
        # The int8 draft only guesses tokens, which the model checks; a caller's own hooks see the model alone, and a
        # long source decodes unaided (DRAFT_MAX_SOURCE). The first trace starts its build when it is done, records
        # and all: built beside it, it would slow that trace.
        draft = None if fwd_hooks or len(source.ids) > DRAFT_MAX_SOURCE else self.draft
        dec = greedy_decode(self.model, src, v.bos_idx, v.eos_idx, self.max_steps(source, max_len), forced or None,
                            record=True, top_k=top_k, fwd_hooks=hm, draft=draft)
        cross = np.stack([s.cross for s in dec.steps[: len(dec.ids)]]) if dec.ids else None  # (t, L, h, s)
        done = self._finish(source, dec, t0, src, hm, replace_unk, decoding, cross)
        if not fwd_hooks:
            self._drafts.start()
        return done

    @torch.inference_mode()
    def contributions(self, text: str, target: list[str] | None = None):
        """Value norms and ALTI+ of `text` teacher-forced as in forced_tensors (model/analysis/contributions.py)."""
        from model.analysis.contributions import contributions
        return contributions(self, text, target)

    def teacher_forced(self, text: str, tgt_tokens: list[str], use_causal_mask: bool = True) -> SentenceTrace:
        """Traced teacher-forced pass over <bos> + tgt_tokens; the causal mask can be switched off."""
        source = self.prepare(text)
        tgt = torch.tensor([[self.tgt_vocab.bos_idx] + self.tgt_vocab.encode(tgt_tokens)], dtype=torch.long)
        log_probs, cache = self.model.run_with_cache(self._src_tensor(source), tgt, for_trace,
                                                     use_causal_mask=use_causal_mask)
        return to_sentence_trace(cache, log_probs, source.axis_tokens, [self.tgt_vocab.token("bos")] + list(tgt_tokens))

    @torch.inference_mode()
    def score(self, text: str, tgt_tokens: list[str], off_heads: OffHeads | None = None) -> float:
        """Log-probability of tgt_tokens + <eos> as the translation of text (teacher forced, raw generator)."""
        source = self.prepare(text)
        ids = self.tgt_vocab.encode(tgt_tokens)
        tgt = torch.tensor([[self.tgt_vocab.bos_idx] + ids], dtype=torch.long)
        log_probs = self.model(self._src_tensor(source), tgt, Hooks(self.hooks(off_heads)))
        gold = torch.tensor(ids + [self.tgt_vocab.eos_idx])
        return float(log_probs[0].gather(-1, gold[:, None]).sum())

    padding_example = LONGER_EXAMPLE  # padded_batch's partner, an input of this model's kind (a toy's: digits)

    def padded_batch(self, text: str, partner: str | None = None, use_padding_mask: bool = True,
                     alone: Translation | None = None, max_len: int | None = None) -> dict:
        """`text` padded in one batch with a longer sentence, as in training (model/inference/padding.py)."""
        from model.inference.padding import padded_batch

        return padded_batch(self, text, partner, use_padding_mask, alone, max_len)

    @torch.inference_mode()
    def cross_attention(self, src: torch.Tensor, ids: list[int], fwd_hooks: FwdHooks = (),
                        use_src_padding_mask: bool = True) -> np.ndarray:
        """(t, L, h, s): cross-attention of a teacher-forced pass over <bos> + ids."""
        tgt = torch.tensor([[self.tgt_vocab.bos_idx] + ids], dtype=torch.long)
        cache: dict = {}
        self.model(src, tgt, Hooks(fwd_hooks, cache, patterns), use_src_padding_mask=use_src_padding_mask)
        return probs(cache, "cross", self.cfg.n_decoder_layers).transpose(2, 0, 1, 3)  # (L, h, t, s) -> (t, L, h, s)

    def decode_batch(self, sources: list[Source], beam: int = 1, batch_size: int = 64, alpha: float = 0.6,
                     fwd_hooks: FwdHooks = (), max_len: int | None = None,
                     progress: Callable[[int], object] | None = None) -> list[Decoded | None]:
        """Search each prepared source (None for one without tokens) in batches of similar length; each gets what
        translate() would decode for it (its own step limit or `max_len`). `progress(n)` after each batch."""
        out: list[Decoded | None] = [None] * len(sources)
        order = sorted(range(len(sources)), key=lambda i: len(sources[i].ids))
        v = self.tgt_vocab
        for start in range(0, len(order), batch_size):
            idx = [i for i in order[start : start + batch_size] if sources[i].tokens]
            if idx:
                width = max(len(sources[i].ids) for i in idx)
                src = torch.full((len(idx), width), self.cfg.pad_idx, dtype=torch.long)
                for r, i in enumerate(idx):
                    src[r, : len(sources[i].ids)] = torch.tensor(sources[i].ids)
                limits = [self.max_steps(sources[i], max_len) for i in idx]
                decoded = search(self.model, src, v.bos_idx, v.eos_idx, limits, max(beam, 1),
                                 alpha if beam > 1 else 0.0, self.start_prefix, fwd_hooks=fwd_hooks)
                for i, dec in zip(idx, decoded):
                    out[i] = dec
            if progress is not None:
                progress(len(order[start : start + batch_size]))
        return out

    def translate_batch(self, texts: list[str], beam: int = 1, batch_size: int = 64, replace_unk: bool = True,
                        alpha: float = 0.6, progress: Callable[[int], object] | None = None,
                        off_heads: OffHeads | None = None, max_len: int | None = None) -> list[str]:
        """Translate many sentences (for evaluation), in batches of similar length.

        Each sentence gets what translate() would give it (its own step limit or `max_len`, the same <unk> rule).
        """
        hm = self.hooks(off_heads)
        decoding = "greedy" if beam <= 1 else f"beam {beam}"
        sources = [self.prepare(t) for t in texts]
        decoded = self.decode_batch(sources, beam, batch_size, alpha, hm, max_len, progress)
        return ["" if dec is None else self._finish(source, dec, 0.0, self._src_tensor(source), hm, replace_unk,
                                                     decoding).text for source, dec in zip(sources, decoded)]
