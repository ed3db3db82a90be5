"""Write openapi/openapi.json from the app: `python openapi/generate.py` (tests check it is current)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def spec_text() -> str:
    from app.main import create_app

    return json.dumps(create_app().openapi(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    (HERE / "openapi.json").write_text(spec_text())
    print(f"wrote {HERE / 'openapi.json'}")
