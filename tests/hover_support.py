"""What Plotly's hover shows for one cell of a heatmap trace, rendered from the trace as plotly.js does for the
parts the app's hover templates use: %{x}, %{y} (the cell's coordinates: category names on a token axis),
%{z:fmt}, %{customdata} and %{customdata[k]}; <extra></extra> is dropped and <br> kept."""
from __future__ import annotations

import re

import numpy as np


def cell_hover(trace, i: int, j: int) -> str:
    """The hover text of row ``i``, column ``j`` of a heatmap ``trace`` (a plotly trace object or dict)."""
    get = trace.get if isinstance(trace, dict) else lambda k: getattr(trace, k)
    z = np.asarray(get("z"), dtype=float)
    cd = get("customdata")
    cell_cd = None if cd is None else np.asarray(cd, dtype=object)[i, j]

    def value(m: re.Match) -> str:
        name, fmt = m.group(1), m.group(2)
        if name == "x":
            return str(list(get("x"))[j])
        if name == "y":
            return str(list(get("y"))[i])
        if name == "z":
            return format(z[i, j], fmt.lstrip(":")) if fmt else str(z[i, j])
        if name == "customdata":
            return str(cell_cd)
        k = int(re.fullmatch(r"customdata\[(\d+)\]", name).group(1))
        return str(cell_cd[k])

    text = re.sub(r"%\{([a-z]+(?:\[\d+\])?)(:[^}]*)?\}", value, get("hovertemplate"))
    return text.replace("<extra></extra>", "")
