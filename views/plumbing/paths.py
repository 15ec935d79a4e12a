"""The server's folders, and how a page names them: no page, file name or message shows a server's absolute path."""
from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # views/plumbing/ -> the repository


def checkpoint_dir() -> Path:
    """Where checkpoint folders are looked for (ATLAS_CHECKPOINT_DIR, read at each run so tests can point it)."""
    return Path(os.environ.get("ATLAS_CHECKPOINT_DIR", ROOT / "checkpoints"))


def _public_names() -> list[tuple[str, str]]:
    """(a folder of the server, how a page names it), longest first so that a folder inside another is named by
    the inner one: the checkpoint folder `checkpoints`, the data and cache folders by their setting
    (`$ATLAS_DATA_DIR`, `$XDG_CACHE_HOME`), ../shared beside the repository as the README names it, the
    repository `.` and the home folder `~`."""
    named: dict[str, str] = {}
    for folder, name in [(Path.home(), "~"), (ROOT, "."), (ROOT.parent / "shared", ".." + os.sep + "shared")] + [
            (Path(os.environ[env]).expanduser(), "$" + env) for env in ("XDG_CACHE_HOME", "ATLAS_DATA_DIR")
            if os.environ.get(env)] + [(checkpoint_dir(), "checkpoints")]:
        for path in {str(folder), str(folder.resolve())}:
            if len(path) > 1:  # never the file system's root
                named[path] = name
    return sorted(named.items(), key=lambda item: len(item[0]), reverse=True)


def public_message(message: str) -> str:
    """Text for a page without the server's own paths: every folder of `_public_names` named as it says (a path
    inside the repository becomes relative to it)."""
    for path, name in _public_names():
        # the folder itself or a path inside it, not a longer name that starts with it ("/srv/data2")
        message = re.sub(re.escape(path) + r"(?:(" + re.escape(os.sep) + r")(?=\S)|(?![\w-]|\.\w))",
                         lambda m, name=name: ("" if name == "." else name + m.group(1)) if m.group(1) else name,
                         message)
    return message
