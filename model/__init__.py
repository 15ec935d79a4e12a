"""A from-scratch encoder-decoder Transformer that returns its own internals.

Rooms (paper vocabulary, "Attention Is All You Need"):
- records.py    the plain data a page gets (Translation, Step, Source, SentenceTrace, Attribution), the attention
                kinds and the page list; no torch
- service.py    the one door pages use: load, trace, translate, teacher-force, attribute, facts, jobs
- nn/           the network: config, attention (explicit and fused paths), layers (embeddings, positional
                encoding, feed-forward, encoder/decoder layers), transformer (EncoderDecoder, masks), trace
- text/         vocab, tokenize (spaCy blank + Moses), pieces (SentencePiece), language (the target-language hint)
- inference/    decode (greedy, recorded, batched, forced, beam), draft (int8 guesser), translator (text in,
                translation and trace out), runtime (process-wide torch settings)
- analysis/     experiments (numbers the pages state); the head report (analyze drives sentences, measures,
                importance, pruning; report is its file format); attribution (+ attribution_rules, faithfulness);
                patch (knockout and activation patching), lens (logit lens, contrast), pairs (minimal pairs)
- training/     data, train (the order of steps: options, vocabularies, loop, finish), evaluate, film (the
                training film), toy (digit tasks trained live), distributed
- io/           checkpoint (the folder format), import_marian (opus-mt into that format), export (trace JSON)
- translate.py, train.py, evaluate.py, analyze.py, attribution.py, patch.py, export.py, import_marian.py:
                the command lines, `python -m model.<name>`

Shape letters, the same in every module's shape comments:
    b    batch (sentences, or sentences × beams while searching)
    L    layers
    h    heads
    s    source positions
    t    target (decoder) positions
    i    query positions of an attention (s or t)
    j    key positions of an attention (s or t)
    n    positions of one sequence where either side fits (embeddings, positional table)
    d    d_model
    d_k  per-head size, d_model / h
    V    vocabulary size
"""


def __getattr__(name: str):
    """`from model import Translator` for a notebook, imported only when asked for: the app's pages import
    model.records and model.service without loading torch's inference code first."""
    if name == "Translator":
        from model.inference.translator import Translator

        return Translator
    raise AttributeError(f"module 'model' has no attribute {name!r}")
