"""The theme every figure is built with: sizes, colours, and the screen presenter mode must fit.

A theme is set per thread (each Streamlit session has its own) with :func:`using_theme`.

Presenter mode promises that a page part fits a 1280×720 projector without scrolling. The server does not know
the viewport, so the presenter theme's figure height is the room left on the smallest screen it promises, below
the app's header and the controls above the figure (:func:`presenter_height`). A page with more controls above
its figure builds it inside :func:`below_controls`, which takes their rows off that height.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Theme:
    """Sizes (px) and colours every figure is built with; see :func:`theme`.

    The default is a laptop screen; :data:`PRESENTER_THEME` is a projector seen from the back row.
    """

    tick: int = 14  # tick labels and colourbar ticks
    min_tick: int = 11  # crowded tick labels shrink down to this, never below
    base: int = 15  # axis titles, annotations, legends
    title: int = 19
    hover: int = 15
    min_font: int = 0  # every text of every figure at least this (0: no floor)
    min_tick_px: int = 14  # between neighbouring tick labels, across the text
    prob_scale: str = "Blues"  # probabilities 0..1: white = 0
    signed_scale: str = "RdBu_r"  # signed values around 0
    # The colour of signed_scale's high end in words: legends of effects say what it means (viz.scales.effect_words).
    warm_name: str = "red"
    bar_colour: str = "#9ecae1"  # bars of probabilities and attention weights
    highlight_colour: str = "#ff7f0e"  # the bar that matters: the chosen candidate, the most-attended key
    # Presenter mode: the height of the page's main figure, and the most any figure may take (None: a figure's
    # height follows its content, as on a laptop, where the page scrolls).
    height_px: int | None = None
    short_axis_titles: bool = False  # "query (EN) ↓" instead of "query (EN, decoder input) ↓": fits a short axis
    max_label_chars: int | None = None  # token tick labels longer than this are cut ("…"); hover names them whole
    # How much wider the page is than the width_px figures are built for (PAGE_WIDTH_PX: a 1440 px window with the
    # sidebar open). Presenter mode folds the sidebar: at 1280 px the page is about 1220 px wide.
    width_scale: float = 1.0

    def high_contrast(self) -> Theme:
        """Viridis instead of Blues: small weights stay visible on a washed-out projector, and it reads in
        greyscale and for colour-blind viewers. Bars turn from light blue to Viridis' dark blue (a short bar of
        0.01 stands out against the white plot), the highlighted one to the dark orange of PuOr; signed values run
        from purple to orange, and the legends of effects say orange where they said red."""
        return replace(self, prob_scale="Viridis", signed_scale="PuOr_r", warm_name="orange", bar_colour="#3b528b",
                       highlight_colour="#e66101")


# The smallest screen presenter mode fits, and what stands above a page's figure on it (measured in Chromium at
# 1280×720 with presenter mode's CSS): Streamlit's toolbar, the sentence and its translation on two lines with
# the caption under them; a row of controls without labels above them (select boxes, the part radio, a toggle)
# with the gap after it; and a row whose controls carry a label above them (a slider, a labelled select box).
SCREEN_PX = 720
HEADER_PX = 219
ROW_PX = 64
LABELLED_ROW_PX = 113
TEXT_LINE_PX = 43  # one more line of text above a figure (the Heads and Training pages' header caption has two)
MIN_FIGURE_PX = 200  # a presenter figure is never squeezed below this, whatever stands above it


def presenter_height(rows: int = 2, labelled: int = 0, extra_px: int = 0) -> int:
    """Height of a presenter figure below the header, ``rows`` rows of unlabelled controls, ``labelled`` rows of
    labelled ones and ``extra_px`` more (a line of text), so that its bottom stays on a 720 px screen."""
    room = SCREEN_PX - HEADER_PX - rows * ROW_PX - labelled * LABELLED_ROW_PX - extra_px - 4
    return max(MIN_FIGURE_PX, room)


DEFAULT_THEME = Theme()
# A 1280×720 projector: every text ≥ 20 px, labels thinned so 20 px labels do not touch, token labels cut to
# 12 characters, and the main figure as tall as the screen leaves below the header, the controls and the part
# radio (presenter_height()).
PRESENTER_THEME = Theme(tick=20, min_tick=20, base=22, title=24, hover=20, min_font=20, min_tick_px=22,
                        height_px=presenter_height(), short_axis_titles=True, max_label_chars=12, width_scale=1.25)
_THEME: ContextVar[Theme] = ContextVar("viz_theme", default=DEFAULT_THEME)


def theme() -> Theme:
    """The theme figures are built with now (per thread: each Streamlit session has its own)."""
    return _THEME.get()


@contextmanager
def using_theme(t: Theme) -> Iterator[Theme]:
    """Build the figures inside the block with theme ``t``."""
    token = _THEME.set(t)
    try:
        yield t
    finally:
        _THEME.reset(token)


@contextmanager
def below_controls(rows: int = 2, labelled: int = 0, extra_px: int = 0) -> Iterator[Theme]:
    """Build the figures inside the block to fit below the header and these controls (see
    :func:`presenter_height`); outside presenter mode the theme is left as it is."""
    t = theme()
    if not t.height_px:
        yield t
        return
    with using_theme(replace(t, height_px=presenter_height(rows, labelled, extra_px))) as shorter:
        yield shorter


def fit_height(height: int | None) -> int | None:
    """A figure's ``height`` in the theme in force: no taller than a presenter figure may be."""
    cap = theme().height_px
    return min(int(height), cap) if height and cap else height
