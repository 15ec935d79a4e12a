"""Attention Atlas: watch a small German→English Transformer translate.

    streamlit run app.py

This file is the entry point: sidebar controls, loading, bad-input handling, the translation the
figures show, then the router (views/plumbing/router.py) runs one view. Every figure comes from viz/; every number from
model/.
"""
from __future__ import annotations

from pathlib import Path

# Plotly looks NumPy and pandas up in sys.modules (it never imports them): when a fresh server's first sessions run at
# once, another session's thread can be halfway through importing them, and a chart would meet a half-made module
# ("partially initialized module 'pandas' has no attribute 'Series'"). An import statement instead waits until the
# other thread's import of the same module has finished, so every run imports both first. (Importing pandas after a
# server's first page instead paid 2 % of a cold start and cost first visits: docs/performance.md.)
import numpy  # noqa: F401
import pandas  # noqa: F401
import streamlit as st

from views.plumbing import warmup  # imports only Streamlit and the standard library

# The browser starts on Plotly's code while this run loads the model (views/plumbing/warmup.py).
_warm = warmup.start()

# The app's own imports come after the warm-up, on purpose (pyproject.toml allows E402 in this file). These are the
# ones the sidebar needs, without torch; torch and the pages come after the sidebar (below).
from views.parts.counts import source_count
from views.parts.header import Header
from views.parts.note import field as note_field
from views.parts.note import pin as pin_note
from views.parts.text import md_escape
from views.plumbing.languages import language_name
from views.plumbing.screen import screen_size
from views.plumbing.state import (
    COMPARE,
    COMPARE_VIEWS,
    EXAMPLES,
    MAX_DECODE_STEPS,
    PARAMS,
    ROLE_SWAP,
    Context,
    ModelKey,
    checkpoint_choices,
    checkpoint_label,
    config_languages,
    init_state,
    language_codes,
    languages_of,
    load_model,
    model_facts,
    trace_json,
    trace_sentence,
    traced_decoding,
    wrong_language,
)
from views.plumbing.streamlit_internals import PAGE_CSS, PHONE_CSS, PRESENTER_CSS, style
from views.plumbing.urlstate import describe_replaced, first_value, fit_to_model, replaced_values

# A local icon: an emoji or Material icon would make the browser fetch it from the internet.
st.set_page_config(page_title="Attention Atlas", page_icon=str(Path(__file__).parent / "docs" / "favicon.png"),
                   layout="wide")
st.markdown(style(PAGE_CSS + PHONE_CSS), unsafe_allow_html=True)
if "room" in st.query_params:  # a student's phone in the quiz's live poll: that page alone, no model, no sidebar
    from views.pages import room

    room.render()
    warmup.done(_warm)
    st.stop()
adopted = init_state()  # this run took its state from the URL (a link opened, Back or Forward)
ss = st.session_state
# Presenter mode: the sidebar folds away (its arrow, top left, opens it: sentence and views stay reachable),
# text grows and the page uses the screen's width.
# Elsewhere "auto": open on a wide screen, folded on a phone's (where it would cover the whole page).
st.set_page_config(initial_sidebar_state="collapsed" if ss["present"] else "auto")
if ss["present"]:
    st.markdown(style(PRESENTER_CSS), unsafe_allow_html=True)
# the window's size: presenter figures fill its height, a phone's figures are built for its width
screen = screen_size(st.sidebar, every=ss["present"])


def _stop() -> None:
    """End the run before the page (after the router's import, below): the list of views is still drawn, so another
    view can be chosen."""
    router.draw_views(view_slot)
    router.end(_warm)
    st.stop()


def _new_sentence() -> None:
    """A new sentence or model starts from plain decoding at step 1."""
    ss["prefix"], ss["dec_step"] = (), 1


def _language(code: str) -> str:
    name = language_name(code)
    return code if name == code else f"{name} ({code})"


def _choose_languages(model: ModelKey, codes: list[str]) -> None:
    """A many-to-many model's pair, chosen before this run's key is made from it (so a session's first run and the
    next name the same model): a link's unknown code, none, or a model switched: the model's own choice."""
    mine = config_languages(model) or (codes[0], codes[-1])
    for side, default in zip(("src_lang", "tgt_lang"), mine):
        if ss[side] not in codes:
            ss[side] = default


def _languages(codes: list[str]) -> None:
    """A many-to-many model's pair: the source carries its language's token, decoding starts from the target's."""
    # One above the other: the sidebar is too narrow for two names such as "German (deu_Latn)" side by side.
    st.selectbox("From", codes, key="src_lang", format_func=_language, on_change=_new_sentence,
                 persist_state="session", help="The source language: its token starts the sentence the encoder "
                                               "reads, as the model's tokenizer puts it.")
    st.selectbox("Into", codes, key="tgt_lang", format_func=_language, on_change=_new_sentence,
                 persist_state="session", help="The target language: its token is forced as the first output "
                                               "token, as the model's generate() does.")


def _role_swap() -> None:
    ss["text"], ss["text2"] = ROLE_SWAP
    _new_sentence()


def _use_example() -> None:
    if ss.get("example"):
        ss["text"] = ss["example"]
        _new_sentence()


# The sidebar names the languages of the model that is open, read from its config: on a session's first run it
# goes out before torch is imported and the model loaded, and the browser draws it meanwhile.
key = ModelKey.parse(ss["ckpt"])  # the model the sidebar chose, as the URL names it
codes = language_codes(key)  # a many-to-many model's (NLLB, M2M100, mBART-50), else none
if codes:
    _choose_languages(key, codes)
    key = key.with_pair(ss["src_lang"], ss["tgt_lang"])
langs = languages_of(key)
with st.sidebar:
    st.title("Attention Atlas")
    st.caption(f"A Transformer, {langs['src_name']} → {langs['tgt_name']}, opened up.")
    st.toggle("Presenter mode", key="present", persist_state="session",
              help="For a projector: large type (every figure's text ≥ 20 px), figures as large as the screen, one "
                   "part of a page at a time, this sidebar folded away (the arrow at the top left opens it). "
                   "A link to the page opens in presenter mode too.")
    st.toggle("High-contrast colours", key="contrast", persist_state="session",
              help="Viridis instead of light blues for attention weights and probabilities (small weights stay "
                   "visible on a washed-out projector; readable in greyscale and for colour-blind viewers), "
                   "purple–orange for signed values.")
    note_field()
    choices = checkpoint_choices()
    if ss["ckpt"] not in choices:
        choices.append(ss["ckpt"])  # keep the URL's choice visible, even if it turns out broken
    st.selectbox("Model", choices, key="ckpt", format_func=checkpoint_label, on_change=_new_sentence,
                 persist_state="session",
                 help="trained: the shipped model. untrained: its twin with the same architecture and random "
                      "weights (seed 0). Any other folder under checkpoints/ is listed by name.")
    if codes:
        _languages(codes)
    st.text_area(f"{langs['src_name'].capitalize()} sentence", key="text", value=first_value("text"), height=90,
                 persist_state="session",
                 max_chars=5000,
                 on_change=_new_sentence,
                 help="Anything you type is shown as text, never run as HTML.")
    st.selectbox("…or an example from Multi30k's validation set", [""] + EXAMPLES, key="example",
                 on_change=_use_example, format_func=lambda s: s or "choose an example")
    # The list of views is drawn by the page's fragment (views/plumbing/router.py): choosing a view reruns the page
    # only, so the browser redraws the page, not this sidebar and the header as well.
    view_slot = st.container()
    with st.expander("Side by side", expanded=ss["compare"] != "off"):
        st.radio("Compare", list(COMPARE), key="compare", format_func=COMPARE.get, persist_state="session",
                 help="Draws two traces next to each other on the Attention and Decoding pages, head by head, each "
                      "with its own token axes: two sentences on this model, or this sentence on two models.")
        if ss["compare"] == "sentence":
            st.text_area("Sentence B", key="text2", height=70, max_chars=5000, persist_state="session")
            st.button("Example: the same words, the roles swapped", on_click=_role_swap, key="role_swap")
        elif ss["compare"] == "model":
            st.selectbox("Model B", choices + ([ss["ckpt2"]] if ss["ckpt2"] not in choices else []), key="ckpt2",
                         persist_state="session",
                         format_func=checkpoint_label)
    # Its widgets are drawn only while it is open: a slider lays itself out again on every run, which makes the
    # browser lay out the whole page once more while a new page is being drawn. Their values stay in the session.
    options = st.expander("Decoding options", expanded=ss["decoding"] != "greedy" or bool(ss["max_len"]),
                          key="decoding_options", on_change="rerun")
    if options.open:
        options.radio("Decoding traced in the figures", ["greedy", "beam"], key="decoding", horizontal=True,
                      on_change=_new_sentence, persist_state="session",
                      help="greedy: the most probable token at each step. beam: beam search's best translation, "
                           "traced by running the decoder along its tokens (the attention it computed for that "
                           "hypothesis).")
        options.slider("Beam size", 2, 10, key="beam", disabled=ss["decoding"] != "beam", on_change=_new_sentence,
                       persist_state="session")
        options.slider("Maximum output length (0 = automatic)", 0, MAX_DECODE_STEPS, key="max_len",
                       on_change=_new_sentence, persist_state="session")
    st.radio("Figures save as", ["png", "svg"], key="fig_format", horizontal=True, format_func=str.upper,
             persist_state="session",
             help="The camera button above each figure saves it in this format (PNG at 3× scale), named after the "
                  "model, the sentence, the decoding, the view, kind, layer and head.")

# torch (a second or more on a first run) and the pages' code (the router imports the pages)
from model.analysis.experiments import untrained_summary
from model.io.export import file_stem
from views.parts import compare
from views.parts.lesson import lesson_html
from views.parts.reading import input_notes, output_captions  # how the model read the sentence and what it wrote
from views.plumbing import router

model, error = load_model(key)  # cached; an error is reported below the note
pin_note(ss["present"])  # the lecturer's note, on every view (also when the page stops below)
if error:
    st.error(f"**The model could not be loaded.** {md_escape(error)}")
    st.info("Choose another model in the sidebar; the page works with any valid checkpoint folder.")
    _stop()
facts = model_facts(key)
if adopted:  # the link's layers and heads within this model's, so that the URL holds only values a page can use
    fit_to_model(model.cfg.n_encoder_layers, model.cfg.n_decoder_layers, model.cfg.n_heads)

text = ss["text"] or ""
if not text.strip():
    st.info(f"Type a {langs['src_name']} sentence in the sidebar (or pick an example) to see how the model "
            "translates it.")
    _stop()

greedy = trace_sentence(key, text, ss["max_len"])
source = greedy.source
if not source.tokens:
    st.info("This text has no words the tokenizer can read (only control characters or spaces). "
            f"Type a {langs['src_name']} sentence.")
    _stop()

# The figures show one decoding; the header shows that same translation and says which one it is.
comparing = ss["compare"] != "off" and ss["view"] in COMPARE_VIEWS
traced = traced_decoding(key, text, ss["decoding"], ss["beam"], ss["max_len"],
                         () if comparing else tuple(ss["prefix"]), greedy)  # side by side: both sides decode alike
result, greedy, beam, mode, shows, forced = (traced.result, traced.greedy, traced.beam, traced.mode, traced.shows,
                                             traced.forced)
prefix = tuple(ss["prefix"])

with st.sidebar:
    # Greedy and forced traces describe themselves; a beam traced along its tokens needs saying so.
    st.download_button("Download this trace (JSON)",
                       # runs on click, in another thread: bind the values now, not the session state
                       lambda key=key, n=ss["max_len"], how=shows if mode == "beam" else "":
                       trace_json(key, text, n, forced, how),
                       file_name=file_stem(str(key), text, shows) + ".json", mime="application/json",
                       on_click="ignore", key="download_trace",
                       help="What every figure shows: tokens, ids, all attention as [layer][head][query][key], "
                            "every step's candidates. Same schema as `python -m model.export` (docs/formats.md).")
    st.download_button("Download a lesson file (HTML)",
                       lambda key=key, n=ss["max_len"], how=shows if mode == "beam" else "":
                       lesson_html(key, text, n, forced, how),
                       file_name=file_stem(str(key), text, shows) + ".html", mime="text/html",
                       on_click="ignore", key="download_lesson",
                       help="One HTML page with this sentence's figures: every attention kind × layer × head, the "
                            "decoding steps, the embeddings and the positional encoding. It opens in any browser "
                            "without a network or Python (docs/lesson.md); `python -m model.export … --html` makes "
                            "one for several sentences.")

status = "" if result.finished else f" · stopped at the length limit before `{facts['end_token']}`"
header_slot = st.container()  # the sentence, its translation and the notes on them: drawn with the page (router)
captions = []  # on other decodings than the one shown
if beam is not None and prefix:
    captions.append(f"Beam search (beam {ss['beam']}) gave: {md_escape(beam.text) or '∅'}")
elif beam is not None and beam.text != greedy.text:
    captions.append(f"Greedy decoding would give: {md_escape(greedy.text) or '∅'}")
notes = []  # on the input, and on the link's values that were not valid
link = describe_replaced(replaced_values(PARAMS))
if link:
    notes.append(("warning", md_escape(link)))
if source.truncated:
    cut = " ".join(source.dropped[:12]) + (" …" if len(source.dropped) > 12 else "")
    extra = f" and {source.chars_cut} characters beyond the reading limit" if source.chars_cut else ""
    notes.append(("warning", f"The sentence was cut to its first {len(source.tokens)} tokens (the limit protects a "
                             f"shared server). Left out: {len(source.dropped)} tokens{extra}: {md_escape(cut)}"))
notes += input_notes(source, model.cfg, text)
captions += output_captions(result.tokens, source, model.cfg)
if wrong_language(key, text):
    notes.append(("info", f"To this model's vocabularies the text reads as {langs['tgt_name']} rather than "
                          f"{langs['src_name']}. It translates {langs['src_name']} into {langs['tgt_name']}: type a "
                          f"{langs['src_name']} sentence."))
if key.twin and result.trace is not None:
    notes.append(("info", md_escape(untrained_summary(result.trace.log_probs, [s.chosen_prob for s in result.steps],
                                                      result.finished))))
header = Header(src_tag=f"{'A · ' if comparing else ''}{langs['src']}", tgt_tag=langs["tgt"],
                source=" ".join(source.tokens), output=result.text,
                prefixes=tuple(" ".join(s.prefix_tokens[1:]) for s in result.steps or ()),
                one_line=comparing, captions=tuple(captions),
                notes=tuple(notes))

ctx = Context(key=key, cfg=model.cfg, result=result, text=text, max_len=ss["max_len"], mode=mode,
              shows=shows, facts=facts, present=ss["present"])
if comparing:
    ctx = compare.with_side_b(ctx, ss)

# The router runs the chosen view's page as a fragment, with the list of views and the header into their slots.
# The count is what the encoder reads, the end token included: the length of every source axis on the pages.
counted = source_count(len(source.axis_tokens), source.eos_token)
router.show(ctx, router.Frame(views=view_slot, header_slot=header_slot, header=header, comparing=comparing,
                              facts=f"{counted} · {result.seconds * 1000:.0f} ms{status}", screen=screen))
router.end(_warm)
