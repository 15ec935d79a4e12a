"""A from-scratch encoder-decoder Transformer that returns its own internals.

Modules (paper vocabulary, "Attention Is All You Need"):
- config.py      frozen ModelConfig, round-trips through config.json
- attention.py   MultiHeadAttention with an explicit (traceable) and a fused path
- layers.py      embeddings, positional encoding, feed-forward, encoder/decoder layers
- transformer.py EncoderDecoder, Generator, masks
- trace.py       the trace dataclasses that forward returns
- vocab.py       Vocab that knows its special ids (<unk> <pad> <bos> <eos> at 0..3 for words)
- tokenize.py    spaCy blank tokenizers and Moses detokenizer
- pieces.py      SentencePiece: imported (Marian) models' tokenization, and training our own piece models
- decode.py      one search loop: greedy (recorded, batched, from a forced prefix) and beam search
- draft.py       an int8 copy of the decoder that guesses a recorded greedy decoding; the model checks every token
- checkpoint.py  the checkpoint format: folders, per-epoch weights, averaging, metrics.json
- import_marian.py  a Marian (opus-mt) model from transformers into the checkpoint format (CLI)
- translator.py  text in, translation + trace out (what the app and the CLI use)
- data.py, train.py, evaluate.py, translate.py  data loading and command lines
- experiments.py numbers the pages state, computed from what the model recorded (NumPy in, NumPy out)
- analyze.py     the head report over a corpus: per-head measures, importance, ablation, pruning curve (CLI)
- attribution.py which source tokens each output token came from: rollout, relevance, input×gradient (CLI: faithfulness)
- runtime.py     process-wide torch settings the app sets once
- film.py        the training film: probe sentences traced at log-spaced steps (recorder, format, load_film)
- toy.py         copy / reverse / sort of digit sequences, trained live by a 2-layer model (ToyTranslator)
- distributed.py DistributedDataParallel under torchrun: ranks, batch shares, weight digests

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
