"""Shared fixtures for the tests of the `model` package.

Everything here is tiny (d_model 32, 4 heads, 2+2 layers, d_ff 64, vocabularies from a few
sentences) so the whole model suite runs in seconds on a couple of CPU cores. Imports of torch
and the model package happen inside the fixtures, so the viz tests never pay for them.
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

# The tests live in folders that mirror the packages (model/, viz/, views/, browser/); a few import helpers from each
# other by bare name (test_model_data's corpus, test_marian's tiny model): every folder is on the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE / d) for d in ("model", "viz", "views", "browser") if str(_HERE / d) not in sys.path]

# The real-browser fixtures (one server and one Chromium for the whole session) are registered here, once:
# imported into two test modules they would become two "session" fixtures and start Playwright twice.
from browser_support import (  # noqa: E402,F401
    COLLECTED,
    app_server,
    atlas_checkpoints,
    chromium,
    page,
    screenshot_dir,
)

# A test that needs one of these needs Chromium: it is a browser test whether or not its module says so, so that
# `pytest -m "not browser"` never starts a browser.
BROWSER_FIXTURES = frozenset({"chromium", "app_server", "page"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
    config.stash[COLLECTED] = {item.nodeid: frozenset(m.name for m in item.iter_markers()) for item in items}


# German -> English sentence pairs the tiny vocabularies and the trained model are made from.
PAIRS = [
    ("Ein Mann fährt Fahrrad.", "A man rides a bike."),
    ("Zwei Hunde spielen im Schnee.", "Two dogs play in the snow."),
    ("Eine Frau liest ein Buch.", "A woman reads a book."),
    ("Ein Kind isst einen Apfel.", "A child eats an apple."),
]

TINY = dict(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, max_len=256)


@pytest.fixture(scope="session")
def pairs():
    return list(PAIRS)


@pytest.fixture(scope="session")
def vocabs():
    """(source vocab, target vocab) built from PAIRS with min_freq 1."""
    from model.text.tokenize import tokenize
    from model.text.vocab import Vocab

    src = Vocab.build((tokenize(de, "de") for de, _ in PAIRS), min_freq=1)
    tgt = Vocab.build((tokenize(en, "en") for _, en in PAIRS), min_freq=1)
    return src, tgt


@pytest.fixture(scope="session")
def make_model(vocabs):
    """Factory: a tiny EncoderDecoder in eval mode, seeded; keyword arguments override the config."""
    import torch

    from model.nn.config import ModelConfig
    from model.nn.transformer import EncoderDecoder

    torch.set_num_threads(1)
    sv, tv = vocabs

    def make(seed: int = 0, **overrides):
        kw = {**TINY, "dropout": 0.0, "attn_dropout": 0.0, **overrides}
        cfg = ModelConfig(src_vocab_size=len(sv), tgt_vocab_size=len(tv), pad_idx=sv.pad_idx, **kw)
        torch.manual_seed(seed)
        return EncoderDecoder(cfg).eval()

    return make


@pytest.fixture
def tiny_model(make_model):
    return make_model()


def _encode_pairs(sv, tv):
    from model.text.tokenize import tokenize

    out = []
    for de, en in PAIRS:
        out.append((sv.encode(tokenize(de, "de")) + [sv.eos_idx], tv.encode(tokenize(en, "en"))))
    return out


@pytest.fixture(scope="session")
def encoded_pairs(vocabs):
    """PAIRS as (source ids with <eos>, target ids) lists."""
    return _encode_pairs(*vocabs)


def train_on_pairs(model, vocabs, encoded_pairs, steps: int, lr: float):
    """`model` trained on every pair of PAIRS (one batch, Adam) for `steps` steps, in eval mode."""
    import torch
    import torch.nn.functional as F

    from model.training.batch import collate

    sv, tv = vocabs
    src, tgt_in, tgt_out = collate(encoded_pairs, list(range(len(encoded_pairs))), sv.pad_idx, tv.bos_idx, tv.eos_idx)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        logp = model(src, tgt_in)
        loss = F.nll_loss(logp.reshape(-1, logp.shape[-1]), tgt_out.reshape(-1), ignore_index=sv.pad_idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="session")
def _trained(make_model, vocabs, encoded_pairs):
    """The tiny model trained on PAIRS until it reproduces them (and so emits <eos>)."""
    model = train_on_pairs(make_model(seed=1), vocabs, encoded_pairs, steps=120, lr=1e-2)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


@pytest.fixture
def trained_model(_trained):
    """A private copy of the trained tiny model (tests may change it)."""
    return copy.deepcopy(_trained)


@pytest.fixture
def translator(trained_model, vocabs):
    from model.inference.translator import Translator

    sv, tv = vocabs
    return Translator(trained_model, sv, tv, {"note": "tiny test model"})


@pytest.fixture
def checkpoint_dir(tmp_path, tiny_model, vocabs):
    """A complete checkpoint folder of the tiny model under tmp_path; returns (folder, model)."""
    from model.io.checkpoint import save_checkpoint

    sv, tv = vocabs
    folder = save_checkpoint(tmp_path / "ckpt", tiny_model, sv, tv, {"val": {"bleu": 1.5}, "note": "tiny"})
    return folder, tiny_model
