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

A very large generator (NLLB's and mBART-50's 250,000 x 1024, 1 GB) gets its int8 copy at load, in blocks of rows
packed by both cores (Int8Rows): a draft of the float32 decoder layers and that generator then guesses the first
trace's tokens, when a step's float32 generator row would be half of its time. The whole draft follows in the
background and keeps that generator.
"""
from __future__ import annotations

import copy
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

from model.nn.transformer import EncoderDecoder, Generator

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


ROWS_PER_BLOCK = 16384  # fbgemm packs 16 blocks of 16,384 x 1024 in half the time of one 256,206 x 1024 matrix
PACKING_THREADS = 2  # a load, not a request: both cores


class Int8Rows(nn.Module):
    """An nn.Linear's int8 copy in blocks of output rows: each row quantized with a scale of its own (symmetric), each
    block packed for fbgemm's dynamic int8 product, the blocks' outputs concatenated. Blocks are packed in parallel;
    their products are as fast as one matrix's."""

    def __init__(self, linear: nn.Linear, rows: int | None = None, threads: int | None = None):
        super().__init__()
        rows, threads = rows or ROWS_PER_BLOCK, threads or PACKING_THREADS
        weight = linear.weight.detach()  # (out, in)
        bias = linear.bias.detach() if linear.bias is not None else None
        blocks = [(w, None if bias is None else bias[i:i + rows]) for w, i in zip(weight.split(rows),
                                                                                 range(0, weight.shape[0], rows))]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="atlas-int8") as pool:
            self.packed = list(pool.map(lambda wb: _pack(*wb), blocks))
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out)
        # reduce_range as torch.ao's dynamic Linear on x86: fbgemm's 16-bit sums of 8-bit products cannot saturate
        return torch.cat([torch.ops.quantized.linear_dynamic(x, p, True) for p in self.packed], dim=-1)


def _pack(weight: torch.Tensor, bias: torch.Tensor | None):
    """One block (rows, in) of float32 weights as fbgemm's packed int8, one scale per row."""
    low, high = torch.aminmax(weight, dim=1)
    scale = (torch.maximum(-low, high).clamp_min(1e-12) / 127.5).double()  # (rows,)
    zero = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # quantized tensors announce their move to torchao
        warnings.simplefilter("ignore")
        q = torch.quantize_per_channel(weight, scale, zero, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(q, bias)


class Int8Generator(nn.Module):
    """The generator with its projection in Int8Rows; the same log-softmax."""

    def __init__(self, generator: nn.Module):
        super().__init__()
        self.proj = Int8Rows(generator.proj)

    forward = Generator.forward


class Draft(nn.Module):
    """The model's decoder and generator with int8 linear layers; embeddings and norms are shared.

    `layers=False` keeps the model's float32 decoder layers (shared, not copied): only the generator is int8.
    `generator`: an int8 generator already built (a first draft's), used instead of quantizing again.
    It has the two methods a greedy loop calls (decode with a cache, new_cache) and cfg.
    """

    def __init__(self, model: EncoderDecoder, layers: bool = True, generator: nn.Module | None = None):
        super().__init__()
        self.cfg = model.cfg
        self.tgt_embed, self.decoder_norm = model.tgt_embed, model.decoder_norm  # shared, not copied
        if model.cfg.positions == "relative":  # the decoder's position bias, shared too
            self.tgt_pos_bias = model.tgt_pos_bias
        self.decoder_layers = _int8(model.decoder_layers) if layers else model.decoder_layers
        self.generator = generator if generator is not None else _int8(model.generator)
        self.layers_int8 = layers
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


# A float32 generator this large is drafted at load: NLLB-600M's and mBART-50's (1 GB) are; opus-mt's (119 MB) is not,
# its draft comes from the background as before. Such a row is half of a first trace's step on one core, and packing
# its int8 copy takes a few seconds of the load (`python benchmarks/bench_model.py --families` measures both).
GENERATOR_AT_LOAD_BYTES = 256 * 2**20


def generator_at_load(model: EncoderDecoder) -> bool:
    """True where the int8 generator is worth building while the model loads (a large one, in a model that wants a
    draft)."""
    return model.cfg.d_model * model.cfg.tgt_vocab_size * 4 >= GENERATOR_AT_LOAD_BYTES and worth_a_draft(model)


def build_draft(model: EncoderDecoder, layers: bool = True, generator: nn.Module | None = None) -> Draft | None:
    """The int8 draft of `model` (see Draft), or None when quantization fails on this machine (greedy then runs
    unaided). Without `layers`, the generator is Int8Rows' copy."""
    try:
        if not layers and generator is None:
            generator = Int8Generator(model.generator)
        return Draft(model, layers, generator)
    except (RuntimeError, NotImplementedError, AttributeError, ImportError):  # e.g. a torch without torch.ao
        return None


class DraftSlot:
    """One model's draft, shared by every Translator over that model (a language pair is a view of the same weights:
    a draft each would hold another int8 decoder and generator per pair, about 1 GB for NLLB-600M).

    `want` True: built now. None: only where it pays (worth_a_draft), built by a background thread that the first
    trace starts when it is done, so a Translator that only translates does not pay for it; until it is there,
    traces decode unaided, with the same result, or, where the generator is very large (generator_at_load), with a
    draft of the generator alone, built now. False: never.
    """

    def __init__(self, model: EncoderDecoder, want: bool | None = None):
        self.model = model
        self.wanted = bool(want) or (want is None and worth_a_draft(model))
        self.draft = build_draft(model) if want else (
            build_draft(model, layers=False) if want is None and generator_at_load(model) else None)
        self.started = bool(want)
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start building the draft once, if it is wanted."""
        if (self.draft is None or not self.draft.layers_int8) and self.wanted:
            with self._lock:
                if not self.started:
                    self.started = True
                    # Not a daemon: Python joins it before finalizing; a daemon still inside torch at interpreter
                    # teardown aborted scripts (exit 134) after their work. The trace that starts it does not wait.
                    threading.Thread(target=self._build, name="atlas-draft", daemon=False).start()

    def _build(self) -> None:
        first = self.draft  # a generator's draft keeps serving until the whole one is there, which reuses its generator
        built = build_draft(self.model, generator=first.generator if first is not None else None)
        if built is not None:
            self.draft = built  # one reference assignment: a trace sees the old draft or the whole new one
