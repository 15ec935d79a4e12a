"""A phone's figure: its colour bar below the plot, across (beside the plot, it took a fifth of a 356 px figure).

Applied to the figure as it is sent (viz.transport), in a theme with ``figure_px`` (viz.theme.PHONE_THEME).
"""
from __future__ import annotations

BAR_PX = 64  # below the plot: the bar, its tick labels and one line of its title below them
LINE_PX = 18  # each further line of the title
_SCALED = ("heatmap", "contour", "histogram2d", "surface")


def colorbar_below(fig: dict) -> None:
    """Move a figure's only colour bar (a shared colour axis's or one trace's) below its plot, across the figure's
    width, in place; the figure grows by the bar's height, so its plots keep theirs. A figure with several bars
    keeps them beside their plots (below, they would all sit in one place)."""
    layout, traces = fig["layout"], fig["data"]
    # where each bar shown is set: a colour axis that a trace uses, a trace with a colour scale, a scale of markers
    owners = [layout[k] for k in layout if k.startswith("coloraxis") and isinstance(layout[k], dict)
              and layout[k].get("showscale", True) and any(t.get("coloraxis") == k for t in traces)]
    owners += [t for t in traces if t.get("type") in _SCALED and not t.get("coloraxis") and t.get("showscale", True)]
    owners += [t["marker"] for t in traces if isinstance(t.get("marker"), dict) and t["marker"].get("showscale")]
    if len(owners) != 1:
        return
    owner = owners[0]
    bar = dict(owner.get("colorbar") or {})
    title = dict(bar.get("title") or {})
    title["side"] = "bottom"  # "top" of a horizontal bar drew the title over the bar (plotly.js, yref="container")
    bar.update(orientation="h", x=0.5, xanchor="center", xref="container", y=0, yanchor="bottom", yref="container",
               ypad=6, thickness=12, len=0.9, lenmode="fraction", title=title)
    if "tickvals" not in bar:  # across 320 px, five labels stay apart (more were turned on their sides)
        bar["nticks"] = 5
    owner["colorbar"] = bar
    margin = layout.setdefault("margin", {})
    grow = BAR_PX + LINE_PX * str(title.get("text") or "").count("<br>")
    margin["b"] = (margin.get("b") or 80) + grow
    layout["height"] = (layout.get("height") or 450) + grow
