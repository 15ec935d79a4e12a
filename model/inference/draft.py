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

The copy's linear layers are Int8Rows: int8 weights (a quarter of the bytes), a scale per output row, and fbgemm's
dynamic int8 kernels (torch.ao's, with per-channel weights): a single-row product with a large generator (Marian's
58,000 x 512) runs several times faster (`python benchmarks/bench_model.py --opus-size` measures it). Norms,
embeddings and a position bias are the model's own tensors, shared.

A model with a very large generator (NLLB's and mBART-50's 250,000 x 1024, 1 GB) gets its draft while it loads,
packed by both cores, so its first trace is guessed too; others get theirs in the background after their first trace.
"""
from __future__ import annotations

import copy
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

from model.inference.runtime import release_freed_memory
from model.nn.transformer import EncoderDecoder, Generator

# A draft pays where a step's weights do not fit the CPU caches: the generator's float32 bytes. The shipped model's
# (7.7 MB, with 12 MB of decoder layers) fits the caches of some CPUs (then a draft changes nothing) and not of
# others (then it saves about a quarter of a trace; the "no draft" column of `python benchmarks/bench_model.py`
# tells which); below 4 MB (the tests' tiny models, the toy tasks) a step is small enough that the draft could only
# add work.
MIN_GENERATOR_BYTES = 4 * 2**20
# The draft's int8 copy of the generator stays in memory beside the model: it may add at most this share of the
# float32 weights. NLLB-600M's adds 0.11, T5Gemma B-B's 0.13; T5Gemma S-S's (Gemma's 256k-row generator on a 181M
# model) would add 0.19, taking the process past 1.5× its weights: it runs without (its trace is within 4 s anyway).
DRAFT_MEMORY_SHARE = 0.15


# fbgemm packs 4 blocks of 65,536 x 1024 faster than one 256,206 x 1024 matrix, and two threads pack two at once;
# fewer, larger blocks make the quicker product (opus-mt's generator is one block)
ROWS_PER_BLOCK = 65536
PACKING_THREADS = 2  # a load, not a request: both cores


class Int8Rows(nn.Module):
    """An nn.Linear's int8 copy in blocks of output rows: each row quantized with a scale of its own (symmetric), each
    block packed for fbgemm's dynamic int8 product (the activations quantized per call), the blocks' outputs
    concatenated; as fast as one matrix's product. Made by int8_linears."""

    def __init__(self, packed: list, in_features: int, out_features: int):
        super().__init__()
        self.packed, self.in_features, self.out_features = packed, in_features, out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out)
        # reduce_range as torch.ao's dynamic Linear on x86: fbgemm's 16-bit sums of 8-bit products cannot saturate
        if len(self.packed) == 1:
            return torch.ops.quantized.linear_dynamic(x, self.packed[0], True)
        return torch.cat([torch.ops.quantized.linear_dynamic(x, p, True) for p in self.packed], dim=-1)


def int8_linears(linears: list[nn.Linear], rows: int | None = None, threads: int | None = None) -> list[Int8Rows]:
    """Each Linear's Int8Rows; the blocks of all of them packed by `threads` threads (torch releases the GIL)."""
    rows, threads = rows or ROWS_PER_BLOCK, threads or PACKING_THREADS
    jobs = []  # (which linear, weight block (rows, in), its bias or None)
    for n, linear in enumerate(linears):
        weight, bias = linear.weight.detach(), linear.bias
        for start, block in zip(range(0, weight.shape[0], rows), weight.split(rows)):
            jobs.append((n, block, None if bias is None else bias.detach()[start:start + rows]))
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="atlas-int8") as pool:
        packed = list(pool.map(lambda job: _pack(job[1], job[2]), jobs))
    return [Int8Rows([p for (m, _, _), p in zip(jobs, packed) if m == n], lin.in_features, lin.out_features)
            for n, lin in enumerate(linears)]


def _pack(weight: torch.Tensor, bias: torch.Tensor | None):
    """One block (rows, in) of float32 weights as fbgemm's packed int8, one scale per row."""
    low, high = torch.aminmax(weight, dim=1)
    scale = (torch.maximum(-low, high).clamp_min(1e-12) / 127.5).double()  # (rows,)
    zero = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # quantized tensors announce their move to torchao
        warnings.simplefilter("ignore")
        q = torch.quantize_per_channel(weight, scale, zero, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(q, bias)


def _int8_copy(module: nn.Module, threads: int | None = None) -> nn.Module:
    """A copy of `module` whose nn.Linear layers are Int8Rows, every other parameter and buffer shared. No float32
    weight is copied: a deep copy first would hold the decoder layers twice, and the allocator keeps much of what
    a background thread frees (a 600M model's process then stayed at 2.3x its weights)."""
    tensors = list(module.parameters()) + list(module.buffers())
    twin = copy.deepcopy(module, memo={id(t): t for t in tensors})  # the structure; the tensors are the model's
    places = [(parent, name, child) for parent in twin.modules() for name, child in parent.named_children()
              if type(child) is nn.Linear]
    for (parent, name, _), q in zip(places, int8_linears([child for _, _, child in places], threads=threads)):
        setattr(parent, name, q)
    return twin


class Int8Generator(nn.Module):
    """The generator with its projection in Int8Rows; the same log-softmax."""

    def __init__(self, generator: nn.Module, threads: int | None = None):
        super().__init__()
        self.proj = int8_linears([generator.proj], threads=threads)[0]
        self.softcap = generator.softcap  # Gemma 2's final logit cap, as the model's own generator

    forward = Generator.forward


class Draft(nn.Module):
    """The model's decoder and generator with int8 linear layers (Int8Rows, packed by `threads` threads); embeddings,
    norms and a position bias are shared. It has the two methods a greedy loop calls (decode with a cache, new_cache)
    and cfg.
    """

    def __init__(self, model: EncoderDecoder, threads: int | None = None):
        super().__init__()
        self.cfg = model.cfg
        self.tgt_embed, self.decoder_final_ln = model.tgt_embed, model.decoder_final_ln  # shared, not copied
        if model.cfg.positions == "relative":  # the decoder's position bias, shared too
            self.tgt_pos_bias = model.tgt_pos_bias
        self.decoder = _int8_copy(model.decoder, threads)
        self.generator = Int8Generator(model.generator, threads)
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
# A trace of a longer source decodes unaided. A wrong guess costs a traced pass over the whole guess, which grows
# with its square, and long outputs are where a guess goes wrong (the model repeating itself). Measured on the
# shipped model (docs/performance.md, `bench_model.py`): the draft pays at 5-20 source tokens and costs at 40 and 80.
DRAFT_MAX_SOURCE = 30


def worth_a_draft(model: EncoderDecoder) -> bool:
    """Large generators only, and only where the generator is a large share of a step (at least DRAFT_SHARE of the
    decoder layers' weights: the shipped model 0.65, opus-mt 1.2, NLLB-600M 1.3): a small model's step is already in
    cache, and where the layers dominate (Flan-T5-base: 0.22) a wrong guess's extra checking pass costs more than
    the int8 layers save (random weights flip near-tied tokens; each flip is another traced pass); and only where its
    copy adds at most DRAFT_MEMORY_SHARE of the weights' bytes."""
    cfg = model.cfg
    generator = cfg.d_model * cfg.tgt_vocab_size
    layers = sum(p.numel() for p in model.decoder.parameters())
    weights = sum(p.numel() for p in model.parameters())  # a tied matrix counted once
    return (generator * 4 >= MIN_GENERATOR_BYTES and generator >= DRAFT_SHARE * layers
            and generator <= DRAFT_MEMORY_SHARE * 4 * weights and quantization_available())


# Where the float32 generator is this large the draft is built while the model loads: NLLB-600M's and mBART-50's
# (1 GB) are, opus-mt's (119 MB) is not. Without it a first trace's steps would read the float32 weights, a generator
# row being half of each, and both cores pack the draft in a few seconds of the load (`python
# benchmarks/bench_model.py --families` measures the load and the first trace).
DRAFT_AT_LOAD_BYTES = 256 * 2**20


def draft_at_load(model: EncoderDecoder) -> bool:
    """True where the draft is built with the model (a very large generator, in a model that wants a draft)."""
    return model.cfg.d_model * model.cfg.tgt_vocab_size * 4 >= DRAFT_AT_LOAD_BYTES and worth_a_draft(model)


def build_draft(model: EncoderDecoder, threads: int | None = None) -> Draft | None:
    """The int8 draft of `model` (see Draft), packed by `threads` threads (default PACKING_THREADS), or None when
    quantization fails on this machine (greedy then runs unaided)."""
    try:
        return Draft(model, threads)
    except (RuntimeError, NotImplementedError, AttributeError, ImportError):  # e.g. a torch without torch.ao
        return None


class DraftSlot:
    """One model's draft, shared by every Translator over that model (a language pair is a view of the same weights:
    a draft each would hold another int8 decoder and generator per pair, about 1 GB for NLLB-600M).

    `want` True: built now. None: only where it pays (worth_a_draft): now where the generator is very large
    (draft_at_load), otherwise by a background thread that the first trace starts when it is done, so a Translator
    that only translates does not pay for it; until it is there, traces decode unaided, with the same result.
    False: never.
    """

    def __init__(self, model: EncoderDecoder, want: bool | None = None):
        self.model = model
        self.wanted = bool(want) or (want is None and worth_a_draft(model))
        now = bool(want) or (want is None and draft_at_load(model))
        self.draft = build_draft(model) if now else None
        if self.draft is not None:
            release_freed_memory()  # the packing threads' int8 tensors, freed but kept by their allocator arenas
        self.started = now
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
        # one thread: the other core serves requests meanwhile
        self.draft = build_draft(self.model, threads=1)  # one reference assignment: a trace sees None or all of it
        release_freed_memory()
