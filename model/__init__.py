"""A from-scratch encoder-decoder Transformer that returns its own internals.

Modules (paper vocabulary, "Attention Is All You Need"):
- config.py      frozen ModelConfig, round-trips through config.json
- attention.py   MultiHeadAttention with an explicit (traceable) and a fused path
- layers.py      embeddings, positional encoding, feed-forward, encoder/decoder layers
- transformer.py EncoderDecoder, Generator, masks
- trace.py       the trace dataclasses that forward returns
- vocab.py       Vocab with <unk> <pad> <bos> <eos>
- tokenize.py    spaCy blank tokenizers and Moses detokenizer
- decode.py      greedy (recorded step by step), forced prefix, beam search
- checkpoint.py  safetensors checkpoint folders, with clear errors
- translator.py  text in, translation + trace out (what the app and the CLI use)
- data.py, train.py, evaluate.py, translate.py  data loading and command lines
"""
