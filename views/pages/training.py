"""Training: watch a model learn. The film the trainer recorded, and a toy task trained live.

The film (model/training/film.py) holds, for a fixed set of probe sentences teacher-forced on their references, every
head's attention at log-spaced steps, the greedy translation at each step and the losses; this page only
draws what it recorded. The toy task (model/training/toy.py) trains a fresh 2-layer model in the user's own script run,
so nothing it does touches the shipped model or another session; the result is kept on the server under a
`toy:` key that every other page can open.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from model import service
from model.training import film_file
from views.parts.text import md_escape
from views.parts.widgets import chart, choices, fig_config, kind_layer_head, sections, shown_heads
from views.plumbing import jobs
from views.plumbing.figcache import cached
from views.plumbing.state import Context, ModelKey, keep_toy, public_message, sync_url
from views.plumbing.urlstate import within
from viz.attention import attention_figure, heads_figure
from viz.layout import PAGE_WIDTH_PX
from viz.theme import below_controls
from viz.training import entropy_figure, loss_figure, toy_loss_figure

PLAY_SECONDS = 0.8  # between frames while the film plays
REDRAW_EVERY = 25  # toy steps between redraws of the live loss and cross-attention
KIND_NAMES = {"enc_self": "encoder self-attention", "dec_self": "decoder self-attention", "cross": "cross-attention"}


def render(ctx: Context) -> None:
    if not ctx.present:  # presenter mode: the controls and one part's figures (the film's curves are a part)
        st.subheader("Watch it learn")
    with choices(ctx):
        show = sections(ctx, ["the film"] + (["learning curves"] if ctx.present else []) + ["a toy task"])
    if show("the film") or show("learning curves"):
        _film(ctx, None if not ctx.present else "curves" if show("learning curves") else "heads")
    if show("a toy task"):
        _toy(ctx)


# ----------------------------------------------------------------------------- the film

def film_folder(key: ModelKey) -> Path | None:
    """The checkpoint folder whose film the page shows (None: the key has no folder of its own)."""
    return None if key.toy or key.twin else key.folder()


@st.cache_resource(max_entries=4, show_spinner="Loading the training film…")
def _load(folder: str, mtime_ns: int) -> film_file.Film:
    """The film, read once per file version (the key holds film.json's modification time)."""
    return film_file.load_film(folder)


def below(key: ModelKey) -> str:
    """What this page draws under the header, in words true of this model: a film only where it has one (the
    untrained twin, a toy and a checkpoint trained without one have none)."""
    folder = film_folder(key)
    jpath = folder / film_file.JSON_NAME if folder is not None else None
    if jpath is not None and jpath.is_file():
        try:
            _load(str(folder), jpath.stat().st_mtime_ns)
            return "The film below is teacher-forced on reference translations"
        except film_file.FilmError:
            pass  # the page says what is wrong with it
    return "This model has no training film; the toy task below trains a fresh model of its own"


def _film(ctx: Context, part: str | None = None) -> None:
    """The film; ``part`` (presenter mode) draws only its "heads" or its "curves"."""
    if not ctx.present:
        st.markdown("#### The film of this model's training")
    folder = film_folder(ctx.key)
    if folder is None:
        what = "was never trained" if ctx.key.twin else "was trained live on this page, without a film"
        st.info(f"This model {what}, so it has no film. Choose a trained checkpoint in the sidebar.")
        return
    jpath = folder / film_file.JSON_NAME
    try:
        film = _load(str(folder), jpath.stat().st_mtime_ns if jpath.is_file() else 0)
    except film_file.FilmError as e:
        st.info(f"No training film for this model. {md_escape(public_message(str(e)))}")
        return
    if not ctx.present:
        st.caption("While the model trained, the trainer stopped at log-spaced steps (0, 25, 50, 100, 200, … and every "
                   "epoch's end) and recorded every head's attention on a fixed set of probe sentences, teacher-forced "
                   "on their reference translations (so the axes are the same in every frame), the greedy translation "
                   "of each probe, and the losses. One colour scale, 0 to 1, in every frame.")
    ss = st.session_state
    probes = film.probes
    ss["film_probe"] = within(ss.get("film_probe"), 1, len(probes))
    # Presenter mode: the probe, kind and layer in the header's Choose; the play button and the frame slider stay on
    # the page, for the lecturer to play the film on stage.
    cfg = ctx.cfg
    n_layers = film.meta.get("n_layers", {})
    with choices(ctx):
        st.selectbox("Probe sentence", list(range(1, len(probes) + 1)), key="film_probe", persist_state="session",
                     label_visibility="collapsed" if ctx.present else "visible",
                     format_func=lambda n: f"{n} · {probes[n - 1]['src']}")
        kind, layer, _ = kind_layer_head(n_layers.get("enc_self", cfg.n_encoder_layers),
                                         n_layers.get("dec_self", cfg.n_decoder_layers), cfg.n_heads, with_head=False,
                                         compact=ctx.present)
    _frames(ctx, film, ss["film_probe"] - 1, kind, layer, part)


def _frames(ctx: Context, film: film_file.Film, probe: int, kind: str, layer: int, part: str | None = None,
            where=st) -> None:
    """The frame slider, the play button and everything that changes with the frame."""
    ss = st.session_state
    n = len(film)
    if not 1 <= int(ss.get("film_frame", 0)) <= n:
        ss["film_frame"] = n  # 0 in the URL: the last frame
    playing = bool(ss.get("film_playing", False))
    # Play/Pause belongs to the page, not to the frame fragment: pressing it reruns the page, which builds the
    # fragment again with (or without) its timer.
    where.button("Pause" if playing else "Play" if ctx.present else "Play the film", key="film_play",
                 on_click=_toggle_play, args=(n,), icon=":material/pause:" if playing else ":material/play_arrow:")

    @st.fragment(run_every=PLAY_SECONDS if playing else None)
    def frame_part() -> None:
        if ss.get("film_playing") and ss.get("_film_tick_ok"):
            if ss["film_frame"] >= n:
                ss["film_playing"] = False  # played to the end: stop, and redraw the button as "Play"
                st.rerun(scope="app")
            ss["film_frame"] += 1
        ss["_film_tick_ok"] = True  # the first run after pressing Play shows the frame it starts from
        steps = film.steps
        frame = st.select_slider("Frame (training step)", options=list(range(1, n + 1)), key="film_frame",
                                 persist_state="session", label_visibility="collapsed" if ctx.present else "visible",
                                 format_func=lambda f: f"step {int(steps[f - 1]):,}")
        _frame(ctx, film, probe, kind, layer, frame - 1, part)
        if not ss.get("film_playing"):
            sync_url()  # a frame chosen by hand is in the link, and Back returns to the one before (not every tick)

    frame_part()


def _toggle_play(n: int) -> None:
    ss = st.session_state
    ss["film_playing"] = not ss.get("film_playing", False)
    ss["_film_tick_ok"] = False
    if ss["film_playing"] and int(ss.get("film_frame", 1)) >= n:
        ss["film_frame"] = 1  # at the end, Play starts again from the first frame


def _frame(ctx: Context, film: film_file.Film, probe: int, kind: str, layer: int, f: int,
           part: str | None = None) -> None:
    step = int(film.steps[f])
    p = film.probes[probe]
    epoch = film.epochs[f]
    frame_text = (f"**Step {step:,}**" + (f" (end of epoch {epoch})" if epoch is not None else "")
                  + f" · translation: **{md_escape(p['translations'][f]) or '∅ (empty)'}**  \n"
                    f":gray[reference: {md_escape(p['ref'])}]")
    if not ctx.present:  # presenter mode: below the figures
        st.markdown(frame_text)
    q_tokens, k_tokens = film.axes(probe, kind)
    probs = film.attn[probe][kind][f, layer].astype(np.float32)  # (h, i, j)
    entropy = film_file.mean_entropy(film, kind)  # (F, L) over probes, heads and queries
    # Presenter mode: below the play button and the frame slider.
    with below_controls(rows=2):
        if part in (None, "heads"):
            heads = shown_heads(ctx, probs.shape[0], q_tokens, k_tokens)
            chart(st, cached(heads_figure, probs, q_tokens, k_tokens, kind, layer, width_px=PAGE_WIDTH_PX,
                             heads=heads),
                  width="stretch", config=fig_config(ctx, f"film_probe{probe + 1}_{kind}_L{layer + 1}_step{step}"),
                  key="film_heads")
        if part in (None, "curves"):
            left, right = st.columns(2)
            with left:
                chart(st, cached(loss_figure, film.steps, film.train_loss, film.val_loss, f,
                                 val_on=str(film.meta.get("val_loss_on") or "")),
                      width="stretch", config=fig_config(ctx, "film_loss"), key="film_loss")
            with right:
                chart(st, cached(entropy_figure, film.steps, entropy, f, kind_name=KIND_NAMES[kind]),
                      width="stretch", config=fig_config(ctx, f"film_entropy_{kind}"), key="film_entropy")
    if ctx.present:
        st.markdown(frame_text)
    st.caption(md_escape(reading(film.steps, entropy, film.val_loss, f, layer, KIND_NAMES[kind])))


def reading(steps: np.ndarray, entropy: np.ndarray, val_loss: np.ndarray, f: int, layer: int, kind_name: str) -> str:
    """One sentence on what changed up to frame f, computed from the film's numbers."""
    e0, ef = float(entropy[0, layer]), float(entropy[f, layer])
    if f == 0:
        return (f"Step 0, before any update: {kind_name} of layer {layer + 1} has a mean entropy of {e0:.2f} nats "
                f"over the probes, and the validation loss is {float(val_loss[0]):.2f}.")
    prev = max(f - 1, 0)
    a, b = round(e0, 2), round(ef, 2)
    move = (f"fell from {a:.2f} to {b:.2f}" if b < a else f"rose from {a:.2f} to {b:.2f}" if b > a
            else f"stayed at {a:.2f}")
    return (f"From step 0 to step {int(steps[f]):,}, the mean entropy of {kind_name} in layer {layer + 1} {move} "
            f"nats (since the previous frame, step {int(steps[prev]):,}: "
            f"{float(entropy[f, layer] - entropy[prev, layer]):+.2f}); the validation loss went from "
            f"{float(val_loss[0]):.2f} to {float(val_loss[f]):.2f}.")


# ----------------------------------------------------------------------------- the toy task

# What each task asks, as a verb phrase for the caption's sentence and a gloss for the task's radio label.
TASK_VERB = {"copy": "copy", "reverse": "reverse", "sort": "sort"}
TASK_TEXT = {"copy": "write the sequence again", "reverse": "write it backwards",
             "sort": "write its digits in increasing order"}


def _either(words: list[str]) -> str:
    """'a', 'a or b', 'a, b or c'."""
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _toy(ctx: Context) -> None:
    ss = st.session_state
    st.markdown("#### A toy task, trained live")
    offered = [t for t in service.TOY_OFFERED if t in service.TOY_TASKS]
    if not ctx.present:
        cfg = service.toy_config()
        st.caption(f"A fresh {cfg.n_encoder_layers}+{cfg.n_decoder_layers}-layer Transformer (d_model {cfg.d_model}, "
                   f"{cfg.n_heads} heads) learns to {_either([TASK_VERB.get(t, t) for t in offered])} "
                   f"random digit sequences ({service.TOY_MIN_LEN} to {service.TOY_MAX_LEN} digits; "
                   f"you choose the task below), "
                   f"{service.TOY_BATCH} sequences per step, "
                   f"for up to {service.TOY_STEPS} steps on one core; the page redraws the loss and the "
                   f"cross-attention of the example “{service.TOY_EXAMPLE}” every {REDRAW_EVERY} steps. "
                   "It is your own model: "
                   "the shipped one is not touched, and nobody else sees it unless you share its link.")
    if ss.get("toy_task") not in offered:
        ss["toy_task"] = offered[0]
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    task = c1.radio("Task", offered, key="toy_task", persist_state="session", horizontal=True,
                    format_func=lambda t: f"{t} ({TASK_TEXT.get(t, t)})")
    go = c2.button("Train", key="toy_train", type="primary", width="stretch")
    live = st.container()
    if go:
        _train(ctx, task, live)
    done = ss.get("toy_done")
    if done and not go:
        _show_done(ctx, done, live)


def _train(ctx: Context, task: str, box) -> None:
    ss = st.session_state
    with jobs.heavy_job_slot() as ok:
        if not ok:
            box.warning(f"The server is already running {jobs.MAX_HEAVY_JOBS} heavy job(s) (a toy run, a head report "
                        "or a BLEU measurement), its limit for everyone at once. Try again in a moment.")
            return
        status = box.empty()
        loss_box, attn_box = box.columns(2)
        loss_slot, attn_slot = loss_box.empty(), attn_box.empty()
        losses: list[tuple[int, float]] = []

        def report(step: int, loss: float, cross: np.ndarray) -> None:
            losses.append((step, loss))
            status.markdown(f"Training **{task}**: step {step} of up to {service.TOY_STEPS}, loss {loss:.3f}")
            # details=False: a slot holds one element, and these charts are replaced at every report
            chart(loss_slot, toy_loss_figure(losses, service.TOY_STEPS), width="stretch",
                             key=f"toy_loss_{step}", details=False)
            chart(attn_slot, _toy_cross(cross, task, step), width="stretch", key=f"toy_cross_{step}", details=False)

        run = service.train_toy(task, callback=report, every=REDRAW_EVERY, target=1.0, threads=1)
    key = keep_toy(task, run.model)
    ss["toy_done"] = {"task": task, "key": key, "steps": run.steps, "seconds": run.seconds,
                      "accuracy": run.accuracy, "losses": run.losses,
                      "cross": run.cross}
    status.empty()
    loss_slot.empty()
    attn_slot.empty()
    _show_done(ctx, ss["toy_done"], box)


def _toy_cross(cross: np.ndarray, task: str, step: int):
    """The example's cross-attention in the last layer, mean of heads: (t, s) from (L, h, t, s)."""
    xs = [c for c in service.TOY_EXAMPLE if not c.isspace()]
    q = ["<bos>"] + service.TOY_TASKS[task](xs)
    k = xs + ["<eos>"]
    return attention_figure(np.asarray(cross)[-1].mean(0), q, k, "cross",
                            title=f"step {step}: cross-attention, last layer, mean of heads",
                            src_lang="digits", tgt_lang=task)


def _show_done(ctx: Context, done: dict, box) -> None:
    acc = done["accuracy"]
    box.success(f"**{done['task']}**: {done['steps']} steps in {done['seconds']:.1f} s; exact outputs on 200 held-out "
                f"sequences: {acc:.0%}.")
    loss_box, attn_box = box.columns(2)
    chart(loss_box, toy_loss_figure(done["losses"], service.TOY_STEPS), width="stretch", key="toy_loss_done")
    chart(attn_box, _toy_cross(done["cross"], done["task"], done["steps"]), width="stretch",
                    key="toy_cross_done")
    box.button("Open it in the views (decode a digit sequence step by step)", key="toy_open", on_click=_open_toy,
               args=(done["key"],))


def _open_toy(key: ModelKey) -> None:
    ss = st.session_state
    ss["ckpt"], ss["text"], ss["view"] = str(key), service.TOY_EXAMPLE, "Decoding"
    ss["prefix"], ss["dec_step"] = (), 1
