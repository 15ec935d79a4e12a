"""The decoder read layer by layer (logit lens), and why token A rather than token B (contrastive attribution).

Shape letters: see model/__init__.py (L layers, h heads, s source positions, V target vocabulary). Teacher
forcing as in model/analysis/patch.py: step i (0-based) is the choice of tgt_tokens[i] after <bos> tgt_tokens[:i].

  logit lens             each decoder layer's output at step i passed through the final decoder norm and the
                         generator, as if the decoder ended there (nostalgebraist 2020): its top-k candidates and
                         the probability it gives the chosen token. The last layer's row is the model's own
                         distribution. A post-norm model (Marian) has no final decoder norm: each layer's output is
                         already normalised by its last sub-layer's LayerNorm and goes to the generator as it is.
  contrastive attribution why A and not B at step i (Yin & Neubig 2022, "Interpreting Language Models with
                         Contrastive Explanations"; Inseq's contrast_prob_diff with logprobs=True): the objective is
                         log p(A) − log p(B), which equals the logit difference (the softmax normaliser cancels).
                           input_x_grad: Σ_d e_jd · ∂(log p(A) − log p(B)) / ∂e_jd per source token j, with
                             e_j the token's embedding row × √d_model, as in attribution.py's input × gradient;
                             positive: the word pushes towards A rather than B (nats, to first order).
                           relevance: Chefer et al. 2021's gradient-weighted relevance (attribution.relevance_rules)
                             with the gradients of the same difference: non-negative, sums to 1 (0 if nothing is
                             positive).
                           heads: the change of log p(A) − log p(B) when one head alone is switched off
                             (model/analysis/patch.py's knockout, batched), and the heads ranked by its size.
                         A against A is 0 everywhere: the objective is the constant 0.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from model.analysis.attribution import attribute_ids
from model.analysis.patch import DEFAULT_BATCH_TOKENS, KINDS, forced_tensors, knockout_scores
from model.nn.transformer import EncoderDecoder
from model.records import Contrast, LogitLens


@torch.inference_mode()
def logit_lens_ids(model: EncoderDecoder, src_ids: Sequence[int], tgt_ids: Sequence[int], bos: int,
                   steps: Sequence[int], k: int = 5) -> dict:
    """{"top_ids", "top_probs": (P, L, k), "chosen_probs", "chosen_ranks": (P, L)} at the given steps.

    Only the decoder positions up to the last step asked for are run (later ones cannot change them).
    """
    steps = [int(i) for i in steps]
    if not steps or any(not 0 <= i < len(tgt_ids) for i in steps):
        raise ValueError(f"steps must be target positions 0..{len(tgt_ids) - 1}, got {steps}")
    src, tgt_in, gold = forced_tensors(model, src_ids, tgt_ids, bos)
    _, cache = model.run_with_cache(src, tgt_in[:, : max(steps) + 1],
                                    lambda n: n.startswith("decoder.") and n.endswith(".hook_resid_post"))
    at = torch.tensor(steps, dtype=torch.long, device=src.device)
    layers = torch.stack([cache[f"decoder.{l}.hook_resid_post"][0, at] for l in range(model.cfg.n_decoder_layers)],
                         dim=1)  # (P, L, d)
    # read as the last layer is: the final norm, the generator's scale (T5 v1.0), the generator
    probs = model.generator(model.decoder_final_ln(layers) * model.cfg.generator_scale).exp()  # (P, L, V)
    top = probs.topk(min(k, probs.shape[-1]), dim=-1)
    chosen = probs.gather(-1, gold[at].view(-1, 1, 1).expand(-1, probs.shape[1], 1))  # (P, L, 1)
    ranks = 1 + (probs > chosen).sum(-1)  # (P, L) ties share the better rank
    return {"steps": steps, "top_ids": top.indices.cpu().numpy(), "top_probs": top.values.double().cpu().numpy(),
            "chosen_probs": chosen[..., 0].double().cpu().numpy(), "chosen_ranks": ranks.cpu().numpy()}


def logit_lens(translator, text: str, tgt_tokens: Sequence[str], step: int, k: int = 5) -> LogitLens:
    """The logit lens of `text` teacher-forced on `tgt_tokens`, at 0-based `step`."""
    tv = translator.tgt_vocab
    res = logit_lens_ids(translator.model, translator.prepare(text).ids, tv.encode(list(tgt_tokens)), tv.bos_idx,
                         [step], k)
    return LogitLens(step=int(step), chosen_token=tgt_tokens[step],
                     top_tokens=[tv.decode(row) for row in res["top_ids"][0].tolist()], top_ids=res["top_ids"][0],
                     top_probs=res["top_probs"][0], chosen_probs=res["chosen_probs"][0],
                     chosen_ranks=res["chosen_ranks"][0])


def contrast_ids(model: EncoderDecoder, src_ids: Sequence[int], tgt_ids: Sequence[int], bos: int, step: int,
                 target_id: int, foil_id: int, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> dict:
    """{"log_prob_diff", "input_x_grad" (s,), "relevance" (s,), "heads": kind -> (L, h)} of log p(A) − log p(B)."""
    if not 0 <= step < len(tgt_ids):
        raise ValueError(f"step must be a target position 0..{len(tgt_ids) - 1}, got {step}")
    # Later positions cannot change this step: the sentence is read up to it, with A there.
    forced = list(tgt_ids[:step]) + [target_id]
    res = attribute_ids(model, list(src_ids), forced, bos, ("relevance", "input_x_grad"), None, "log_prob", [step],
                        foil_id)
    src, tgt_in, _ = forced_tensors(model, src_ids, forced, bos)

    def readout(states: torch.Tensor) -> torch.Tensor:  # (b, t, d) -> (b, 1)
        lp = model.generator(states[:, step])  # (b, V)
        return (lp[:, target_id] - lp[:, foil_id]).unsqueeze(1)

    _, heads = knockout_scores(model, src, tgt_in, readout, batch_tokens)
    return {"log_prob_diff": float(res["chosen_log_probs"][0]), "input_x_grad": res["signed"]["input_x_grad"][0],
            "relevance": res["matrices"]["relevance"][0],
            "heads": {kind: v[..., 0] for kind, v in heads.items()}}


def ranked_heads(heads: dict[str, np.ndarray], n: int | None = None) -> list[tuple[str, int, int, float]]:
    """(kind, 0-based layer, 0-based head, value) sorted by |value|, largest first (ties: KINDS order)."""
    flat = []
    for kind in KINDS:
        if kind in heads:
            v = heads[kind]  # (L, h)
            flat += [(kind, l, hh, float(v[l, hh])) for l in range(v.shape[0]) for hh in range(v.shape[1])]
    flat.sort(key=lambda x: -abs(x[3]))  # stable: equal sizes keep the KINDS, layer, head order
    return flat[:n] if n is not None else flat


def contrast(translator, text: str, tgt_tokens: Sequence[str], step: int, foil: str, target: str | None = None,
             batch_tokens: int = DEFAULT_BATCH_TOKENS) -> Contrast:
    """Why `target` (default: tgt_tokens[step], the token chosen) and not `foil` at 0-based `step`.

    Both must be tokens of the target vocabulary (ValueError otherwise: <unk> would stand for either).
    """
    tv = translator.tgt_vocab
    target = tgt_tokens[step] if target is None else target
    for token in (target, foil):
        if token not in tv:
            raise ValueError(f"{token!r} is not a token of the target vocabulary")
    source = translator.prepare(text)
    res = contrast_ids(translator.model, source.ids, tv.encode(list(tgt_tokens)), tv.bos_idx, step,
                       tv.stoi[target], tv.stoi[foil], batch_tokens)
    return Contrast(src_tokens=source.axis_tokens, step=int(step), target=target, foil=foil,
                    log_prob_diff=res["log_prob_diff"], input_x_grad=res["input_x_grad"],
                    relevance=res["relevance"], heads=res["heads"], top_heads=ranked_heads(res["heads"]))
