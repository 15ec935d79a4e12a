"""The app through streamlit.testing.v1.AppTest, on a tiny checkpoint built by the tests."""
from __future__ import annotations

import html
import json
import re

import pytest

from model import records
from tests.app_support import demo_checkpoints, run_app, url, visible_text
from tests.tiny_checkpoint import ENGLISH, GERMAN

VIEWS = [v for v in records.VIEWS if v not in ("Heads", "Training")]  # those two: test_app_heads/_training
SENTENCES = {
    "normal": GERMAN[3],
    "empty": "",
    "whitespace": "   \n\t ",
    "long": " ".join(["Ein Hund läuft im Schnee."] * 60),
    "markup": "<script>alert(1)</script><b>Hund</b> läuft",
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, demo_folder):
    """A root of this module's own, overriding the shared one (tests/views/conftest.py): `demo` and beside it
    `broken`, whose weights are not safetensors."""
    with demo_checkpoints(tmp_path_factory, "ckpts", demo_folder) as root:
        broken = root / "broken"
        broken.mkdir()
        for name in ("config.json", "vocab.src.json", "vocab.tgt.json"):
            (broken / name).write_bytes((root / "demo" / name).read_bytes())
        (broken / "model.safetensors").write_bytes(b"\x80\x04this is not safetensors")
        yield root


def charts(at):
    return at.get("plotly_chart")


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("case", list(SENTENCES))
def test_every_view_renders(checkpoints, view, case):
    at = run_app(view=view, text=SENTENCES[case])
    assert not at.exception, [e.value for e in at.exception]
    if case in ("empty", "whitespace"):
        assert any("Type a German sentence" in e.value for e in at.info)
        assert not charts(at)
    else:
        assert charts(at), f"{view} drew no chart"
    if case == "long":
        assert any("cut to its first" in w.value for w in at.warning)


def test_markup_is_shown_as_text(checkpoints):
    at = run_app(view="Overview", text=SENTENCES["markup"])
    text = visible_text(at)
    # Markdown gets the tokens HTML-escaped, so the browser prints them literally and runs nothing.
    assert "<script>" not in text and "<b>" not in text
    assert "&lt;" in text and "script" in text
    assert not at.exception


def test_translation_visible_and_correct(checkpoints):
    at = run_app(view="Overview", text=GERMAN[3])
    assert any(ENGLISH[3].rstrip(".") in m.value.replace("\\", "") for m in at.markdown)


def test_url_parameters_select_view_and_widgets(checkpoints):
    at = run_app(view="Attention", kind="enc_self", layer=2, head=3, text=GERMAN[0])
    assert at.sidebar.radio(key="view").value == "Attention"
    assert at.selectbox(key="kind").value == "enc_self"
    assert at.selectbox(key="layer").value == 2
    assert at.selectbox(key="head").value == 3
    assert at.query_params["view"] == ["Attention"] or at.query_params["view"] == "Attention"


def test_changing_layer_changes_the_figure(checkpoints):
    at = run_app(view="Attention", kind="cross", layer=1, head=1, text=GERMAN[0])
    before = charts(at)[0].proto.spec
    at.selectbox(key="layer").set_value(2).run()
    assert not at.exception
    after = charts(at)[0].proto.spec
    assert before != after
    assert at.query_params["layer"] in (["2"], "2")


def test_changing_view_widget_updates_url(checkpoints):
    at = run_app(view="Overview", text=GERMAN[1])
    at.sidebar.radio(key="view").set_value("Decoding").run()
    assert not at.exception
    assert at.query_params["view"] in (["Decoding"], "Decoding")
    assert any("Step" in e.label for e in at.slider) or any("step" in m.value.lower() for m in at.markdown)


def test_forcing_a_candidate_continues_from_it(checkpoints):
    at = run_app(view="Decoding", text=GERMAN[3])
    buttons = [b for b in at.button if b.key and b.key.startswith("force_1_") and not b.disabled]
    assert buttons
    buttons[0].click().run()
    assert not at.exception
    assert any("You forced the first 1 token" in e.value for e in at.info)


def shown(elements) -> str:
    """The elements' text as the reader sees it: Markdown's escapes and HTML's entities undone."""
    return " ".join(html.unescape(re.sub(r"\\(.)", r"\1", str(e.value))) for e in elements)


def test_a_forced_token_outside_the_vocabulary_is_said_as_the_model_received_it(checkpoints):
    at = run_app(view="Decoding", text=GERMAN[3], prefix="zzzqqq")
    assert not at.exception
    note = shown(at.info)
    assert ("You forced the first 1 token(s): <unk>. Not in the model's vocabulary: zzzqqq (read as <unk>). "
            "Decoding continued greedily.") in note
    at = run_app(view="Decoding", text=GERMAN[3])
    chosen = next(b for b in at.button if b.key and b.key.startswith("force_1_") and not b.disabled)
    token = html.unescape(re.sub(r"\\(.)", r"\1", chosen.label))
    chosen.click().run()
    assert not at.exception
    note = shown(at.info)
    assert f"You forced the first 1 token(s): {token}." in note and "vocabulary" not in note  # a candidate is in it


def test_a_links_values_that_are_not_valid_are_replaced_said_and_left_out_of_the_url(checkpoints):
    """The demo model has 2 decoder layers and 4 heads: a link's layer 999 is its last layer, on every page."""
    at = run_app(view="Nope", layer=999, head="abc", off="cross-9-9,cross-1-2", text=GERMAN[0])
    assert not at.exception
    assert at.sidebar.radio(key="view").value == "Overview"
    link = url(at)
    assert (link["view"], link["layer"], link["off"]) == ("Overview", "2", "cross-1-2") and "head" not in link
    assert ("Not valid in this link, so replaced: view “Nope” (now Overview), layer “999” (now 2), head “abc” "
            "(now 1), off “cross-9-9,cross-1-2” (now cross-1-2).") in shown(at.warning)
    at.sidebar.radio(key="view").set_value("Attention").run()
    assert not at.exception
    assert at.selectbox(key="layer").value == 2 and url(at)["layer"] == "2"
    assert "Not valid in this link" not in shown(at.warning)  # said once
    at = run_app(view="Attention", layer=2, head=3, text=GERMAN[0])
    assert not at.exception and "Not valid" not in shown(at.warning)


def test_broken_checkpoint_gives_clear_message(checkpoints):
    at = run_app(ckpt="broken", text=GERMAN[0])
    assert not at.exception
    msg = " ".join(e.value for e in at.error).replace("\\", "")  # Markdown escapes
    assert "broken" in msg and "model.safetensors" in msg
    # the rest of the page still works: switching to the good model renders charts
    at.sidebar.selectbox(key="ckpt").set_value("demo").run()
    assert not at.exception and charts(at)


def test_missing_checkpoint_gives_clear_message(checkpoints):
    at = run_app(ckpt="does-not-exist", text=GERMAN[0])
    assert not at.exception
    assert any("does-not-exist" in e.value.replace("\\", "") and "does not offer" in e.value for e in at.error)


def test_untrained_twin_differs(checkpoints):
    trained = run_app(view="Attention", text=GERMAN[0], kind="enc_self")
    twin = run_app(view="Attention", text=GERMAN[0], kind="enc_self", ckpt="demo:untrained")
    assert not twin.exception
    assert charts(trained)[0].proto.spec != charts(twin)[0].proto.spec


@pytest.mark.parametrize("kind, name", [("enc_self", "encoder self-attention"), ("dec_self", "decoder self-attention"),
                                        ("cross", "cross-attention")])
def test_the_single_head_figure_and_its_saved_file_name_the_attention_kind(checkpoints, kind, name):
    import json

    at = run_app(view="Attention", text=GERMAN[0], kind=kind, layer=2, head=3)
    assert not at.exception
    specs = [json.loads(c.proto.spec) for c in charts(at)]
    titled = [s for s in specs if f"{name}, layer 2, head 3" in json.dumps(s["layout"].get("title", {}))]
    assert titled, "no figure titled with its attention kind, layer and head"
    configs = [json.loads(c.proto.config) for c in charts(at)]
    assert any(f"attention_{kind}_L2_H3" in c.get("toImageButtonOptions", {}).get("filename", "") for c in configs)


@pytest.mark.parametrize("switch", ["ATLAS_PUBLIC_ONLY=1", "ATLAS_SPEED_OFF=all"])
@pytest.mark.parametrize("view", records.VIEWS)
def test_every_view_draws_with_the_speed_layer_off(checkpoints, view, switch, monkeypatch):
    """ATLAS_PUBLIC_ONLY=1: public Plotly and Streamlit API only (viz/plotly_internals.py,
    views/plumbing/streamlit_internals.py), so a broken upgrade of either makes pages slower, never blank;
    ATLAS_SPEED_OFF=all: every speed device off (viz/speed.py), the way each is measured against the app."""
    monkeypatch.setenv(*switch.split("="))
    at = run_app(view=view, text=GERMAN[3])
    assert not at.exception, [e.value for e in at.exception]
    if view not in ("Heads", "Training"):  # those two need a report or a film the tiny checkpoint lacks
        assert charts(at), f"{view} drew no chart"
    for chart in charts(at):  # what the browser gets holds the figure, not only its size
        sent = json.loads(chart.proto.spec)
        drawn = sent.get("data") or sent.get("layout", {}).get("annotations") or sent.get("layout", {}).get("shapes")
        assert "data" in sent and drawn, f"{view}: an empty chart was sent"
    markdown = " ".join(m.value for m in at.markdown)
    assert "data-testid" not in markdown  # the CSS named no Streamlit test id
    if switch.endswith("all"):  # the look left to Streamlit's theme, the axis titles to Plotly
        assert all(c.proto.theme == "streamlit" for c in charts(at)), f"{view}: a chart without Streamlit's theme"
        assert not any(a.get("name", "").endswith(" title") for c in charts(at)
                       for a in json.loads(c.proto.spec).get("layout", {}).get("annotations", [])), "axis notes left"
