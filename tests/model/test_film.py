"""model.film: the schedule, the probes, recording inside a tiny training run, the format and its errors."""
from __future__ import annotations

import ast
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from model.nn.trace import patterns, probs
from model.records import APP_EXAMPLES, KINDS
from model.training import train as train_cli
from model.training.film import FilmRecorder, choose_probes, is_film_step
from model.training.film_file import SCHEMA, FilmError, load_film, mean_entropy
from test_model_data import synthetic_corpus, train_args

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]


def write_corpus(d: Path) -> Path:
    """The 40-pair synthetic corpus as train, 4 of its pairs as val (no test split needed)."""
    d.mkdir(parents=True, exist_ok=True)
    pairs = synthetic_corpus()
    for split, items in (("train", pairs), ("val", pairs[1:40:10])):
        for lang, k in (("de", 0), ("en", 1)):
            with gzip.open(d / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(p[k] for p in items) + "\n")
    return d


def film_args(data_dir, out, epochs, *extra):
    # 6 batches of <= 60 padded tokens per epoch: 8 epochs are 48 steps, so frames at 0, 25 and every epoch's end
    return train_args(data_dir, out, epochs, "--max-tokens", "60", "--test-split", "", "--bleu-every", "100", *extra)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("film_data"))


@pytest.fixture(scope="module")
def eight_epochs(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("film8") / "ckpt"
    assert train_cli.main(film_args(corpus, out, 8)) == 0
    return out


def test_schedule_is_log_spaced():
    assert [s for s in range(0, 3300) if is_film_step(s)] == [0, 25, 50, 100, 200, 400, 800, 1600, 3200]


def test_app_examples_are_the_pages_examples():
    """One list: the app's example sentences are the film's first probes (both take model.records')."""
    tree = ast.parse((ROOT / "views" / "plumbing" / "state.py").read_text(encoding="utf-8"))
    found = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EXAMPLES" for t in node.targets)]
    assert len(found) == 1 and ast.unparse(found[0]) == "records.APP_EXAMPLES"
    from model.training import film

    assert film.APP_EXAMPLES is APP_EXAMPLES  # the film's probes start with them
    assert len(APP_EXAMPLES) == 6 and all(s.startswith(("Ein", "Zwei")) for s in APP_EXAMPLES)


def test_choose_probes_puts_the_examples_first_and_keeps_the_rest_short(vocabs):
    sv, tv = vocabs
    val_src = [f"Satz {i} mit " + "viel " * (i % 20) + "Text." for i in range(60)] + APP_EXAMPLES[:2]
    val_tgt = [f"Sentence {i} ." for i in range(60)] + ["A brown dog.", "A man sleeps."]
    probes = choose_probes(val_src, val_tgt, sv, tv, n_more=5, max_words=8)
    assert [p.src for p in probes[:2]] == APP_EXAMPLES[:2]  # the two examples that are in this val
    assert len(probes) == 7 and len({p.src for p in probes}) == 7
    for p in probes[2:]:
        assert len(p.src_tokens) - 1 <= 8 and len(p.tgt_tokens) - 1 <= 8
    assert probes[0].src_tokens[-1] == "<eos>" and probes[0].tgt_tokens[0] == "<bos>"
    assert probes[0].src_ids[-1] == sv.eos_idx and len(probes[0].tgt_ids) == len(probes[0].tgt_tokens) - 1
    assert choose_probes(val_src, val_tgt, sv, tv, n_more=5, max_words=8) == probes  # the same every time


def test_record_leaves_training_untouched(make_model, vocabs, pairs):
    """Eval mode and no_grad inside; train mode, weights, gradients and the RNG are as they were."""
    sv, tv = vocabs
    probes = choose_probes([de for de, _ in pairs], [en for _, en in pairs], sv, tv, n_more=4)
    model = make_model(dropout=0.2, attn_dropout=0.1)  # in train mode these would draw random numbers
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    rec = FilmRecorder(Path("/nonexistent-never-written"), probes, [(p.src_ids, p.tgt_ids) for p in probes], sv, tv,
                       "cpu")
    rec.save = lambda: None  # nothing written in this test
    frame = rec.record(model, 0)
    assert model.training and torch.equal(torch.get_rng_state(), rng)
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    for n, p in enumerate(probes):
        s, t = len(p.src_tokens), len(p.tgt_tokens)
        assert frame.attn[n]["cross"].shape == (2, 4, t, s) and frame.attn[n]["enc_self"].shape == (2, 4, s, s)
        assert frame.attn[n]["dec_self"].dtype == np.float16
        np.testing.assert_allclose(frame.attn[n]["cross"].astype(np.float32).sum(-1), 1.0, atol=2e-3)
    # the padded batch gives each probe what it gives alone (teacher-forced on its reference)
    src = torch.tensor([probes[0].src_ids])
    tgt = torch.tensor([[tv.bos_idx] + probes[0].tgt_ids])
    model.eval()
    _, cache = model.run_with_cache(src, tgt, patterns)
    np.testing.assert_allclose(frame.attn[0]["cross"].astype(np.float32), probs(cache, "cross", 2), atol=1e-3)
    assert frame.train_loss is None and math.isfinite(frame.val_loss)


def test_training_records_a_film_that_round_trips(eight_epochs):
    film = load_film(eight_epochs)
    steps = list(film.steps)
    assert steps[0] == 0 and 25 in steps and steps == sorted(steps) and len(set(steps)) == len(steps)
    history = json.loads((eight_epochs / "metrics.json").read_text(encoding="utf-8"))["training"]["history"]
    ends = {h["step"]: h["epoch"] for h in history}
    assert set(ends) <= set(steps) and [film.epochs[steps.index(s)] for s in ends] == list(ends.values())
    assert film.meta["schema"] == SCHEMA and film.meta["n_heads"] == 2
    assert math.isnan(film.train_loss[0]) and np.isfinite(film.train_loss[1:]).all()
    assert film.val_loss[-1] < film.val_loss[0] - 0.5
    # the epoch ends' train loss equals the trainer's own when no other frame fell inside the epoch
    assert film.train_loss[steps.index(history[0]["step"])] == pytest.approx(history[0]["train_nll"], rel=1e-6)
    for n, probe in enumerate(film.probes):
        assert len(probe["translations"]) == len(film)
        for kind in KINDS:
            q, k = film.axes(n, kind)
            assert film.attn[n][kind].shape == (len(film), 1, 2, len(q), len(k))
    assert (eight_epochs / "film.safetensors").stat().st_size < 100_000


def test_cross_attention_starts_near_uniform_and_sharpens(eight_epochs):
    film = load_film(eight_epochs)
    uniform = np.mean([math.log(len(p["src_tokens"])) for p in film.probes])  # entropy of a uniform row
    ent = mean_entropy(film, "cross")  # (F, L)
    assert ent.shape == (len(film), 1)
    assert ent[0, 0] > 0.85 * uniform, (ent[0, 0], uniform)
    assert ent[-1, 0] < 0.7 * ent[0, 0], ent[:, 0]
    assert film.probes[0]["translations"][-1] != film.probes[0]["translations"][0]


def test_the_film_does_not_change_training(corpus, eight_epochs, tmp_path):
    """Same seed, same weights, bit for bit, with and without recording."""
    out = tmp_path / "nofilm"
    assert train_cli.main(film_args(corpus, out, 8, "--no-film")) == 0
    assert not (out / "film.json").exists()
    assert (out / "model.safetensors").read_bytes() == (eight_epochs / "model.safetensors").read_bytes()


def test_resume_keeps_the_film(corpus, eight_epochs, tmp_path):
    out = tmp_path / "ckpt"
    assert train_cli.main(film_args(corpus, out, 5)) == 0
    assert load_film(out).steps[-1] == 30
    # As if the run had crashed in epoch 8: frames after the saved state (step 30) are on disk.
    # Resume drops them and records them again, so none is doubled.
    (out / "film.safetensors").write_bytes((eight_epochs / "film.safetensors").read_bytes())
    meta = json.loads((eight_epochs / "film.json").read_text(encoding="utf-8"))
    meta["val_loss"] = [v if s <= 30 else 999.0 for s, v in zip(meta["steps"], meta["val_loss"])]  # marks them
    (out / "film.json").write_text(json.dumps(meta), encoding="utf-8")
    assert train_cli.main(film_args(corpus, out, 8, "--resume")) == 0
    resumed, straight = load_film(out), load_film(eight_epochs)
    np.testing.assert_array_equal(resumed.steps, straight.steps)
    assert resumed.epochs == straight.epochs
    np.testing.assert_allclose(resumed.val_loss, straight.val_loss, rtol=1e-5)
    for a, b in zip(resumed.attn, straight.attn):
        for kind in KINDS:
            np.testing.assert_allclose(a[kind].astype(np.float32), b[kind].astype(np.float32), atol=2e-3)
    assert [p["translations"] for p in resumed.probes] == [p["translations"] for p in straight.probes]


def test_load_film_errors_name_the_file(eight_epochs, tmp_path):
    with pytest.raises(FilmError, match="no film here"):
        load_film(tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("film.json", "film.safetensors"):
        (bad / name).write_bytes((eight_epochs / name).read_bytes())
    assert len(load_film(bad / "film.json")) == len(load_film(eight_epochs))  # either file names the film
    data = (eight_epochs / "film.safetensors").read_bytes()
    (bad / "film.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(FilmError, match="film.safetensors.*truncated"):
        load_film(bad)
    (bad / "film.safetensors").write_bytes(data)
    meta = json.loads((eight_epochs / "film.json").read_text(encoding="utf-8"))
    (bad / "film.json").write_text(json.dumps({**meta, "schema": "something-else/9"}), encoding="utf-8")
    with pytest.raises(FilmError, match="something-else/9"):
        load_film(bad)
    (bad / "film.json").write_text(json.dumps({**meta, "steps": meta["steps"][:-1]}), encoding="utf-8")
    with pytest.raises(FilmError, match="do not agree"):
        load_film(bad)
    (bad / "film.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(FilmError, match="film.json.*not valid JSON"):
        load_film(bad)
