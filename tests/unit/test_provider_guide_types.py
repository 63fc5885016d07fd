"""The code of docs/writing-a-provider.md passes ``mypy --strict`` against this checkout.

The guide's Python files are its fenced ``python`` blocks with ``title="<path>"``, as
tests/integration/test_provider_guide.py (which follows the guide verbatim on a real control
plane) writes them. Here they are written to a scratch directory and type-checked, so a
renamed or retyped kccm API the guide still uses fails in the unit suite, not only in the
integration run. The example provider in examples/external-provider is covered by the
project's own mypy run (``files`` in pyproject.toml).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "writing-a-provider.md"
# the same fence syntax as tests/integration/test_provider_guide.py
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)
TITLE = re.compile(r'\btitle="([^"]*)"')


def guide_python_files(text: str) -> dict[str, str]:
    """``title`` -> code of every titled ``python`` block."""
    files: dict[str, str] = {}
    for match in FENCE.finditer(text):
        title = TITLE.search(match.group(2))
        if match.group(1) == "python" and title:
            files[title.group(1)] = match.group(3)
    return files


def test_the_guides_code_passes_mypy_strict(tmp_path: Path) -> None:
    files = guide_python_files(GUIDE.read_text())
    assert {"src/my_cloud/__init__.py", "tests/test_my_cloud.py"} <= set(files)
    for title, code in files.items():
        path = tmp_path / "guide" / title
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")  # none of the project's own settings or overrides
    env = {
        **os.environ,
        "MYPYPATH": os.pathsep.join([str(tmp_path / "guide" / "src"), str(ROOT / "src")]),
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            *sorted(files),
        ],
        cwd=tmp_path / "guide",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, (
        f"docs/writing-a-provider.md's code fails mypy --strict:\n{result.stdout}{result.stderr}"
    )
