"""The what-if lab on an imported Marian model (post-norm, its own languages and pieces): every part draws."""
from __future__ import annotations

from tests.app_support import run_app, visible_text
from tests.views.test_app_marian import marian_root  # noqa: F401  (a fixture)

TEXT, PAIR = "Le chien court dans le parc.", "Le chat court dans le parc."


def keys(at) -> set[str]:
    return {c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")}


def test_the_what_if_page_and_the_lens_work_on_an_imported_model(marian_root):  # noqa: F811
    at = run_app(view="What if", text=TEXT, pair=PAIR, max_len=6, lab_patch=1)
    assert not at.exception, [e.value for e in at.exception]
    assert {"pair_fig", "pair_diff_fig", "knockout_fig", "knockout_bars"} <= keys(at)
    said = visible_text(at)
    assert "French" in said and "German" not in said
    assert "patch_heads_fig" in keys(at) or "same number of tokens" in said
    at = run_app(view="Decoding", text=TEXT, max_len=6, dec_step=1, dec_lens=1, dec_why=1)
    assert not at.exception, [e.value for e in at.exception]
    assert {"lens_fig", "why_fig", "why_heads_fig"} <= keys(at)
