"""A draft for greedy decoding: an int8 copy of the decoder and generator that guesses, the model checks.

Greedy decoding of one sentence is memory-bound on a CPU: every step reads every decoder weight and
the (V, d) generator matrix for a single row (for an opus-mt-size model about 200 MB a step, 119 MB of
it the generator). A recorded translation runs a teacher-forced pass over <bos> + output anyway, to
trace it. So the tokens can be guessed by a cheaper copy of the decoder and then checked by that
pass: its row i is the model's own distribution after the first i tokens, so if every row's argmax
is the guessed token, the guess *is* the model's greedy output, and the pass is its trace. At the
first row whose argmax differs, the model's token replaces the guess and the draft goes on from
there (speculative decoding with the model's own int8 copy as the draft model). What a page shows
comes from the float32 model only; the draft decides nothing, it only saves steps.

`torch.ao.quantization.quantize_dynamic` gives the copy: int8 weights (a quarter of the bytes) and
fbgemm's int8 kernels: a single-row product with a large generator (Marian's 58,000 x 512) runs several
times faster (`python benchmarks/bench_model.py --opus-size` measures it).
"""
from __future__ import annotations

import copy
import threading
import warnings

import torch
from torch import nn

from model.nn.transformer import EncoderDecoder

# A draft pays where a step's weights do not fit the CPU caches: the generator's float32 bytes. The shipped model's
# (7.7 MB, with 12 MB of decoder layers) fits the caches of some CPUs (then a draft changes nothing) and not of
# others (then it saves about a quarter of a trace; the "no draft" column of `python benchmarks/bench_model.py`
# tells which); below 4 MB (the tests' tiny models, the toy tasks) a step is small enough that the draft could only
# add work.
MIN_GENERATOR_BYTES = 4 * 2**20


def _int8(module: nn.Module) -> nn.Module:
    """A copy of `module` whose nn.Linear layers are dynamically quantized to int8."""
    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(module), {nn.Linear}, dtype=torch.qint8)


class Draft(nn.Module):
    """The model's decoder and generator with int8 linear layers; embeddings and norms are shared.

    It has the two methods a greedy loop calls (decode with a cache, new_cache) and cfg.
    """

    def __init__(self, model: EncoderDecoder):
        super().__init__()
        self.cfg = model.cfg
        self.tgt_embed, self.decoder_norm = model.tgt_embed, model.decoder_norm  # shared, not copied
        if model.cfg.positions == "relative":  # the decoder's position bias, shared too
            self.tgt_pos_bias = model.tgt_pos_bias
        self.decoder_layers = _int8(model.decoder_layers)
        self.generator = _int8(model.generator)
        self.eval()

    decode = EncoderDecoder.decode
    decode_from = EncoderDecoder.decode_from
    _final = staticmethod(EncoderDecoder._final)
    _pos_bias = EncoderDecoder._pos_bias
    new_cache = EncoderDecoder.new_cache


def quantization_available() -> bool:
    """True when this torch has an int8 engine for dynamic quantization (fbgemm/x86, or qnnpack on ARM)."""
    try:
        return any(e != "none" for e in torch.backends.quantized.supported_engines)
    except Exception:  # a build without quantized kernels
        return False


DRAFT_SHARE = 0.5  # the generator's parameters against the decoder layers' for a draft to pay


def worth_a_draft(model: EncoderDecoder) -> bool:
    """Large generators only, and only where the generator is a large share of a step (at least DRAFT_SHARE of the
    decoder layers' weights: the shipped model 0.65, opus-mt 1.2, NLLB-600M 1.3): a small model's step is already in
    cache, and where the layers dominate (Flan-T5-base: 0.22) a wrong guess's extra checking pass costs more than
    the int8 generator saves (benchmarks/results/families.json: 2.7 s drafted, 1.35 s without, random weights)."""
    cfg = model.cfg
    generator = cfg.d_model * cfg.tgt_vocab_size
    layers = sum(p.numel() for p in model.decoder_layers.parameters())
    return (generator * 4 >= MIN_GENERATOR_BYTES and generator >= DRAFT_SHARE * layers
            and quantization_available())


def build_draft(model: EncoderDecoder) -> Draft | None:
    """The int8 draft of `model`, or None when quantization fails on this machine (greedy then runs unaided)."""
    try:
        return Draft(model)
    except (RuntimeError, NotImplementedError, AttributeError, ImportError):  # e.g. a torch without torch.ao
        return None


class DraftSlot:
    """One model's draft, shared by every Translator over that model (a language pair is a view of the same weights:
    a draft each would hold another int8 decoder and generator per pair, about 1 GB for NLLB-600M).

    `want` True: built now. None: only where it pays (worth_a_draft), built by a background thread that the first
    trace starts when it is done, so neither loading nor a Translator that only translates pays for it; until it is
    there, traces decode unaided, with the same result. False: never.
    """

    def __init__(self, model: EncoderDecoder, want: bool | None = None):
        self.model = model
        self.draft = build_draft(model) if want else None
        self.wanted = bool(want) or (want is None and worth_a_draft(model))
        self.started = bool(want)
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start building the draft once, if it is wanted."""
        if self.draft is None and self.wanted:
            with self._lock:
                if not self.started:
                    self.started = True
                    # Not a daemon: Python joins it before finalizing; a daemon still inside torch at interpreter
                    # teardown aborted scripts (exit 134) after their work. The trace that starts it does not wait.
                    threading.Thread(target=self._build, name="atlas-draft", daemon=False).start()

    def _build(self) -> None:
        self.draft = build_draft(self.model)  # one reference assignment: a trace sees None or the whole draft
