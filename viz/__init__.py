"""Plotly figures and pandas tables for Attention Atlas; NumPy and token lists in, no torch.

Shape letters, the same in model/ and every viz module's shape comments:

    b  batch                      L    layers
    h  heads                      d    d_model
    s  source positions           d_k  per-head size (d_model / h)
    t  target positions           V    vocabulary size
    i  query positions (rows)     j    key positions (columns)

so one head's attention is (i, j): (s, s) for encoder self-attention, (t, t)
for decoder self-attention, (t, s) for cross-attention; a layer's is (h, i, j)
and a whole trace's (L, h, i, j).

Conventions: query on the y axis (first token at the top), key on the x axis,
integer axes with token tick labels (thinned when crowded; hover names every
token), functions taking both token lists take them as (z, query/row tokens,
key/column tokens), probabilities on a fixed 0..1 scale and written with
``text.fmt_prob`` (3 decimals), titles wrapped by ``layout.style``, masks
bool with True = may attend (False = masked: NaN in z plus a grey trace named
"masked"). Heads and layers are labelled 1-based in figures; ``layer``
arguments are 0-based indices. Tokens are HTML-escaped in figures, not in tables.

Modules (import them directly, e.g. ``from viz.attention import heads_figure``):

- text: escape_token(s), fmt_prob, fmt_share, PROB_D3, wrap_title, title_lines (plain strings, no plotly)
- theme: Theme, theme, using_theme, below_controls, presenter_height, fit_height
  (DEFAULT_THEME, PRESENTER_THEME: font sizes, label spacing, colour scales; high_contrast())
- kinds: KIND_NAMES, axis_titles, kind_sides; languages, using_languages (the axes' language labels)
- scales: PROB_SCALE, SIGNED_SCALE, resolve_scale (colour scales by role, from the theme); effect_scale,
  effect_colours, effect_legend, effect_words (effects on the translation: red = worse, on every page)
- layout: figure, validating, style, styled_figure, PAGE_WIDTH_PX, text_px, label_margins, fit_margins,
  enforce_min_font, floor_fonts (figures built without validation, their styling, margins and fonts)
- token_axes: axis_ticks, tick_step, token_axis, cell_names, heatmap_height, plot_rows_px, plot_width_px,
  label_px (which token labels fit, and the plot sizes that follow)
- heatmap: heatmap, facet_heatmaps, heatmap_traces, grid_figure, cell_axes, as_mask, check_tokens,
  MASK_TRACE_NAME
- transport: figure_json, browser_json (a built figure as JSON for the browser, without plotly's validation)
- look: bake (the app's chart look written into a figure, so that Plotly draws it once)
- axis_notes: place_titles (axis titles as notes past the tick labels, so that Plotly measures no label)
- attention: attention_figure, heads_figure, overview_figure, row_sums, rows_sum_to_one,
  sink_key, robust_zmax, saturated_share, rescale_note; weight_zmax, weight_colorbar_title,
  weight_colorbar_ticks (the weights' colour bar, which compare shares)
- embeddings: embedding_heatmap, scaling_figure, embedding_stages_figure, pca_2d,
  vocab_map_figure, nearest_neighbours
- positional: sinusoidal_encoding, waves_figure, pe_heatmap, position_similarity_figure
- head: matrix_figure, vectors_figure, probs_figure, dropout_figure, with_row_sums,
  head_pipeline_figures, head_pipeline_rows (one figure per row of the Inside-one-head page)
- panels: panel_row (built figures side by side as one figure: one chart instead of several)
- masks: mask_figure (of a mask the model recorded; viz builds no masks from tokens)
- decoding: candidates_figure, step_cross_attention_figure, decoding_table
- architecture: parameter_table, architecture_figure
- compare: Side, side_by_side_figure (two traces, head by head, each with its own axes)
- heads: head_grid_figure, offset_pattern_figure, pruning_figure (the Heads page's report card)
- training: loss_figure, entropy_figure, toy_loss_figure (the Training page's curves)
- tables: matrix_csv, heads_csv, candidates_csv (matrices as CSV text)
- quiz: Question, next_word, looks_at, shuffled, nearly_tied (presenter mode's quiz questions from a
  step's numbers; no plotly)
"""
