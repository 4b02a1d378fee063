"""mkdocs hook: render the pictures in docs/generated/ from the code, on every build.

Each module in ``docs/pictures/`` (one per tutorial stem, e.g. ``distributed.py``) has a
``render() -> dict[str, str]`` mapping a file name to SVG text. Nothing is drawn by hand, so a
picture can never disagree with the code it shows.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
PICTURES, OUT = DOCS / "pictures", DOCS / "generated"


def render_all() -> list[Path]:
    """Write every picture module's SVGs into docs/generated/; return the paths written."""
    OUT.mkdir(exist_ok=True)
    sys.path.insert(0, str(PICTURES))  # so picture modules can import _svg
    written = []
    try:
        for path in sorted(PICTURES.glob("[!_]*.py")):
            spec = importlib.util.spec_from_file_location(f"pictures_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            for name, svg in module.render().items():
                target = OUT / name
                if not target.exists() or target.read_text() != svg:  # no rewrite: no serve loop
                    target.write_text(svg)
                written.append(target)
    finally:
        sys.path.remove(str(PICTURES))
    return written


def on_config(config, **kwargs):  # runs before mkdocs collects the files
    render_all()
    return config
