"""AppTest of the what-if lab: the What if page (minimal pair, head knockout, activation patching) and the
Decoding page's logit lens and "why A and not B", on the tiny demo model, its untrained twin and a toy; what the
figures show is what model/analysis computed, links restore every choice, and a pair that cannot be patched says
why."""
from __future__ import annotations

import numpy as np
import pytest

from model.analysis import pairs
from tests.app_support import array, figures, run_app, url, visible_text
from tests.tiny_checkpoint import GERMAN

A = GERMAN[3]  # "Ein Hund läuft im Schnee."
B = "Zwei Hunde spielen im Schnee."  # as many tokens as A
LONGER = "Ein Hund läuft nicht im Schnee."  # one token more
LAB_FIGURES = ["pair_fig", "pair_diff_fig", "knockout_fig", "knockout_bars", "patch_heads_fig", "patch_pos_fig"]


@pytest.fixture(scope="module")
def model(checkpoints):
    from model import service

    return service.load(str(checkpoints / "demo"))


def scored(model, text: str) -> list[str]:
    from model import service  # the real door: the model's own greedy tokens
    return [s.chosen_token for s in service.trace(model, text).steps]


def test_the_what_if_page_draws_every_part_and_its_numbers_are_the_models(checkpoints, model):
    from model import service

    at = run_app(view="What if", text=A, pair=B, kind="cross", layer=2, head=3, lab_patch=1)
    assert not at.exception, [e.value for e in at.exception]
    figs = figures(at)
    assert [k for k in LAB_FIGURES if k in figs] == LAB_FIGURES
    tokens = scored(model, A)
    ko = service.knockout(model, A, tokens)
    grid = figs["knockout_fig"]["data"]
    assert [t["name"] for t in grid] == ["encoder self-attention", "decoder self-attention", "cross-attention"]
    for trace, kind in zip(grid, ("enc_self", "dec_self", "cross")):
        assert np.allclose(array(trace["z"]), ko.delta[kind].sum(-1), atol=1e-5)  # the whole translation
        assert "layer %{y}, head %{x}" in trace["hovertemplate"] and "%{z:+.3f}" in trace["hovertemplate"]
    # red: worse for the translation, as on the Heads page (a head without which log p fell; its tokens' bars too)
    red = figs["knockout_fig"]["layout"]["coloraxis"]
    assert red["colorscale"][0][1] == "rgb(103,0,31)" and red["cmin"] < 0  # the lowest Δ log p at the red end
    assert "red: worse for the translation" in red["colorbar"]["title"]["text"]
    bars = figs["knockout_bars"]["data"][0]
    assert np.allclose(array(bars["y"]), ko.delta["cross"][1, 2], atol=1e-5)  # the chosen head, every token
    assert all((c == "rgb(103,0,31)") == (y < 0) for c, y in zip(bars["marker"]["color"], array(bars["y"])))
    pa = service.patching(model, A, B, tokens)
    heads = figs["patch_heads_fig"]["data"]
    effect = pairs.patch_effect(pa)
    assert np.allclose(array(heads[2]["z"]), effect["cross"], atol=1e-5, equal_nan=True)
    gap = float(pa.clean_log_probs.sum() - pa.corrupt_log_probs.sum())  # red: the shares whose copy lowered log p
    shares = figs["patch_heads_fig"]["layout"]["coloraxis"]
    assert shares["colorscale"][0 if gap > 0 else -1][1] == "rgb(103,0,31)"
    positions = figs["patch_pos_fig"]["data"]
    assert np.allclose(array(positions[0]["z"]), effect["enc_resid"].T, atol=1e-5, equal_nan=True)  # (s, L)
    said = visible_text(at)
    assert "teacher-forced on the translation shown in the header" in said
    assert "Negative, in red: the head helped" in said and "Red: the copy lowered log p" in said
    assert f"log p = {pa.clean_log_probs.sum():.3f} in A's run and {pa.corrupt_log_probs.sum():.3f} in B's" in said
    assert url(at)["pair"] == B


def test_the_minimal_pair_marks_changed_tokens_and_its_difference_is_b_minus_a(checkpoints, model):
    from model import service

    at = run_app(view="What if", text=A, pair=B, kind="enc_self", layer=1, head=2)
    assert not at.exception
    lines = [m.value for m in at.markdown if m.value.startswith(("**A**", "**B**"))]
    assert ":orange-background[**Zwei**]" in lines[1] and ":orange-background[**Ein**]" in lines[0]
    assert "Schnee" in lines[1] and ":orange-background[**Schnee**]" not in lines[1]  # unchanged: not marked
    diff = figures(at)["pair_diff_fig"]["data"][0]
    ta, tb = service.trace(model, A).trace, service.trace(model, B).trace
    expected = tb.probs("enc_self")[0, 1] - ta.probs("enc_self")[0, 1]  # same length: every token aligned
    assert np.allclose(array(diff["z"]), expected, atol=1e-5)
    assert diff["y"][0] == "Ein→Zwei (0)" and "A: query 0, key 0 · B: query 0, key 0" in str(diff["customdata"])


def test_a_pair_of_another_length_is_compared_but_not_patched_and_the_page_says_why(checkpoints):
    at = run_app(view="What if", text=A, pair=LONGER)
    assert not at.exception
    figs = figures(at)
    assert "pair_diff_fig" in figs and "knockout_fig" in figs and "patch_heads_fig" not in figs
    warning = " ".join(w.value for w in at.warning)
    assert "same number of tokens" in warning and "A reads 7" in warning and "B reads 8" in warning
    assert "inserted or deleted tokens have no partner" in visible_text(at)
    diff = figures(at)["pair_diff_fig"]["data"][0]
    assert "nicht" not in " ".join(diff["y"])  # the inserted token has no partner


def test_without_sentence_b_the_page_starts_from_a_and_asks_for_a_change(checkpoints):
    at = run_app(view="What if", text=A)
    assert not at.exception
    assert "pair" not in url(at) and at.text_input(key="pair_box").value == A  # A's copy: left out of the link
    assert at.button(key="lab_swap").disabled  # nothing to swap
    said = visible_text(at)
    assert "A and B are the same sentence" in said and "Patching needs a sentence B that differs" in said
    assert "knockout_fig" in figures(at)  # knockout needs sentence A only


def test_the_measured_token_and_the_head_come_from_the_link_and_go_back_into_it(checkpoints, model):
    from model import service

    params = dict(view="What if", text=A, pair=B, lab_token=2, kind="dec_self", layer=2, head=4)
    at = run_app(**params)
    assert not at.exception
    assert at.selectbox(key="lab_token").value == 2
    assert {k: url(at).get(k) for k in params} == {k: str(v) for k, v in params.items()}
    figs = figures(at)
    ko = service.knockout(model, A, scored(model, A))
    assert np.allclose(array(figs["knockout_fig"]["data"][1]["z"]), ko.delta["dec_self"][..., 1], atol=1e-5)
    assert np.allclose(array(figs["knockout_bars"]["data"][0]["y"]), ko.delta["dec_self"][1, 3], atol=1e-5)
    tok = scored(model, A)[1]
    assert f"output token 2, “{tok}”" in figs["knockout_fig"]["layout"]["title"]["text"].replace("<br>", " ")


def test_an_example_pair_sets_both_sentences(checkpoints):
    from views.pages.whatif import EXAMPLE_PAIRS

    at = run_app(view="What if", text=A)
    label = next(iter(EXAMPLE_PAIRS))
    at.selectbox(key="lab_example").set_value(label).run()
    assert not at.exception
    assert (url(at)["text"], url(at)["pair"]) == EXAMPLE_PAIRS[label]
    assert at.selectbox(key="lab_example").value == label
    assert url(at)["lab_patch"] == "1"  # an example pair is there to be patched


@pytest.mark.parametrize("present", [0, 1])
def test_choosing_a_pair_says_that_it_set_the_sidebars_sentence(checkpoints, present):
    """Said once, where the pair is chosen: a caption under its row (presenter mode: a toast, the row's height is the
    figure's)."""
    from views.pages.whatif import EXAMPLE_PAIRS

    def unescaped(elements) -> list[str]:
        return [str(e.value).replace("\\", "") for e in elements]
    label, (a, _) = next(iter(EXAMPLE_PAIRS.items()))
    at = run_app(view="What if", text=A, present=present, focus="A and B")
    said = f"The sidebar's sentence is now this pair's A: “{a}”"
    assert not any(said in c for c in unescaped(at.caption) + unescaped(at.toast))
    at.selectbox(key="lab_example").set_value(label).run()
    assert not at.exception and url(at)["text"] == a
    assert [said in c for c in unescaped(at.toast if present else at.caption)].count(True) == 1
    assert not any(said in c for c in unescaped(at.caption if present else at.toast))
    at.run()
    assert not any(said in c for c in unescaped(at.caption) + unescaped(at.toast))


def change_a(at, text: str):
    """Type a new sentence A into the sidebar."""
    at.text_area(key="text").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def set_b(at, text: str):
    """Type sentence B into the What if page's box."""
    at.text_input(key="pair_box").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


A2, A3 = "Ein Hund läuft im Regen.", "Ein Mann schläft auf einem Sofa."
UNRELATED = "Der Mann hält das Kind."  # shares "." and the end token with A: 2 of 7 source tokens


def test_sentence_b_follows_a_until_it_is_edited_and_stays_out_of_the_link_meanwhile(checkpoints):
    at = change_a(run_app(view="What if", text=A), A2)
    assert at.text_input(key="pair_box").value == A2 and "pair" not in url(at)  # B follows A, unwritten
    assert "A and B are the same sentence" in visible_text(at)
    set_b(at, B)
    assert url(at)["pair"] == B
    change_a(at, A3)
    assert at.text_input(key="pair_box").value == B and url(at)["pair"] == B  # B is the user's now
    assert (url(at)["text"], url(at)["pair"]) == (A3, B)
    set_b(at, f"  {A3} ")  # typed back to A: B follows A again
    assert "pair" not in url(at)
    change_a(at, A)
    assert at.text_input(key="pair_box").value == A and "pair" not in url(at)


def test_a_links_sentence_b_stays_and_a_link_whose_b_is_a_copy_of_a_follows_a(checkpoints):
    at = change_a(run_app(view="What if", text=A, pair=B), A2)
    assert at.text_input(key="pair_box").value == B and url(at)["pair"] == B
    at = run_app(view="What if", text=A, pair=A)  # as links were written before B followed A
    assert not at.exception and "pair" not in url(at)
    change_a(at, A2)
    assert at.text_input(key="pair_box").value == A2 and "pair" not in url(at)


def page_order(node) -> list:
    """The elements under a block (an AppTest: its main area) in the order the page draws them."""
    def walk(block):
        for child in getattr(block, "children", {}).values():
            yield child
            yield from walk(child)
    return list(walk(getattr(node, "main", node)))


@pytest.mark.parametrize("pair,unrelated", [(UNRELATED, True), (B, False), (LONGER, False)])
def test_a_pair_sharing_less_than_half_its_tokens_is_called_no_minimal_pair_before_any_figure(checkpoints, model,
                                                                                                pair, unrelated):
    from model import service

    at = run_app(view="What if", text=A, pair=pair, lab_patch=1)
    assert not at.exception
    shared, longer = pairs.shared_tokens(*(service.trace(model, s).source.axis_tokens for s in (A, pair)))
    assert (2 * shared < longer) == unrelated  # B shares exactly half: 4 of 7
    said = [w.value for w in at.warning if "no minimal pair" in w.value]
    assert len(said) == unrelated
    if unrelated:
        assert f"share only {shared} of the {longer} source tokens" in said[0] and "patching between" in said[0]
        order = [n.value if getattr(n, "type", None) == "warning" else getattr(n, "type", None)
                 for n in page_order(at)]
        assert order.index(said[0]) < order.index("plotly_chart")
        assert "patch_heads_fig" in figures(at)  # the same length: patched, after the warning
        for part in ("patching: heads", "A and B"):
            at = run_app(view="What if", text=A, pair=pair, present=1, focus=part)
            assert any("No minimal pair" in w.value for w in at.warning) and set(figures(at)) == PARTS[part]
        assert not any(m.value.startswith("**A**") for m in at.markdown)  # under the warning: no output lines
    else:
        at = run_app(view="What if", text=A, pair=pair, present=1, focus="A and B")
        assert any(m.value.startswith("**A**") for m in at.markdown) and not at.warning


PARTS = {"A and B": {"pair_fig"}, "B − A": {"pair_diff_fig"}, "knockout": {"knockout_fig"},
         "one head off": {"knockout_bars"}, "patching: heads": {"patch_heads_fig"},
         "patching: positions": {"patch_pos_fig"}}


def test_swapping_makes_b_the_clean_sentence(checkpoints):
    at = run_app(view="What if", text=A, pair=B, lab_patch=1)
    at.button(key="lab_swap").click().run()
    assert not at.exception
    assert (url(at)["text"], url(at)["pair"]) == (B, A)
    assert "in A's run and" in visible_text(at)  # patching runs the other way round


def test_patching_runs_when_asked_for_and_the_switch_is_in_the_link(checkpoints):
    at = run_app(view="What if", text=A, pair=B)
    assert not at.exception
    assert "patch_heads_fig" not in figures(at) and at.toggle(key="lab_patch").value is False
    assert "knockout_fig" in figures(at)
    at.toggle(key="lab_patch").set_value(True).run()
    assert not at.exception
    assert {"patch_heads_fig", "patch_pos_fig"} <= set(figures(at)) and url(at)["lab_patch"] == "1"


def test_on_a_large_model_knockout_waits_for_its_switch_and_the_switch_is_in_the_link(checkpoints, monkeypatch):
    """A model with more heads × parameters than KNOCKOUT_AUTO (here: the budget lowered below the demo model's)
    does not run a pass per head on the page's first visit; its switch runs it and goes into the link."""
    from views.parts import lab_parts

    monkeypatch.setattr(lab_parts, "KNOCKOUT_AUTO", 0)
    at = run_app(view="What if", text=A, pair=B)
    assert not at.exception
    assert not {"knockout_fig", "knockout_bars"} & set(figures(at)) and at.toggle(key="lab_knockout").value is False
    assert "heads and" in visible_text(at) and "pair_fig" in figures(at)  # says why; the pair is drawn
    at.toggle(key="lab_knockout").set_value(True).run()
    assert not at.exception
    assert {"knockout_fig", "knockout_bars"} <= set(figures(at)) and url(at)["lab_knockout"] == "1"


@pytest.mark.parametrize("part", ["A and B", "patching: heads"])
def test_presenter_mode_offers_sentence_b_and_the_pairs_in_one_row_above_the_parts_that_read_b(checkpoints, part):
    at = run_app(view="What if", text=A, present=1, focus=part)
    assert not at.exception
    box = at.main.text_input(key="pair_box")
    assert box.value == A and at.main.selectbox(key="lab_example")
    row = [n for n in page_order(at) if getattr(n, "type", None) == "flex_container"
           and any(getattr(c, "key", None) == "pair_box" for c in page_order(n))][-1]  # the innermost: its row
    assert {c.key for c in page_order(row) if getattr(c, "key", None)} == {"pair_box", "lab_example"}  # one row
    assert box.proto.label_visibility.value == box.proto.label_visibility.COLLAPSED
    set_b(at, B)
    assert url(at)["pair"] == B and url(at)["present"] == "1"
    assert set(figures(at)) == PARTS[part]  # B read from the box: the part draws
    at = run_app(view="What if", text=A, pair=B, present=1, focus="knockout")  # knockout reads A alone
    assert not at.exception and not at.main.get("text_input")


@pytest.mark.parametrize("part", list(PARTS))
def test_presenter_mode_shows_one_part(checkpoints, part):
    at = run_app(view="What if", text=A, pair=B, present=1, focus=part)
    assert not at.exception
    assert list(at.radio(key="focus").options) == list(PARTS)
    assert set(figures(at)) == PARTS[part]


def test_presenter_mode_shows_why_a_not_b_beside_its_heads(checkpoints):
    at = run_app(view="Decoding", text=A, present=1, focus="why A and not B", dec_step=2)
    assert not at.exception
    assert set(figures(at)) == {"why_fig", "why_heads_fig"}
    assert at.selectbox(key="why_a").format_func(at.selectbox(key="why_a").value).startswith("A: ")


def test_the_lens_and_why_run_when_asked_for_and_their_switches_are_in_the_link(checkpoints):
    at = run_app(view="Decoding", text=A, dec_step=2)
    assert not at.exception
    assert not {"lens_fig", "why_fig", "why_heads_fig"} & set(figures(at))
    assert at.toggle(key="dec_lens").value is False and at.toggle(key="dec_why").value is False
    at.toggle(key="dec_lens").set_value(True).run()
    assert not at.exception
    assert "lens_fig" in figures(at) and "why_fig" not in figures(at) and url(at)["dec_lens"] == "1"
    at.toggle(key="dec_why").set_value(True).run()
    assert {"lens_fig", "why_fig", "why_heads_fig"} <= set(figures(at)) and url(at)["dec_why"] == "1"


def test_the_lens_last_layer_is_the_models_own_distribution(checkpoints, model):
    from model import service

    at = run_app(view="Decoding", text=A, dec_step=2, dec_lens=1)
    assert not at.exception, [e.value for e in at.exception]
    lens = figures(at)["lens_fig"]["data"]
    tokens = scored(model, A)
    own = np.exp(service.teacher_forced(model, A, tokens[:-1]).log_probs[1])  # (V,) the generator at step 2
    top = np.sort(own)[::-1][:5]
    assert np.allclose(array(lens[0]["z"])[-1], top, atol=1e-5)
    assert lens[0]["text"][-1][0] == tokens[1]  # greedy: the top candidate is the token chosen
    assert "is the top candidate from layer" in visible_text(at)


def test_why_a_not_b_defaults_to_the_chosen_token_against_the_runner_up_and_restores_from_a_link(checkpoints, model):
    from model import service

    at = run_app(view="Decoding", text=A, dec_step=2, dec_why=1)
    step = service.trace(model, A).steps[1]
    assert at.selectbox(key="why_a").value == step.chosen_token
    assert at.selectbox(key="why_b").value == next(t for t in step.top_tokens if t != step.chosen_token)
    a, b = step.top_tokens[2], step.top_tokens[1]
    at = run_app(view="Decoding", text=A, dec_step=2, why_a=a, why_b=b, dec_why=1)
    assert not at.exception
    assert (url(at)["why_a"], url(at)["why_b"]) == (a, b)
    res = service.contrast(model, A, scored(model, A), 1, a, b)
    figs = figures(at)
    assert np.allclose(array(figs["why_fig"]["data"][0]["y"]), res.input_x_grad, atol=1e-5)
    assert np.allclose(array(figs["why_heads_fig"]["data"][2]["z"]), res.heads["cross"], atol=1e-5)
    assert f"= {res.log_prob_diff:+.3f} nats" in visible_text(at)


def test_after_forcing_a_candidate_why_compares_it_with_the_models_own_choice(checkpoints, model):
    from model import service

    greedy = service.trace(model, A).steps[1]
    other = next(t for t in greedy.top_tokens if t != greedy.chosen_token)
    at = run_app(view="Decoding", text=A, prefix=f"{greedy.prefix_tokens[1]} {other}", dec_step=2, dec_lens=1,
                 dec_why=1)
    assert not at.exception
    assert at.selectbox(key="why_a").value == other and at.selectbox(key="why_b").value == greedy.chosen_token
    assert "was not the model's own choice" in visible_text(at)  # the lens: the last layer ranks it lower


def test_the_same_token_twice_asks_for_two(checkpoints, model):
    from model import service

    tok = service.trace(model, A).steps[1].chosen_token
    at = run_app(view="Decoding", text=A, dec_step=2, why_a=tok, why_b=tok, dec_why=1)
    assert not at.exception
    assert any("Choose two different candidates" in i.value for i in at.info)


@pytest.mark.parametrize("ckpt", ["demo:untrained", "toy"])
@pytest.mark.parametrize("view", ["What if", "Decoding"])
def test_the_lab_works_on_the_twin_and_a_toy(checkpoints, toy_key, ckpt, view):
    key = toy_key if ckpt == "toy" else ckpt
    text, pair = ("3 1 4 1 5", "3 1 4 1 6") if ckpt == "toy" else (A, B)
    at = run_app(view=view, text=text, pair=pair, ckpt=key, max_len=8, lab_patch=1, dec_lens=1)
    assert not at.exception, [e.value for e in at.exception]
    figs = figures(at)
    wanted = LAB_FIGURES if view == "What if" else ["lens_fig"]
    assert all(k in figs for k in wanted), (sorted(figs), wanted)
    if ckpt == "toy" and view == "What if":
        assert "IN" in visible_text(at) and "German" not in visible_text(at)


@pytest.mark.checkpoint
@pytest.mark.parametrize("model_name", ["multi30k-de-en", "multi30k-de-en-words"])
def test_the_lab_works_on_the_shipped_models_and_every_example_pair_can_be_patched(model_name):
    from pathlib import Path

    from model import service
    from tests.app_support import serving
    from views.pages.whatif import EXAMPLE_PAIRS

    root = Path(__file__).resolve().parents[2] / "checkpoints"
    shipped = service.load(str(root / model_name))
    for a, b in EXAMPLE_PAIRS.values():  # the page's promise: each example pair runs through patching
        assert len(service.trace(shipped, a).source.tokens) == len(service.trace(shipped, b).source.tokens), (a, b)
    a, b = EXAMPLE_PAIRS["an adjective (brown → black)"]
    with serving(root, model_name):
        at = run_app(view="What if", text=a, pair=b, lab_patch=1)
        assert not at.exception, [e.value for e in at.exception]
        assert set(LAB_FIGURES) <= set(figures(at))
        at = run_app(view="Decoding", text=a, dec_step=2, dec_lens=1, dec_why=1)
        assert not at.exception
        assert {"lens_fig", "why_fig", "why_heads_fig"} <= set(figures(at))
