"""docs/hooks.md is true: its recipes run, its table names every hook point and gives the shapes a cache has.

The recipes run against the shipped checkpoint (pre-norm, SentencePiece) and the tiny imported Marian kept in
tests/data/reference (post-norm, shared vocabulary, <pad> as the start token), so a recipe cannot lean on one
model's size or conventions.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "hooks.md"
CHECKPOINTS = {"shipped": ROOT / "checkpoints" / "multi30k-de-en",
               "tiny-marian": ROOT / "tests" / "data" / "reference" / "tiny-marian"}
TEXT = DOC.read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```", TEXT, flags=re.S | re.M)


def _table() -> list[tuple[str, str, bool]]:
    """(name with {l}, shape cell, pre-norm only) for each row of the section "Every hook point"."""
    section = TEXT.split("## Every hook point", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4:
            rows.append((cells[0].strip("`"), cells[1], "pre-norm only" in cells[3]))
    return rows


def _normalised(names) -> list[str]:
    return [re.sub(r"\.\d+\.", ".{l}.", n) for n in names]


@pytest.fixture(scope="module", params=[pytest.param("shipped", marks=pytest.mark.checkpoint), "tiny-marian"])
def doc_translator(request):
    from model.inference.translator import Translator

    return Translator.from_checkpoint(CHECKPOINTS[request.param], draft=False)


def test_the_doc_has_its_recipes():
    assert len(BLOCKS) >= 4
    assert all("assert " in block for block in BLOCKS), "every recipe checks its own result"


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_recipe_runs(doc_translator, index):
    code = compile(BLOCKS[index], f"{DOC}:python block {index + 1}", "exec")
    exec(code, {"translator": doc_translator, "__name__": "hooks_doc_recipe"})


@pytest.mark.parametrize("norm_first", [True, False])
def test_table_lists_exactly_the_hook_points(norm_first):
    from model.nn.config import ModelConfig
    from model.nn.transformer import hook_names

    cfg = ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=32, n_heads=4, n_encoder_layers=2,
                      n_decoder_layers=3, d_ff=64, norm_first=norm_first)
    rows = _table()
    documented = [name for name, _, pre_only in rows if norm_first or not pre_only]
    assert len(documented) == len(set(documented)), "a name is listed twice"
    assert set(documented) == set(_normalised(hook_names(cfg)))
    assert {name for name, _, pre_only in rows if pre_only} == {"encoder_final_ln.hook_normalized",
                                                               "decoder_final_ln.hook_normalized"}


@pytest.mark.parametrize("norm_first", [True, False])
def test_table_shapes_are_a_caches_shapes(make_model, norm_first):
    import torch

    model = make_model(norm_first=norm_first)
    cfg = model.cfg
    b, s, t = 2, 5, 3  # different sizes, so that a swapped axis shows
    src = torch.randint(4, cfg.src_vocab_size, (b, s))
    tgt = torch.randint(4, cfg.tgt_vocab_size, (b, t))
    with torch.no_grad():
        _, cache = model.run_with_cache(src, tgt)
    sizes = {"b": b, "s": s, "t": t, "h": cfg.n_heads, "d_head": cfg.d_k, "d_model": cfg.d_model, "d_ff": cfg.d_ff}
    assert len(set(sizes.values())) == len(sizes)
    documented = {name: shape for name, shape, _ in _table()}
    for name, value in cache.items():
        letters = [x.strip() for x in documented[_normalised([name])[0]].strip("()").split(",")]
        assert tuple(value.shape) == tuple(sizes[x] for x in letters), name
