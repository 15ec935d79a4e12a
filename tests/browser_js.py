"""The scripts the browser tests and benchmarks run in the page: counting the app's finished runs, and telling
when the page, its charts and their layout have settled. Plain strings, for `page.wait_for_function` and
`context.add_init_script`."""
from __future__ import annotations

# Installed in every page before the app's own scripts (context.add_init_script): counts the app's
# finished script runs, so a wait can tell "a new run has finished" from "the previous run is still the
# last one", including the very first run. The runs are counted in the messages the server sends (a
# ForwardMsg with script_finished, field 6, other than FINISHED_EARLY_FOR_RERUN = 2), not from stApp's
# data-test-script-state: on a busy machine React renders a short run's 'running' and 'notRunning' in
# one commit, the page never shows 'running', and a counter of those switches misses the run.
# __atlasChanges counts DOM changes, so a wait can also tell when the page has stopped changing.
RUN_COUNTER_JS = """
window.__atlasRuns = 0;
window.__atlasChanges = 0;
new MutationObserver(records => { window.__atlasChanges += records.length; })
  .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
window.__atlasQuietFor = key => {  // called once a frame: true when the page did not change for two frames
  const q = window.__atlasQuiet;
  if (!q || q.key !== key || q.changes !== window.__atlasChanges) {
    window.__atlasQuiet = {key, changes: window.__atlasChanges, frames: 0};
    return false;
  }
  return ++q.frames >= 2;
};
const finishedRun = bytes => {  // reads the top-level fields of one ForwardMsg
  let i = 0;
  const varint = () => {
    let x = 0, shift = 0, c;
    do { c = bytes[i++]; x += (c & 127) * 2 ** shift; shift += 7; } while (c & 128);
    return x;
  };
  while (i < bytes.length) {
    const tag = varint(), field = Math.floor(tag / 8), wire = tag % 8;
    if (wire === 0) { const v = varint(); if (field === 6) return v !== 2; }
    else if (wire === 2) { const n = varint(); i += n; }
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else return false;
  }
  return false;
};
const PageSocket = window.WebSocket;
window.WebSocket = class extends PageSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', e => {
      if (e.data instanceof ArrayBuffer && finishedRun(new Uint8Array(e.data))) window.__atlasRuns += 1;
    });
  }
};
"""

# Polled once an animation frame: true once more than n runs have finished, the app is idle, no element is
# still waiting for its code (Streamlit loads a widget's or chart's code lazily and shows a stSkeleton until it
# arrives, which under load takes longer than two frames), and the page has not changed for two frames in a
# row, so React has rendered what the finished run sent.
SETTLED_JS = """([n, idle]) => {
  if (!(window.__atlasRuns > n && document.querySelector(idle)
        && !document.querySelector("[data-testid='stSkeleton']"))) { window.__atlasQuiet = null; return false; }
  return window.__atlasQuietFor(n);
}"""

# At least n charts are on the page, no element is still waiting for its code (a chart behind a stSkeleton is
# not counted yet), every chart has drawn its SVG and Plotly is not in the middle of drawing it.
CHARTS_DRAWN_JS = """([sel, n]) => {
  const charts = [...document.querySelectorAll(sel)];
  if (document.querySelector("[data-testid='stSkeleton']")) return false;
  return charts.length >= Math.max(n, 1) && charts.every(c => {
    const gd = c.querySelector('.js-plotly-plot');
    return gd && gd.querySelector('.main-svg') && gd._fullLayout && !gd._fullLayout._replotting;
  });
}"""

# After a resize: every visible chart is drawn at its container's width (the app's charts all stretch),
# none is drawing, and the page has not changed for two animation frames.
LAID_OUT_JS = """sel => {
  const fit = [...document.querySelectorAll(sel)].every(c => {
    const gd = c.querySelector('.js-plotly-plot');
    return c.clientWidth === 0 || (gd && gd._fullLayout && !gd._fullLayout._replotting
                                   && Math.abs(gd._fullLayout.width - c.clientWidth) < 1);
  });
  if (!fit) { window.__atlasQuiet = null; return false; }
  return window.__atlasQuietFor('layout');
}"""
