"""What attention carries, not only where it points: value norms and ALTI+, from one teacher-forced pass.

- **Value norms** (Kobayashi et al. 2020, "Attention is not only a weight"): head h moves
  α_ij · f_h(x_j) from key j to query i, with f_h(x) = (x W_V,h + b_V,h) W_O,h; its norm ‖α_ij f_h(x_j)‖ says how
  much moved, where α_ij alone says only where the head looked. For a layer: ‖Σ_h α_ij,h f_h(x_j)‖.
- **ALTI+** (Ferrando et al. 2022, "Towards Opening the Black Box of Neural Machine Translation"; the reference is
  mt-upc/transformer-contributions-nmt, `get_contributions` and `get_contribution_rollout`). An attention block's
  output y_i is a sum of transformed vectors T_i(x_j), one per key, plus the residual (on the diagonal for
  self-attention; an extra column for cross-attention, the decoder's own stream) and the bias; a post-norm block's
  norm is linear once its σ is fixed, so it is taken through too. Token j's contribution to position i is
  max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), each row normalised to sum 1 (the reference's `l1` and `min_sum`). The
  layers' matrices are then rolled out through the network: for each decoder position, the share of every source
  token and of every earlier decoder token; the source tokens' sum is the **source share**.

Two departures from the reference, both where it is wrong: σ is the norm's own (√(biased variance + ε); the
reference takes the unbiased std of x + ε), and the attention weights are the model's own (the reference recomputes
them without the 1/√d_k, right only through an in-place multiply of fairseq's). RMSNorm (T5) has no mean: its linear
part is the division by the recorded root mean square and the scale. T5's position bias lives inside the weights.
Every block's decomposition is exact: :func:`block_alti` returns its y, which tests compare with the recorded
output (1e-5, float64).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from model.nn.layers import GemmaRMSNorm


@dataclass
class Contributions:
    """The arrays of one teacher-forced pass (float64). Rows are receiving positions: decoder row t reads
    ``decoder_tokens[t]`` and predicts the next token.

    ``alti``: "enc_self" (L_enc, S, S), "dec_self" (L_dec, T, T), "cross" (L_dec, T, S + 1: the last column is the
    residual), "total" (L_dec, T, S + T: the rollout after each decoder layer, the source tokens first),
    "source_share" (T,). ``value_norm`` and ``attention``: "enc_self" (L, H, S, S), "dec_self" (L, H, T, T),
    "cross" (L, H, T, S); ``value_norm_layer``: the same without the head axis (‖Σ_h α f_h‖)."""

    source_tokens: list[str]
    decoder_tokens: list[str]
    alti: dict[str, np.ndarray] = field(default_factory=dict)
    value_norm: dict[str, np.ndarray] = field(default_factory=dict)
    value_norm_layer: dict[str, np.ndarray] = field(default_factory=dict)
    attention: dict[str, np.ndarray] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The record as python -m model.contributions writes it (docs/contributions.md)."""
        def lists(d: dict) -> dict:
            return {k: np.round(v, 6).tolist() for k, v in d.items()}
        return {"source_tokens": self.source_tokens, "decoder_tokens": self.decoder_tokens,
                "alti": lists(self.alti), "value_norm": lists(self.value_norm),
                "value_norm_layer": lists(self.value_norm_layer), "attention": lists(self.attention)}


def _stack(kind: str) -> str:
    return "encoder" if kind == "enc_self" else "decoder"


def _attn(kind: str) -> str:
    return "cross_attn" if kind == "cross" else "attn"


def _points(kind: str, layer: int) -> tuple[str, str, str]:
    """(the block's residual input, its recorded output, its attention's prefix) hook names."""
    s = f"{_stack(kind)}.{layer}"
    if kind == "cross":
        return f"{s}.hook_resid_mid", f"{s}.hook_resid_mid_cross", f"{s}.cross_attn"
    return f"{s}.hook_resid_pre", f"{s}.hook_resid_mid", f"{s}.attn"


def points(n_enc: int, n_dec: int) -> list[str]:
    """The hook points contributions read, for a model of these layer counts."""
    names = []
    for kind, n in (("enc_self", n_enc), ("dec_self", n_dec), ("cross", n_dec)):
        for layer in range(n):
            res, out, attn = _points(kind, layer)
            names += [res, out, f"{attn}.hook_v", f"{attn}.hook_pattern"]
    return names


def head_outputs(v: torch.Tensor, w_o: torch.nn.Linear) -> torch.Tensor:
    """f_h(x_j) = v_jh W_O,h for every head and key: (h, j, d) from the values ``v`` (j, h_kv, d_head), which already
    hold x_j W_V,h + b_V,h. Under grouped-query attention (h_kv < h) query head h reads value head h // (h / h_kv)."""
    d_head = v.shape[2]
    h = w_o.weight.shape[1] // d_head
    v = v.repeat_interleave(h // v.shape[1], dim=1) if v.shape[1] != h else v  # (j, h, d_head)
    w = w_o.weight.double().T.reshape(h, d_head, -1)  # (h, d_head, d): W_O's rows of each head
    return torch.einsum("jhk,hkd->hjd", v.double(), w)


@torch.no_grad()
def value_norms(v: torch.Tensor, pattern: torch.Tensor, w_o: torch.nn.Linear) -> tuple[np.ndarray, np.ndarray]:
    """(‖α_ij,h f_h(x_j)‖ (h, i, j), ‖Σ_h α_ij,h f_h(x_j)‖ (i, j)) from ``v`` (j, h, d_head), ``pattern`` (h, i, j)."""
    f = head_outputs(v, w_o)  # (h, j, d)
    a = pattern.double()
    per_head = a * f.norm(dim=-1)[:, None, :]  # ‖α f‖ = α ‖f‖: α ≥ 0
    layer = torch.einsum("hij,hjd->ijd", a, f).norm(dim=-1)
    return per_head.numpy(), layer.numpy()


def _linear_norm(t: torch.Tensor, pre: torch.Tensor, norm: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """A post-norm block's norm taken through the parts ``t`` (i, n, d) of its input ``pre`` (i, d) = Σ_n t: the
    norm's linear part with σ fixed at the recorded one, per part, and what the norm adds (i, d) once."""
    eps = norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
    gamma = norm.weight.double() + (1.0 if isinstance(norm, GemmaRMSNorm) else 0.0)  # Gemma scales by 1 + w
    if isinstance(norm, (torch.nn.RMSNorm, GemmaRMSNorm)):  # no mean to subtract, no bias
        sigma = (pre.pow(2).mean(-1, keepdim=True) + eps).sqrt()  # (i, 1)
        return t * (gamma / sigma)[:, None, :], torch.zeros_like(pre)
    sigma = (pre.var(-1, unbiased=False, keepdim=True) + eps).sqrt()  # the LayerNorm's own σ
    parts = (t - t.mean(-1, keepdim=True)) * (gamma / sigma)[:, None, :]
    beta = norm.bias.double() if norm.bias is not None else torch.zeros_like(gamma)
    return parts, beta.expand_as(pre)


@torch.no_grad()
def block_alti(x_res: torch.Tensor, v: torch.Tensor, pattern: torch.Tensor, attn: torch.nn.Module,
               norm: torch.nn.Module, norm_first: bool, cross: bool,
               post: torch.nn.Module | None = None) -> tuple[np.ndarray, torch.Tensor]:
    """One attention block's ALTI matrix (i, j), (i, j + 1) for cross-attention, and its decomposed output y (i, d).

    ``x_res`` (i, d): the block's residual input; ``v`` (j, h_kv, d_head) and ``pattern`` (h, i, j): its values and
    weights as recorded; ``attn``: the MultiHeadAttention (W_O, b_O); ``norm``: the sub-layer's norm; ``post``: the
    norm after the sub-layer (Gemma 2: x + P(attention)), taken through the parts as a post-norm block's is."""
    x_res = x_res.double()
    t = torch.einsum("hij,hjd->ijd", pattern.double(), head_outputs(v, attn.w_o))  # (i, j, d) transformed vectors
    b_o = attn.w_o.bias.double() if attn.w_o.bias is not None else torch.zeros(x_res.shape[1], dtype=t.dtype)
    if post is not None:  # P's linear part with its σ fixed, per part; what P adds joins the bias
        t, added = _linear_norm(torch.cat([t, b_o.expand(t.shape[0], 1, -1)], dim=1), t.sum(1) + b_o, post)
        t, b_o = t[:, :-1], t[:, -1] + added
    if cross:  # the decoder's own stream: one more "token"
        t = torch.cat([t, x_res[:, None, :]], dim=1)
    else:
        t = t + torch.diag_embed(torch.ones(x_res.shape[0], dtype=t.dtype)).unsqueeze(-1) * x_res[None, :, :]
    if norm_first:
        y = t.sum(1) + b_o
    else:
        pre = t.sum(1) + b_o
        t, added = _linear_norm(torch.cat([t, b_o.expand(t.shape[0], 1, -1)], dim=1), pre, norm)
        t, bias = t[:, :-1], t[:, -1]
        y = t.sum(1) + bias + added
    c = (y.abs().sum(-1, keepdim=True) - (y[:, None, :] - t).abs().sum(-1)).clamp(min=0)  # (i, n)
    return (c / c.sum(-1, keepdim=True).clamp(min=1e-30)).numpy(), y


def rollout_encoder(c: np.ndarray) -> np.ndarray:
    """(L, S, S) ALTI matrices -> their rollout after each layer (L, S, S): R_l = C_l R_(l-1)."""
    out = [c[0]]
    for layer in range(1, len(c)):
        out.append(c[layer] @ out[-1])
    return np.stack(out)


def rollout_decoder(cross: np.ndarray, dec_self: np.ndarray, enc_rollout: np.ndarray) -> np.ndarray:
    """The whole network's rollout after each decoder layer (L, T, S + T), as the reference's
    `get_contribution_rollout`: a layer's self-attention shares are scaled by its cross-attention's residual
    column, its cross-attention shares reach the source through the encoder's rollout ``enc_rollout`` (S, S)."""
    s = cross.shape[2] - 1
    joint = np.concatenate([cross[:, :, :s] @ enc_rollout, dec_self * cross[:, :, -1:]], axis=-1)  # (L, T, S + T)
    out = [joint[0]]
    for layer in range(1, len(joint)):
        own, prev = joint[layer][:, s:], out[-1]  # (T, T), (T, S + T)
        new = np.concatenate([own @ prev[:, :s] + joint[layer][:, :s], own @ prev[:, s:]], axis=-1)
        out.append(new / new.sum(-1, keepdims=True))
    return np.stack(out)


def _blocks(model, kind: str, layer: int) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(the attention, the sub-layer connection holding its norm) of one block of the native network."""
    if kind == "enc_self":
        block = model.encoder[layer]
        return block.attn, block.sub[0]
    block = model.decoder[layer]
    return (block.attn, block.sub[0]) if kind == "dec_self" else (block.cross_attn, block.sub[1])


def post_norm(model, kind: str, layer: int) -> torch.nn.Module | None:
    """The norm after the block's attention (Gemma 2's attn_post_ln, cross_attn_post_ln), or None."""
    block = (model.encoder if kind == "enc_self" else model.decoder)[layer]
    return getattr(block, f"{_attn(kind)}_post_ln", None)


@torch.no_grad()
def from_cache(model, cache: dict, source_tokens: list[str], decoder_tokens: list[str]) -> Contributions:
    """Value norms and ALTI+ of every block from a pass's ``cache`` (the names of :func:`points`, batch of one)."""
    cfg = model.cfg
    out = Contributions(source_tokens, decoder_tokens)
    for kind, n in (("enc_self", cfg.n_encoder_layers), ("dec_self", cfg.n_decoder_layers),
                    ("cross", cfg.n_decoder_layers)):
        alti, norms, layer_norms, weights = [], [], [], []
        for layer in range(n):
            res, _, prefix = _points(kind, layer)
            attn, sub = _blocks(model, kind, layer)
            v, pattern = cache[f"{prefix}.hook_v"][0], cache[f"{prefix}.hook_pattern"][0]
            per_head, whole = value_norms(v, pattern, attn.w_o)
            c, _ = block_alti(cache[res][0], v, pattern, attn, sub.norm, sub.norm_first, kind == "cross",
                              post_norm(model, kind, layer))
            alti.append(c)
            norms.append(per_head)
            layer_norms.append(whole)
            weights.append(pattern.double().numpy())
        out.alti[kind], out.value_norm[kind] = np.stack(alti), np.stack(norms)
        out.value_norm_layer[kind], out.attention[kind] = np.stack(layer_norms), np.stack(weights)
    enc = rollout_encoder(out.alti["enc_self"])[-1]
    out.alti["total"] = rollout_decoder(out.alti["cross"], out.alti["dec_self"], enc)
    s = len(source_tokens)
    out.alti["source_share"] = out.alti["total"][-1][:, :s].sum(-1)
    return out


def contributions(translator, text: str, target: list[str] | None = None) -> Contributions:
    """Value norms and ALTI+ of ``text`` teacher-forced on ``target`` (target tokens; by default the model's own
    greedy translation, its end token included when it finished): decoder row t reads the start token and the
    target's first t tokens, and predicts token t + 1."""
    cfg = translator.model.cfg
    # a given target is the rows' labels as they are (a translation cut at its length limit has no end token)
    src, tgt_in = translator.forced_tensors(text, target, eos=target is None)
    with torch.inference_mode():
        _, cache = translator.model.run_with_cache(src, tgt_in, points(cfg.n_encoder_layers, cfg.n_decoder_layers))
    source = translator.prepare(text).axis_tokens
    return from_cache(translator.model, cache, list(source), translator.tgt_vocab.decode(tgt_in[0].tolist()))
