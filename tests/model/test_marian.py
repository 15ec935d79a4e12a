"""The Marian importer (model/io/import_marian.py) against transformers' own MarianMTModel and MarianTokenizer.

Everything is built here: SentencePiece models trained on generated sentences, a MarianTokenizer made
from them, a small MarianMTModel with random weights (every parameter randomised, the final logits
bias too, so a weight left behind or put in the wrong place shows), saved with save_pretrained and
imported. Nothing is downloaded.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
spm = pytest.importorskip("sentencepiece")
transformers = pytest.importorskip("transformers")

from model.inference.translator import Translator  # noqa: E402
from model.io.checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from model.io.import_marian import ImportRefused, import_marian, main  # noqa: E402
from model.nn.config import FORMAT_VERSION  # noqa: E402
from model.nn.hooks import attn_name  # noqa: E402
from model.nn.trace import patterns  # noqa: E402
from tests.hf_support import assert_same_greedy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DE = ("der die das ein eine Hund Katze Mann Frau Kind läuft spielt liest schläft im Park Schnee Haus "
      "mit einem roten blauen großen kleinen Ball Buch Wasser und sieht 1 2 3").split()
EN = ("the a dog cat man woman child runs plays reads sleeps in park snow house with red blue big small "
      "ball book water and sees 1 2 3").split()
DROPPED = 3  # pieces left out of vocab.json, so that some pieces are unknown and map to <unk>


def sentences(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))).capitalize() + rng.choice([".", "!", "?"])
            for _ in range(n)]


def train_spm(lines: list[str], prefix: Path, size: int) -> Path:
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=size,
                                   model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    return prefix.with_suffix(".model")


def randomise(model) -> None:
    """Every parameter and the logits bias drawn at random (LayerNorm weights near 1), so that a weight
    imported into the wrong place changes the output."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            # Small embeddings next to the ±1 positional table: outputs change from step to step.
            p.copy_(1 + 0.2 * noise if "layer_norm.weight" in name else (0.05 if "embed" in name else 0.3) * noise)
        model.final_logits_bias.copy_(0.1 * torch.randn(model.final_logits_bias.shape, generator=gen))



def build_marian(folder: Path, shared: bool = True, activation: str = "swish", **overrides) -> Path:
    """A saved MarianMTModel + MarianTokenizer folder (SentencePiece models trained here)."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    work = folder / "spm"
    work.mkdir(exist_ok=True)
    src_model = train_spm(sentences(DE, 400, 1), work / "source", 120)
    tgt_model = train_spm(sentences(EN, 400, 2), work / "target", 110)
    pieces = []
    for m in (src_model, tgt_model):
        sp = spm.SentencePieceProcessor(model_file=str(m))
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                   if not sp.is_control(i) and not sp.is_unknown(i)]
    pieces = list(dict.fromkeys(pieces))  # one entry per piece, first seen first
    pieces = [p for p in pieces if p not in (pieces[10], pieces[20], pieces[30])]  # DROPPED pieces become <unk>
    itos = ["</s>", "<unk>"] + pieces + ["<pad>"]  # Marian's layout: </s> 0, <unk> 1, <pad> last
    (work / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(itos)}), encoding="utf-8")
    tok = MarianTokenizer(str(src_model), str(tgt_model), str(work / "vocab.json"), source_lang="de", target_lang="en")
    pad = len(itos) - 1
    cfg = MarianConfig(vocab_size=len(itos), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                       decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
                       activation_function=activation, scale_embedding=True, pad_token_id=pad,
                       decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
                       share_encoder_decoder_embeddings=shared, tie_word_embeddings=shared, **overrides)
    torch.manual_seed(0)
    model = MarianMTModel(cfg)
    randomise(model)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


SENTENCES = sentences(DE, 18, 7) + ["Der Hund läuft im Park mit einem roten Ball.", "Ein Zebra frisst Äpfel!"]


@pytest.fixture(scope="module", params=["shared", "separate"])
def imported(request, tmp_path_factory):
    """(original MarianMTModel with eager attention, its MarianTokenizer, our Translator)."""
    from transformers import MarianMTModel, MarianTokenizer

    torch.set_num_threads(1)
    shared = request.param == "shared"
    root = tmp_path_factory.mktemp(f"marian-{request.param}")
    src = build_marian(root / "hf", shared=shared, activation="swish" if shared else "gelu")
    import_marian(str(src), root / "ours")
    hf = MarianMTModel.from_pretrained(str(src), attn_implementation="eager").eval()
    return hf, MarianTokenizer.from_pretrained(str(src)), Translator.from_checkpoint(root / "ours"), root


# Specials typed in the text, a language code, characters the pieces do not cover, extra spaces.
EDGE = ["Der Hund </s> läuft <unk> im Park.", ">>de<< Der Hund läuft.", "Der Hund<pad>läuft", "  Der   Hund  ",
        "Der Hund € läuft ☃.", "ÄÖÜ ß é 123 4.5"]


def test_token_ids_equal_the_marian_tokenizers(imported):
    _, tok, tr, _ = imported
    unknown = 0
    for text in SENTENCES + EDGE:
        source = tr.prepare(text)
        assert source.ids == tok(text)["input_ids"], text
        assert source.axis_tokens[-1] == "</s>"
        unknown += sum(source.unknown)
    assert unknown > 0  # the dropped pieces were met and became <unk>, as in MarianTokenizer
    assert tr.src_vocab.unk_idx == tok.unk_token_id and tr.tgt_vocab.bos_idx == tok.pad_token_id


def test_config_describes_marian(imported):
    cfg = imported[2].cfg
    assert ((cfg.norm_first, cfg.pe_layout, cfg.scale_embedding, cfg.tokenizer)
            == (False, "sin_then_cos", True, "sentencepiece"))
    assert cfg.decoder_start_idx == cfg.pad_idx != cfg.eos_idx == 0
    assert (cfg.src_lang, cfg.tgt_lang) == ("de", "en")


def _hf_pass(hf, src_ids, tgt_ids):
    with torch.inference_mode():
        return hf(input_ids=torch.tensor([src_ids]), decoder_input_ids=torch.tensor([tgt_ids]), output_attentions=True)


def test_teacher_forced_log_probs_and_attention_equal_the_originals(imported):
    hf, tok, tr, _ = imported
    for text in SENTENCES:
        src_ids = tr.prepare(text).ids
        tgt_ids = [tr.cfg.decoder_start_idx] + tok(text_target=text)["input_ids"][:-1]
        out = _hf_pass(hf, src_ids, tgt_ids)
        with torch.inference_mode():
            ours, cache = tr.model.run_with_cache(torch.tensor([src_ids]), torch.tensor([tgt_ids]), patterns)
        theirs = torch.log_softmax(out.logits, dim=-1)
        assert (ours - theirs).abs().max() < 1e-4, text
        for kind, maps in (("enc_self", out.encoder_attentions), ("dec_self", out.decoder_attentions),
                           ("cross", out.cross_attentions)):
            for layer, b in enumerate(maps):
                a = cache[attn_name(kind, layer, "hook_pattern")]
                assert (a - b).abs().max() < 1e-5, (text, kind, layer)


def test_greedy_output_equals_generate(imported):
    hf, tok, tr, _ = imported
    pad = tr.cfg.pad_idx
    for text in SENTENCES:
        source = tr.prepare(text)
        limit = tr.max_steps(source, None)
        ours = tr.translate(text)
        with torch.inference_mode():
            # The real opus-mt models ban <pad> in their generation_config.json (bad_words_ids); our search
            # never generates the start token or <pad> either. Forced </s> at the length limit is a length
            # rule, not the model, so it is off here and our `finished` flag says where the limit cut.
            seq = hf.generate(torch.tensor([source.ids]), num_beams=1, do_sample=False, max_new_tokens=limit,
                              bad_words_ids=[[pad]], forced_eos_token_id=None)[0].tolist()
        theirs = assert_same_greedy(tr, ours, seq, text)  # ended by </s> in both, or cut by the same length limit
        assert ours.text == tok.decode(theirs, skip_special_tokens=True, use_source_tokenizer=False)


def test_trace_attention_and_steps_match(imported):
    hf, _, tr, _ = imported
    r = tr.trace(SENTENCES[-2])
    st = r.trace
    assert st.tgt_tokens[0] == "<pad>" and st.src_tokens[-1] == "</s>"
    assert any(t.startswith("\u2581") for t in st.src_tokens)  # pieces keep their visible word-start mark
    out = _hf_pass(hf, r.source.ids, [tr.cfg.decoder_start_idx] + tr.tgt_vocab.encode(r.raw_tokens))
    got = torch.tensor(st.probs("cross"))
    want = torch.stack([c[0] for c in out.cross_attentions])
    assert (got - want).abs().max() < 1e-5


def test_export_trace_has_the_originals_attention(imported, tmp_path):
    from model.io import export

    hf, _, tr, root = imported
    path = tmp_path / "trace.json"
    assert export.main([SENTENCES[0], "--checkpoint", str(root / "ours"), "--out", str(path)]) == 0
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["model"]["src_lang"] == "de" and data["tgt_tokens"][0] == "<pad>"
    out = _hf_pass(hf, data["src_ids"], data["tgt_ids"])
    for kind, maps in (("enc_self", out.encoder_attentions), ("dec_self", out.decoder_attentions),
                       ("cross", out.cross_attentions)):
        want = torch.stack([m[0] for m in maps])
        assert (torch.tensor(data[kind]) - want).abs().max() < 1e-5, kind


def test_checkpoint_folder_and_model_card(imported):
    _, _, tr, root = imported
    folder = root / "ours"
    for name in ("model.safetensors", "config.json", "vocab.src.json", "vocab.tgt.json", "metrics.json",
                 "source.spm", "target.spm"):
        assert (folder / name).is_file(), name
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["format_version"] == FORMAT_VERSION and config["tokenizer"] == "sentencepiece"
    metrics = (folder / "metrics.json").read_text(encoding="utf-8")
    card = json.loads(metrics)["imported"]
    assert str(root) not in metrics  # a checkpoint may be shipped: no path of this machine
    assert card["parameters"] == sum(p.numel() for p in tr.model.parameters())
    assert card["licence"].startswith("unknown") and card["agreement_max_abs_log_prob"] < 1e-4
    assert card["source"] == "local folder hf"


def test_missing_spm_is_one_clear_error(imported, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(imported[3] / "ours", broken)
    (broken / "target.spm").unlink()
    with pytest.raises(CheckpointError, match="target.spm.*missing"):
        Translator.from_checkpoint(broken)
    load_checkpoint(imported[3] / "ours")  # the intact folder loads


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return build_marian(tmp_path_factory.mktemp("marian-src") / "hf")


def _edit_config(src: Path, dst: Path, **changes) -> Path:
    import shutil

    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text(encoding="utf-8"))
    cfg.update(changes)
    (dst / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return dst


@pytest.mark.parametrize("changes, field", [
    ({"activation_function": "quick_gelu"}, "activation_function"),
    ({"normalize_before": True}, "normalize_before"),
    ({"add_final_layer_norm": True}, "add_final_layer_norm"),
    ({"static_position_embeddings": False}, "static_position_embeddings"),
    ({"decoder_ffn_dim": 128}, "encoder_ffn_dim"),
    ({"eos_token_id": [0, 1]}, "eos_token_id"),
    ({"model_type": "bart"}, "model_type"),
])
def test_unrepresentable_configs_are_refused_naming_the_field(saved, tmp_path, capsys, changes, field):
    src = _edit_config(saved, tmp_path / "edited", **changes)
    assert main([str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("missing", ["source.spm", "vocab.json", "config.json", "model.safetensors"])
def test_missing_source_files_are_one_clear_message(saved, tmp_path, capsys, missing):
    import shutil

    src = tmp_path / "partial"
    shutil.copytree(saved, src)
    (src / missing).unlink()
    assert main([str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and (missing in err or "model.safetensors" in err)


def test_existing_output_is_not_overwritten_without_force(saved, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(ImportRefused, match="--force"):
        import_marian(str(saved), out)
    import_marian(str(saved), out, force=True)
    assert not (out / "keep.txt").exists() and (out / "source.spm").is_file()


def test_hub_id_offline_says_so_in_one_line(tmp_path):
    import os

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    run = subprocess.run([sys.executable, "-m", "model.import_marian", "Helsinki-NLP/opus-mt-de-en", "--out",
                          str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Helsinki-NLP/opus-mt-de-en" in lines[0] and "Traceback" not in run.stderr


def test_app_start_up_never_imports_transformers_and_a_word_model_needs_no_sentencepiece(tmp_path):
    """What app.py imports loads neither transformers nor sentencepiece; a word model translating loads neither;
    the shipped model translating (words or pieces, whichever ships) never loads transformers."""
    from tests.tiny_checkpoint import make_tiny_checkpoint

    words = make_tiny_checkpoint(tmp_path / "words")
    code = ("import sys\n"
            "from views.pages import attention, decoding, embeddings, head, heads, masks, overview, positional\n"
            "from views.parts import compare\n"
            "from views.plumbing import state\n"
            "import model, model.io.export, model.io.import_marian\n"
            "from model.inference.translator import Translator\n"
            "loaded = lambda: ('transformers' in sys.modules, 'sentencepiece' in sys.modules)\n"
            "print(*loaded())\n"
            f"Translator.from_checkpoint({str(words)!r}).translate('Ein Hund läuft.')\n"
            "print(*loaded())\n"
            "Translator.from_checkpoint().translate('Ein Hund läuft.')\n"
            "print(loaded()[0])")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-5:] == ["False", "False", "False", "False", "False"]


# checkpoints/multi30k-de-en/config.json as the first shipped model wrote it (format version 1), kept here because
# the shipped model has since been retrained and is written in today's format.
CONFIG_V1 = {"format_version": 1, "src_vocab_size": 8012, "tgt_vocab_size": 6190, "d_model": 256, "n_heads": 4,
             "n_encoder_layers": 3, "n_decoder_layers": 3, "d_ff": 1024, "dropout": 0.2, "attn_dropout": 0.1,
             "max_len": 256, "norm_first": True, "tie_weights": True, "pad_idx": 1}


def test_version_1_config_loads_as_todays_model_and_cannot_hold_new_fields():
    from model.nn.config import FORMAT_VERSION, ModelConfig

    v1 = dict(CONFIG_V1)
    assert FORMAT_VERSION == 5
    cfg = ModelConfig.from_dict(v1)
    assert (cfg.activation, cfg.pe_layout, cfg.scale_embedding, cfg.share_embeddings, cfg.final_logits_bias) == (
        "relu", "interleaved", True, False, True)
    assert ((cfg.decoder_start_idx, cfg.eos_idx, cfg.src_lang, cfg.tgt_lang, cfg.tokenizer)
            == (2, 3, "de", "en", "spacy"))
    assert (cfg.norm, cfg.positions, cfg.scale_attention, cfg.ff_gated, cfg.bias, cfg.embed_norm) == (
        "layer", "sinusoidal", True, False, True, False)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg  # written as version 5, read back the same
    with pytest.raises(ValueError, match="activation"):
        ModelConfig.from_dict({**v1, "activation": "gelu"})  # a version-1 file cannot describe that
    with pytest.raises(ValueError, match="activation"):
        ModelConfig.from_dict({**v1, "format_version": 2, "activation": "tanh"})
    with pytest.raises(ValueError, match="norm"):
        ModelConfig.from_dict({**v1, "format_version": 2, "norm": "rms"})  # nor can a version-2 file


def test_shared_embeddings_are_stored_once_and_reload_tied(tmp_path):
    from safetensors.torch import load_file

    from model.io.checkpoint import WEIGHTS, save_checkpoint
    from model.nn.config import ModelConfig
    from model.nn.transformer import EncoderDecoder
    from model.text.vocab import Vocab

    itos = ["</s>", "<unk>", "▁a", "b", "<pad>"]
    v = Vocab(itos, {"unk": "<unk>", "pad": "<pad>", "bos": "<pad>", "eos": "</s>"})
    cfg = ModelConfig(5, 5, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16, pad_idx=4,
                      share_embeddings=True, decoder_start_idx=4, eos_idx=0, norm_first=False)
    save_checkpoint(tmp_path, EncoderDecoder(cfg), v, v)
    assert set(load_file(str(tmp_path / WEIGHTS))) & {"tgt_embed.lut.weight", "generator.proj.weight"} == set()
    model, sv, tv, _ = load_checkpoint(tmp_path)
    assert model.tgt_embed.lut.weight is model.src_embed.lut.weight is model.generator.proj.weight
    assert (tv.bos_idx, tv.eos_idx, tv.pad_idx, tv.special_ids, tv.n_leading_specials) == (4, 0, 4, [0, 1, 4], 2)
    assert json.loads((tmp_path / "vocab.tgt.json").read_text(encoding="utf-8"))["specials"]["eos"] == "</s>"
