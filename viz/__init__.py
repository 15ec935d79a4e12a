"""Plotly figures and pandas tables for Attention Atlas; NumPy and token lists in, no torch.

Conventions: query on the y axis (first token at the top), key on the x axis,
integer axes with token tick labels, probabilities on a fixed 0..1 scale, masks
bool with True = may attend (False = masked: NaN in z plus a grey trace named
"masked"). Heads and layers are labelled 1-based in figures; ``layer``
arguments are 0-based indices. Tokens are HTML-escaped in figures, not in tables.

Modules (import them directly, e.g. ``from viz.attention import heads_figure``):

- common: heatmap, facet_heatmaps, escape_token(s), as_mask, axis_titles, style
- attention: attention_figure, heads_figure, overview_figure, row_sums, rows_sum_to_one,
  sink_key, robust_zmax
- embeddings: embedding_heatmap, scaling_figure, embedding_stages_figure, pca_2d,
  vocab_map_figure, nearest_neighbours
- positional: sinusoidal_encoding, waves_figure, pe_heatmap, position_similarity_figure
- head: matrix_figure, vectors_figure, probs_figure, dropout_figure, with_row_sums,
  head_pipeline_figures
- masks: causal_mask, padding_mask, mask_figure, padding_demo_figure
- decoding: candidates_figure, step_cross_attention_figure, decoding_table
- architecture: parameter_table, architecture_figure
"""
