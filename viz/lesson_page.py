"""The lesson file's page: HTML, CSS and the JavaScript that swaps figures when a selector changes.

Everything the page needs is inside it: Plotly's code (inlined once, from the installed plotly package), the
figures (a :class:`viz.figure_pack.FigurePack`) and the text. It asks for nothing over the network: no script,
style sheet, font or image is loaded from anywhere, so it opens from a USB stick with the network off. Text is put
into the page with ``textContent``, never as HTML, so a token such as ``<script>`` stays text.
"""

from __future__ import annotations

import html
import json
import re

from plotly.offline import get_plotlyjs

from viz.figure_pack import PACK_JS

CSS = """
body {font-family: "Source Sans Pro", "Source Sans", system-ui, -apple-system, "Segoe UI", sans-serif;
  color: #31333f; margin: 0; background: #fff; line-height: 1.45;}
main {max-width: 980px; margin: 0 auto; padding: 0 20px 40px;}
nav {position: sticky; top: 0; z-index: 10; background: #f0f2f6; border-bottom: 1px solid #d6d9e0;
  padding: 8px 20px; display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: center;}
nav a {color: #1a5fb4; text-decoration: none;} nav a:hover {text-decoration: underline;}
h1 {font-size: 1.9rem; margin: 18px 0 4px;} h2 {margin: 34px 0 6px; border-top: 1px solid #e6e8ee; padding-top: 18px;}
.gray {color: #5f6270;} .caption {color: #6b6f80; font-size: 0.92rem;}
.source {font-size: 1.25rem; font-weight: 600;} .translation {font-size: 1.6rem; font-weight: 600;}
.controls {display: flex; flex-wrap: wrap; gap: 8px 18px; align-items: end; margin: 10px 0;}
label {font-size: 0.9rem; display: flex; flex-direction: column; gap: 2px;}
label.inline {flex-direction: row; align-items: center; gap: 6px;}
select, input[type=range] {font-size: 1rem; padding: 3px 4px; min-width: 90px;}
select.kind {min-width: 320px;}
.two {display: grid; grid-template-columns: 1fr 1fr; gap: 12px;}
.chart {width: 100%; min-height: 120px;}
table.steps {border-collapse: collapse; font-size: 0.92rem;}
table.steps th, table.steps td {border-bottom: 1px solid #e6e8ee; padding: 3px 10px; text-align: left;}
footer {margin-top: 40px; font-size: 0.85rem; color: #6b6f80;}
"""

BODY = """
<nav aria-label="lesson">
  <label class="inline">Sentence <select id="sentence"></select></label>
  <a href="#attention">Attention</a> <a href="#decoding">Decoding</a> <a href="#embeddings">Embeddings</a>
  <a href="#positional">Positional encoding</a>
</nav>
<main>
<h1>Attention Atlas: a lesson file</h1>
<p class="caption" id="model-facts"></p>
<section id="header" aria-label="the translation">
  <div class="source"><span class="gray" id="src-lang"></span> <span id="source"></span></div>
  <div class="translation"><span class="gray" id="tgt-lang"></span> <span id="translation"></span></div>
  <p class="caption" id="shows"></p>
  <p class="caption" id="unknown"></p>
</section>
<section id="attention" aria-label="Attention">
  <h2>Attention</h2>
  <div class="controls">
    <label>Attention <select id="kind" class="kind"></select></label>
    <label>Layer <select id="layer"></select></label>
    <label>Head <select id="head"></select></label>
  </div>
  <p class="caption" id="explain"></p>
  <div class="chart" id="chart-heads"></div>
  <div class="chart" id="chart-head"></div>
  <h3>Every layer × head</h3>
  <div class="chart" id="chart-grid"></div>
</section>
<section id="decoding" aria-label="Decoding">
  <h2>Decoding, step by step</h2>
  <p class="caption">The decoder writes one token per step. At each step it sees the source sentence (through
    cross-attention) and the prefix written so far, and gives a probability to every token of its vocabulary;
    greedy decoding takes the most probable one.</p>
  <div class="controls">
    <label>Step <input type="range" id="step" min="1" max="1" value="1"></label>
    <label>Layer <select id="dec-layer"></select></label>
    <label>Head <select id="dec-head"></select></label>
  </div>
  <p id="read"></p>
  <div class="two">
    <div><div class="chart" id="chart-cand"></div><p id="chosen"></p></div>
    <div class="chart" id="chart-cross"></div>
  </div>
  <h3>All steps</h3>
  <div id="steps-table"></div>
</section>
<section id="embeddings" aria-label="Embeddings">
  <h2>Embeddings</h2>
  <div class="controls" role="radiogroup" aria-label="Side">
    <label class="inline"><input type="radio" name="side" value="src" checked> <span id="side-src"></span></label>
    <label class="inline"><input type="radio" name="side" value="tgt"> <span id="side-tgt"></span></label>
  </div>
  <p class="caption" id="emb-text"></p>
  <div class="chart" id="chart-stages"></div>
  <div class="chart" id="chart-scaling"></div>
</section>
<section id="positional" aria-label="Positional encoding">
  <h2>Positional encoding</h2>
  <p class="caption" id="pe-words"></p>
  <p class="caption" id="pe-check"></p>
  <div class="chart" id="chart-waves"></div>
  <div class="chart" id="chart-matrix"></div>
  <div class="controls">
    <label>Compare every position with position <input type="range" id="pe-ref" min="0" value="10"></label>
    <span id="pe-ref-value"></span>
  </div>
  <div class="chart" id="chart-similarity"></div>
  <p class="caption">The dot product PE[i]·PE[j] depends only on the distance i − j (a property of the formula, for
    any model).</p>
</section>
<footer id="footer"></footer>
</main>
"""

PAGE_JS = """
const D = JSON.parse(document.getElementById("lesson-data").textContent);
const PACK = D.pack, S = D.sentences, M = D.model, L = D.langs;
const $ = id => document.getElementById(id);
const state = {sentence: 0, kind: "cross", layer: 0, head: 0, step: 1, decLayer: 0, decHead: 0, side: "src", ref: 10};

function config(what) {
  return {displaylogo: false, responsive: true,
          toImageButtonOptions: {format: "png", scale: 3, filename: "atlas_" + M.name + "_lesson_" + what}};
}
function draw(id, name) {
  const fig = figure(name);
  Plotly.react($(id), fig.data, fig.layout, config(name.replace(/\\//g, "_")));
}
function options(select, values, labels, chosen) {
  select.replaceChildren(...values.map((v, i) => {
    const o = document.createElement("option");
    o.value = v; o.textContent = labels[i]; o.selected = String(v) === String(chosen);
    return o;
  }));
}
function range(n) { return Array.from({length: n}, (_, i) => i); }
function sentence() { return S[state.sentence]; }

function drawHeader() {
  const s = sentence();
  $("source").textContent = s.source;
  $("translation").textContent = s.translation || "∅ (empty output)";
  $("shows").textContent = "Every figure below shows: " + s.decoding + " · " + M.name + " · " + s.n_source +
    " source tokens incl. " + s.end + (s.finished ? "" : " · stopped at the length limit before the end token") +
    (s.dropped ? " · " + s.dropped + " tokens beyond the length limit left out" : "");
  $("unknown").textContent = s.unknown.length ? "? Unknown to the model (read as <unk>): " + s.unknown.join(", ") : "";
}
function drawAttention() {
  const s = sentence(), n = s.layers[state.kind];
  state.layer = Math.min(state.layer, n - 1);
  options($("layer"), range(n), range(n).map(i => String(i + 1)), state.layer);
  options($("head"), range(s.heads), range(s.heads).map(i => String(i + 1)), state.head);
  $("explain").textContent = D.texts.explain[state.kind] +
    " Rows: queries; columns: keys; each row's weights sum to 1.";
  const at = "s" + state.sentence + "/";
  draw("chart-heads", at + "heads/" + state.kind + "/" + state.layer);
  draw("chart-head", at + "head/" + state.kind + "/" + state.layer + "/" + state.head);
  draw("chart-grid", at + "grid/" + state.kind);
}
function drawDecoding() {
  const s = sentence(), n = s.steps.length, layers = s.layers.cross;
  state.step = Math.min(Math.max(state.step, 1), n);
  $("step").max = n; $("step").value = state.step;
  options($("dec-layer"), range(layers), range(layers).map(i => String(i + 1)), state.decLayer);
  options($("dec-head"), range(s.heads + 1), range(s.heads + 1).map(h => h ? "head " + h : "mean of heads"),
          state.decHead);
  const step = s.steps[state.step - 1];
  $("read").textContent = "Step " + state.step + " of " + n + ". The decoder has read: " + step.read;
  $("chosen").textContent = "Chosen: " + step.chosen + " (p = " + step.prob + ")" + (step.forced ? " (forced)" : "");
  const at = "s" + state.sentence + "/";
  draw("chart-cand", at + "cand/" + state.step);
  draw("chart-cross", at + "cross/" + state.step + "/" + (state.decLayer + 1) + "/" + state.decHead);
}
function drawEmbeddings() {
  const at = "s" + state.sentence + "/";
  draw("chart-stages", at + "stages/" + state.side);
  draw("chart-scaling", at + "scaling/" + state.side);
}
function drawPositional() {
  const s = sentence();
  $("pe-words").textContent = D.pe_words;
  $("pe-check").textContent = D.pe_check ? D.pe_check :
    "The formula matches the encoding the model added to this sentence's " + s.n_src_positions +
    " source positions to " + s.pe_gap.toExponential(1) + ".";
  $("pe-ref-value").textContent = String(state.ref);
  draw("chart-similarity", "pe/similarity/" + state.ref);
}
function drawSentence() {
  state.decLayer = sentence().layers.cross - 1;  // the Decoding page opens on the last layer
  drawHeader(); drawAttention(); drawDecoding(); drawEmbeddings(); drawPositional();
  $("steps-table").innerHTML = sentence().table;  // pandas wrote it with every cell escaped
}

function start() {
  $("model-facts").textContent = D.facts;
  $("footer").textContent = D.footer;
  $("src-lang").textContent = L.src; $("tgt-lang").textContent = L.tgt;
  $("side-src").textContent = "source (" + L.src_name + ", encoder input)";
  $("side-tgt").textContent = "target (" + L.tgt_name + ", decoder input)";
  $("emb-text").textContent = D.emb_text;
  options($("sentence"), range(S.length), S.map((s, i) => (i + 1) + ". " + s.label), 0);
  options($("kind"), Object.keys(D.texts.kinds), Object.values(D.texts.kinds), state.kind);
  $("pe-ref").max = D.pe_positions - 1;
  $("sentence").onchange = e => { state.sentence = +e.target.value; drawSentence(); };
  $("kind").onchange = e => { state.kind = e.target.value; drawAttention(); };
  $("layer").onchange = e => { state.layer = +e.target.value; drawAttention(); };
  $("head").onchange = e => { state.head = +e.target.value; drawAttention(); };
  $("step").oninput = e => { state.step = +e.target.value; drawDecoding(); };
  $("dec-layer").onchange = e => { state.decLayer = +e.target.value; drawDecoding(); };
  $("dec-head").onchange = e => { state.decHead = +e.target.value; drawDecoding(); };
  for (const r of document.querySelectorAll("input[name=side]"))
    r.onchange = e => { state.side = e.target.value; drawEmbeddings(); };
  $("pe-ref").oninput = e => { state.ref = +e.target.value; drawPositional(); };
  draw("chart-waves", "pe/waves");
  draw("chart-matrix", "pe/matrix");
  drawSentence();
  document.body.dataset.ready = "true";
}
start();
"""


def page_data(page: str) -> dict:
    """The data a lesson page holds (its figures' pack, the sentences' text), read back from the page."""
    found = re.search(r'<script type="application/json" id="lesson-data">(.*?)</script>', page, re.S)
    if not found:
        raise ValueError("this is not a lesson file: it holds no lesson data")
    return json.loads(found.group(1))


def _script_json(value) -> str:
    """JSON for a <script type="application/json"> element: "<" written as \\u003c, so no text in it ends the
    element early (a token "</script>" stays data)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")


def plotly_js_name() -> str:
    """"plotly.js v3.7.0": the version of Plotly's code the page holds (from its header comment)."""
    found = re.search(r"plotly\.js v(\d[\w.-]*)", get_plotlyjs()[:400])
    return f"plotly.js v{found.group(1)}" if found else "plotly.js"


def embedding_words(model: dict) -> str:
    """What happens to a token before layer 1, as this model does it (docs/models.md)."""
    d, positions = model["d_model"], model.get("positions", "sinusoidal")
    words = f"Each token id selects one row of a {table_words(model)} {d}-dimensional table."
    if model.get("scale_embedding", True):
        words += f" The row is multiplied by √d_model = {d ** 0.5:.1f}"
        words += (", so that it is not drowned by the positional encoding (values in −1…1) that is added next."
                  if positions == "sinusoidal" else ".")
    words += {"sinusoidal": " A sine-and-cosine vector of its position is added.",
              "learned": " A learned vector of its position is added.",
              "relative": " No position vector is added: the attention scores get a bias by relative distance."
              }.get(positions, "")
    if model.get("embed_norm"):
        words += " A LayerNorm follows."
    return words + " The result is what enters encoder/decoder layer 1."


def positional_words(model: dict) -> dict:
    """{"pe_words": what the model adds for a position, "pe_check": the check's sentence, "" for the formula's}."""
    offset = int(model.get("pos_offset", 0))
    from_row = f", read from row {offset} on (position p reads row p + {offset})" if offset else ""
    positions = model.get("positions", "sinusoidal")
    if positions == "learned":
        return {"pe_words": "Attention itself ignores word order, so every position gets a learned vector, added to "
                            f"the token's embedding{from_row}.",
                "pe_check": "The similarity below is that of the learned vectors the model added to this sentence."}
    if positions == "relative":
        return {"pe_words": "Attention itself ignores word order. This model adds no vector for a position: each "
                            "head adds a learned bias to its scores, by the distance between query and key.",
                "pe_check": "This model adds no position vector, so there is no table to draw or compare."}
    return {"pe_words": "Attention itself ignores word order, so every position gets a fixed vector of sines and "
                        f"cosines of different wavelengths, added to the token's embedding{from_row}.",
            "pe_check": ""}


def table_words(model: dict) -> str:
    """What the embedding table is, true of this model (as the app's Embeddings page says it)."""
    return "learned" if model.get("trained", True) else "randomly initialised (untrained)"


def facts_line(model: dict, langs: dict) -> str:
    """The model, as the app's Overview states it: name, languages, size and its measured test BLEU."""
    line = (f"{model['name']} · {langs['src_name']} → {langs['tgt_name']} · {model['parameters']:,} parameters · "
            f"d_model {model['d_model']}, {model['n_heads']} heads, {model['n_encoder_layers']} + "
            f"{model['n_decoder_layers']} layers")
    bleu = model.get("test_bleu")
    if not model.get("trained", True):
        line += " · untrained: random weights"
    elif bleu:
        line += f" · BLEU {bleu['greedy']:.2f} on {bleu['split']} (greedy)"
    return line


def page_html(pack: dict, sentences: list[dict], model: dict, langs: dict, texts: dict, made_by: str = "") -> str:
    """The whole page as one string: Plotly's code, the figures and the text inlined; see the module docstring."""
    data = {"pack": pack, "sentences": sentences, "model": {"name": model["name"]}, "langs": langs, "texts": texts,
            "facts": facts_line(model, langs), "pe_positions": len([k for k in pack["names"]
                                                                      if k.startswith("pe/similarity/")]),
            "emb_text": embedding_words(model), **positional_words(model),
            "footer": (f"Made {made_by + ' ' if made_by else ''}by Attention Atlas. This file needs no network and no "
                       f"Python: {plotly_js_name()} and every figure are inside it; hover a chart for its values, and "
                       "its camera button saves it as PNG.")}
    title = html.escape(f"Attention Atlas lesson: {model['name']}, {len(sentences)} sentence"
                        f"{'s' if len(sentences) != 1 else ''}")
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{title}</title>\n'
            f"<style>{CSS}</style>\n</head>\n<body>\n{BODY}\n"
            f'<script type="application/json" id="lesson-data">{_script_json(data)}</script>\n'
            f'<script type="text/javascript">{get_plotlyjs()}</script>\n'
            f"<script>{PACK_JS}{PAGE_JS}</script>\n</body>\n</html>\n")
