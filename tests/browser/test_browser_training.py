"""Real-browser test of the Training page: the film of a model trained by model.train, frame by frame,
and Play advancing the frames by itself."""
from __future__ import annotations

import pytest

from browser_support import EXCEPTION, MAIN, chart_titles, open_app, wait_charts


@pytest.mark.browser
def test_the_film_plays_in_the_browser(page, app_server):
    open_app(page, app_server.link(view="Training", ckpt="filmed", kind="cross", layer=1, film_frame=1))
    assert wait_charts(page, at_least=3) >= 3  # the layer's heads, the losses, the entropy per layer
    assert page.locator(EXCEPTION).count() == 0
    assert any("layer 1, all heads" in t for t in chart_titles(page))
    main = page.locator(MAIN)
    assert main.get_by_text("Step 0", exact=True).count() == 1
    page.get_by_role("button", name="Play the film").click()
    # The frame fragment reruns on its own timer: the step shown moves on without another click.
    page.wait_for_function("""() => [...document.querySelectorAll("[data-testid='stMain'] strong")]
        .some(e => /^Step [1-9]/.test(e.textContent))""", timeout=60_000)
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Play the film").wait_for(timeout=30_000)
    assert page.locator(EXCEPTION).count() == 0
