"""AppTest tests of what the pages' labels say: the decoding a comparison traces, the toy tasks' sentence, the order
of the nearest-neighbour table, and no server path in any page's text."""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from google.protobuf import text_format

from model import records
from tests.app_support import demo_checkpoints, md_tables, run_app, visible_text, write_split
from tests.tiny_checkpoint import ENGLISH, GERMAN

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = GERMAN[3]  # "Ein Hund läuft im Schnee."


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, demo_folder):
    """A root of this module's own, overriding the shared one (tests/views/conftest.py): a test writes a broken
    checkpoint into it."""
    with demo_checkpoints(tmp_path_factory, "ckpts_labels", demo_folder) as root:
        yield root


def comparison(at, body: bool = False) -> dict[str, str]:
    """The Decoding page's "Greedy and beam search" columns: {bold label: its note in brackets (or, with `body`,
    the translation below it)}, unescaped."""
    out = {}
    for m in at.markdown:
        found = re.match(r"\*\*(.+?)\*\* \((.*?)\)  \n(.*)", str(m.value), re.S)
        if found:
            out[found.group(1).replace("\\", "")] = found.group(3 if body else 2).replace("\\", "")
    return out


# ----------------------------------------------------------------------------- which decoding is traced

def test_a_forced_decoding_is_named_in_the_comparison_and_plain_greedy_is_not_called_traced(checkpoints,
                                                                                             demo_translator):
    greedy = demo_translator.translate(SENTENCE)
    other = next(t for t in ENGLISH[2].split() if t != greedy.raw_tokens[0])  # "Two": another first token
    at = run_app(view="Decoding", text=SENTENCE, beam=3, dec_beam=1, prefix=other)
    assert not at.exception
    columns = comparison(at)
    forced = demo_translator.trace(SENTENCE, prefix=[other])
    label = "Your forced first 1 token(s), then greedy decoding"
    assert label in columns and "traced" in columns[label], columns
    assert comparison(at, body=True)[label] == forced.text.replace("\\", "")
    assert "traced" not in columns["Greedy"].replace("not traced", "") and "without your forcing" in columns["Greedy"]
    assert "traced" not in columns["Beam search, beam 3"]


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
def test_the_comparison_calls_traced_only_the_decoding_the_figures_show(checkpoints, decoding):
    at = run_app(view="Decoding", text=SENTENCE, beam=3, dec_beam=1, decoding=decoding)
    assert not at.exception
    columns = comparison(at)
    assert set(columns) == {"Greedy", "Beam search, beam 3"}, columns
    traced = {name for name, note in columns.items() if "traced:" in note}
    assert traced == {"Greedy" if decoding == "greedy" else "Beam search, beam 3"}, columns


# ----------------------------------------------------------------------------- the toy tasks in words

def test_the_toy_task_sentence_is_grammatical(checkpoints):
    from model import service
    from views.pages.training import TASK_VERB, _either

    at = run_app(view="Training", text=SENTENCE)
    assert not at.exception
    said = " ".join(c.value for c in at.caption)
    offered = [t for t in service.TOY_OFFERED if t in service.TOY_TASKS]
    verbs = _either([TASK_VERB[t] for t in offered])
    assert f"learns to {verbs} random digit sequences (" in said, said
    assert _either(["copy", "reverse", "sort"]) == "copy, reverse or sort"
    assert " of random digit sequences" not in said


# ----------------------------------------------------------------------------- nearest neighbours

def test_the_neighbour_table_lists_the_sentences_words_in_its_order(checkpoints, demo_translator):
    text = GERMAN[0]  # "Ein brauner Hund rennt dem schwarzen Hund hinterher.": "Hund" twice, ids not in order
    tokens = demo_translator.prepare(text).tokens
    expected = list(dict.fromkeys(tokens))
    assert expected != sorted(expected, key=demo_translator.src_vocab.stoi.get) and len(expected) < len(tokens)
    at = run_app(view="Embeddings", text=text)
    assert not at.exception
    table = next(t for t in md_tables(at) if t and "neighbour 1" in t[0])
    assert [row["token"] for row in table] == expected
    assert "in the sentence's order" in visible_text(at) and "listed once" in visible_text(at)


# ----------------------------------------------------------------------------- no server path on a page

def page_text(at) -> str:
    """Every element's content as text (labels, help, values, options, captions, charts' specs), UTF-8."""
    out = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(text_format.MessageToString(proto, as_utf8=True))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(out)


def server_paths(tmp: Path, data: Path | None = None) -> list[str]:
    """The absolute folders a page must never show: the repository, beside it, the test's temporary and home
    folders, the data folder."""
    paths = [str(ROOT), str(ROOT.parent / "shared"), str(tmp), tempfile.gettempdir() + "/pytest", str(Path.home())]
    return [p for p in paths + ([str(data)] if data else []) if len(p) > 1]


def assert_no_path(at, paths: list[str], where: str) -> None:
    assert not at.exception, where
    text = page_text(at)
    for path in paths:
        assert path not in text, f"{where}: a server path on the page: …{text[max(0, text.find(path) - 120):][:300]}"


@pytest.fixture
def val_data(tmp_path):
    """A Multi30k-like validation split of the tiny model's sentences."""
    return write_split(tmp_path / "data", "val", GERMAN, ENGLISH)


@pytest.mark.slow
def test_no_page_shows_a_server_path(checkpoints, tmp_path, val_data, monkeypatch):
    monkeypatch.setenv("ATLAS_DATA_DIR", str(val_data))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    paths = server_paths(checkpoints.parent, val_data)
    for view in records.VIEWS:
        assert_no_path(run_app(view=view, text=SENTENCE), paths, view)


def test_the_ablation_names_its_data_by_its_setting(checkpoints, tmp_path, val_data, monkeypatch):
    monkeypatch.setenv("ATLAS_DATA_DIR", str(val_data))
    at = run_app(view="Attention", kind="cross", layer=1, text=SENTENCE, off="cross-1-1")
    at.button(key="ablate_bleu").click().run()
    # its BLEU names the set and the sentences scored, as the Overview's and the Heads page's do
    assert [m.label for m in at.metric if "sacreBLEU" in m.label] == [
        f"sacreBLEU (greedy) on the first {len(GERMAN)} sentences of val"]
    assert_no_path(at, server_paths(checkpoints.parent, val_data), "the ablation's BLEU")
    assert "Data: Multi30k's validation split in `$ATLAS_DATA_DIR`" in visible_text(at)


def test_missing_validation_data_names_the_folders_by_their_settings(checkpoints, tmp_path, monkeypatch):
    from model.analysis import experiments

    nowhere = tmp_path / "nowhere"
    monkeypatch.setenv("ATLAS_DATA_DIR", str(nowhere))
    # folders that hold nothing (../shared/data/multi30k may hold the data on this machine)
    monkeypatch.setattr(experiments, "data_dir_candidates", lambda: [nowhere, ROOT / "data" / "nowhere"])
    at = run_app(view="Attention", kind="cross", layer=1, text=SENTENCE, off="cross-1-1")
    at.button(key="ablate_bleu").click().run()
    assert_no_path(at, server_paths(checkpoints.parent, nowhere), "validation data missing")
    said = visible_text(at).replace("\\", "")
    assert "Looked in: $ATLAS_DATA_DIR; data/nowhere." in said, said


@pytest.mark.parametrize("ckpt", ["no-such-model", "broken", "demo:untrained"])
def test_error_states_show_no_server_path(checkpoints, ckpt):
    if ckpt == "broken" and not (checkpoints / "broken").exists():
        import shutil

        shutil.copytree(checkpoints / "demo", checkpoints / "broken")
        weights = checkpoints / "broken" / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    for text in (SENTENCE, ""):
        at = run_app(view="Overview", text=text, ckpt=ckpt)
        assert_no_path(at, server_paths(checkpoints.parent), f"{ckpt}, text {text!r}")
        if ckpt == "broken":
            assert "checkpoints/broken/model.safetensors" in visible_text(at).replace("\\", "")


def test_the_default_checkpoint_folder_is_the_repositorys(monkeypatch):
    """Without ATLAS_CHECKPOINT_DIR the app looks in the repository's checkpoints/, where the shipped model is (the
    plain `streamlit run app.py`), wherever views/ keeps the module that says so."""
    from views.plumbing.paths import ROOT, checkpoint_dir

    monkeypatch.delenv("ATLAS_CHECKPOINT_DIR", raising=False)
    assert (ROOT / "app.py").is_file() and (ROOT / "views").is_dir()
    assert (checkpoint_dir() / "multi30k-de-en" / "config.json").is_file()


def test_public_message_names_each_server_folder_by_its_setting(tmp_path, monkeypatch):
    from views.plumbing import state

    monkeypatch.setenv("ATLAS_CHECKPOINT_DIR", str(tmp_path / "ck"))
    monkeypatch.setenv("ATLAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    said = state.public_message(
        f"{tmp_path}/ck/demo/config.json; {tmp_path}/data; {tmp_path}/data2/x; {ROOT.parent}/shared/data/multi30k; "
        f"{ROOT}/data/multi30k; {tmp_path}/cache/attention-atlas/demo/head_report.json; {ROOT}.")
    assert said == (f"checkpoints/demo/config.json; $ATLAS_DATA_DIR; {tmp_path}/data2/x; ../shared/data/multi30k; "
                    "data/multi30k; $XDG_CACHE_HOME/attention-atlas/demo/head_report.json; ..")


# ----------------------------------------------------------------------------- Inside one head's colour scales

def test_inside_one_head_gives_the_raw_scores_their_own_colour_scale_and_says_so(checkpoints, demo_translator):
    import json

    import numpy as np

    from tests.app_support import array

    at = run_app(view="Inside one head", kind="enc_self", layer=1, head=1, text=SENTENCE)
    assert not at.exception
    d_k = demo_translator.cfg.d_model // demo_translator.cfg.n_heads
    said = " ".join(c.value for c in at.caption)
    assert f"√d_k = {np.sqrt(d_k):.1f} times the scaled ones" in said and "a bar of their own" in said
    scores_row = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                      if "Q·Kᵀ / √" in json.dumps(json.loads(c.proto.spec)["layout"], ensure_ascii=False))
    raw, scaled = [t for t in scores_row["data"] if t["type"] == "heatmap" and t.get("name") != "masked"][:2]
    for trace in (raw, scaled):  # each on its own values' range
        values = array(trace["z"])
        assert trace["zmax"] == pytest.approx(float(np.nanmax(np.abs(values))), rel=1e-3)
