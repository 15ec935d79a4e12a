"""A tiny checkpoint built from a few sentences, for the app and browser tests (no shipped model needed)."""
from __future__ import annotations

from pathlib import Path

import torch

from model.io.checkpoint import save_checkpoint
from model.nn.config import ModelConfig
from model.nn.transformer import EncoderDecoder
from model.text.tokenize import tokenize
from model.text.vocab import Vocab

GERMAN = [
    "Ein brauner Hund rennt dem schwarzen Hund hinterher.",
    "Ein Mann schläft in einem grünen Raum auf einem Sofa.",
    "Zwei Hunde spielen im hohen Gras mit einem orangen Spielzeug.",
    "Ein Hund läuft im Schnee.",
]
ENGLISH = [
    "A brown dog is running after the black dog.",
    "A man sleeping in a green room on a couch.",
    "Two dogs play in the tall grass with an orange toy.",
    "A dog runs in the snow.",
]


def make_tiny_checkpoint(folder: str | Path, seed: int = 0, train_steps: int = 60) -> Path:
    """A 2+2-layer model with d_model 32, briefly fitted to four sentence pairs so it emits <eos>."""
    sv = Vocab.build((tokenize(s, "de") for s in GERMAN), min_freq=1)
    tv = Vocab.build((tokenize(s, "en") for s in ENGLISH), min_freq=1)
    cfg = ModelConfig(len(sv), len(tv), d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                      dropout=0.0, attn_dropout=0.1, max_len=128)
    torch.manual_seed(seed)
    model = EncoderDecoder(cfg)
    src = [sv.encode(tokenize(s, "de")) + [sv.eos_idx] for s in GERMAN]
    tgt = [tv.encode(tokenize(s, "en")) for s in ENGLISH]
    s_len, t_len = max(map(len, src)), max(map(len, tgt)) + 1
    S = torch.full((len(src), s_len), cfg.pad_idx)
    Ti = torch.full((len(src), t_len), cfg.pad_idx)
    To = torch.full((len(src), t_len), cfg.pad_idx)
    for r, (a, b) in enumerate(zip(src, tgt)):
        S[r, : len(a)] = torch.tensor(a)
        Ti[r, : len(b) + 1] = torch.tensor([tv.bos_idx] + b)
        To[r, : len(b) + 1] = torch.tensor(b + [tv.eos_idx])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(train_steps):
        logp = model(S, Ti)
        loss = torch.nn.functional.nll_loss(logp.reshape(-1, logp.shape[-1]), To.reshape(-1), ignore_index=cfg.pad_idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return save_checkpoint(folder, model, sv, tv, {"note": "tiny test model"})
