"""A server process stops while a page is open (a restart, or one process of several behind the proxy): the page
reconnects to the next process at the same address, and the first sentence typed after that is the one shown,
not the older one the link still held."""
from __future__ import annotations

import urllib.parse

import pytest

from browser_support import (
    MAIN,
    enter_text,
    new_page,
    open_app,
    start_server,
    start_test_server,
    stop_server,
    widget,
)

# Counts the page's websocket connections: the second one is the page talking to the new process.
WS_COUNTER_JS = """() => {
  window.__atlasSockets = 0;
  const Native = window.WebSocket;
  window.WebSocket = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener('open', () => { window.__atlasSockets += 1; });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
}"""

BEFORE = "Ein Hund läuft im Schnee."
AFTER = "Eine Frau liest ein Buch."


@pytest.mark.slow
def test_a_sentence_typed_after_the_server_restarted_is_kept(chromium, atlas_checkpoints, tmp_path_factory):
    first = start_test_server(atlas_checkpoints, "demo", tmp_path_factory)
    pg = new_page(chromium)
    pg.context.add_init_script(f"({WS_COUNTER_JS})();")
    second = None
    try:
        open_app(pg, first.link(view="Attention", text=BEFORE))
        assert pg.evaluate("() => window.__atlasSockets") == 1
        stop_server(first)
        log = tmp_path_factory.mktemp("restarted") / "streamlit.log"
        second = start_server(atlas_checkpoints, "demo", log, port=first.port,
                              extra_env={"OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(first.cache)})
        pg.wait_for_function("() => window.__atlasSockets >= 2", timeout=60_000)
        enter_text(pg, AFTER, timeout=60_000)
        source = pg.locator(f"{MAIN} h4").first.inner_text()
        assert "Frau" in source and "Hund" not in source, source
        assert widget(pg, "text").locator("textarea").input_value() == AFTER
        assert urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query)["text"] == [AFTER]
        assert pg.locator("[data-testid='stException']").count() == 0
    finally:
        pg.context.close()
        stop_server(second or first)
