"""Heads: a report card of every head over a corpus, one head up close, and the pruning curve.

Everything on this page comes from the head report that `python -m model.analyze` writes (beside the
checkpoint, or in the cache folder when that folder is read-only); the only thing the page runs the model for
is the heatmap of a corpus sentence (a teacher-forced pass, as the report's own). Where the report is and how it
is computed from the page: views/parts/heads_report.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from model import records, service
from model.analysis import agreement
from views.parts.counts import measured_on, split_name
from views.parts.heads_report import (
    alignment_layers,
    compute_button,
    find_report,
    job_name,
    no_report,
    place,
    progress,
    report_paths,
)
from views.parts.text import md_escape, md_table
from views.parts.widgets import chart, choices, fig_config, kind_layer_head, sections
from views.plumbing import jobs
from views.plumbing.figcache import cached
from views.plumbing.state import Context, load_model, teacher_forced
from viz.attention import attention_figure
from viz.heads import (
    GROUP_NAMES,
    MEASURES,
    PRUNING_ORDERS,
    head_grid_figure,
    head_name,
    head_short,
    offset_pattern_figure,
    pruning_figure,
    sentence_label,
)
from viz.layout import PAGE_WIDTH_PX
from viz.theme import theme

KIND_ORDER = records.KINDS
ROLE_NAMES = {"positional": "positional", "previous-token": "previous-token", "next-token": "next-token",
              "aligner": "aligner", "rare-word": "rare-word", "sink": "sink", "diffuse": "diffuse"}
EFFECT = "ablation_loss_increase"  # the measured effect of switching a head off: the grid's default
SCALES = {"raw": "as measured (compare layers)", "layer": "normalised per layer"}
__all__ = ["render", "report_paths"]


def grid(report: dict, kind: str, measure: str, scale: str = "raw") -> np.ndarray | None:
    """(L, h) values of a measure as the grid shows them (NaN where it has none), or None when it is not defined
    for the kind (model/analysis/agreement.py's grid_values)."""
    return agreement.grid_values(report, kind, measure, scale)


def render(ctx: Context) -> None:
    if not ctx.present:  # presenter mode: the controls and one part's figure; the findings go below it
        st.subheader("Heads across a corpus")
        st.caption("What each head does over many sentences, not one: the measures of Voita et al. (2019), "
                   "Clark et al. (2019) and Michel et al. (2019), computed for the model you have open by "
                   "`python -m model.analyze`. Choose a measure to colour the grid; the text in a cell is the head's "
                   "role.")
    if ctx.key.toy:
        st.info("Head reports are computed over Multi30k's validation split, which a toy model cannot read. "
                "Choose a translation model in the sidebar.")
        return
    report, path, error = find_report(ctx.key)
    running = jobs.job(job_name(ctx.key))
    if running is not None and not running.done:
        progress(ctx.key)
        return
    if running is not None and running.error:
        st.error(f"Computing the report failed: {md_escape(running.error)}")
    if report is None:
        no_report(ctx, error)
        return
    stale = _stale(report, ctx)
    if stale:
        st.warning(f"This report does not match the model you have open ({stale}). Compute it again below.")
        compute_button(ctx, again=True)
    summary = st.container()  # the findings: in presenter mode below the part
    # One part at a time (URL `focus`), as tabs: each part is one or two figures, so the page opens quickly.
    cfg = ctx.cfg
    with choices(ctx):
        head_choice = kind_layer_head(cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.n_heads, compact=ctx.present)
        show = sections(ctx, ["the grid", "one head"] + ["its sentences"] * ctx.present + ["pruning"], always=True)
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
            compute_button(ctx, again=True)


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
    if report.get("pruning"):
        lines += [_pruning_sentence(report, order, n_heads) for order in pruning_orders(report)]
    st.markdown("  \n".join(lines))
    where = corpus_file(report)
    st.caption(f"A head is named in words, e.g. {head_name('cross', 1, 2)}, and short where space is tight: "
               f"{head_short('cross', 1, 2)} (layers and heads counted from 1). Report: `{place(path)}` · "
               f"{corpus['sentences']:,} sentence pairs from `{place(where)}`, teacher-forced on their "
               f"references ({corpus['tokens']['tgt']:,} target tokens) · computed {report['created']} in "
               f"{report['timings'].get('total', 0):.0f} s.")


def corpus_file(report: dict) -> str:
    """The report's corpus as a page names it ("multi30k/val.de.gz"); older reports hold full paths."""
    return service.corpus_file_name(report["corpus"].get("src")) or "the given sentences"


def measure_label(measure: str, facts: dict, scale: str | None = None) -> str:
    """A measure's label with the model's own start and end tokens (Marian: <pad> and </s>). With a `scale`, the
    label of the grid's values: importance as measured is the raw gradient, and normalised values say so."""
    label = MEASURES[measure][0] if measure in MEASURES else measure
    if measure == "importance" and scale is not None:
        label = "importance (raw gradient)" if scale == "raw" else "importance (normalised per layer)"
    elif scale == "layer":
        label += ", normalised per layer"
    return label.replace("<eos>", facts["end_token"]).replace("<bos>", facts["start_token"])


def _measure_select(ctx: Context, report: dict) -> tuple[str, str]:
    """The grid's measure and scale (URL `heads_measure`, `heads_scale`): by default the measured effect of
    switching a head off, or importance where the report has no ablation."""
    ss = st.session_state
    # importance_raw is importance as measured (scale "raw"): one entry in the box, older links still work
    if ss.get("heads_measure") == "importance_raw":
        ss["heads_measure"], ss["heads_scale"] = "importance", "raw"
    available = [m for m in MEASURES if m != "importance_raw"
                 and any(m in report["kinds"][k]["measures"] for k in KIND_ORDER)]
    if ss.get("heads_measure") not in available:
        ss["heads_measure"] = EFFECT if EFFECT in available else "importance"
    if ss.get("heads_scale") not in SCALES:
        ss["heads_scale"] = "raw"
    with choices(ctx):
        c1, c2 = st.columns([3, 2])
    vis = "collapsed" if ctx.present else "visible"
    measure = c1.selectbox("Colour the grid by", available, key="heads_measure", persist_state="session",
                           label_visibility=vis,  # importance: raw or normalised, as the values' scale says
                           format_func=lambda m: "importance (gradient)" if m == "importance" else
                           measure_label(m, ctx.facts))
    scale = c2.radio("Values", list(SCALES), key="heads_scale", persist_state="session", horizontal=True,
                     label_visibility=vis,  # presenter: the options' first words, so that they stay on one line
                     format_func=(lambda s: SCALES[s].split(" (")[0]) if ctx.present else SCALES.get,
                     help="As measured, the grid compares every head with every other, across layers. Normalised "
                          "per layer, each layer's values are divided by their L2 norm (for importance: the "
                          "bertology normalisation the report records), so a head is compared only with the heads "
                          "of its own layer.")
    return measure, scale


def _grid(ctx: Context, report: dict, chosen: tuple[str, int, int]) -> None:
    measure, scale = _measure_select(ctx, report)
    _, fmt, signed = MEASURES["importance_raw" if measure == "importance" and scale == "raw" else measure]
    fmt = ".3f" if scale == "layer" else fmt
    label = measure_label(measure, ctx.facts, scale)
    values = {k: grid(report, k, measure, scale) for k in KIND_ORDER}
    roles = {k: report["kinds"][k]["roles"] for k in KIND_ORDER}
    fig = cached(head_grid_figure, values, roles, label, signed=signed, fmt=fmt, chosen=chosen,
                 title=f"every head, coloured by {label}")
    chart(st, fig, width="stretch", config=fig_config(ctx, f"heads_{measure}_{scale}"), key="heads_grid")
    _agreement(ctx, report, measure, scale, values)
    if measure in ("aer", "aer_value_norm"):
        alignment_layers(report)
    definition = report["definitions"].get(measure) or report["definitions"].get(
        "argmax_offsets" if measure == "best_offset_share" else measure.replace("_raw", ""), "")
    sentences = (report.get("ablation") or {}).get("sentences")  # the report's definition names the field
    definition = definition.replace("ablation.sentences", f"{sentences:,}" if sentences else "the ablation's")
    if not ctx.present:
        per_layer = (" Normalised per layer: each layer's values divided by their L2 norm"
                     + (" (importance: then one min-max over all heads, as the report records it)"
                        if measure == "importance" else "") + ", so colours compare heads within a layer, not "
                     "across layers." if scale == "layer" else "")
        warm = (f" {theme().warm_name.capitalize()}: switching the head off raised the loss (worse for the "
                "translation), the colour of worse in every effect the app draws." if signed else "")
        st.caption(f"**{md_escape(label)}.** {md_escape(definition)}{per_layer}{warm} Cells: the head's main role "
                   "(pos ±k = positional at offset k, prev/next = previous/next-token, align = aligner, rare = "
                   "rare-word, · = mixed: no role applies); the outlined cell is the head chosen above. Hover for the "
                   "exact value.")


def _agreement(ctx: Context, report: dict, measure: str, scale: str, values: dict) -> None:
    """The agreement line: how well the grid's measure, and importance, rank the heads as the measured loss
    increase does (Spearman ρ, overall and per kind), in a sentence computed from the numbers."""
    if not agreement.has_effect(report):
        st.info("**Agreement with the measured effect:** this report has no ablation losses (it was computed "
                "without switching heads off), so the grid is coloured by importance by default, and no measure can "
                "be checked against what switching a head off costs. Compute the report again with the ablation "
                "losses to see it.")
        return
    effect = "the measured loss increase when a head is switched off"
    lines = []
    if (measure, scale) != (EFFECT, "raw"):
        lines.append(agreement.agreement_sentence(measure_label(measure, ctx.facts, scale), effect,
                                                agreement.rank_agreement(report, values), GROUP_NAMES, KIND_ORDER))
    if (measure, scale) != ("importance", "layer"):
        imp = {k: grid(report, k, "importance", "layer") for k in KIND_ORDER}
        lines.append(agreement.agreement_sentence(measure_label("importance", ctx.facts, "layer"), effect,
                                                agreement.rank_agreement(report, imp), GROUP_NAMES, KIND_ORDER))
    st.markdown("**Agreement with the measured effect** (Spearman rank correlation ρ over heads, ties "
                "ranked by their mean; 1: the same order, −1: the opposite): " + " ".join(md_escape(x) for x in lines))


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
    pick = st.selectbox if ctx.present else st.radio  # presenter mode: one row in the header's Choose
    with choices(ctx):
        choice = pick("Corpus sentence", list(range(1, len(pairs) + 1)), key="heads_sent", persist_state="session",
                      **(dict(label_visibility="collapsed") if ctx.present else dict(horizontal=True)),
                      format_func=lambda n: f"{n} · {pairs[n - 1][1]:.2f} · "
                                            f"{sentence_label(pairs[n - 1][2]['src'], 40)}")
    index, confidence, pair = pairs[choice - 1]
    model, _ = load_model(ctx.key)
    tgt = tuple(service.target_tokens(model, pair["ref"])[: ctx.cfg.max_len - 1])  # as the analysis read it
    trace = teacher_forced(ctx.key, pair["src"], tgt, True)
    q_tokens, k_tokens = trace.axes(kind)
    probs = trace.probs(kind)[layer, head]  # (i, j)
    mask = trace.attn[kind][layer]["mask"]
    here = float(probs.max(-1).mean())
    above = st.container()  # the sentence and the confidence: in presenter mode below the figure
    chart(st, cached(attention_figure, probs, q_tokens, k_tokens, kind, mask=mask,
                     title=f"{head_short(kind, layer, head)} on corpus sentence {index + 1}", width_px=PAGE_WIDTH_PX),
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


def pruning_orders(report: dict) -> list[str]:
    """The orders the report's pruning curve was decoded in (keys of PRUNING_ORDERS), the measured one first."""
    pruning = report.get("pruning") or {}
    return (["loss_increase"] if pruning.get("by_loss_increase") else []) + (["importance"] if pruning else [])


def pruning_section(report: dict, order: str) -> dict:
    """One order's curves, refinement and heads_off_before_bleu_drop from the report's pruning section."""
    pruning = report["pruning"]
    return pruning["by_loss_increase"] if order == "loss_increase" else pruning


def _pruning_sentence(report: dict, order: str, n_heads: int) -> str:
    """How many heads can go, in this order, before BLEU drops: one sentence from the report's numbers."""
    kinds, pruning = report["kinds"], report["pruning"]
    before = pruning_section(report, order)["heads_off_before_bleu_drop"]
    by, first = PRUNING_ORDERS[order]
    on = md_escape(measured_on(corpus_file(report), pruning["sentences"], first=True))
    return (f"**Pruning {by}:** {before['all']} of {n_heads} heads can be switched off ({first}) before greedy BLEU "
            f"on {on} falls {report['thresholds']['bleu_drop']:g} point or more below "
            f"{pruning['baseline_bleu']:.2f}, its value with every head on ("
            + ", ".join(f"{GROUP_NAMES[k]} {before[k]} of {kinds[k]['layers'] * kinds[k]['heads']}" for k in KIND_ORDER)
            + ", each group alone).")


def _pruning(ctx: Context, report: dict) -> None:
    pruning = report.get("pruning")
    if not ctx.present:
        st.markdown("#### Pruning: how many heads does the translation need?")
    if not pruning:
        st.info("This report was computed without the pruning curve (`--no-pruning`).")
        return
    ss = st.session_state
    if ss.get("heads_prune_order") not in PRUNING_ORDERS:
        ss["heads_prune_order"] = "loss_increase"
    with choices(ctx):
        order = st.radio("Switch heads off", list(PRUNING_ORDERS), key="heads_prune_order",
                         persist_state="session", horizontal=True,
                         label_visibility="collapsed" if ctx.present else "visible",
                         format_func=lambda o: PRUNING_ORDERS[o][0] if ctx.present else
                         f"{PRUNING_ORDERS[o][0]} ({PRUNING_ORDERS[o][1]})")
    if order not in pruning_orders(report):
        st.info("This report has the pruning curve by importance only: it was computed without the ablation "
                "losses, or before the order of the measured loss increase was recorded. Compute the report again "
                "with the ablation losses for that order. Shown: the curve by importance.")
        order = "importance"
    section = pruning_section(report, order)
    kinds = report["kinds"]
    totals = {k: kinds[k]["layers"] * kinds[k]["heads"] for k in KIND_ORDER}
    totals["all"] = sum(totals.values())
    curves = {}
    for group, points in section["curves"].items():
        extra = section.get("refined", {}).get(group, [])
        curves[group] = sorted({p["heads_off"]: p["bleu"] for p in [*points, *extra]}.items())
    drop = report["thresholds"]["bleu_drop"]
    fig = cached(pruning_figure, curves, totals, pruning["baseline_bleu"], drop, sentences=pruning["sentences"],
                 order=order, split=split_name(corpus_file(report)))
    chart(st, fig, width="stretch", config=fig_config(ctx, f"heads_pruning_{order}"), key="heads_pruning")
    if not ctx.present:
        how = ("in ascending order of importance (Michel et al. 2019, Fig. 3)" if order == "importance" else
               "in ascending order of the loss increase measured when each head alone is switched off")
        st.caption(f"Heads are switched off {how}: each group on its own, and all heads together. Greedy decoding "
                   f"of {md_escape(measured_on(corpus_file(report), pruning['sentences'], first=True))} (every head "
                   f"on: BLEU {pruning['baseline_bleu']:.2f}), sacreBLEU " + md_escape(pruning["signature"]) + ".")
