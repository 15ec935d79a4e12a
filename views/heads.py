"""Heads: a report card of every head over a corpus, one head up close, and the pruning curve.

Everything on this page comes from the head report that `python -m model.analyze` writes (beside the
checkpoint, or in the cache folder when that folder is read-only); the only thing the page runs the model for
is the heatmap of a corpus sentence (a teacher-forced pass, as the report's own). Without a report the page
offers to compute it in a background job (one per server, see views/jobs.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from model import records, service
from views import jobs
from views.figcache import cached
from views.state import TWIN, Context, checkpoint_dir, is_toy, is_twin, load_model, teacher_forced
from views.text import md_escape, md_table
from views.widgets import chart, fig_config, kind_layer_head, sections
from viz.attention import attention_figure
from viz.heads import (
    GROUP_NAMES,
    MEASURES,
    head_grid_figure,
    head_name,
    head_short,
    offset_pattern_figure,
    pruning_figure,
    sentence_label,
)
from viz.layout import PAGE_WIDTH_PX
from viz.theme import TEXT_LINE_PX, below_controls

KIND_ORDER = records.KINDS
ROLE_NAMES = {"positional": "positional", "previous-token": "previous-token", "next-token": "next-token",
              "aligner": "aligner", "rare-word": "rare-word", "sink": "sink", "diffuse": "diffuse"}


def report_name(key: str) -> str:
    """The cache folder's name of a checkpoint key (the untrained twin gets its own)."""
    return key.removesuffix(TWIN) + ("-untrained" if is_twin(key) else "")


def report_paths(key: str) -> list[Path]:
    """Where a checkpoint's report is looked for, in order: beside the checkpoint (not for the twin, whose
    weights are not in that folder), then the cache folder."""
    folder = checkpoint_dir() / key.removesuffix(TWIN)
    cached_path = service.report_cache_dir(report_name(key)) / service.REPORT_NAME
    return [cached_path] if is_twin(key) else [folder / service.REPORT_NAME, cached_path]


@st.cache_resource(max_entries=8, show_spinner=False)
def _read(path: str, mtime_ns: int) -> dict:
    """The report, parsed once per file version (the key holds its modification time)."""
    return service.load_report(path)


def find_report(key: str) -> tuple[dict | None, Path | None, str | None]:
    """(report, its path, None), or (None, the path that failed, why), or (None, None, None) when there is none."""
    for path in report_paths(key):
        if path.is_file():
            try:
                return _read(str(path), path.stat().st_mtime_ns), path, None
            except service.ReportError as e:
                return None, path, str(e)
    return None, None, None


def grid(report: dict, kind: str, measure: str) -> np.ndarray | None:
    """(L, h) values of a measure (NaN where it has none), or None when it is not defined for the kind."""
    values = report["kinds"][kind]["measures"].get(measure)
    return None if values is None else np.array(values, dtype=np.float64)


def render(ctx: Context) -> None:
    if not ctx.present:  # presenter mode: the controls and one part's figure; the findings go below it
        st.subheader("Heads across a corpus")
        st.caption("What each head does over many sentences, not one: the measures of Voita et al. (2019), "
                   "Clark et al. (2019) and Michel et al. (2019), computed for the model you have open by "
                   "`python -m model.analyze`. Choose a measure to colour the grid; the text in a cell is the head's "
                   "role.")
    if is_toy(ctx.key):
        st.info("Head reports are computed over Multi30k's validation split, which a toy model cannot read. "
                "Choose a translation model in the sidebar.")
        return
    report, path, error = find_report(ctx.key)
    running = jobs.job(_job_name(ctx.key))
    if running is not None and not running.done:
        _progress(ctx.key)
        return
    if running is not None and running.error:
        st.error(f"Computing the report failed: {md_escape(running.error)}")
    if report is None:
        _no_report(ctx, path, error)
        return
    stale = _stale(report, ctx)
    if stale:
        st.warning(f"This report does not match the model you have open ({stale}). Compute it again below.")
        _compute_button(ctx, again=True)
    summary = st.container()  # the findings: in presenter mode below the part
    # One part at a time (URL `focus`), as tabs: each part is one or two figures, so the page opens quickly.
    cfg = ctx.cfg
    head_choice = kind_layer_head(cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.n_heads, compact=ctx.present)
    show = sections(ctx, ["the grid", "one head"] + ["its sentences"] * ctx.present + ["pruning"], always=True)
    with below_controls(rows=2, extra_px=TEXT_LINE_PX):  # presenter: below two lines of caption, boxes and tabs
        if show("the grid"):
            _grid(ctx, report, head_choice)
        if show("one head"):
            _one_head(ctx, report, *head_choice)
        if show("its sentences"):
            _top_sentences(ctx, report, *head_choice)
        if show("pruning"):
            _pruning(ctx, report)
    with st.container() if ctx.present else summary:
        _summary(report, path)
    if not ctx.present and not stale:
        with st.expander("Compute the report again"):
            st.caption("For example after retraining the model. It replaces the file above.")
            _compute_button(ctx, again=True)


def _stale(report: dict, ctx: Context) -> str:
    """Why the report is not this model's ('' when it is)."""
    mine = ctx.cfg.to_dict()
    theirs = report.get("config", {})
    # Fields both know: a report written before a field existed was computed with that field's default.
    diff = sorted(k for k in set(mine) & set(theirs) if k != "format_version" and mine[k] != theirs[k])
    return ("it was computed for a different configuration: " + ", ".join(diff)) if diff else ""


def _summary(report: dict, path: Path) -> None:
    """What the report found, in sentences computed from its numbers."""
    corpus, kinds = report["corpus"], report["kinds"]
    found = []
    for role, name in (("positional", "Positional (argmax at one offset ≥ "
                        f"{report['thresholds']['positional']:.0%} of the time)"),
                       ("previous-token", "Previous-token"), ("next-token", "Next-token"), ("aligner", "Aligners"),
                       ("rare-word", "Rare-word"), ("sink", "Sinks"), ("diffuse", "Diffuse")):
        heads = [head_short(k, l, h) for k in KIND_ORDER for l, row in enumerate(kinds[k]["roles"])
                 for h, labels in enumerate(row) if labels and labels[0].startswith(role)]
        if heads:
            found.append(f"**{name}:** {', '.join(heads)}")
    n_heads = sum(kinds[k]["layers"] * kinds[k]["heads"] for k in KIND_ORDER)
    labelled = sum(1 for k in KIND_ORDER for row in kinds[k]["roles"] for labels in row
                   if labels and labels[0] != "mixed")
    lines = [f"{labelled} of {n_heads} heads have a role (main label); the other {n_heads - labelled} are mixed: "
             "no role applies (· in the grid)."]
    lines += found
    pruning = report.get("pruning")
    if pruning:
        before = pruning["heads_off_before_bleu_drop"]
        drop = report["thresholds"]["bleu_drop"]
        lines.append(f"**Pruning:** {before['all']} of {n_heads} heads can be switched off (least important first) "
                     f"before greedy BLEU on {pruning['sentences']} sentences falls {drop:g} point or more below "
                     f"{pruning['baseline_bleu']:.2f} ("
                     + ", ".join(f"{GROUP_NAMES[k]} {before[k]} of {kinds[k]['layers'] * kinds[k]['heads']}"
                                 for k in KIND_ORDER) + ", each group alone).")
    st.markdown("  \n".join(lines))
    where = service.corpus_file_name(corpus.get("src")) or "the given sentences"  # older reports hold full paths
    st.caption(f"A head is named in words, e.g. {head_name('cross', 1, 2)}, and short where space is tight: "
               f"{head_short('cross', 1, 2)} (layers and heads counted from 1). Report: `{_code(path)}` · "
               f"{corpus['sentences']:,} sentence pairs from `{_code(where)}`, teacher-forced on their "
               f"references ({corpus['tokens']['tgt']:,} target tokens) · computed {report['created']} in "
               f"{report['timings'].get('total', 0):.0f} s.")


def _code(path) -> str:
    """A path for inside `backticks` (markdown is not read there, so nothing is escaped but the backtick)."""
    return str(path).replace("`", "'")


def measure_label(measure: str, facts: dict) -> str:
    """A measure's label with the model's own start and end tokens (Marian: <pad> and </s>)."""
    label = MEASURES[measure][0] if measure in MEASURES else measure
    return label.replace("<eos>", facts["end_token"]).replace("<bos>", facts["start_token"])


def _measure_select(ctx: Context, report: dict) -> str:
    ss = st.session_state
    available = [m for m in MEASURES if any(m in report["kinds"][k]["measures"] for k in KIND_ORDER)]
    if ss.get("heads_measure") not in available:
        ss["heads_measure"] = available[0]
    return st.selectbox("Colour the grid by", available, key="heads_measure", persist_state="session",
                        label_visibility="collapsed" if ctx.present else "visible",
                        format_func=lambda m: measure_label(m, ctx.facts))


def _grid(ctx: Context, report: dict, chosen: tuple[str, int, int]) -> None:
    measure = _measure_select(ctx, report)
    _, fmt, signed = MEASURES[measure]
    label = measure_label(measure, ctx.facts)
    values = {k: grid(report, k, measure) for k in KIND_ORDER}
    roles = {k: report["kinds"][k]["roles"] for k in KIND_ORDER}
    with below_controls(rows=3, extra_px=TEXT_LINE_PX):  # and the measure's box
        fig = cached(head_grid_figure, values, roles, label, signed=signed, fmt=fmt, chosen=chosen,
                     title=f"every head, coloured by {label}")
    chart(st, fig, width="stretch", config=fig_config(ctx, f"heads_{measure}"), key="heads_grid")
    definition = report["definitions"].get(measure) or report["definitions"].get(
        "argmax_offsets" if measure == "best_offset_share" else measure.replace("_raw", ""), "")
    if not ctx.present:
        st.caption(f"**{md_escape(label)}.** {md_escape(definition)} Cells: the head's main role (pos ±k = "
                   "positional at offset k, prev/next = previous/next-token, align = aligner, rare = rare-word, "
                   "· = mixed: no role applies); the outlined cell is the head chosen above. Hover for the exact "
                   "value.")


def _one_head(ctx: Context, report: dict, kind: str, layer: int, head: int) -> None:
    k = report["kinds"][kind]
    if layer >= k["layers"] or head >= k["heads"]:
        st.info("The report has no such head.")
        return
    roles = k["roles"][layer][head]
    c1, c2 = st.columns([2, 3])
    with c1:
        st.markdown(f"**{head_name(kind, layer, head)}** · role: **{md_escape(', '.join(roles) or 'mixed')}**")
        rows = [{"measure": measure_label(m, ctx.facts), "value": _fmt(v[layer][head], MEASURES.get(m, (m, '.4f'))[1])}
                for m, v in k["measures"].items() if m in MEASURES]
        if "best_offset" in k["measures"]:
            rows.append({"measure": "best offset (argmax)", "value": f"{k['measures']['best_offset'][layer][head]:+d}"})
        # A Markdown table: it draws with the page (an st.dataframe is a canvas grid that takes longer to lay out)
        st.markdown(md_table(rows, right=("value",)))
        st.button("Open this head in the Attention view", key="heads_to_attention", on_click=_open_attention,
                  help="Shows your sentence in the sidebar with this kind, layer and head chosen.")
    with c2:
        pattern = k["offset_pattern"]
        chart(st, cached(offset_pattern_figure, pattern["offsets"], pattern["weights"][layer][head], kind,
                         title=f"{head_short(kind, layer, head)}: mean weight by relative position"),
                  width="stretch", config=fig_config(ctx, f"heads_{kind}_L{layer + 1}_H{head + 1}_offsets"),
                  key="heads_offsets")
    if not ctx.present:
        _top_sentences(ctx, report, kind, layer, head)


def _fmt(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def _open_attention(text: str | None = None) -> None:
    ss = st.session_state
    ss["view"] = "Attention"
    if text is not None and text != ss.get("text"):
        ss["text"], ss["prefix"], ss["dec_step"] = text, (), 1


def _top_sentences(ctx: Context, report: dict, kind: str, layer: int, head: int) -> None:
    ss = st.session_state
    top = report["kinds"][kind]["top_sentences"]
    ids, conf = top["ids"][layer][head], top["confidence"][layer][head]
    texts = report["corpus"].get("texts", {})
    pairs = [(i, c, texts.get(str(i))) for i, c in zip(ids, conf) if texts.get(str(i))]
    if not pairs:
        st.info("The report keeps no sentence text for this head.")
        return
    if not ctx.present:
        st.markdown(f"#### Where {head_name(kind, layer, head)} is most confident")
    ss["heads_sent"] = min(max(int(ss.get("heads_sent", 1)), 1), len(pairs))
    pick = st.selectbox if ctx.present else st.radio  # presenter mode: one row, so the figure keeps the screen
    choice = pick("Corpus sentence", list(range(1, len(pairs) + 1)), key="heads_sent", persist_state="session",
                  **(dict(label_visibility="collapsed") if ctx.present else dict(horizontal=True)),
                  format_func=lambda n: f"{n} · {pairs[n - 1][1]:.2f} · {sentence_label(pairs[n - 1][2]['src'], 40)}")
    index, confidence, pair = pairs[choice - 1]
    model, _ = load_model(ctx.key)
    tgt = tuple(service.target_tokens(model, pair["ref"])[: ctx.cfg.max_len - 1])  # as the analysis read it
    trace = teacher_forced(ctx.key, pair["src"], tgt, True)
    q_tokens, k_tokens = trace.axes(kind)
    probs = trace.probs(kind)[layer, head]  # (i, j)
    mask = trace.attn[kind][layer]["mask"]
    here = float(probs.max(-1).mean())
    above = st.container()  # the sentence and the confidence: in presenter mode below the figure
    with below_controls(rows=3, extra_px=TEXT_LINE_PX):  # and the sentence's box
        chart(st, cached(attention_figure, probs, q_tokens, k_tokens, kind, mask=mask,
                         title=f"{head_short(kind, layer, head)} on corpus sentence {index + 1}",
                         width_px=PAGE_WIDTH_PX),
              width="stretch", config=fig_config(ctx, f"heads_{kind}_L{layer + 1}_H{head + 1}_sentence{index + 1}"),
              key="heads_sentence")
    (st if ctx.present else above).caption(
        f"Sentence {index + 1} of the corpus. Source: {md_escape(pair['src'])} · "
        f"Reference: {md_escape(pair['ref'])}  \n"
        "Teacher-forced on the reference, as the analysis read it (not the model's own decoding). Confidence of this "
        f"head on the heatmap: {here:.3f} (the report: {confidence:.3f}).")
    st.button("Open this sentence in the Attention view", key="heads_sentence_to_attention", on_click=_open_attention,
              args=(pair["src"],), help="Makes it the sentence in the sidebar; the figures there show the model's own "
                                        "greedy decoding of it, not the reference.")


def _pruning(ctx: Context, report: dict) -> None:
    pruning = report.get("pruning")
    if not ctx.present:
        st.markdown("#### Pruning: how many heads does the translation need?")
    if not pruning:
        st.info("This report was computed without the pruning curve (`--no-pruning`).")
        return
    kinds = report["kinds"]
    totals = {k: kinds[k]["layers"] * kinds[k]["heads"] for k in KIND_ORDER}
    totals["all"] = sum(totals.values())
    curves = {}
    for group, points in pruning["curves"].items():
        extra = pruning.get("refined", {}).get(group, [])
        curves[group] = sorted({p["heads_off"]: p["bleu"] for p in [*points, *extra]}.items())
    drop = report["thresholds"]["bleu_drop"]
    chart(st, cached(pruning_figure, curves, totals, pruning["baseline_bleu"], drop,
                     sentences=pruning["sentences"]),
              width="stretch", config=fig_config(ctx, "heads_pruning"), key="heads_pruning")
    if not ctx.present:
        st.caption("Heads are switched off in ascending order of importance (Michel et al. 2019, Fig. 3): each group "
                   "on its own, and all heads together. Greedy decoding, sacreBLEU " + md_escape(pruning["signature"])
                   + ".")


def _job_name(key: str) -> str:
    return f"head-report:{key}"


def _no_report(ctx: Context, path: Path | None, error: str | None) -> None:
    if error:
        st.error(f"The head report could not be read. {md_escape(error)}")
    else:
        looked = ", ".join(f"`{_code(p)}`" for p in report_paths(ctx.key))
        trained = ctx.key.removesuffix(TWIN)
        if is_twin(ctx.key):
            st.info(f"There is no head report for the untrained twin yet (looked in {looked}). A report of the "
                    f"trained model ({md_escape(trained)}) describes its learned weights, not these random ones: the "
                    "twin gets its own, computed here over the validation split and kept in the cache folder. For "
                    "a trained model, `python -m model.analyze --checkpoint FOLDER` computes one from a terminal.")
        else:
            st.info(f"There is no head report for this model yet (looked in {looked}). It is computed once per "
                    "model over the validation split and kept; from a terminal: `python -m model.analyze "
                    f"--checkpoint {_code(checkpoint_dir() / trained)}`.")
    _compute_button(ctx)


def _compute_button(ctx: Context, again: bool = False) -> None:

    folder, looked = service.find_data_dir("val")
    if folder is None:
        st.warning("The report needs Multi30k's validation split (val.de and val.en, plain or .gz), which was not "
                   "found. Looked in: " + ", ".join(f"`{_code(p)}`" for p in looked)
                   + ". Set ATLAS_DATA_DIR to the folder that holds it.")
        return
    c1, c2 = st.columns([2, 3])
    full = c2.toggle("With the ablation losses and the pruning curve (minutes: every head switched off, BLEU at 11 "
                     "points per group)", key=f"heads_full_{int(again)}", value=False)
    if c1.button("Compute the report again" if again else "Compute the head report", key=f"heads_compute_{int(again)}",
                 type="primary"):
        started = jobs.start_job(_job_name(ctx.key), f"a head report for {ctx.key}",
                                 _work(ctx.key, str(folder), full))
        if started is None:
            busy = jobs.running_jobs()
            st.warning("The server is already running its heavy job"
                       + (f" ({md_escape(busy[0].what)})" if busy else "")
                       + f" (at most {jobs.MAX_HEAVY_JOBS} at a time). Try again when it has finished.")
            return
        st.rerun()


def _work(key: str, folder: str, full: bool):
    """The job: analyse the validation split and write the report where find_report looks for it."""
    def work(progress):
        model, error = load_model(key)
        if model is None:
            raise RuntimeError(error)
        src_path, ref_path = service.find_file(folder, "val", "de"), service.find_file(folder, "val", "en")
        src, ref = service.read_parallel(str(src_path), str(ref_path))
        report = service.head_report(model, src, ref, ablation=full, pruning=full, progress=progress,
                                 name=report_name(key), src_path=str(src_path), ref_path=str(ref_path))
        target = report_paths(key)
        if is_twin(key):
            return str(service.write_report(report, target[0], checkpoint_dir()))
        return str(service.write_report(report, None, checkpoint_dir() / key))
    return work


def _progress(key: str) -> None:
    """The running job's progress, refreshed every second; the page reloads when it is done."""
    @st.fragment(run_every=1.0)
    def poll() -> None:
        job = jobs.job(_job_name(key))
        if job is None or job.done:
            st.rerun(scope="app")
        left = job.remaining()
        eta = f", about {left:.0f} s left" if left is not None else ""
        st.progress(job.fraction, text=f"Computing the head report: {job.message} ({job.elapsed:.0f} s{eta})")
        st.caption("It runs on the server: you can switch pages meanwhile. One such job runs at a time.")
    poll()
