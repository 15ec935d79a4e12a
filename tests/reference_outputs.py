"""What the app's analyses give for fixed inputs, kept in tests/data/reference/ so that a change to how the network
is reached (hooks instead of forward arguments) can be checked to change no number a user sees.

    python tests/reference_outputs.py     # writes tests/data/reference/{name}.npz (and the tiny Marian's folder)

`outputs(translator)` computes every recorded value through the public analyses: the trace of a greedy
translation (every array of the SentenceTrace and every step's candidates), a teacher-forced pass without the
causal mask, the padded batch, translation and scoring with heads switched off, every attribution method,
`model.patch`'s JSON (knockout, patching, logit lens), why-A-not-B and a head report over a few sentence pairs.
tests/model/test_reference_outputs.py computes them again and compares (`mismatches`).

They are recorded and compared with the model in float64 (`in_float64`): float32 kernels sum in an order of their
own per instruction set (AVX2, AVX-512, none), which moved values recorded on one processor by up to 1e-3 on another.
In float64 a different order moves a value by about n·ε64·Σ|terms| (below 1e-12 relative here), so what is left is the
app's own rounding of what it stores, which `tolerance` allows for, step by step.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE), str(HERE / "model")]  # test_marian.py builds the tiny Marian

from model import patch  # noqa: E402
from model.analysis import lens  # noqa: E402
from model.analysis.analyze import analyze  # noqa: E402
from model.analysis.attribution import METHODS, attribute  # noqa: E402
from model.inference.translator import Translator  # noqa: E402
from model.nn.layers import Embeddings, sinusoidal_encoding  # noqa: E402

REFERENCE = HERE / "data" / "reference"
MARIAN = REFERENCE / "tiny-marian"
MODELS = {"pieces": ROOT / "checkpoints" / "multi30k-de-en", "words": ROOT / "checkpoints" / "multi30k-de-en-words",
          "marian": MARIAN}
SENTENCE = "Ein Mann mit einem roten Hut spielt Gitarre im Park."
CORRUPT = ["Eine Frau mit einem blauen Hut spielt Gitarre im Park.",
           "Ein Mann mit einem blauen Hut spielt Gitarre im Park.",
           "Ein Kind mit einem roten Hut spielt Gitarre im Park.",
           "Ein Mann mit einem roten Hut spielt Gitarre im Haus.",
           "Der Hund mit einem roten Ball spielt Gitarre im Park.", "Ein Kind mit einem roten Ball spielt im Park."]
PAIRS = [("Ein Hund läuft durch den Schnee.", "A dog runs through the snow."),
         ("Zwei Kinder spielen im Wasser.", "Two children play in the water."),
         ("Eine Frau liest ein Buch.", "A woman reads a book."),
         ("Ein Mann fährt Fahrrad auf der Straße.", "A man rides a bike on the street."),
         ("Die Katze schläft auf dem Sofa.", "The cat sleeps on the sofa."),
         ("Ein Junge wirft einen roten Ball.", "A boy throws a red ball."),
         ("Menschen sitzen in einem Café.", "People sit in a cafe."),
         ("Ein Mädchen springt in den See.", "A girl jumps into the lake.")]
OFF = [("enc_self", 0, 1), ("cross", 1, 0), ("dec_self", 0, 2)]


FLOAT32_RTOL = 2.0**-21  # a few float32 ulps (one is at most 2^-23·|x|)
PATCH_ATOL = 1e-6  # one step of model.patch's 6 decimals
REPORT_RTOL = 1e-5  # one step of the head report's 6 significant figures is at most 1e-5·|x|
FLOOR = 1e-9  # absolute, for values that cancel to nearly zero, where a relative bound says nothing


def tolerance(key: str) -> tuple[float, float]:
    """(rtol, atol) for the recorded value `key`: it matches when |now - recorded| <= atol + rtol·|recorded|.

    Derived from the arithmetic, each rounding a value goes through adding its own step:
    - float64 (the model here): another summation order (another CPU's vector width, threads) moves a result by about
      n·ε64·Σ|terms|, below 1e-12 relative for these models: far below every bound that follows.
    - float32: the app stores most values in float32 (a trace's arrays, model/nn/trace.py; the attributions) or
      computes them from ones it stored. A float64 value within that 1e-12 of a rounding boundary may round to the
      neighbouring float32 on another machine: one ulp, at most 2^-23·|x|. FLOAT32_RTOL = 2^-21 ≈ 4.8e-7 allows a
      few ulps for a value computed from rounded ones (a sum of positive terms, a ratio). It also bounds the values
      the app keeps in float64.
    - decimal: such a flip at a decimal rounding boundary becomes one whole step: `model.patch` writes 6 decimals
      (_num; keys under "patch/": + 1e-6 absolute), the head report 6 significant figures (model/analysis/report.py
      DIGITS; keys under "report/": + 1e-5 relative).
    - FLOOR: a difference of nearly equal values (padded/encoder_shift is ~1e-15 or 0) has no relative accuracy.
    A change of one weight by 1e-4 moves most values by far more (test_a_weight_changed_by_1e_4_is_caught).
    """
    if key.startswith("patch/"):
        return FLOAT32_RTOL, FLOOR + PATCH_ATOL
    if key.startswith("report/"):
        return FLOAT32_RTOL + REPORT_RTOL, FLOOR
    return FLOAT32_RTOL, FLOOR


def mismatches(now: Mapping[str, np.ndarray], recorded: Mapping[str, np.ndarray]) -> list[str]:
    """What differs between `now` and `recorded` (name -> array; np.load's NpzFile is one) beyond `tolerance`: a
    missing or extra name, another shape, a bool array not equal, numbers too far apart (NaN matches NaN)."""
    return [m for key in sorted(set(now) | set(recorded)) if (m := _mismatch(key, now.get(key), recorded.get(key)))]


def _mismatch(key: str, a, b) -> str | None:
    if a is None or b is None:
        return f"{key}: {'not computed now' if a is None else 'not recorded'}"
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return f"{key}: shape {a.shape}, recorded {b.shape}"
    if a.dtype == bool or b.dtype == bool:
        bad = a != b
        return f"{key}: {int(bad.sum())} of {a.size} booleans differ" if bad.any() else None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    rtol, atol = tolerance(key)
    nan = np.isnan(a64) | np.isnan(b64)
    bad = (np.isnan(a64) != np.isnan(b64)) | (~nan & ~(np.abs(a64 - b64) <= atol + rtol * np.abs(b64)))
    if not bad.any():
        return None
    i = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
    return (f"{key}: {int(bad.sum())} of {a.size} values beyond rtol {rtol:.2g}, atol {atol:.2g}; "
            f"first at {tuple(int(j) for j in i)}: {a64[i]!r}, recorded {b64[i]!r}")


def in_float64(tr: Translator) -> Translator:
    """tr with its model cast to float64 (in place). A sinusoidal table is computed again in float64 rather than
    widened: the float32 one ("interleaved") comes from torch.sin/exp, whose last bit differs between CPUs' vector
    code, and that bit would then reach every value."""
    tr.model.double()
    for m in tr.model.modules():
        if isinstance(m, Embeddings) and m.positions == "sinusoidal":
            n, d = m.pe.shape
            m.pe = sinusoidal_encoding(n, d, m.pe_layout, torch.float64).to(m.pe.device)
    return tr


def load(name: str) -> Translator:
    """The model `name` of MODELS as recorded and compared: in float64, without a draft."""
    return in_float64(Translator.from_checkpoint(MODELS[name], draft=False))


def _flat(prefix: str, value, out: dict) -> None:
    """Nested dicts and lists of numbers -> out[prefix/key/...] = float64 array (NaN for None)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}/{k}", v, out)
    elif isinstance(value, (list, tuple)) and value and isinstance(value[0], (dict, str)):
        for i, v in enumerate(value):
            if isinstance(v, dict):
                _flat(f"{prefix}/{i}", v, out)
    elif isinstance(value, (bool, str)) or value is None:
        return
    else:
        if isinstance(value, np.ndarray) and value.dtype.kind in "fb":
            out[prefix] = value  # kept in its own precision (the trace's float32)
            return
        try:  # words (a head's roles, a token) are not numbers: left out
            arr = np.asarray(value, dtype=object)
            out[prefix] = np.where(arr == None, np.nan, arr).astype(np.float64)  # noqa: E711 (elementwise)
        except (TypeError, ValueError):
            return


def outputs(tr: Translator) -> dict[str, np.ndarray]:
    """Every recorded number (arrays by name) of one model; see the module docstring."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one summation order: several threads may round a value the other way
    try:
        return _outputs(tr)
    finally:
        torch.set_num_threads(threads)


def _outputs(tr: Translator) -> dict[str, np.ndarray]:
    torch.manual_seed(0)
    out: dict[str, np.ndarray] = {}
    res = tr.trace(SENTENCE)
    st = res.trace
    for side in ("src_embed", "tgt_embed"):
        _flat(f"trace/{side}", getattr(st, side), out)
    for kind, layers in st.attn.items():
        for l, a in enumerate(layers):
            _flat(f"trace/{kind}/{l}", a, out)
    out["trace/log_probs"] = st.log_probs
    out["trace/steps"] = np.array([[s.chosen_prob] + list(s.top_probs) for s in res.steps], dtype=np.float64)
    off = tr.teacher_forced(SENTENCE, res.raw_tokens, use_causal_mask=False)
    out["no_causal/log_probs"] = off.log_probs.astype(np.float64)
    out["no_causal/dec_self"] = off.probs("dec_self").astype(np.float64)
    padded = tr.padded_batch(SENTENCE, use_padding_mask=True)
    out["padded/enc_self"] = padded["trace"].probs("enc_self").astype(np.float64)
    out["padded/encoder_shift"] = np.array([padded["encoder_shift"]])
    off_heads = [(k, min(l, tr.cfg.n_encoder_layers - 1), min(h, tr.cfg.n_heads - 1)) for k, l, h in OFF]
    out["score_off"] = np.array([tr.score(SENTENCE, res.raw_tokens, off_heads=off_heads),
                                 tr.score(SENTENCE, res.raw_tokens)])
    tgt = res.raw_tokens + ([tr.tgt_vocab.token("eos")] if res.finished else [])
    att = attribute(tr, SENTENCE, tgt, METHODS)
    for m, a in att.matrices.items():
        out[f"attribution/{m}"] = a.astype(np.float64)
    out["attribution/signed"] = att.signed["input_x_grad"].astype(np.float64)
    att_off = attribute(tr, SENTENCE, tgt, ("rollout", "relevance"), off_heads=off_heads, rows=[1])
    for m, a in att_off.matrices.items():
        out[f"attribution_off/{m}"] = a.astype(np.float64)
    n = len(tr.prepare(SENTENCE).ids)
    corrupt = next(c for c in CORRUPT if len(tr.prepare(c).ids) == n)  # patching needs as many tokens
    rep = patch.report(tr, SENTENCE, corrupt)
    rep.pop("seconds")
    _flat("patch", rep, out)
    foil = next(t for t in tr.tgt_vocab.itos[10:] if t != tgt[1])
    con = lens.contrast(tr, SENTENCE, tgt, 1, foil)
    out["contrast/diff"] = np.array([con.log_prob_diff])
    out["contrast/input_x_grad"] = con.input_x_grad.astype(np.float64)
    out["contrast/relevance"] = con.relevance.astype(np.float64)
    for kind, v in con.heads.items():
        out[f"contrast/heads/{kind}"] = v.astype(np.float64)
    report = analyze(tr, [s for s, _ in PAIRS], [r for _, r in PAIRS], batch_tokens=120, pruning_limit=4)
    for key in ("kinds", "importance", "ablation"):
        _flat(f"report/{key}", report[key], out)
    _flat("report/pruning", {g: [p["bleu"] for p in pts] for g, pts in report["pruning"]["curves"].items()}, out)
    return out


def _make_marian() -> None:
    """The tiny Marian model of tests/model/test_marian.py, imported once and kept (its random draws are not rerun)."""
    import shutil
    import tempfile

    from test_marian import build_marian

    from model.io.import_marian import import_marian

    with tempfile.TemporaryDirectory() as tmp:
        src = build_marian(Path(tmp) / "hf", shared=True, activation="swish")
        if MARIAN.exists():
            shutil.rmtree(MARIAN)
        import_marian(str(src), MARIAN)


def main() -> int:
    torch.set_num_threads(1)
    REFERENCE.mkdir(parents=True, exist_ok=True)
    if not (MARIAN / "config.json").is_file():
        _make_marian()
    for name in MODELS:
        values = outputs(load(name))
        np.savez_compressed(REFERENCE / f"{name}.npz", **values)
        print(f"{name}: {len(values)} arrays, {sum(v.size for v in values.values()):,} numbers")
    (REFERENCE / "README.md").write_text(
        "Outputs recorded by `python tests/reference_outputs.py` (see its docstring) with each model in float64; "
        "compared by tests/model/test_reference_outputs.py within the tolerances that `tolerance` (in the same script) "
        "derives. `tiny-marian/` is the tiny Marian model of tests/model/test_marian.py, imported once.\n",
        encoding="utf-8")
    print(json.dumps({p.name: p.stat().st_size for p in REFERENCE.rglob("*") if p.is_file()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
