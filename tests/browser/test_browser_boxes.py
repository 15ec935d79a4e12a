"""The Embeddings page's boxes are drawn from five numbers computed on the server (viz.embeddings.box_of): they must
be the numbers Plotly itself computes from the values (its quartiles and whiskers), checked in plotly.js."""
from __future__ import annotations

import json

import numpy as np
import pytest

from viz.embeddings import box_of

# Plotly computes a box's statistics from its values into calcdata: q1, med, q3 and the whiskers' ends lf, uf.
CALC_JS = """values => {
  const gd = document.createElement('div');
  document.body.appendChild(gd);
  Plotly.newPlot(gd, [{type: 'box', y: values, boxpoints: false}]);
  const c = gd.calcdata[0][0];
  return [c.lf, c.q1, c.med, c.q3, c.uf];
}"""


@pytest.mark.browser
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_five_numbers_are_plotlys_own(chromium, seed):
    from plotly.offline import get_plotlyjs

    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.normal(size=(9, 64)).ravel(), rng.normal(0, 6, size=7)])  # with outliers
    values = values[: 500 + seed].astype(np.float32)  # odd and even counts
    pg = chromium.new_page()
    try:
        pg.set_content(f"<html><body><script>{get_plotlyjs()}</script></body></html>")
        plotly = pg.evaluate(CALC_JS, json.loads(json.dumps(values.astype(np.float64).tolist())))
    finally:
        pg.close()
    box = box_of(values, "v", "#000")
    ours = [box[k][0] for k in ("lowerfence", "q1", "median", "q3", "upperfence")]
    assert np.allclose(ours, plotly, rtol=0, atol=1e-9), (ours, plotly)
    assert "y" not in box  # the values themselves are not sent
