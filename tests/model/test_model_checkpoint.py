"""model.checkpoint and model.config: exact round trips, and a clear CheckpointError for every broken folder."""
from __future__ import annotations

import dataclasses
import json
import pickle
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from model.inference.translator import Translator
from model.io.checkpoint import (
    CONFIG,
    METRICS,
    REQUIRED,
    SRC_VOCAB,
    TGT_VOCAB,
    TIED_KEY,
    WEIGHTS,
    CheckpointError,
    average_weights,
    load_checkpoint,
    load_weights_into,
    save_checkpoint,
    save_weights,
    write_metrics,
)
from model.nn.config import FORMAT_VERSION, ModelConfig

torch.set_num_threads(1)


def assert_fails(folder: Path, file: Path, *words: str) -> CheckpointError:
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(folder)
    msg = str(info.value)
    assert str(file) in msg, msg  # the message names the file ...
    for w in words:
        assert w in msg, msg
    assert msg.rstrip().endswith(".") and len(msg) > len(str(file)) + 20  # ... and says what to do
    return info.value


# --------------------------------------------------------------------------- round trips


def test_round_trip_is_exact(checkpoint_dir, vocabs):
    folder, model = checkpoint_dir
    sv, tv = vocabs
    assert sorted(p.name for p in folder.iterdir()) == sorted([*REQUIRED, METRICS])
    loaded, lsv, ltv, metrics = load_checkpoint(folder)
    assert not loaded.training
    assert loaded.cfg == model.cfg
    assert lsv.itos == sv.itos and ltv.itos == tv.itos
    assert metrics == {"val": {"bleu": 1.5}, "note": "tiny"}
    want, got = model.state_dict(), loaded.state_dict()
    assert set(want) == set(got)
    for k in want:
        assert got[k].dtype == want[k].dtype == torch.float32, k
        assert torch.equal(got[k], want[k]), k
    assert loaded.generator.proj.weight is loaded.tgt_embed.lut.weight  # still tied
    src = torch.tensor([[5, 6, 7, 3]])
    tgt = torch.tensor([[2, 8, 9]])
    assert torch.equal(loaded(src, tgt), model(src, tgt))
    # the tied matrix is stored once
    assert TIED_KEY not in load_file(str(folder / WEIGHTS))


def test_round_trip_untied_model(tmp_path, make_model, vocabs):
    model = make_model(seed=3, tie_weights=False, norm_first=False)
    folder = save_checkpoint(tmp_path / "untied", model, *vocabs)
    loaded, _, _, metrics = load_checkpoint(folder)
    assert metrics == {}
    assert TIED_KEY in load_file(str(folder / WEIGHTS))
    assert loaded.generator.proj.weight is not loaded.tgt_embed.lut.weight
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k


def test_half_round_trip_within_float16_precision(tmp_path, trained_model, vocabs):
    folder = save_checkpoint(tmp_path / "half", trained_model, *vocabs, metrics={"a": 1}, half=True)
    stored = load_file(str(folder / WEIGHTS))
    assert all(v.dtype == torch.float16 for v in stored.values())
    full_size = sum(v.numel() * 4 for k, v in trained_model.state_dict().items() if k != TIED_KEY)
    assert (folder / WEIGHTS).stat().st_size < 0.6 * full_size
    loaded, _, _, _ = load_checkpoint(folder)
    assert loaded.generator.proj.weight is loaded.tgt_embed.lut.weight
    for k, v in trained_model.state_dict().items():
        w = loaded.state_dict()[k]
        assert w.dtype == torch.float32, k
        assert torch.equal(w, v.half().float()), k
        torch.testing.assert_close(w, v, rtol=1e-3, atol=1e-4)
    # and it still translates the training sentences the same way
    sv, tv = vocabs
    a = Translator(trained_model, sv, tv).translate("Ein Mann fährt Fahrrad.").text
    b = Translator(loaded, sv, tv).translate("Ein Mann fährt Fahrrad.").text
    assert a == b == "A man rides a bike."


@pytest.mark.parametrize("tie", [True, False])
def test_epoch_weights_average_and_load_back_tied_or_not(tmp_path, make_model, tie):
    """Training's per-epoch files: written, averaged and loaded by checkpoint.py, with or without the tie."""
    models = [make_model(seed=s, tie_weights=tie) for s in (10, 11, 12)]
    paths = [save_weights(m, tmp_path / f"epoch_{i}.safetensors") for i, m in enumerate(models)]
    assert (TIED_KEY in load_file(str(paths[0]))) is not tie  # a tied matrix is stored once
    target = make_model(seed=13, tie_weights=tie)
    load_weights_into(target, average_weights(paths))
    for k, v in target.state_dict().items():
        mean = torch.stack([m.state_dict()[k] for m in models]).double().mean(0).float()
        torch.testing.assert_close(v, mean, rtol=0, atol=1e-7, msg=k)
    assert (target.generator.proj.weight is target.tgt_embed.lut.weight) is tie
    with pytest.raises(ValueError, match="nothing to average"):
        average_weights([])
    other = save_weights(make_model(seed=1, tie_weights=not tie), tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match="other tensors"):
        average_weights([paths[0], other])


def test_write_metrics(tmp_path):
    path = write_metrics(tmp_path, {"val": {"greedy": {"sacrebleu": 1.5}}, "note": "ä"})
    assert path == tmp_path / METRICS
    assert json.loads(path.read_text(encoding="utf-8")) == {"val": {"greedy": {"sacrebleu": 1.5}}, "note": "ä"}


def test_translator_from_checkpoint(checkpoint_dir):
    folder, model = checkpoint_dir
    tr = Translator.from_checkpoint(folder)
    assert tr.cfg == model.cfg and tr.metrics["note"] == "tiny"
    with pytest.raises(CheckpointError):
        Translator.from_checkpoint(folder / "nope")


# --------------------------------------------------------------------------- broken folders


def test_missing_folder(tmp_path):
    missing = tmp_path / "no-such-checkpoint"
    assert_fails(missing, missing, "does not exist", "python -m model.train")


def test_a_file_instead_of_a_folder(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert_fails(f, f)


@pytest.mark.parametrize("name", REQUIRED)
def test_each_missing_required_file(checkpoint_dir, name):
    folder, _ = checkpoint_dir
    (folder / name).unlink()
    assert_fails(folder, folder / name, "missing")


def test_missing_metrics_is_fine(checkpoint_dir):
    folder, _ = checkpoint_dir
    (folder / METRICS).unlink()
    assert load_checkpoint(folder)[3] == {}


def test_invalid_metrics_json(checkpoint_dir):
    folder, _ = checkpoint_dir
    (folder / METRICS).write_text("{oops", encoding="utf-8")
    assert_fails(folder, folder / METRICS, "JSON")


def test_truncated_weights(checkpoint_dir):
    folder, _ = checkpoint_dir
    data = (folder / WEIGHTS).read_bytes()
    (folder / WEIGHTS).write_bytes(data[: len(data) // 2])
    assert_fails(folder, folder / WEIGHTS, "safetensors")


@pytest.mark.parametrize(
    "payload",
    [
        b"this is not a safetensors file at all" * 20,
        b"",
        b"\x00" * 64,
        struct.pack("<Q", 12) + b"not json!!!!" + b"\x00" * 32,
        struct.pack("<Q", 2) + b"{}",
    ],
    ids=["text", "empty", "zeros", "bad-header", "empty-header"],
)
def test_garbage_weights(checkpoint_dir, payload):
    folder, _ = checkpoint_dir
    (folder / WEIGHTS).write_bytes(payload)
    assert_fails(folder, folder / WEIGHTS)


def test_torch_pickle_instead_of_safetensors(checkpoint_dir):
    folder, model = checkpoint_dir
    torch.save(model.state_dict(), folder / WEIGHTS)
    assert_fails(folder, folder / WEIGHTS, "pickle")


class _Evil:
    """Unpickling this would create a marker file."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_malicious_pickle_is_never_executed(checkpoint_dir, tmp_path):
    folder, _ = checkpoint_dir
    marker = tmp_path / "pwned"
    blob = pickle.dumps(_Evil(str(marker)))
    # sanity: unpickling really would create the file
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_Evil(str(probe))))
    assert probe.exists()
    (folder / WEIGHTS).write_bytes(blob)
    assert_fails(folder, folder / WEIGHTS)
    assert not marker.exists()
    # the same pickle smuggled into the other files is not executed either
    for name in (CONFIG, SRC_VOCAB):
        (folder / name).write_bytes(blob)
        with pytest.raises(CheckpointError):
            load_checkpoint(folder)
        assert not marker.exists()


def test_config_invalid_json(checkpoint_dir):
    folder, _ = checkpoint_dir
    (folder / CONFIG).write_text('{"src_vocab_size": 23,', encoding="utf-8")
    assert_fails(folder, folder / CONFIG, "not a valid model config")


@pytest.mark.parametrize(
    "change",
    [
        {"heads": 4},  # unknown field
        {"format_version": FORMAT_VERSION + 1},
        {"d_model": 30},  # not divisible by n_heads
        {"d_ff": 0},
        {"d_model": "32"},
    ],
    ids=["unknown-field", "format-version", "indivisible", "non-positive", "string"],
)
def test_config_with_bad_fields(checkpoint_dir, change):
    folder, _ = checkpoint_dir
    cfg = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    cfg.update(change)
    (folder / CONFIG).write_text(json.dumps(cfg), encoding="utf-8")
    err = assert_fails(folder, folder / CONFIG, "not a valid model config")
    if "heads" in change:
        assert "heads" in str(err)


@pytest.mark.parametrize("text", ["[1, 2]", "null", '"abc"', "\xff\xfe"], ids=["list", "null", "string", "binary"])
def test_config_not_an_object(checkpoint_dir, text):
    folder, _ = checkpoint_dir
    (folder / CONFIG).write_bytes(text.encode("latin-1"))
    assert_fails(folder, folder / CONFIG)


@pytest.mark.parametrize("field, value, expected", [
    ("d_model", 64, ("does not match config.json", "wrong shape")),
    ("n_encoder_layers", 3, ("missing", "encoder.2")),
    ("tie_weights", False, (TIED_KEY,)),
], ids=["d_model", "more-layers", "untied"])
def test_config_disagrees_with_weights(checkpoint_dir, field, value, expected):
    folder, _ = checkpoint_dir
    cfg = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    cfg[field] = value
    (folder / CONFIG).write_text(json.dumps(cfg), encoding="utf-8")
    assert_fails(folder, folder / WEIGHTS, *expected)


def test_extra_tensor_in_weights(checkpoint_dir):
    folder, _ = checkpoint_dir
    state = load_file(str(folder / WEIGHTS))
    state["spare.weight"] = torch.zeros(2)
    save_file(state, str(folder / WEIGHTS))
    assert_fails(folder, folder / WEIGHTS, "unexpected", "spare.weight")


@pytest.mark.parametrize("name,side", [(SRC_VOCAB, "src"), (TGT_VOCAB, "tgt")])
def test_vocab_size_disagrees_with_config(checkpoint_dir, vocabs, name, side):
    folder, _ = checkpoint_dir
    v = vocabs[0] if side == "src" else vocabs[1]
    (folder / name).write_text(json.dumps({"itos": v.itos + ["extra"]}), encoding="utf-8")
    assert_fails(folder, folder / name, f"{side}_vocab_size", str(len(v) + 1))


@pytest.mark.parametrize(
    "text",
    ['{"itos": ["a", "b"]}', '["<unk>", "<pad>", "<bos>", "<eos>"]', "{not json",
     '{"itos": ["<unk>", "<pad>", "<bos>", "<eos>", "x", "x"]}'],
    ids=["no-specials", "list", "invalid-json", "duplicates"],
)
def test_invalid_vocab_file(checkpoint_dir, text):
    folder, _ = checkpoint_dir
    (folder / TGT_VOCAB).write_text(text, encoding="utf-8")
    assert_fails(folder, folder / TGT_VOCAB, "vocabulary")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_weights(checkpoint_dir, bad):
    folder, _ = checkpoint_dir
    state = load_file(str(folder / WEIGHTS))
    state["decoder.1.mlp.w_1.weight"][3, 4] = bad
    save_file(state, str(folder / WEIGHTS))
    assert_fails(folder, folder / WEIGHTS, "NaN or infinite", "decoder.1.mlp.w_1.weight")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_huge_finite_weights_load_and_a_bad_value_among_them_is_found(checkpoint_dir, bad):
    """The check sums each tensor first: a sum that overflows (finite values near float32's largest) must not be
    taken for a NaN, and one that does not is no reason to miss one."""
    folder, _ = checkpoint_dir
    state = load_file(str(folder / WEIGHTS))
    state["decoder.1.mlp.w_1.weight"][:2] = 3e38  # float32's largest is 3.4e38: two of them overflow
    save_file(state, str(folder / WEIGHTS))
    Translator.from_checkpoint(folder)  # loads
    state["decoder.1.mlp.w_1.weight"][5, 0] = bad
    save_file(state, str(folder / WEIGHTS))
    assert_fails(folder, folder / WEIGHTS, "NaN or infinite", "decoder.1.mlp.w_1.weight")


# --------------------------------------------------------------------------- config


def test_model_config_round_trips_through_config_json(tmp_path):
    cfg = ModelConfig(src_vocab_size=50, tgt_vocab_size=40, d_model=48, n_heads=6, n_encoder_layers=1,
                      n_decoder_layers=3, d_ff=96, dropout=0.15, attn_dropout=0.05, max_len=64,
                      norm_first=False, tie_weights=False, pad_idx=1)
    cfg.save(tmp_path / CONFIG)
    data = json.loads((tmp_path / CONFIG).read_text(encoding="utf-8"))
    assert data["format_version"] == FORMAT_VERSION and data["d_model"] == 48
    back = ModelConfig.load(tmp_path / CONFIG)
    assert back == cfg and back.d_k == 8
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 64  # frozen


def test_invalid_config_raises_value_error():
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="positive"):
        ModelConfig(src_vocab_size=0, tgt_vocab_size=10, d_model=32, n_heads=4)
    with pytest.raises(ValueError, match="unknown config fields: bogus"):
        ModelConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 10, "bogus": 1})
    with pytest.raises(ValueError, match="format_version"):
        ModelConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 10, "format_version": 99})
