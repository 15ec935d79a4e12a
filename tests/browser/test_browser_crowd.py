"""A class opening the link at once: every student's page gets the app, on a fresh server, round after round, and
each page shows its own sentence's translation and attention (one cached model serves every session)."""
from __future__ import annotations

import pytest

from browser_support import TEST_CHROMIUM_ARGS, start_test_server, stop_server
from crowd_support import open_at_once

PAGES, ROUNDS = 8, 2  # two cold starts, and between them every one of the 16 sentences
WORDS = ["Hund", "Schnee", "Mann", "Sofa", "Gras", "Spielzeug", "Raum", "Hunde"]
# 16 different sentences: a page that showed another session's trace would show another sentence's tokens
SENTENCES = [f"Ein {WORDS[i % 8]} {'und ein ' + WORDS[(i + 3) % 8] if i >= 8 else ''} läuft.".replace("  ", " ")
             for i in range(16)]
ONE_HEAD = 1  # the Attention view's second chart: one head, its keys are the sentence's tokens (+ <eos>)


@pytest.mark.slow
@pytest.mark.browser
def test_pages_opened_at_once_on_a_fresh_server_each_get_the_app_with_their_own_sentence(atlas_checkpoints,
                                                                                         tmp_path_factory):
    """Each round starts a new server, so the sessions' first runs import the scientific stack in parallel
    threads (a half-imported pandas once reached the warm-up chart: a traceback instead of the app), and 8
    sessions send different sentences through one cached model at once: each page's header, source line and
    attention keys are its own sentence's."""
    from model.inference.translator import Translator

    assert len(set(SENTENCES)) == 16
    translator = Translator.from_checkpoint(atlas_checkpoints / "demo")
    failed, crossed = [], []
    for r in range(ROUNDS):
        sentences = [SENTENCES[(r * PAGES + i) % len(SENTENCES)] for i in range(PAGES)]
        server = start_test_server(atlas_checkpoints, "demo", tmp_path_factory)
        try:
            results = open_at_once([server.link(view="Attention", kind="enc_self", text=s) for s in sentences],
                                   ticks_of=ONE_HEAD, args=TEST_CHROMIUM_ARGS)
        finally:
            stop_server(server)
        failed += [(r, x.exceptions[:1], x.error) for x in results if not x.got_app or x.error]
        for s, x in zip(sentences, results):
            if not x.got_app:
                continue
            expected = translator.translate(s)
            if not (x.header.strip().endswith(expected.text)
                    and x.source.strip().endswith(" ".join(expected.source.tokens))
                    and x.key_ticks == expected.source.axis_tokens):
                crossed.append((r, s, expected.text, x.header, x.source, x.key_ticks))
    assert failed == [], f"{len(failed)} of {PAGES * ROUNDS} pages did not get the app: {failed[:3]}"
    assert crossed == [], f"{len(crossed)} pages showed another sentence: {crossed[:3]}"
