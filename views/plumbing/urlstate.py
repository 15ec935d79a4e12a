"""Everything a user chose lives in the URL, and Back/Forward move through it.

Each choice is one query parameter (parameters at their default are left out, so links stay short).
A run adopts the URL when the session starts and when the browser's Back or Forward brought it
(Streamlit marks those runs as history navigation); every other run writes the state into the URL,
which adds one history entry per change. A link's value that is not valid (unreadable, out of its range, a layer or
head the model lacks) is replaced on adopting it, and the header says which (REPLACED), so that the URL written back
holds only values the pages use.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from model import records
from views.plumbing.streamlit_internals import history_navigation

KINDS_ORDER = records.KINDS


@dataclass(frozen=True)
class Param:
    default: object
    parse: Callable[[str], object]  # raises ValueError on a bad value (then the default is used)
    dump: Callable[[object], str] = str
    needed: Callable[[dict], bool] | None = None  # written to the URL only when this holds for the state
    default_text: str = ""  # the default in words where its value says too little (the schema's table)


def _accepts(parse: Callable, text: str) -> Callable:
    parse.accepts = text  # what the schema's table says a parser takes (accepts())
    return parse


def _choice(options) -> Callable[[str], str]:
    def parse(s: str) -> str:
        if s not in options:
            raise ValueError(s)
        return s
    return _accepts(parse, r" \| ".join(f"`{o}`" for o in options))


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    parse = _accepts(lambda s: min(max(int(s), lo), hi), f"an integer, brought within {lo}–{hi}")
    parse.clamps = True  # a number it had to bring within lo..hi was not valid: _from_url says so
    return parse


def within(value, lo: int, hi: int, default: int | None = None) -> int:
    """A layer, head or step choice (None or "" when not made: `default`, else `lo`) kept within lo..hi: the one
    clamp every page applies to what the URL or an earlier page left."""
    value = int(value) if value not in (None, "") else (lo if default is None else default)
    return min(max(value, lo), hi)


LAST = 64  # a layer number past any model's: the last layer (within() brings it down)


def _bool(s: str) -> bool:
    if s.lower() in ("1", "true", "on", "yes"):
        return True
    if s.lower() in ("0", "false", "off", "no"):
        return False
    raise ValueError(s)


def _dump_bool(v: object) -> str:
    return "1" if v else "0"


def accepts(p: Param) -> str:
    """What a parameter's parser takes, in words (the URL schema's table, docs/url-parameters.md)."""
    named = {str: "text", _bool: "`1` or `0`", parse_heads: "heads `kind-layer-head`, comma-separated",
             parse_tokens: "tokens, space-separated", parse_ints: "integers, comma-separated",
             parse_note: "one line of text, cut at 200 characters"}
    return getattr(p.parse, "accepts", None) or named.get(p.parse, p.parse.__name__)


def schema_rows(schema: dict[str, Param]) -> list[str]:
    """The schema as Markdown table rows: parameter | default (as the URL writes it) | accepted values."""
    def default(p: Param) -> str:
        dumped = "" if p.default is None else p.dump(p.default)
        return " ".join(filter(None, [f"`{dumped}`" if dumped else "", p.default_text])) or "(empty)"
    return [f"| `{key}` | {default(p)} | {accepts(p)} |" for key, p in schema.items()]


def parse_heads(s: str) -> tuple[tuple[str, int, int], ...]:
    """'cross-2-3,enc_self-1-1' (1-based layer and head) -> sorted ((kind, layer0, head0), ...)."""
    out = set()
    for part in filter(None, s.split(",")):
        kind, layer, head = part.rsplit("-", 2)
        if kind not in KINDS_ORDER or int(layer) < 1 or int(head) < 1:
            raise ValueError(part)
        out.add((kind, int(layer) - 1, int(head) - 1))
    return tuple(sorted(out, key=lambda x: (KINDS_ORDER.index(x[0]), x[1], x[2])))


def dump_heads(heads) -> str:
    return ",".join(f"{k}-{l + 1}-{h + 1}" for k, l, h in heads)


def parse_tokens(s: str) -> tuple[str, ...]:
    """A forced prefix: tokens separated by single spaces (vocabulary tokens hold no spaces)."""
    return tuple(t for t in s.split(" ") if t)


def dump_tokens(tokens) -> str:
    return " ".join(tokens)


def parse_ints(s: str) -> tuple[int, ...]:
    return tuple(sorted({int(x) for x in s.split(",") if x.strip()}))


def dump_ints(v) -> str:
    return ",".join(str(x) for x in v)


def parse_owner_key(s: str) -> str:
    """A live poll's presenter key: as views/rooms/codes.py makes them, else refused (never passed to the store)."""
    from views.rooms.codes import valid_owner_key

    if not valid_owner_key(s):
        raise ValueError(s)
    return s


parse_owner_key.accepts = "a room's presenter key (written by \"Let the room vote\")"

NOTE_CHARS = 200  # a lecturer's note is a line on the projector, not a text


def parse_note(s: str) -> str:
    """A lecturer's note: one line (runs of spaces and line breaks become one space), at most NOTE_CHARS long."""
    return " ".join(s.split())[:NOTE_CHARS]


def params(examples_default: str, views: list[str], kinds, max_steps: int, compare=("off",),
           second_text: str = "") -> dict[str, Param]:
    """The app's URL schema: parameter -> (default, parser, writer), in the order of its table."""
    return (_general_params(examples_default, views, max_steps, compare, second_text)
            | _page_params(kinds, max_steps) | _more_page_params())


def _general_params(examples_default: str, views: list[str], max_steps: int, compare,
                    second_text: str) -> dict[str, Param]:
    """The sentence, the view, the model and its decoding, presenter mode, side by side."""
    return {
        "text": Param(examples_default, str),
        "view": Param("Overview", _choice(views)),
        "ckpt": Param(None, str, default_text="the server's default model"),  # ATLAS_DEFAULT_MODEL
        # A many-to-many model's languages (NLLB, M2M100, mBART-50); None: the ones its import chose
        "src_lang": Param(None, str, default_text="the model's source language"),
        "tgt_lang": Param(None, str, default_text="the model's target language"),
        "decoding": Param("greedy", _choice(("greedy", "beam"))),
        "beam": Param(5, _int_in(2, 10)),
        "max_len": Param(0, _int_in(0, max_steps), default_text="(automatic)"),
        "fig_format": Param("png", _choice(("png", "svg"))),  # what a figure's camera button saves
        # Presenter mode: large type, one thing at a time; `focus` is the page's section shown
        "present": Param(False, _bool, _dump_bool),
        "contrast": Param(False, _bool, _dump_bool),  # high-contrast colour scales
        "focus": Param("", str),
        "panels": Param(1, _int_in(1, 64)),  # presenter mode: which of a figure's panels (widgets.panel_group)
        # Side by side: what is compared, and side B's sentence or model
        "compare": Param("off", _choice(compare)),
        "text2": Param(second_text, str, needed=lambda state: state.get("compare") == "sentence"),
        # ckpt2 None: the untrained twin of `ckpt` (or the trained model of a twin)
        "ckpt2": Param(None, str, needed=lambda state: state.get("compare") == "model",
                       default_text="the untrained twin of `ckpt`"),
    }


def _page_params(kinds, max_steps: int) -> dict[str, Param]:
    """Attention, Inside one head, Masks, Decoding, What if, Alignment."""
    layer = _int_in(1, 64)
    return {
        # Attention, Inside one head
        "kind": Param("cross", _choice(kinds)),
        "layer": Param(1, layer),
        "head": Param(1, layer),
        "rescale": Param(False, _bool, _dump_bool),
        "carry": Param("weights", _choice(("weights", "norms", "alti"))),  # Attention: weights, value norms, ALTI+
        "off": Param((), parse_heads, dump_heads),  # switched-off heads (ablation)
        # Masks
        "pad_on": Param(True, _bool, _dump_bool),
        "pad_layer": Param(1, layer),
        "pad_head": Param(1, layer),
        "causal_layer": Param(1, layer),
        "causal_head": Param(1, layer),
        # Decoding
        "prefix": Param((), parse_tokens, dump_tokens),  # tokens the user forced
        "dec_step": Param(1, _int_in(1, max_steps + 1)),
        "dec_layer": Param(LAST, _int_in(1, LAST), default_text="(the last layer)"),  # 0 in an older link: the same
        "dec_head": Param(0, _int_in(0, 64), default_text="(the mean of the heads)"),
        "dec_beam": Param(False, _bool, _dump_bool),  # run beam search beside the greedy output
        "dec_lens": Param(False, _bool, _dump_bool),  # the logit lens at the chosen step
        "dec_why": Param(False, _bool, _dump_bool),  # why A and not B at the chosen step
        # What if: sentence B of the minimal pair ("": a copy of A that follows A; a B equal to A is that copy,
        # left out), the token the grids measure (0: the whole translation; n: output token n); Decoding's "why A
        # and not B" ("": the page's default pair)
        "pair": Param("", str, needed=lambda state: (state.get("pair") or "").strip()
                      != (state.get("text") or "").strip()),
        "lab_token": Param(0, _int_in(0, max_steps + 1), default_text="(the whole translation)"),
        "lab_patch": Param(False, _bool, _dump_bool),  # What if: run activation patching
        "lab_knockout": Param(False, _bool, _dump_bool),  # What if: run head knockout on a large model
        "why_a": Param("", str),
        "why_b": Param("", str),
        # Alignment (docs/contributions.md): the measure, decoder layer ("auto": two thirds of the depth, "mean", or
        # 1-based), head ("mean" or 1-based), the shifted reading, the annotated pair shown; your sentence's reference
        # and gold links
        "align_method": Param("alti", _choice(("attention", "value-norm", "alti"))),
        "align_layer": Param("auto", str),
        "align_head": Param("mean", str),
        "align_shift": Param(False, _bool, _dump_bool),
        "align_pair": Param(1, _int_in(1, 100)),
        "align_ref": Param("", str),  # your sentence's reference translation ("": the model's own)
        "align_gold": Param("", str),  # its gold links, talp
    }


def _more_page_params() -> dict[str, Param]:
    """Embeddings, Positional encoding, Heads, Training; presenter mode's quiz, live poll and note."""
    return {
        # Embeddings, Positional encoding
        "emb_side": Param("src", _choice(("src", "tgt"))),
        "emb_alone": Param(False, _bool, _dump_bool),  # the token embeddings' own heatmap
        "pe_positions": Param(50, _int_in(10, 256)),
        "pe_dims": Param((0, 1, 4, 5, 16, 17, 64, 65), parse_ints, dump_ints),
        "pe_ref": Param(10, _int_in(0, 255)),
        "pe_key": Param(0, _int_in(0, 255)),  # rotary positions: the key whose score with position pe_ref is drawn
        # Heads (the head report; the chosen head is kind/layer/head, shared with Attention)
        # the grid's measure (default: the measured effect of switching a head off; importance where a report has
        # no ablation), its values as measured or normalised per layer, and the order the pruning curve shows
        "heads_measure": Param("ablation_loss_increase", str),
        "heads_scale": Param("raw", _choice(("raw", "layer"))),
        "heads_prune_order": Param("loss_increase", _choice(("loss_increase", "importance"))),
        "heads_sent": Param(1, _int_in(1, 64)),
        # Training: the film's probe sentence and frame (1-based), the toy task
        "film_probe": Param(1, _int_in(1, 64)),
        "film_frame": Param(0, _int_in(0, 10_000), default_text="(the last frame)"),
        "toy_task": Param("copy", _choice(("copy", "reverse", "sort"))),
        # Presenter mode's quiz on the Decoding page (views/parts/quiz.py): the question asked before the step is shown,
        # the seed of the options' order, whether the answer is shown; the lecturer's note shown on every view
        "quiz": Param("off", _choice(("off", "next", "looks"))),
        "quiz_seed": Param(1, _int_in(0, 9999)),
        "reveal": Param(False, _bool, _dump_bool, needed=lambda state: state.get("quiz", "off") != "off"),
        # the quiz's live poll (views/parts/poll.py): the presenter's secret key of the room; students join by its
        # code, `?room=CODE`, on a page of their own (views/pages/room.py)
        "poll": Param("", parse_owner_key),
        "note": Param("", parse_note),
    }


REPLACED = "_url_replaced"  # session key: {parameter: the link's text} of the values the link gave that were not valid


def _from_url(schema: dict[str, Param]) -> tuple[dict[str, object], dict[str, str]]:
    """The URL's values (the default where one cannot be read, a number brought within its range), and the link's
    text of each value that was not valid as it stood."""
    values, replaced = {}, {}
    for key, p in schema.items():
        value = p.default
        if key in st.query_params:
            text = st.query_params[key]
            try:
                value = p.parse(text)
                if getattr(p.parse, "clamps", False) and value != int(text):
                    replaced[key] = text
            except (ValueError, TypeError):
                value = p.default
                replaced[key] = text
        values[key] = value
    return values, replaced


def fit_to_model(n_enc: int, n_dec: int, n_heads: int) -> None:
    """On the run that adopted a link: its layers, heads and switched-off heads brought within the loaded model's,
    as the pages' selectors bring them (widgets.kind_layer_head, the Decoding page), so that a page without those
    selectors does not leave e.g. `layer=64` in the URL. Each value changed is noted as not valid (REPLACED)."""
    ss = st.session_state
    fits = {"layer": (1, n_enc if ss.get("kind") == "enc_self" else n_dec), "head": (1, n_heads),
            "pad_layer": (1, n_enc), "pad_head": (1, n_heads), "causal_layer": (1, n_dec),
            "causal_head": (1, n_heads), "dec_head": (0, n_heads)}
    if ss.get("dec_layer") != LAST:  # LAST: the last layer, whatever the model
        fits["dec_layer"] = (1, n_dec)
    changed = {}
    for key, (lo, hi) in fits.items():
        if key in ss and ss[key] != within(ss[key], lo, hi):
            changed[key] = within(ss[key], lo, hi)
    layers = {"enc_self": n_enc, "dec_self": n_dec, "cross": n_dec}
    off = tuple(ss.get("off", ()))
    kept = tuple(h for h in off if h[1] < layers[h[0]] and h[2] < n_heads)
    if kept != off:
        changed["off"] = kept
    for key, value in changed.items():
        ss.setdefault(REPLACED, {}).setdefault(key, st.query_params.get(key, ""))
        ss[key] = value


def replaced_values(schema: dict[str, Param]) -> list[tuple[str, str, str]]:
    """(parameter, the link's text, the value used now, in words) of each value of the link that was not valid; said
    once: the list is emptied."""
    ss = st.session_state
    out = []
    for key, text in ss.pop(REPLACED, {}).items():
        p, value = schema[key], ss.get(key)
        if value == p.default and p.default_text:
            now = p.default_text.strip("()")
        else:
            now = p.dump(tuple(value) if isinstance(value, list) else value) if value is not None else ""
        out.append((key, text, now or "none"))
    return out


def describe_replaced(replaced: list[tuple[str, str, str]]) -> str:
    """The header's line on a link's values that were not valid ("" when all were): plain text, to be escaped."""
    if not replaced:
        return ""
    cut = [(k, text if len(text) <= 40 else text[:39] + "…", now) for k, text, now in replaced]
    return "Not valid in this link, so replaced: " + ", ".join(f"{k} “{t}” (now {now})" for k, t, now in cut) + "."


def from_history() -> bool:
    """True when the browser's Back or Forward button started this run (the state came from the URL)."""
    return bool(history_navigation())


# Widgets whose value a reconnecting browser sends with the run it asks for (the sentence just typed): on a session's
# first run the link's value is only their starting value (`first_value`), so what the browser sent wins over it.
FROM_BROWSER = ("text",)
FIRST = "_atlas_first_"  # + key: a plain session-state key holding that starting value until the widget reads it


def adopt_url_if_needed(schema: dict[str, Param], fixups: Callable[[dict], None]) -> bool:
    """Load the state from the URL on a session's first run and on Back/Forward; returns True if it did.

    Every widget of the schema keeps its value by itself (`persist_state="session"`) when a run does not draw it
    (another page, a part presenter mode hides, a fragment run): the value lives in one place, the widget's key.
    A session's first run may be a reconnect to another server process (one stopped, the proxy sent the page to
    the next) carrying a sentence the user has just typed: FROM_BROWSER widgets then start from the link's value
    without overriding what the browser sent.
    """
    ss = st.session_state
    written = ss.get("_url_written")
    url_now = {k: st.query_params[k] for k in st.query_params}
    history = history_navigation()
    first = "_initialised" not in ss
    adopt = first or bool(history)
    if history is None and written is not None and url_now != written:
        adopt = True  # a Streamlit without the history flag: the URL changed under us
    if adopt:
        ss["_initialised"] = True
        values, ss[REPLACED] = _from_url(schema)
        fixups(values)
        for k, v in values.items():
            if first and not history and k in FROM_BROWSER:
                ss[FIRST + k] = v
            else:
                ss[k] = v
        ss["_url_written"] = url_now
        return True
    return False


def first_value(key: str, default=""):
    """The starting value of a FROM_BROWSER widget on a session's first run (its link's value), else `default`: pass
    it as the widget's `value`, which Streamlit uses only when the browser sent none."""
    return st.session_state.pop(FIRST + key, default)


ALWAYS = ("text", "view")  # written even at their defaults: a link always says what it shows


def write_url(schema: dict[str, Param]) -> None:
    """The current state into the URL (one history entry when it changed); other defaults are left out."""
    ss = st.session_state
    wanted = {}
    for key, p in schema.items():
        if key not in ss:
            continue
        value = ss[key]
        if isinstance(value, list):
            value = tuple(value)
        if value is None or (value == p.default and key not in ALWAYS) or (p.needed and not p.needed(ss)):
            continue
        wanted[key] = p.dump(value)
    current = {k: st.query_params[k] for k in st.query_params}
    if current != wanted:
        st.query_params.from_dict(wanted)
    ss["_url_written"] = wanted
