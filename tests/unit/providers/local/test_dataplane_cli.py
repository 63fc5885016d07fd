"""``kccm local dataplane`` is reachable through the kccm command line."""

from __future__ import annotations

import pytest

from kccm.app.cli import main


def test_help_through_kccm_local(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["local", "dataplane", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "kccm local dataplane" in out
    assert "--state-file" in out


def test_bad_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["local", "dataplane", "--no-such-flag"])
    assert exited.value.code == 2
    assert "--no-such-flag" in capsys.readouterr().err
