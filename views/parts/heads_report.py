"""The Heads page's report file: where it is looked for, how a page names it, and the job that computes it.

A report lives beside the checkpoint, or in the cache folder (always for the untrained twin, whose weights are not
that folder's, and for a many-to-many model read between other languages than its own, whose corpus reads
otherwise). A page names it relative to the checkpoint folder or by the cache folder's setting, never by the
server's absolute path. Without a report the page offers to compute one in a background job (views/plumbing/jobs.py).
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from model import service
from model.analysis import experiments
from model.training.data import find_file, read_parallel
from views.parts.text import md_escape
from views.parts.widgets import table
from views.plumbing import jobs
from views.plumbing.state import Context, ModelKey, checkpoint_dir, config_languages, load_model, public_message


def report_name(key: ModelKey) -> str:
    """The cache folder's name of a model (the untrained twin and each language pair get their own)."""
    pair = f"@{key.pair[0]}-{key.pair[1]}" if key.pair else ""
    return key.name + pair + ("-untrained" if key.twin else "")


def _own_folder(key: ModelKey) -> bool:
    """Does the report belong beside the checkpoint? Its trained weights, read between the languages the checkpoint
    reads (`python -m model.analyze --checkpoint FOLDER` writes that report there)."""
    return not key.twin and (key.pair is None or key.pair == config_languages(key.base))


def report_paths(key: ModelKey) -> list[Path]:
    """Where a model's report is looked for, in order: beside the checkpoint (see _own_folder), then the cache
    folder."""
    cached_path = service.report_cache_dir(report_name(key)) / service.REPORT_NAME
    return [key.folder() / service.REPORT_NAME, cached_path] if _own_folder(key) else [cached_path]


def place(path: Path | str) -> str:
    """A file as a page names it, for inside `backticks`: relative to the checkpoint folder
    (`checkpoints/NAME/head_report.json`) or by its folder's setting (`$XDG_CACHE_HOME/…`), never the server's
    absolute path. Only the backtick is replaced: Markdown is not read inside backticks."""
    return public_message(str(path)).replace("`", "'")


@st.cache_resource(max_entries=8, show_spinner=False)
def _read(path: str, mtime_ns: int) -> dict:
    """The report, parsed once per file version (the key holds its modification time)."""
    return service.load_report(path)


def find_report(key: ModelKey) -> tuple[dict | None, Path | None, str | None]:
    """(report, its path, None), or (None, the path that failed, why), or (None, None, None) when there is none."""
    for path in report_paths(key):
        if path.is_file():
            try:
                return _read(str(path), path.stat().st_mtime_ns), path, None
            except service.ReportError as e:
                return None, path, public_message(str(e))
    return None, None, None


def job_name(key: ModelKey) -> str:
    return f"head-report:{key}"


def no_report(ctx: Context, error: str | None) -> None:
    """Why there is no report to draw (none, or a broken file), and the button that computes one."""
    if error:
        st.error(f"The head report could not be read. {md_escape(error)}")
    else:
        looked = ", ".join(f"`{place(p)}`" for p in report_paths(ctx.key))
        trained = ctx.key.other_twin() if ctx.key.twin else ctx.key
        if ctx.key.twin:
            st.info(f"There is no head report for the untrained twin yet (looked in {looked}). A report of the "
                    f"trained model ({md_escape(str(trained))}) describes its learned weights, not these random "
                    "ones: the twin gets its own, computed here over the validation split and kept in the cache "
                    "folder. For a trained model, `python -m model.analyze --checkpoint FOLDER` computes one from a "
                    "terminal.")
        else:
            st.info(f"There is no head report for this model yet (looked in {looked}). It is computed once per "
                    "model over the validation split and kept; from a terminal: `python -m model.analyze "
                    f"--checkpoint {place(trained.folder())}`.")
    compute_button(ctx)


def compute_button(ctx: Context, again: bool = False) -> None:
    """The button that starts the report's job (and its switch for the ablation and the pruning curve)."""
    folder, looked = experiments.find_data_dir("val")
    if folder is None:
        st.warning("The report needs Multi30k's validation split (val.de and val.en, plain or .gz), which was not "
                   "found. Looked in: " + ", ".join(f"`{place(p)}`" for p in looked)
                   + ". Set ATLAS_DATA_DIR to the folder that holds it.")
        return
    c1, c2 = st.columns([2, 3])
    # A toggle's label stays on one line (Streamlit cuts what does not fit): the short label, the cost in its help.
    full = c2.toggle("With ablation and pruning (minutes)", key=f"heads_full_{int(again)}", value=False,
                     help="The ablation losses (every head switched off in turn) and the pruning curve (BLEU at 11 "
                          "points per group, in two orders).")
    if c1.button("Compute the report again" if again else "Compute the head report", key=f"heads_compute_{int(again)}",
                 type="primary"):
        started = jobs.start_job(job_name(ctx.key), f"a head report for {ctx.key}", _work(ctx.key, str(folder), full))
        if started is None:
            busy = jobs.running_jobs()
            st.warning("The server is already running its heavy job"
                       + (f" ({md_escape(busy[0].what)})" if busy else "")
                       + f" (at most {jobs.MAX_HEAVY_JOBS} at a time). Try again when it has finished.")
            return
        st.rerun()


def _work(key: ModelKey, folder: str, full: bool):
    """The job: analyse the validation split and write the report where find_report looks for it."""
    def work(progress):
        model, error = load_model(key)
        if model is None:
            raise RuntimeError(error)
        src_path, ref_path = find_file(folder, "val", "de"), find_file(folder, "val", "en")
        src, ref = read_parallel(str(src_path), str(ref_path))
        report = service.head_report(model, src, ref, ablation=full, pruning=full, progress=progress,
                                     name=report_name(key), src_path=str(src_path), ref_path=str(ref_path))
        target = report_paths(key)
        if not _own_folder(key):
            return str(service.write_report(report, target[0], checkpoint_dir()))
        return str(service.write_report(report, None, key.folder()))
    return work


def progress(key: ModelKey) -> None:
    """The running job's progress, refreshed every second; the page reloads when it is done."""
    @st.fragment(run_every=1.0)
    def poll() -> None:
        job = jobs.job(job_name(key))
        if job is None or job.done:
            st.rerun(scope="app")
        left = job.remaining()
        eta = f", about {left:.0f} s left" if left is not None else ""
        st.progress(job.fraction, text=f"Computing the head report: {job.message} ({job.elapsed:.0f} s{eta})")
        st.caption("It runs on the server: you can switch pages meanwhile. One such job runs at a time.")
    poll()


ALIGN_NAMES = {"attention": "weights α (heads' mean)", "value-norm": "value norms ‖Σ α·f‖", "alti": "ALTI+"}


def alignment_layers(report: dict) -> None:
    """The report's AER per decoder layer, the heads taken together (weights, value norms, ALTI+), beside the grid's
    per-head AER; nothing for a report without alignment (a model of other languages, or an older report)."""
    found = report.get("alignment") or {}
    if not found.get("layers"):
        return
    rows = [{"measure": ALIGN_NAMES.get(m, m)} | {f"layer {i + 1}": f"{v:.1f}" for i, v in enumerate(values)}
            for m, values in found["layers"].items()]
    st.markdown(f"**AER (%) per layer, the heads together**, on the {found['pairs']} annotated pairs "
                f"({found['reading']} reading; lower is better):")
    table(rows, "AER per layer", right=tuple(k for k in rows[0] if k != "measure"))
