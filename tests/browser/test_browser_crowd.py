"""A class opening the link at once: every student's page gets the app, on a fresh server, round after round."""
from __future__ import annotations

import pytest

from browser_support import start_test_server, stop_server
from crowd_support import open_at_once

PAGES, ROUNDS = 8, 3
SENTENCE = "Ein Mann fährt Fahrrad."


@pytest.mark.slow
@pytest.mark.browser
def test_eight_pages_opened_at_once_on_a_fresh_server_all_get_the_app(atlas_checkpoints, tmp_path_factory):
    """Each round starts a new server, so the sessions' first runs import the scientific stack in parallel
    threads (a half-imported pandas once reached the warm-up chart: a traceback instead of the app)."""
    failed = []
    for r in range(ROUNDS):
        server = start_test_server(atlas_checkpoints, "demo", tmp_path_factory)
        try:
            results = open_at_once([server.link(view="Attention", text=SENTENCE)] * PAGES)
        finally:
            stop_server(server)
        failed += [(r, x.exceptions[:1], x.error) for x in results if not x.got_app]
        assert all(x.header for x in results if x.got_app)
    assert failed == [], f"{len(failed)} of {PAGES * ROUNDS} pages did not get the app: {failed[:3]}"
