"""model/nn: a hook point's name is the path of the module that makes it (`encoder.0.attn.hook_q` is made by
`model.encoder[0].attn`), the names are read from the modules, and weights stored under the module names from
before (encoder_layers.0.self_attn..., ...ff..., encoder_norm...) load as today's."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from model.inference.translator import Translator
from model.io.checkpoint import WEIGHTS, load_checkpoint, load_weights_into, save_checkpoint, weights_state
from model.nn.config import ModelConfig
from model.nn.hooks import EXPLICIT, module_points
from model.nn.transformer import EncoderDecoder, hook_names, renamed_state

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = sorted(p for p in (ROOT / "checkpoints").iterdir() if (p / "config.json").is_file()) + [
    ROOT / "tests" / "data" / "reference" / "tiny-marian"]  # imported: a post-norm Marian, shared vocabulary
FAMILIES = {
    "pre-norm": {}, "post-norm": {"norm_first": False}, "gated": {"ff_gated": True},
    "t5": {"norm": "rms", "positions": "relative", "ff_gated": True, "bias": False, "scale_attention": False},
    "mbart": {"positions": "learned", "pos_offset": 2, "embed_norm": True},
    "m2m100": {"pe_layout": "fairseq", "pos_offset": 2}, "layers-1-4": {"n_encoder_layers": 1, "n_decoder_layers": 4},
    "t5gemma": {"norm": "gemma_rms", "positions": "rotary", "n_kv_heads": 1, "encoder_windows": "3,0,3",
                "attn_softcap": 5.0, "final_softcap": 3.0, "sublayer_post_norm": True, "query_pre_attn_scalar": 6.0,
                "ff_gated": True, "bias": False},
}


def _configs() -> dict[str, ModelConfig]:
    out = {name: ModelConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=8, n_heads=2, d_ff=8, **kw)
           for name, kw in FAMILIES.items()}
    out.update({p.name: ModelConfig.load(p / "config.json") for p in FOLDERS})
    return out


CONFIGS = _configs()


def hand_written(cfg) -> list[str]:
    """hook_names as it was written by hand before the modules declared their points: the expected list."""
    rotary, capped, post = (getattr(cfg, "positions", "") == "rotary", bool(getattr(cfg, "attn_softcap", 0)),
                            getattr(cfg, "sublayer_post_norm", False))

    def attn(a: str) -> list[str]:
        rot = ["hook_rot_q", "hook_rot_k"] * (rotary and a == "attn")
        return [f"{a}.{p}" for p in ("hook_q", "hook_k", "hook_v", *rot, EXPLICIT[0],
                                     *["hook_softcapped_scores"] * capped, *EXPLICIT[1:], "hook_z")]

    def sub(a: str, resid: str) -> list[str]:
        return [*[f"{a}_post_ln.hook_normalized"] * post, f"hook_{a}_out", resid]

    mlp = ["mlp.hook_pre", *["mlp.hook_pre_linear"] * getattr(cfg, "ff_gated", False), "mlp.hook_post",
           *sub("mlp", "hook_resid_post")]
    enc = ["hook_resid_pre", *attn("attn"), *sub("attn", "hook_resid_mid"), *mlp]
    dec = (["hook_resid_pre", *attn("attn"), *sub("attn", "hook_resid_mid"), *attn("cross_attn"),
            *sub("cross_attn", "hook_resid_mid_cross"), *mlp])
    relative = getattr(cfg, "positions", "sinusoidal") in ("relative", "rotary")
    embed = (["hook_token_embed", "hook_embed"] + ["hook_pos_embed"] * (not relative)
             + ["embed_ln.hook_normalized"] * getattr(cfg, "embed_norm", False)
             + ["hook_pos_bias"] * (getattr(cfg, "positions", "") == "relative"))
    return (embed + [f"encoder.{l}.{p}" for l in range(cfg.n_encoder_layers) for p in enc]
            + ["encoder_final_ln.hook_normalized"] * cfg.norm_first + [f"decoder.{p}" for p in embed]
            + [f"decoder.{l}.{p}" for l in range(cfg.n_decoder_layers) for p in dec]
            + ["decoder_final_ln.hook_normalized"] * cfg.norm_first)


def _skeleton(cfg: ModelConfig) -> EncoderDecoder:
    with torch.device("meta"):
        return EncoderDecoder(cfg, init=False)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_names_read_from_the_modules_are_the_hand_written_ones(name):
    cfg = CONFIGS[name]
    want = hand_written(cfg)
    assert hook_names(cfg) == want
    assert module_points(_skeleton(cfg)) == want  # the model itself, at its real sizes, says the same


def _declarer(model, point_name: str) -> str | None:
    """The path of the nearest module at or above the point's path whose hook_points() declare it."""
    parts = point_name.split(".")
    for n in range(len(parts) - 1, -1, -1):
        path = ".".join(parts[:n])
        try:
            module = model.get_submodule(path)
        except AttributeError:
            continue
        if ".".join(parts[n:]) in getattr(module, "hook_points", list)():
            return path
    return None


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_point_is_made_by_the_module_its_name_is_the_path_of(name):
    model = _skeleton(CONFIGS[name])
    for point_name in hook_names(model.cfg):
        path = point_name.rpartition(".")[0]  # "" for a top-level point: the root model's
        if path.rpartition(".")[2] == "embed_ln":
            # The embedding norm (mBART) stays in src_embed/tgt_embed, so that stored keys keep their names; the
            # root or the decoder, which name the embedding's points, declare it.
            assert (model.src_embed if path == "embed_ln" else model.tgt_embed).norm is not None
            assert _declarer(model, point_name) == path.rpartition(".")[0]
            continue
        assert isinstance(model.get_submodule(path), torch.nn.Module), point_name
        # a final norm is torch's own LayerNorm: the root, which calls it, declares its point; a norm after a
        # sub-layer (T5Gemma) is declared by the layer that calls it, alike
        want = "" if path.endswith("_final_ln") else path.rpartition(".")[0] if path.endswith("_post_ln") else path
        assert _declarer(model, point_name) == want, point_name


def test_the_stacks_are_lists_of_layers_that_name_the_decoders_embedding(tiny_model):
    model = tiny_model
    assert isinstance(model.encoder, torch.nn.ModuleList) and len(model.decoder) == model.cfg.n_decoder_layers
    assert list(model.decoder) == [model.decoder[l] for l in range(model.cfg.n_decoder_layers)]
    assert model.decoder[1].cross_attn is model.get_submodule("decoder.1.cross_attn")
    assert model.decoder.points == ("hook_token_embed", "hook_embed", "hook_pos_embed")
    assert not hasattr(model.decoder, "lut") and "decoder.hook_embed" in hook_names(model.cfg)
    names = {n for n, _ in model.named_modules()}
    assert {"encoder.0.attn", "encoder.0.mlp", "decoder.0.cross_attn", "encoder_final_ln", "decoder_final_ln"} <= names
    assert not any(part in n.split(".") for n in names for part in ("encoder_layers", "self_attn", "ff"))


# --------------------------------------------------------------------------- weights under the old names

OLD = {"encoder.": "encoder_layers.", "decoder.": "decoder_layers.", "encoder_final_ln.": "encoder_norm.",
       "decoder_final_ln.": "decoder_norm."}


def old_names(state: dict) -> dict:
    """A state dict under the module names before the rename, as the shipped checkpoints store it."""
    out = {}
    for key, value in state.items():
        head = next((h for h in OLD if key.startswith(h)), None)
        if head is not None:
            key = OLD[head] + key[len(head):].replace(".attn.", ".self_attn.", 1).replace(".mlp.", ".ff.", 1)
        out[key] = value
    return out


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_every_checkpoint_loads_strictly_and_translates(folder):
    stored = load_file(str(folder / WEIGHTS))
    model, *_ = load_checkpoint(folder)  # strict: no missing, unexpected or misshapen tensor
    assert set(renamed_state(stored)) <= set(model.state_dict())
    assert Translator.from_checkpoint(folder, draft=False).translate("Ein Mann fährt Fahrrad.").text.strip()


def test_old_and_new_keys_load_to_identical_outputs(trained_model, encoded_pairs, vocabs, tmp_path):
    src = torch.tensor([encoded_pairs[0][0]])
    tgt = torch.tensor([[vocabs[1].bos_idx] + encoded_pairs[0][1]])
    state = weights_state(trained_model)
    old = old_names(state)
    assert "encoder_layers.0.self_attn.w_q.weight" in old and "decoder_layers.1.ff.w_1.weight" in old
    assert "decoder_norm.weight" in old and list(renamed_state(old)) == list(state)
    outs = []
    for stored in (state, old):
        model = load_weights_into(EncoderDecoder(trained_model.cfg, init=False).eval(), stored)
        outs.append(model(src, tgt))
        model.load_state_dict(old_names(trained_model.state_dict()))  # torch's own load, strict, takes them too
    folder = save_checkpoint(tmp_path / "ckpt", trained_model, *vocabs)
    written = load_file(str(folder / WEIGHTS))
    assert "encoder.0.attn.w_q.weight" in written and not any(k.startswith("encoder_layers.") for k in written)
    save_file(old_names(written), str(folder / WEIGHTS))  # a folder written before the rename
    outs.append(load_checkpoint(folder)[0](src, tgt))
    with torch.no_grad():
        outs.append(trained_model(src, tgt))
    assert all(torch.equal(o, outs[-1]) for o in outs)


def test_renaming_keeps_unknown_keys_and_refuses_a_tensor_under_both_names():
    state = {"src_embed.lut.weight": 1, "encoder_layers.0.sub.0.norm.weight": 2, "spare": 3}
    assert renamed_state(state) == {"src_embed.lut.weight": 1, "encoder.0.sub.0.norm.weight": 2, "spare": 3}
    today = {"encoder.0.attn.w_q.weight": 1}
    assert renamed_state(today) is today
    with pytest.raises(ValueError, match="both"):
        renamed_state({"encoder.0.attn.w_q.weight": 1, "encoder_layers.0.self_attn.w_q.weight": 2})
