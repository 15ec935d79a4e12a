"""Bad input, broken checkpoints and server limits, through the model API and through the app."""
from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

from tests.app_support import run_app, visible_text
from tests.tiny_checkpoint import GERMAN, make_tiny_checkpoint

BAD_INPUTS = {
    "empty": "",
    "whitespace": " \t\n ",
    "one character": "a",
    "5000 characters": ("Ein Hund läuft im Schnee. " * 200)[:5000],
    "only unknown words": "Quarkstrudel Zwetschgenröster Fliederbusch",
    "emoji": "Ein Hund 🐕 läuft im Schnee ❄️ 😀",
    "right-to-left": "כלב רץ בשלג مرحبا بالعالم",
    "control characters": "Ein\x00 Hund\x07 läuft\u202e im\x1b[31m Schnee\x7f.",
    "html": "<b>Ein Hund</b> <i>läuft</i> im <a href='x'>Schnee</a>",
    "script": "<script>document.title='pwned'</script><img src=x onerror=alert(1)>",
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("robust")
    make_tiny_checkpoint(root / "demo")
    return root


# ------------------------------------------------------------------------------------ model API

@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_model_api_handles_bad_input(tiny, name):
    from model.inference.translator import MAX_SRC_TOKENS, Translator

    tr = Translator.from_checkpoint(tiny / "demo")
    text = BAD_INPUTS[name]
    for result in (tr.translate(text), tr.translate(text, beam=3), tr.trace(text)):
        src = result.source
        assert len(src.tokens) <= MAX_SRC_TOKENS
        assert all("\x00" not in t and "\u202e" not in t for t in src.tokens)
        if not src.tokens:
            assert result.text == "" and result.raw_tokens == []
        else:
            assert isinstance(result.text, str)
            assert len(src.ids) == len(src.tokens) + 1
    if name == "5000 characters":
        assert tr.prepare(text).truncated and tr.prepare(text).dropped
    if name == "only unknown words":
        assert all(tr.prepare(text).unknown)
    if name in ("empty", "whitespace"):
        assert tr.prepare(text).tokens == []


def test_decoding_steps_are_limited(tiny):
    from model.inference.translator import Translator

    tr = Translator.from_checkpoint(tiny / "demo").untrained_twin(seed=3)  # random weights rarely say <eos>
    res = tr.trace(GERMAN[0], max_len=7)
    assert len(res.raw_tokens) <= 7 and len(res.steps) <= 8
    huge = tr.translate(GERMAN[0], max_len=10_000)
    assert len(huge.raw_tokens) <= tr.cfg.max_len - 1


# ------------------------------------------------------------------------------------ the app

@pytest.fixture
def app_env(tiny, monkeypatch):
    monkeypatch.setenv("ATLAS_CHECKPOINT_DIR", str(tiny))
    monkeypatch.setenv("ATLAS_DEFAULT_MODEL", "demo")
    return tiny


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_app_handles_bad_input(app_env, name):
    at = run_app(view="Attention", text=BAD_INPUTS[name])
    assert not at.exception, [e.value for e in at.exception]
    text = visible_text(at)
    for tag in ("<script", "<img", "<b>", "<a "):
        assert tag not in text, f"raw markup {tag!r} reached the page"
    if name in ("empty", "whitespace"):
        assert any("Type a German sentence" in i.value for i in at.info)
    elif name == "5000 characters":
        assert any("cut to its first" in w.value for w in at.warning)
    elif name == "only unknown words":
        assert any("Unknown to the model" in c.value for c in at.caption)


def _broken(root: Path, name: str, how: str) -> None:
    folder = root / name
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(root / "demo", folder)
    weights = folder / "model.safetensors"
    if how == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif how == "pickle":
        marker = root / f"{name}-executed"

        class Boom:
            def __reduce__(self):
                return (Path.touch, (marker,))

        weights.write_bytes(pickle.dumps({"weights": Boom()}))
    elif how == "wrong config":
        cfg = (folder / "config.json").read_text()
        (folder / "config.json").write_text(cfg.replace('"d_model": 32', '"d_model": 64'))
    elif how == "missing file":
        (folder / "vocab.tgt.json").unlink()


@pytest.mark.parametrize("how, names", [
    ("truncated", "model.safetensors"), ("pickle", "model.safetensors"),
    ("wrong config", "model.safetensors"), ("missing file", "vocab.tgt.json"),
])
def test_app_reports_a_broken_checkpoint_and_stays_usable(app_env, how, names):
    name = "broken-" + how.replace(" ", "-")
    _broken(app_env, name, how)
    at = run_app(ckpt=name, text=GERMAN[0])
    assert not at.exception
    message = " ".join(e.value for e in at.error).replace("\\", "")
    assert name in message and names in message
    assert not (app_env / f"{name}-executed").exists(), "a pickle was executed"
    at.sidebar.selectbox(key="ckpt").set_value("demo").run()
    assert not at.exception and at.get("plotly_chart")


def test_heavy_job_limit_gives_a_visible_message(app_env, tmp_path, monkeypatch):
    """While the server's slot for BLEU measurements is taken, another request is told so."""
    import gzip

    from views.plumbing import jobs

    data = tmp_path / "data"
    data.mkdir()
    for lang, lines in (("de", GERMAN), ("en", GERMAN)):
        with gzip.open(data / f"val.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    monkeypatch.setenv("ATLAS_DATA_DIR", str(data))
    at = run_app(view="Attention", kind="cross", layer=1, text=GERMAN[0], off="cross-1-1")
    assert not at.exception
    with jobs.heavy_job_slot() as got:
        assert got
        at.button(key="ablate_bleu").click().run()
    assert not at.exception
    assert any("already running" in w.value for w in at.warning)
    at.button(key="ablate_bleu").click().run()  # the slot is free again: the measurement runs
    assert not at.exception
    assert any("sacreBLEU" in m.label for m in at.metric)


# ------------------------------------------------------------------------------------ a path in the link

def _elsewhere(tmp_path: Path, tiny: Path) -> Path:
    """A valid model folder outside the checkpoint folder (another user's, say), beside a link to it inside."""
    outside = tmp_path / "someone-elses" / "stolen"
    shutil.copytree(tiny / "demo", outside)
    link = tiny / "linked-out"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(outside, target_is_directory=True)
    return outside


@pytest.mark.parametrize("how", ["absolute /etc", "absolute model folder", "dotdot", "dotdot to /etc",
                                 "symlink out", "name of a folder elsewhere", "twin of a path"])
def test_a_link_names_only_the_models_the_server_offers(app_env, tmp_path, how):
    outside = _elsewhere(tmp_path, app_env)
    ckpt = {"absolute /etc": "/etc", "absolute model folder": str(outside), "dotdot": "../robust0",
            "dotdot to /etc": "../../../../../../etc", "symlink out": "linked-out", "name of a folder elsewhere":
            "someone-elses", "twin of a path": str(outside) + ":untrained"}[how]
    try:
        at = run_app(view="Attention", ckpt=ckpt, text=GERMAN[0])
        assert not at.exception
        message = " ".join(e.value for e in at.error).replace("\\", "")
        assert "does not offer" in message
        assert not at.get("plotly_chart"), "a model outside the checkpoint folder was loaded"
        shown = visible_text(at) + " ".join(str(o) for o in at.sidebar.selectbox(key="ckpt").options)
        for path in (str(app_env), str(outside.parent), str(tmp_path)):
            assert path not in message, f"the message shows a server path: {message}"
        assert str(app_env) not in shown
        at.sidebar.selectbox(key="ckpt").set_value("demo").run()  # the page still works
        assert not at.exception and at.get("plotly_chart")
    finally:
        (app_env / "linked-out").unlink()


def test_the_sidebar_lists_no_folder_linked_from_elsewhere(app_env, tmp_path):
    _elsewhere(tmp_path, app_env)
    try:
        at = run_app(view="Overview", text=GERMAN[0])
        assert "linked-out" not in at.sidebar.selectbox(key="ckpt").options
        assert "demo (trained)" in at.sidebar.selectbox(key="ckpt").options
    finally:
        (app_env / "linked-out").unlink()


def test_a_broken_checkpoint_message_names_no_server_path(app_env):
    _broken(app_env, "broken-paths", "truncated")
    at = run_app(ckpt="broken-paths", text=GERMAN[0])
    message = " ".join(e.value for e in at.error).replace("\\", "")
    assert "broken-paths" in message and "model.safetensors" in message
    assert str(app_env) not in message and "/tmp" not in message
