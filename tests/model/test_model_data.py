"""model.data, model.evaluate and model.train on tiny files the tests write."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
import sacrebleu
import torch

from model.io.checkpoint import load_checkpoint, save_checkpoint
from model.training import evaluate as evaluate_cli
from model.training import train as train_cli
from model.training.batch import collate
from model.training.data import DataError, find_file, read_lines, read_parallel, read_split, token_batches

torch.set_num_threads(1)

PAD, BOS, EOS = 1, 2, 3


# --------------------------------------------------------------------------- reading files


def test_read_lines_plain_and_gzipped(tmp_path):
    lines = ["Ein Mann fährt Fahrrad.", "", "Zwei Hunde — im Schnee.", "  Leerzeichen  "]
    (tmp_path / "a.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with gzip.open(tmp_path / "a.de.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    (tmp_path / "crlf.de").write_bytes("\r\n".join(lines).encode("utf-8"))  # no final newline
    assert read_lines(tmp_path / "a.de") == lines
    assert read_lines(tmp_path / "a.de.gz") == lines
    assert read_lines(str(tmp_path / "crlf.de")) == lines


def test_read_lines_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match="missing.de"):
        read_lines(tmp_path / "missing.de")
    (tmp_path / "latin.de").write_bytes("Straße".encode("latin-1"))
    with pytest.raises(DataError, match="latin.de.*UTF-8"):
        read_lines(tmp_path / "latin.de")
    (tmp_path / "fake.de.gz").write_text("not gzip", encoding="utf-8")
    with pytest.raises(DataError, match="fake.de.gz"):
        read_lines(tmp_path / "fake.de.gz")
    full = gzip.compress(("Zeile\n" * 1000).encode())
    (tmp_path / "cut.de.gz").write_bytes(full[: len(full) // 2])
    with pytest.raises(DataError, match="cut.de.gz"):
        read_lines(tmp_path / "cut.de.gz")


def test_read_parallel_reports_misaligned_files(tmp_path):
    (tmp_path / "x.de").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "x.en").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_parallel(tmp_path / "x.de", tmp_path / "x.en")
    msg = str(info.value)
    assert str(tmp_path / "x.de") in msg and str(tmp_path / "x.en") in msg
    assert "3" in msg and "2" in msg and "misaligned" in msg
    (tmp_path / "x.en").write_text("A\nB\nC\n", encoding="utf-8")
    assert read_parallel(tmp_path / "x.de", tmp_path / "x.en") == (["a", "b", "c"], ["A", "B", "C"])


def test_find_file(tmp_path):
    with pytest.raises(DataError) as info:
        find_file(tmp_path, "train", "de")
    msg = str(info.value)
    assert str(tmp_path / "train.de") in msg and "not found" in msg and "train.de.gz" in msg
    (tmp_path / "train.de").write_text("x\n", encoding="utf-8")
    assert find_file(tmp_path, "train", "de") == tmp_path / "train.de"
    with gzip.open(tmp_path / "train.de.gz", "wt", encoding="utf-8") as f:
        f.write("y\n")
    assert find_file(tmp_path, "train", "de") == tmp_path / "train.de.gz"  # the gzipped file wins
    (tmp_path / "train.en").write_text("z\n", encoding="utf-8")
    assert read_split(tmp_path, "train") == (["y"], ["z"])
    with pytest.raises(DataError, match="val.de"):
        read_split(tmp_path, "val")


# --------------------------------------------------------------------------- batching


def random_pairs(n, seed=0, max_len=15):
    rng = random.Random(seed)
    return [([5] * rng.randint(1, max_len), [6] * rng.randint(1, max_len)) for _ in range(n)]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("max_tokens", [1, 20, 64, 500])
def test_token_batches_cover_every_index_once_and_respect_max_tokens(shuffle, max_tokens):
    pairs = random_pairs(300, seed=max_tokens)
    pairs.append(([5] * 40, [6] * 3))  # longer than a small max_tokens on its own
    batches = token_batches(pairs, max_tokens, shuffle=shuffle, seed=7)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(pairs)))
    assert all(batches)
    for b in batches:
        width = max(max(len(pairs[i][0]), len(pairs[i][1]) + 1) for i in b)
        assert width * len(b) <= max_tokens or len(b) == 1
        src, tgt_in, _ = collate(pairs, b, PAD, BOS, EOS)  # what the model will really see
        assert max(src.numel(), tgt_in.numel()) <= max(max_tokens, width)
    if max_tokens == 500:
        assert len(batches) < len(pairs) / 5  # batches really are filled


def test_token_batches_shuffle_is_seeded():
    pairs = random_pairs(200, seed=1)
    a = token_batches(pairs, 60, shuffle=True, seed=3)
    assert a == token_batches(pairs, 60, shuffle=True, seed=3)
    assert a != token_batches(pairs, 60, shuffle=True, seed=4)
    assert token_batches(pairs, 60, shuffle=False) == token_batches(pairs, 60, shuffle=False)
    assert token_batches([], 60, shuffle=True) == []


def test_collate_shapes_bos_eos_and_padding():
    pairs = [([10, 11, 12, EOS], [20, 21]), ([13, EOS], [22, 23, 24, 25]), ([14, 15, EOS], [26])]
    src, tgt_in, tgt_out = collate(pairs, [0, 1, 2], PAD, BOS, EOS)
    assert src.shape == (3, 4) and tgt_in.shape == (3, 5) and tgt_out.shape == (3, 5)
    assert src.dtype == tgt_in.dtype == tgt_out.dtype == torch.long
    assert src.tolist() == [[10, 11, 12, EOS], [13, EOS, PAD, PAD], [14, 15, EOS, PAD]]
    assert tgt_in.tolist() == [[BOS, 20, 21, PAD, PAD], [BOS, 22, 23, 24, 25], [BOS, 26, PAD, PAD, PAD]]
    assert tgt_out.tolist() == [[20, 21, EOS, PAD, PAD], [22, 23, 24, 25, EOS], [26, EOS, PAD, PAD, PAD]]
    # tgt_out is tgt_in shifted left by one
    assert torch.equal(tgt_in[:, 1:][tgt_out[:, :-1] != EOS], tgt_out[:, :-1][tgt_out[:, :-1] != EOS])
    src, tgt_in, tgt_out = collate(pairs, [2], PAD, BOS, EOS)
    assert src.tolist() == [[14, 15, EOS]] and tgt_in.tolist() == [[BOS, 26]] and tgt_out.tolist() == [[26, EOS]]


# --------------------------------------------------------------------------- python -m model.evaluate


def test_evaluate_reports_the_bleu_sacrebleu_gives(tmp_path, capsys, translator, pairs):
    folder = save_checkpoint(tmp_path / "ckpt", translator.model, translator.src_vocab, translator.tgt_vocab)
    srcs = [de for de, _ in pairs] + ["Ein Hund liest ein Buch.", "Zwei Kinder essen einen Apfel."]
    refs = [en for _, en in pairs] + ["A dog reads a book.", "Two children eat an apple."]
    (tmp_path / "test.de").write_text("\n".join(srcs) + "\n", encoding="utf-8")
    with gzip.open(tmp_path / "test.en.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(refs) + "\n")
    out = tmp_path / "hyps.en"
    rc = evaluate_cli.main(["--checkpoint", str(folder), "--src", str(tmp_path / "test.de"),
                            "--ref", str(tmp_path / "test.en.gz"), "--out", str(out), "--json"])
    assert rc == 0
    printed = capsys.readouterr().out.strip().splitlines()
    scores = json.loads(printed[-1])
    hyps = out.read_text(encoding="utf-8").splitlines()
    assert len(hyps) == len(srcs)
    assert hyps[:4] == refs[:4]  # the tiny model knows its training sentences
    expected = sacrebleu.corpus_bleu(hyps, [refs]).score
    assert scores["sacrebleu"] == pytest.approx(round(expected, 2), abs=1e-9)
    assert 0 < scores["sacrebleu"] < 100
    assert scores["signature"].startswith("nrefs:1") and "tok:13a" in scores["signature"]
    lower = sacrebleu.corpus_bleu([h.lower() for h in hyps], [[r.lower() for r in refs]]).score
    assert scores["bleu_lower_spacy_tokens"] == pytest.approx(lower, abs=5.0)
    # the plain-text report prints the same number
    assert evaluate_cli.main(["--checkpoint", str(folder), "--src", str(tmp_path / "test.de"),
                              "--ref", str(tmp_path / "test.en.gz"), "--beam", "2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("BLEU = ") and "nrefs:1" in text


def test_evaluate_errors(tmp_path, capsys, checkpoint_dir):
    folder, _ = checkpoint_dir
    (tmp_path / "s.de").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "r.en").write_text("a\n", encoding="utf-8")
    args = ["--src", str(tmp_path / "s.de"), "--ref", str(tmp_path / "r.en")]
    assert evaluate_cli.main(["--checkpoint", str(folder), *args]) == 2
    assert "2 lines" in capsys.readouterr().err
    assert evaluate_cli.main(["--checkpoint", str(tmp_path / "nothing"), *args]) == 2
    assert "nothing" in capsys.readouterr().err
    assert evaluate_cli.main(["--checkpoint", str(folder), "--src", str(tmp_path / "gone.de"), "--ref", "x"]) == 2
    assert "gone.de" in capsys.readouterr().err


# --------------------------------------------------------------------------- python -m model.train

SUBJECTS = [("Ein Mann", "A man"), ("Eine Frau", "A woman"), ("Ein Kind", "A child"), ("Ein Hund", "A dog"),
            ("Zwei Männer", "Two men")]
VERBS = [("läuft", "runs", "laufen", "run"), ("sitzt", "sits", "sitzen", "sit"),
         ("springt", "jumps", "springen", "jump"), ("schläft", "sleeps", "schlafen", "sleep")]
PLACES = [("im Park", "in the park"), ("am Strand", "on the beach")]


def synthetic_corpus():
    pairs = []
    for sd, se in SUBJECTS:
        plural = sd.startswith("Zwei")
        for vd, ve, vd_pl, ve_pl in VERBS:
            for pd, pe in PLACES:
                pairs.append((f"{sd} {vd_pl if plural else vd} {pd}.", f"{se} {ve_pl if plural else ve} {pe}."))
    return pairs  # 40 pairs


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("multi30k")
    pairs = synthetic_corpus()
    assert len(pairs) == 40
    splits = {"train": pairs, "val": pairs[1:40:10], "test_2016_flickr": pairs[3:40:10]}
    for split, items in splits.items():
        for lang, k in (("de", 0), ("en", 1)):
            with gzip.open(d / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(p[k] for p in items) + "\n")
    return d


def train_args(data_dir, out, epochs, *extra):
    return ["--data-dir", str(data_dir), "--out", str(out), "--d-model", "32", "--n-heads", "2", "--layers", "1",
            "--d-ff", "64", "--epochs", str(epochs), "--max-tokens", "100", "--min-freq", "1", "--average-last", "1",
            "--bleu-every", "1", "--beam", "2", "--warmup", "10", "--lr", "5e-3", "--threads", "1",
            "--dropout", "0.1", "--attn-dropout", "0.0", "--max-len", "32", *extra]


def metrics_of(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def three_epochs(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("run3") / "ckpt"
    assert train_cli.main(train_args(data_dir, out, 3)) == 0
    return out


def test_train_writes_a_loadable_checkpoint(three_epochs, data_dir):
    out = three_epochs
    model, sv, tv, metrics = load_checkpoint(out)
    assert model.cfg.d_model == 32 and model.cfg.n_heads == 2 and model.cfg.n_encoder_layers == 1
    assert model.cfg.tgt_vocab_size == len(tv) and "Hund" in sv and "dog" in tv
    for split in ("val", "test"):
        assert "greedy" in metrics[split] and "beam2" in metrics[split], metrics[split]
        assert 0 <= metrics[split]["greedy"]["sacrebleu"] <= 100
    assert metrics["test"]["split"] == "test_2016_flickr"
    # every BLEU is recorded with the number of sentences it scored (the Overview states it)
    for split, key in (("val", "val"), ("test_2016_flickr", "test")):
        assert metrics[key]["sentences"] == len(read_split(data_dir, split)[0]), key
    assert metrics["model"]["stored_as"] == "float32"
    training = metrics["training"]
    assert training["epochs"] == 3 and [h["epoch"] for h in training["history"]] == [1, 2, 3]
    assert all("val_bleu_greedy" in h for h in training["history"])
    assert "test_2016_flickr.de.gz" in training["data_files"] and "train.de.gz" in training["data_files"]
    # per-epoch state lives under OUT/train
    assert (out / "train" / "state.pt").is_file() and (out / "train.log").is_file()
    assert sorted(p.name for p in (out / "train").glob("epoch_*.safetensors")) == ["epoch_3.safetensors"]


def test_train_reduces_the_loss(three_epochs):
    history = metrics_of(three_epochs)["training"]["history"]
    assert history[2]["train_nll"] < history[0]["train_nll"] - 0.3, history
    assert history[2]["val_nll"] < history[0]["val_nll"], history
    assert history[2]["step"] > history[0]["step"] > 0


def test_train_resumes(three_epochs, data_dir, tmp_path):
    out = tmp_path / "ckpt"
    assert train_cli.main(train_args(data_dir, out, 1)) == 0
    assert [h["epoch"] for h in metrics_of(out)["training"]["history"]] == [1]
    assert train_cli.main(train_args(data_dir, out, 2, "--resume")) == 0
    log = (out / "train.log").read_text(encoding="utf-8")
    assert "resumed after epoch 1" in log
    history = metrics_of(out)["training"]["history"]
    assert [h["epoch"] for h in history] == [1, 2]
    load_checkpoint(out)
    # resuming continues exactly where the uninterrupted 3-epoch run was after the same epochs
    straight = metrics_of(three_epochs)["training"]["history"]
    for a, b in zip(history, straight[:2]):
        assert a["step"] == b["step"]
        assert a["train_nll"] == pytest.approx(b["train_nll"], rel=1e-5)
        assert a["val_nll"] == pytest.approx(b["val_nll"], rel=1e-5)


def test_train_reports_missing_data(tmp_path, capsys):
    assert train_cli.main(["--data-dir", str(tmp_path / "none"), "--out", str(tmp_path / "out"), "--threads", "1"]) == 2
    assert "not found" in capsys.readouterr().err


def test_lr_schedule():
    from model.training.loop import lr_at

    assert lr_at(5, 1e-3, 10) == pytest.approx(5e-4)
    assert lr_at(10, 1e-3, 10) == pytest.approx(1e-3)
    assert lr_at(40, 1e-3, 10) == pytest.approx(5e-4)
    assert lr_at(0, 1e-3, 10) == pytest.approx(1e-4)


@pytest.mark.parametrize("tie", ["--tie-weights", "--no-tie"])
def test_train_averages_epochs_tied_or_untied(data_dir, tmp_path, tie):
    """--no-tie used to crash at the end: the per-epoch files dropped the untied generator matrix."""
    from model.io.checkpoint import average_weights

    out = tmp_path / "ckpt"
    assert train_cli.main(train_args(data_dir, out, 3, tie, "--average-last", "2")) == 0
    model, _, _, metrics = load_checkpoint(out)
    tied = tie == "--tie-weights"
    assert model.cfg.tie_weights is tied and metrics["model"]["config"]["tie_weights"] is tied
    assert (model.generator.proj.weight is model.tgt_embed.lut.weight) is tied
    epochs = sorted((out / "train").glob("epoch_*.safetensors"))
    assert [p.name for p in epochs] == ["epoch_2.safetensors", "epoch_3.safetensors"]
    assert "average of 2 epochs" in (out / "train.log").read_text(encoding="utf-8")
    if metrics["model"]["weights"] == "average of epochs 2-3":
        for k, v in average_weights(epochs).items():
            torch.testing.assert_close(model.state_dict()[k], v, msg=k)
    else:
        assert metrics["model"]["weights"] == "last epoch"


def test_every_config_field_has_a_flag_with_the_configs_default():
    import dataclasses

    from model.nn.config import ModelConfig
    from model.text.vocab import Vocab
    from model.training.options import FROM_DATA, config_from_args

    base = ["--data-dir", "d", "--out", "o"]
    args = train_cli.parse_args(base)
    sv, tv = Vocab.build([["a", "b"]], 1), Vocab.build([["c"]], 1)
    assert config_from_args(args, sv, tv) == ModelConfig(len(sv), len(tv), pad_idx=sv.pad_idx)
    for f in dataclasses.fields(ModelConfig):
        if f.name in FROM_DATA:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):  # --X / --no-X, whichever the default is (later flags win)
            assert getattr(train_cli.parse_args(base + ["--no-" + flag[2:]]), f.name) is False
            assert getattr(train_cli.parse_args(base + ["--no-" + flag[2:], flag]), f.name) is True
            assert getattr(train_cli.parse_args(base + [flag, "--no-" + flag[2:]]), f.name) is False
        else:
            other = type(f.default)(f.default * 2)
            assert getattr(train_cli.parse_args(base + [flag, str(other)]), f.name) == other, flag
    # the README's aliases
    a = train_cli.parse_args(base + ["--layers", "2", "--post-norm", "--no-tie"])
    assert (a.n_encoder_layers, a.n_decoder_layers, a.norm_first, a.tie_weights) == (2, 2, False, False)
    a = train_cli.parse_args(base + ["--layers", "2", "--n-decoder-layers", "5"])  # later flags win
    assert (a.n_encoder_layers, a.n_decoder_layers) == (2, 5)


def test_train_reports_an_impossible_config(data_dir, tmp_path, capsys):
    assert train_cli.main(train_args(data_dir, tmp_path / "bad", 1, "--n-heads", "3")) == 2
    assert "divisible" in capsys.readouterr().err


@pytest.mark.parametrize("flags, copy", [([], True), (["--unk", "copy"], True), (["--unk", "keep"], False),
                                         (["--no-unk-replace"], False)])
def test_evaluate_unk_option(tmp_path, capsys, monkeypatch, checkpoint_dir, flags, copy):
    from model.inference.translator import Translator

    folder, _ = checkpoint_dir
    seen = {}

    def fake(self, texts, beam=1, replace_unk=True, **kw):
        seen["replace_unk"] = replace_unk
        return list(texts)

    monkeypatch.setattr(Translator, "translate_batch", fake)
    (tmp_path / "s.de").write_text("a\n", encoding="utf-8")
    assert evaluate_cli.main(["--checkpoint", str(folder), "--src", str(tmp_path / "s.de"),
                              "--ref", str(tmp_path / "s.de"), *flags]) == 0
    assert seen == {"replace_unk": copy}
