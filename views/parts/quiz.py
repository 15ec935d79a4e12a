"""Presenter mode's quiz: the room is asked about a decoding step before the page shows it.

The quiz takes the place of the Decoding page's "this step" part (URL `quiz`: `next` or `looks`; `focus=quiz`): the
step's two charts wait until "Reveal" (URL `reveal`), which shows the model's answer with its probability or weight,
then the same charts "this step" draws. Until then the page's header shows the translation only up to the prefix the
step read (views/parts/header.py). The questions come from the trace (`viz.quiz`); the options' order from
`quiz_seed`, so a prepared link shows every projector and every student the same question.

Only in presenter mode: outside it the page shows all its parts at once, and the step's charts, its attribution and
the table of all steps would give the answer away beside the question.
"""
from __future__ import annotations

import streamlit as st

from views.parts import poll
from views.parts.reading import forced_by
from views.parts.text import md_escape
from views.plumbing import urlstate
from views.plumbing.state import Context
from viz.quiz import Question, looks_at, next_word
from viz.text import fmt_prob

ASK = {"off": "no quiz", "next": "quiz: next word", "looks": "quiz: where it looks"}
# What the answer takes above the step's charts, at presenter mode's type: a line of text (and the gap above it);
# about this many characters fill a line at 1280 px. The charts get the rest of the screen.
LINE_PX, GAP_PX, LINE_CHARS = 34, 13, 95


def parts(ctx: Context, names: list[str]) -> list[str]:
    """The Decoding page's parts with the quiz in the place of "this step" while a question is set (presenter mode).

    It takes that place rather than a seventh place: the six parts fill the row at 1280 px, and a second row would
    push every part's charts off a 720 px screen. A link with `focus=quiz` and no question asks the next word."""
    ss = st.session_state
    if not ctx.present:
        return names
    if ss.get("focus") == "quiz" and ss.get("quiz", "off") == "off":
        ss["quiz"] = "next"
    return ["quiz" if n == "this step" and ss.get("quiz", "off") != "off" else n for n in names]


def _switched() -> None:
    """Another question (or none): its answer starts hidden, and the page's part follows the choice."""
    ss = st.session_state
    ss["reveal"] = False
    ss["focus"] = "this step" if ss["quiz"] == "off" else "quiz"


def selector(where) -> str:
    """The question asked (URL `quiz`), in the step's row of controls."""
    return where.selectbox("Quiz", list(ASK), key="quiz", format_func=ASK.get, on_change=_switched,
                           persist_state="session", label_visibility="collapsed",
                           help="Ask the room before the step is shown: which word comes next (the candidates "
                                "shuffled), or where the step will look in the source. Reveal shows the answer.")


def _noun(name: str) -> str:
    """What one token of a side is called: "German" -> "German word"; a toy's "input digits" -> "input digit"."""
    return name[:-1] if name.endswith("digits") else f"{name} word"


def question(ctx: Context, step, step_no: int, candidates: tuple, layer: int, head: int) -> Question:
    """Step `step_no`'s question from the trace: its candidates, or its cross-attention at `layer` (1-based) and
    `head` (1-based; 0: the mean of the heads)."""
    ss = st.session_state
    if ss["quiz"] == "next":
        labels, probs, chosen = candidates
        return next_word(labels, probs, chosen, int(ss.get("quiz_seed", 1)), step_no)
    cross = step.cross[layer - 1]  # (h, s) this step's query over the source
    return looks_at(cross.mean(0) if head == 0 else cross[head - 1], ctx.result.source.axis_tokens)


def _hide_if_another_question(ctx: Context, step_no: int) -> None:
    """An answer shown belongs to its question: when the step, sentence, decoding, question or order changed since
    the last run (the slider moved, a new sentence), it is hidden again. Not when Back or Forward brought the
    state: then the URL says whether it shows."""
    ss = st.session_state
    asked = (ctx.key, ctx.text, ctx.shows, ss["quiz"], step_no, ss.get("quiz_seed", 1))
    if ss.get("_quiz_asked") not in (None, asked) and not urlstate.from_history():
        ss["reveal"] = False
    ss["_quiz_asked"] = asked


def _reveal(pick_key: str, q: Question) -> None:
    ss = st.session_state
    pick = ss.get(pick_key)
    ss["_quiz_said"] = (pick_key, q.options[pick] if pick is not None else None)  # the radio is gone once revealed
    ss["reveal"] = True
    poll.reveal(q)  # every phone in the room shows the answer too


def _shuffle() -> None:
    ss = st.session_state
    ss["quiz_seed"] = (int(ss.get("quiz_seed", 1)) + 1) % 10_000
    ss["reveal"] = False


def ask(ctx: Context, where, step, step_no: int, candidates: tuple, layer: int, head: int) -> int | None:
    """Draw the question set in the row's `where` column: None while the room is asked (the charts wait), else the
    height the answer takes above the step's charts (0: no quiz). Moving the step, or Back, asks again."""
    ss = st.session_state
    selector(where)
    if ss.get("quiz", "off") == "off":
        return 0
    _hide_if_another_question(ctx, step_no)
    q = question(ctx, step, step_no, candidates, layer, head)
    pick_key = f"quiz_pick_{q.kind}_{step_no}_{ss.get('quiz_seed', 1)}"
    if ss.get("reveal"):  # text only, so the charts keep the screen; the slider above says the step
        said = ss.get("_quiz_said")
        text = answer_text(ctx, step, step_no, q, layer, head, said[1] if said and said[0] == pick_key else None)
        text += poll.room_line(q)
        st.markdown(text)
        return GAP_PX + LINE_PX * -(-len(text.replace("\\", "").replace("**", "")) // LINE_CHARS)
    asked = (f"Which {_noun(ctx.langs['tgt_name'])} comes next?" if q.kind == "next" else
             f"Which {_noun(ctx.langs['src_name'])} will this step look at most?")
    st.markdown(f"**Step {step_no} of {len(ctx.result.steps)}: {md_escape(asked)}** The decoder has read "
                f"**{md_escape(' '.join(step.prefix_tokens))}**")
    code, failed = poll.live_room()
    # The last column holds "Let the room vote" whole at presenter mode's type (about 230 px at 1280 px).
    row = st.columns([5.5, 1, 1, 2] if q.kind == "next" else [6.5, 1, 2], vertical_alignment="center")
    row[0].radio("The room's guess", list(range(len(q.options))), format_func=lambda i: md_escape(q.options[i]),
                 index=None, horizontal=True, key=pick_key, label_visibility="collapsed")
    if q.kind == "next":
        row[1].button("Shuffle", on_click=_shuffle, key="quiz_shuffle", type="tertiary",
                      help="Another order of the options (URL quiz_seed)")
    row[-2].button("Reveal", on_click=_reveal, args=(pick_key, q), key="quiz_reveal", type="primary")
    ss["_quiz_secret"] = step_no  # the header, drawn after the page, shows the translation up to this step only
    if code is None:
        poll.offer(row[-1], failed)
    else:  # the room is asked the same question, in the same order; its answers take the charts' place
        poll.close_button(row[-1])
        poll.ask_room(code, q, asked, f"The decoder has read: {' '.join(step.prefix_tokens)}")
    return None


def room_beside(ctx: Context, step, step_no: int, candidates: tuple, layer: int, head: int, height: int | None):
    """After Reveal, with a room that answered: (the room-and-model figure, the side it takes: "left" in the place
    of the candidates when the question was where the step looks, else "right" in the place of the
    cross-attention), so the model's own chart for the question stays beside it. None otherwise."""
    ss = st.session_state
    if not ss.get("reveal") or ss.get("quiz", "off") == "off" or not poll.owner():
        return None
    q = question(ctx, step, step_no, candidates, layer, head)
    fig = poll.room_and_model(q, height)
    return None if fig is None else (fig, "left" if q.kind == "looks" else "right")


def answer_text(ctx: Context, step, step_no: int, q: Question, layer: int, head: int, said: str | None) -> str:
    """The reveal in words (Markdown, tokens escaped): the answer and its number as the chart writes it, how it
    was chosen, whether the room said it, and a near tie."""
    answer = md_escape(q.options[q.answer])
    if q.kind == "next":
        text = f"**Next: {answer}** (p = {fmt_prob(q.value)})"
        if ctx.mode == "beam" or step.forced:
            how = "beam search's choice" if ctx.mode == "beam" else forced_by(ctx, step_no, step)
            text += (f", {how}; the most probable was **{md_escape(q.options[q.top])}** "
                     f"({fmt_prob(q.values[q.top])})." if q.top != q.answer else f", {how}.")
        else:
            text += f", the most probable of {len(q.options)} candidates."
    else:
        heads = f"mean of {step.cross.shape[1]} heads" if head == 0 else f"head {head}"
        text = f"**Looked at most: {answer}** (weight {fmt_prob(q.value)}; layer {layer}, {heads})."
    if said is not None:
        text += f" The room said {md_escape(said)}: " + ("right." if said == q.options[q.answer] else "not this.")
    tie = q.tie_sentence()
    return text + (f" {md_escape(tie)}" if tie else "")
