"""Which of the app's own modules a new sentence runs through (docs/architecture.md states the count).

    python benchmarks/path.py [--view Attention] [--checkpoint-dir checkpoints]

The app runs once (Streamlit's AppTest, in this process) on a sentence, then again on another sentence of the same
view; during that second run every Python call is seen (`threading.setprofile`), and the files of app.py, views/,
viz/, model/ and atlas/ whose code ran are counted, in the order first reached. A module imported but never called
is not counted: the path is the code a request runs, not what the process holds.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("views", "viz", "model", "atlas")


def app_module(filename: str) -> str | None:
    """The app's module a code object's file belongs to (a path relative to the repository), else None."""
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if rel.as_posix() == "app.py" or (rel.parts and rel.parts[0] in PACKAGES):
        return rel.as_posix()
    return None


def new_sentence_path(view: str, first: str, second: str) -> list[str]:
    """The app's modules whose code runs while `view` draws `second` after `first`, in the order first reached."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params.update({"view": view, "text": first})
    at.run()
    seen: dict[str, None] = {}

    def profile(frame, event, arg):
        if event == "call":
            module = app_module(frame.f_code.co_filename)
            if module is not None:
                seen.setdefault(module)

    at.query_params["text"] = second
    at.session_state["text"] = second
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        at.run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    if at.exception:
        raise SystemExit(f"the app failed: {at.exception[0].value}")
    return list(seen)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--view", default="Attention")
    ap.add_argument("--checkpoint-dir", default=str(ROOT / "checkpoints"))
    args = ap.parse_args()
    os.environ["ATLAS_CHECKPOINT_DIR"] = args.checkpoint_dir
    sys.path.insert(0, str(ROOT))
    path = new_sentence_path(args.view, "Ein Hund läuft im Schnee.", "Zwei Männer sitzen auf einer Bank.")
    for module in path:
        print(module)
    by = {p: sum(1 for m in path if m.split("/")[0] == p or (p == "app.py" and m == p)) for p in ("app.py",) + PACKAGES}
    print(f"{len(path)} modules on a new sentence's path ({args.view}): "
          + ", ".join(f"{k} {v}" for k, v in by.items() if v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
