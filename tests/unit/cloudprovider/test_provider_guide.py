"""docs/writing-a-provider.md: its example provider, config and conformance test really work."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "writing-a-provider.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL)


def test_the_guide_has_one_provider_one_config_and_one_test() -> None:
    assert len(blocks("python")) == 2
    assert len(blocks("ini")) == 1


def test_the_example_passes_the_conformance_kit_and_loads_the_config(tmp_path: Path) -> None:
    provider, test = blocks("python")
    (tmp_path / "my_cloud.py").write_text(provider)
    (tmp_path / "test_my_cloud.py").write_text(test)
    (tmp_path / "cloud.conf").write_text(blocks("ini")[0])
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\nfilterwarnings = error\n"
    )
    check = (
        "from kccm.cloudprovider import init_cloud_provider\n"
        "cloud = init_cloud_provider('my_cloud:new_cloud', 'cloud.conf')\n"
        "print(cloud.provider_name(), sorted(cloud.machines), repr(cloud.region))\n"
    )
    env_run = {"cwd": tmp_path, "capture_output": True, "text": True}
    loaded = subprocess.run([sys.executable, "-c", check], check=True, **env_run)  # type: ignore[call-overload]
    assert loaded.stdout.strip() == "mycloud ['node-a', 'node-b'] 'eu-west'"
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        **env_run,  # type: ignore[call-overload]
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert re.search(r"\d+ passed, \d+ skipped", tests.stdout)
