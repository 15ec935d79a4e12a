"""The theme every figure is built with: sizes, colours, and the screen presenter mode must fit.

A theme is set per thread (each Streamlit session has its own) with :func:`using_theme`.

Presenter mode promises that a page part fits the screen without scrolling, 1280×720 at least. The browser tells the
server the window's size (views/plumbing/screen.py; until it has, the smallest screen is assumed), and the presenter
theme's figure height is the room left below the header's two lines (:func:`presenter_theme`); the page's pickers
are in the header's "Choose". A page with more above its figure builds it inside :func:`below_controls`, which
takes those rows off that height.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

# The smallest screen presenter mode fits, and the height of its header (see presenter_height below).
SCREEN_PX, SCREEN_WIDTH_PX = 720, 1280
HEADER_PX = 129


@dataclass(frozen=True)
class Theme:
    """Sizes (px) and colours every figure is built with; see :func:`theme`.

    The default is a laptop screen; :data:`PRESENTER_THEME` is a projector seen from the back row.
    """

    tick: int = 14  # tick labels and colourbar ticks
    min_tick: int = 10  # crowded tick labels shrink down to this, never below
    base: int = 15  # axis titles, annotations, legends
    title: int = 19
    hover: int = 15
    min_font: int = 0  # every text of every figure at least this (0: no floor)
    # between neighbouring tick labels, across the text: an 11 px label and its gap where the page is as wide as
    # assumed (PAGE_WIDTH_PX, a 1440 px window's); a 1280 px window's is a fifth narrower, and its labels 10 px
    min_tick_px: int = 13
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
    # Presenter mode: the screen's height, and what the header takes of it (presenter_theme).
    screen_px: int = SCREEN_PX
    top_px: int = HEADER_PX
    # A phone: every figure is this wide, whatever its share of a laptop's page (Streamlit stacks the columns),
    # and a figure of several panels puts at most max_cols of them in a row. None: as the page lays it out.
    figure_px: int | None = None
    max_cols: int | None = None

    def high_contrast(self) -> Theme:
        """Viridis instead of Blues: small weights stay visible on a washed-out projector, and it reads in
        greyscale and for colour-blind viewers. Bars turn from light blue to Viridis' dark blue (a short bar of
        0.01 stands out against the white plot), the highlighted one to the dark orange of PuOr; signed values run
        from purple to orange, and the legends of effects say orange where they said red."""
        return replace(self, prob_scale="Viridis", signed_scale="PuOr_r", warm_name="orange", bar_colour="#3b528b",
                       highlight_colour="#e66101")


# What stands above a page's figure in presenter mode (measured in Chromium at 1280×720 with presenter mode's
# CSS): HEADER_PX, the header's two lines (the sentence and its translation; the caption and "Choose", the page's
# pickers) and the gap after them, as tall with a translation of two lines as of one (the buttons at their ends set
# the lines' height); a row of controls that stays on the page (the quiz's buttons); one whose controls carry a
# label above them (a slider).
ROW_PX = 64
LABELLED_ROW_PX = 105
TEXT_LINE_PX = 43  # one more line of text above a figure
BLOCK_GAP_PX = 9  # between two blocks of the page (presenter mode's 0.45rem)
NOTE_LINE_PX = 26  # a line of the lecturer's note above the header (and the gap under the note, once)
MIN_FIGURE_PX = 200  # a presenter figure is never squeezed below this, whatever stands above it
PRESENTER_WIDTH_SCALE = 1.25  # at 1280 px with the sidebar folded, the page is this much wider than PAGE_WIDTH_PX


def presenter_height(rows: int = 0, labelled: int = 0, extra_px: int = 0, t: Theme | None = None) -> int:
    """Height of a presenter figure below the header, ``rows`` rows of unlabelled controls, ``labelled`` rows of
    labelled ones and ``extra_px`` more (a line of text), so that its bottom stays on the screen of theme ``t``
    (default: the theme in force; a theme without a screen, the smallest)."""
    t = t or theme()
    room = t.screen_px - t.top_px - rows * ROW_PX - labelled * LABELLED_ROW_PX - extra_px - 4
    return max(MIN_FIGURE_PX, room)


DEFAULT_THEME = Theme()
# A 1280×720 projector: every text ≥ 20 px, labels thinned so 20 px labels do not touch, token labels cut to
# 12 characters, and the main figure as tall as the screen leaves below the header (presenter_height()).
_PRESENTER = Theme(tick=20, min_tick=20, base=22, title=24, hover=20, min_font=20, min_tick_px=22,
                   short_axis_titles=True, max_label_chars=12, width_scale=PRESENTER_WIDTH_SCALE)


def presenter_theme(height: int = SCREEN_PX, note_lines: int = 0) -> Theme:
    """The presenter theme for a screen ``height`` px tall (never less than 720: a smaller window scrolls) under a
    lecturer's note of ``note_lines`` and the header. The width stays the smallest screen's: the figures' text is
    laid out for 1280 px, and a wider screen stretches the figures."""
    note = (note_lines + 1) * NOTE_LINE_PX if note_lines else 0
    t = replace(_PRESENTER, screen_px=max(SCREEN_PX, int(height)), top_px=HEADER_PX + note)
    return replace(t, height_px=presenter_height(t=t))


PRESENTER_THEME = presenter_theme()

# A phone (a window narrower than PHONE_PX; Streamlit stacks the page's columns below 640 px): figures are built for
# the 356 px a 390 px screen leaves them, one panel to a row, every text at least 12 px, token labels cut to 10
# characters, short axis titles, colour bars below their plots (viz.layout.enforce_min_font).
PHONE_PX, PHONE_FIGURE_PX = 500, 356
PHONE_THEME = Theme(tick=12, min_tick=12, base=13, title=15, hover=13, min_font=12, min_tick_px=14,
                    short_axis_titles=True, max_label_chars=10, figure_px=PHONE_FIGURE_PX, max_cols=1)
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
def below_controls(rows: int = 0, labelled: int = 0, extra_px: int = 0) -> Iterator[Theme]:
    """Build the figures inside the block to fit below the header and these controls (see
    :func:`presenter_height`); outside presenter mode the theme is left as it is."""
    t = theme()
    if not t.height_px:
        yield t
        return
    with using_theme(replace(t, height_px=presenter_height(rows, labelled, extra_px, t))) as shorter:
        yield shorter


def figure_width(width_px: float | None, default: float = 700) -> float:
    """The width (px) a figure built for ``width_px`` of a laptop's page (``default`` when not given) gets on the
    screen of the theme in force: a phone's every figure is its screen's width."""
    t = theme()
    return t.figure_px or (width_px or default) * t.width_scale


def fit_height(height: int | None) -> int | None:
    """A figure's ``height`` in the theme in force: no taller than a presenter figure may be."""
    cap = theme().height_px
    return min(int(height), cap) if height and cap else height
