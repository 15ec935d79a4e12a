"""The data of a lesson file: traced translations as plain NumPy arrays and strings, ready for viz/lesson.py.

The lesson file (`python -m model.export SENTENCE… --html FILE`, or the app's download) is one HTML page that
holds the app's figures for one or several sentences and opens offline. This module only gathers what those
figures draw, from the records the Translator returns; it knows no Plotly (model/ never imports viz/; the command
line model/export.py joins the two). Shape letters: see model/__init__.py.
"""
from __future__ import annotations

import numpy as np

from model.records import KINDS, Translation


def lesson_model(translator, name: str) -> dict:
    """The model facts the lesson's header states and its figures need (languages, sizes, the positional layout)."""
    cfg = translator.cfg
    return {"name": name, "src_lang": translator.src_lang, "tgt_lang": translator.tgt_lang,
            "parameters": int(sum(translator.parameter_counts().values())), "d_model": int(cfg.d_model),
            "n_heads": int(cfg.n_heads), "n_encoder_layers": int(cfg.n_encoder_layers),
            "n_decoder_layers": int(cfg.n_decoder_layers), "max_len": int(cfg.max_len),
            "pe_layout": getattr(cfg, "pe_layout", "interleaved"), "test_bleu": _test_bleu(translator.metrics),
            # what the family adds to a token (docs/models.md): the lesson's figures and words follow them
            "positions": cfg.positions, "pos_offset": int(cfg.pos_offset), "scale_embedding": cfg.scale_embedding,
            "scale_attention": cfg.scale_attention, "norm": cfg.norm, "embed_norm": cfg.embed_norm}


def _test_bleu(metrics: dict) -> dict | None:
    """{"split", "greedy"} of the checkpoint's test score (metrics.json), or None when it has none."""
    test = metrics.get("test") if isinstance(metrics, dict) else None
    score = test.get("greedy", {}).get("sacrebleu") if isinstance(test, dict) else None
    return {"split": str(test.get("split", "test")), "greedy": float(score)} if score is not None else None


def lesson_sentence(translation: Translation, decoding: str | None = None) -> dict:
    """One traced sentence as the lesson draws it: what the model recorded, never rebuilt from token strings.

    `decoding` overrides the translation's own description (the app traces beam search along its tokens).
    """
    st = translation.trace
    if st is None:
        raise ValueError("the translation has no trace: the sentence is empty")
    steps = []
    for s in translation.steps or []:
        top_tokens, top_probs = list(s.top_tokens), [float(p) for p in s.top_probs]
        chosen = s.top_ids.index(s.chosen) if s.chosen in s.top_ids else len(top_tokens)
        if chosen == len(top_tokens):  # a forced token outside the top-k is added, as on the Decoding page
            top_tokens.append(s.chosen_token)
            top_probs.append(float(s.chosen_prob))
        steps.append({"prefix": list(s.prefix_tokens), "top_tokens": top_tokens, "top_probs": top_probs,
                      "chosen": chosen, "chosen_token": s.chosen_token, "chosen_prob": float(s.chosen_prob),
                      "forced": bool(s.forced),
                      "cross": np.asarray(s.cross, dtype=np.float32)})  # (L, h, s) this step's query
    src = translation.source
    return {
        "source_tokens": list(src.tokens), "unknown": [bool(u) for u in src.unknown], "dropped": list(src.dropped),
        "translation": translation.text,
        "decoding": decoding or ("greedy decoding" if translation.decoding == "greedy" else translation.decoding),
        "finished": bool(translation.finished),
        "src_tokens": list(st.src_tokens), "tgt_tokens": list(st.tgt_tokens),
        "probs": {kind: st.probs(kind) for kind in KINDS},  # kind -> (L, h, i, j)
        "masks": {kind: np.stack([np.asarray(layer["mask"], dtype=bool) for layer in st.attn[kind]])
                  for kind in KINDS},  # kind -> (L, i, j) True = may attend, as the model used it
        "src_embed": dict(st.src_embed), "tgt_embed": dict(st.tgt_embed),  # stage -> (s, d) / (t, d)
        "steps": steps,
    }


def lesson_data(translator, translations: list[tuple[Translation, str | None]], name: str) -> dict:
    """{"model": lesson_model, "sentences": [lesson_sentence, ...]} for (translation, decoding) pairs."""
    return {"model": lesson_model(translator, name),
            "sentences": [lesson_sentence(t, how) for t, how in translations]}
