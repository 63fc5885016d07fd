"""No import circle anywhere in src/kccm: every module's imports, those inside functions too,
read by hack/import_cycles.py (a circle hidden behind a function-level import counts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_no_module_of_kccm_imports_itself_through_others() -> None:
    found = subprocess.run(
        [sys.executable, str(REPO / "hack" / "import_cycles.py"), str(REPO / "src" / "kccm")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0, found.stdout
    assert found.stdout.endswith(" 0 cycles\n"), found.stdout
