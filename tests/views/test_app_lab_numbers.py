"""AppTest of the numbers beside activation patching's shares on the What if page (tiny demo model): the gap each
share divides is on the page (titles, hover, caption), negative shares are explained, a gap below the threshold
gives no shares but says why, naming the threshold; and "why A and not B" in presenter mode keeps its title to one
line with y ticks chosen for its height."""
from __future__ import annotations

import re

import numpy as np
import pytest

from model.analysis import pairs
from tests.app_support import array, figures, run_app, visible_text
from tests.tiny_checkpoint import GERMAN

A = GERMAN[3]  # "Ein Hund läuft im Schnee."
B = "Zwei Hunde spielen im Schnee."  # as many tokens as A


@pytest.fixture(scope="module")
def patched(checkpoints):
    """(the demo model's patching of A → B on A's translation, per-token gaps)."""
    from model import service

    model = service.load(str(checkpoints / "demo"))
    tokens = [s.chosen_token for s in service.trace(model, A).steps]
    pa = service.patching(model, A, B, tokens)
    return pa, pa.clean_log_probs - pa.corrupt_log_probs


def test_every_share_has_its_gap_beside_it_and_negative_shares_are_explained(checkpoints, patched):
    from model.records import MIN_GAP

    pa, gaps = patched
    token = int(np.argmax(np.abs(gaps)))  # the token B changed most
    assert abs(gaps[token]) >= MIN_GAP
    at = run_app(view="What if", text=A, pair=B, lab_patch=1, lab_token=token + 1)
    assert not at.exception, [e.value for e in at.exception]
    figs = figures(at)
    clean, corrupt, gap = pairs.patch_gap(pa, token)
    effect = pairs.patch_effect(pa, token)
    for key in ("patch_heads_fig", "patch_pos_fig"):
        assert f"of a gap of {gap:+.3f} nats" in figs[key]["layout"]["title"]["text"].replace("<br>", " ")
        for trace in figs[key]["data"]:
            assert f"of the gap of {gap:+.3f} nats" in trace["hovertemplate"]
    cross = figs["patch_heads_fig"]["data"][2]
    assert np.allclose(array(cross["customdata"]), effect["cross"] * gap, atol=1e-5)  # nats restored, per head
    said = visible_text(at)
    assert f"log p = {clean:.3f} in A's run and {corrupt:.3f} in B's, a gap of {gap:+.3f} nats" in said
    assert "A negative share: copying that head or position from A moved log p further from A's run" in said
    assert f"defined only where the gap is at least {MIN_GAP:g} nats" in said
    k, l, h, v = pairs.strongest({kind: effect[kind] for kind in ("enc_self", "dec_self", "cross")}, 1)[0]
    assert f"{v:+.2f} ({v * gap:+.3f} nats)" in said  # the strongest head: its share and the nats it restored


def test_a_gap_below_the_threshold_gives_no_share_and_says_why(checkpoints, patched):
    from model.records import MIN_GAP

    _, gaps = patched
    tiny = [i for i, g in enumerate(gaps) if 1e-4 < abs(g) < MIN_GAP]  # the old floor let these through
    assert tiny, gaps
    at = run_app(view="What if", text=A, pair=B, lab_patch=1, lab_token=tiny[0] + 1)
    assert not at.exception
    assert not {"patch_heads_fig", "patch_pos_fig"} & set(figures(at))  # no share of noise is drawn
    info = " ".join(i.value for i in at.info)
    assert f"below the {MIN_GAP:g} nats a share needs" in info and "no component's share restored is defined" in info
    assert f"by {gaps[tiny[0]]:+.1e} nats only" in info or f"by {gaps[tiny[0]]:+.4f} nats only" in info


def test_presenter_why_a_not_b_has_a_one_line_title_and_y_ticks_for_its_height(checkpoints):
    at = run_app(view="Decoding", text=A, present=1, focus="why A and not B", dec_step=2)
    assert not at.exception
    why = figures(at)["why_fig"]["layout"]
    assert "<br>" not in why["title"]["text"]
    assert why["yaxis"]["tickvals"] and why["yaxis2"]["tickvals"]
    # No axis title beside the y ticks or under the rotated labels: on the axes, or as the notes the browser gets.
    titles = [(why[ax].get("title") or {}).get("text") for ax in ("yaxis", "yaxis2", "xaxis2")]
    titles += [n.get("text") for n in why.get("annotations", [])
               if re.fullmatch(r"[xy]axis\d* title", n.get("name", ""))]
    assert not any(titles), titles
    notes = [n.get("text") for n in why.get("annotations", [])]
    assert "input × gradient (nats)" in notes and "relevance (share)" in notes  # the panels' titles say the units
