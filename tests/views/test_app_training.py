"""AppTest of the Training page: the film the trainer recorded, frame by frame, and a toy task
trained live and opened in the other views."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.app_support import array, chart, demo_checkpoints, run_app, visible_text, write_split


@pytest.fixture(scope="module")
def root(tmp_path_factory, demo_folder):
    """The demo model (no film) and `filmed`, a 1-layer model trained 8 epochs on 40 pairs with its film."""
    import torch

    from model.training import train as train_cli
    from tests.model.test_model_data import synthetic_corpus, train_args

    data = tmp_path_factory.mktemp("training_data")
    pairs = synthetic_corpus()
    for split, items in (("train", pairs), ("val", pairs[1:40:10])):
        write_split(data, split, [p[0] for p in items], [p[1] for p in items])
    with demo_checkpoints(tmp_path_factory, "training_ckpts", demo_folder) as folder:
        threads = torch.get_num_threads()
        try:
            assert train_cli.main(train_args(data, folder / "filmed", 8, "--max-tokens", "60", "--test-split", "",
                                             "--bleu-every", "100")) == 0
        finally:
            torch.set_num_threads(threads)
        yield folder


def test_the_film_draws_the_recorded_frame(root):
    from model.training.film_file import load_film, mean_entropy

    film = load_film(root / "filmed")
    at = run_app(view="Training", ckpt="filmed", kind="cross", layer=1, film_probe=2, film_frame=1)
    assert not at.exception
    text = visible_text(at)
    assert "**Step 0**" in text
    assert f"translation: **{film.probes[1]['translations'][0]}**" in text.replace("\\", "")
    heads = chart(at, "film_heads")
    z = array(heads["data"][0]["z"])
    np.testing.assert_allclose(z, film.attn[1]["cross"][0, 0, 0].astype(np.float32), atol=1e-6)  # head 1, frame 1
    e = mean_entropy(film, "cross")
    assert f"mean entropy of {e[0, 0]:.2f} nats" in text.replace("\\", "")  # the reading is computed from the film
    # the last frame: the reading compares it with step 0
    at = run_app(view="Training", ckpt="filmed", kind="cross", layer=1, film_probe=2)
    assert not at.exception
    n = len(film)
    assert at.session_state["film_frame"] == n
    assert f"fell from {e[0, 0]:.2f} to {e[n - 1, 0]:.2f} nats" in visible_text(at).replace("\\", "")  # it learned
    z = array(chart(at, "film_heads")["data"][0]["z"])
    np.testing.assert_allclose(z, film.attn[1]["cross"][n - 1, 0, 0].astype(np.float32), atol=1e-6)
    loss = chart(at, "film_loss")
    np.testing.assert_allclose(array(loss["data"][1]["y"]), film.val_loss, rtol=1e-6)


def test_play_moves_the_frame_and_pause_stops(root):
    at = run_app(view="Training", ckpt="filmed", film_frame=2)
    assert not at.exception
    at.button(key="film_play").click().run()
    assert not at.exception and at.session_state["film_playing"] is True
    assert at.button(key="film_play").label == "Pause"
    at.button(key="film_play").click().run()
    assert at.session_state["film_playing"] is False


def test_a_model_without_a_film_says_so(root):
    at = run_app(view="Training")
    assert not at.exception
    assert any("No training film" in i.value and "film.json" in i.value.replace("\\", "") for i in at.info)
    at = run_app(view="Training", ckpt="demo:untrained")
    assert any("never trained" in i.value for i in at.info)


@pytest.mark.slow
def test_a_toy_task_trained_live_opens_in_the_decoding_view(root):
    at = run_app(view="Training", toy_task="reverse")
    at.button(key="toy_train").click().run(timeout=600)
    assert not at.exception
    (done,) = [s.value for s in at.success]
    m = re.search(r"\*\*reverse\*\*: (\d+) steps in [\d.]+ s; exact outputs on 200 held-out sequences: (\d+)%", done)
    assert m, done
    assert at.session_state["toy_done"]["accuracy"] == pytest.approx(int(m.group(2)) / 100, abs=0.005)
    at.button(key="toy_open").click().run()
    assert not at.exception
    key = at.session_state["ckpt"]
    assert key.startswith("toy:reverse:") and at.session_state["view"] == "Decoding"
    from model import service
    from views.plumbing.state import ModelKey, load_model

    toy, _ = load_model(ModelKey.parse(key))
    expected = service.translate(toy, "3 1 4 1 5 9 2 6").text
    assert expected in visible_text(at).replace("\\", "")  # the header shows this model's own translation
    # Another session does not have it unless it has the link; a link to a toy the server no longer has says so.
    at = run_app(view="Decoding", ckpt="toy:copy:00000000")
    assert not at.exception
    assert any("not on this server any more" in e.value for e in at.error)
