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


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        pytest.param("--poll-interval", "0", "0 is not from 0.01 to 3600 seconds", id="zero-poll"),
        pytest.param("--poll-interval", "-1", "-1 is not from 0.01", id="negative-poll"),
        pytest.param("--poll-interval", "nan", "nan is not from 0.01", id="nan-poll"),
        pytest.param("--health-interval", "soon", "'soon' is not a number of seconds",
                     id="word-interval"),
        pytest.param("--health-timeout", "1e6", "1e6 is not from 0.01", id="huge-timeout"),
        pytest.param("--udp-idle-timeout", "inf", "inf is not from 0.01", id="infinite-idle"),
        pytest.param("--unhealthy-threshold", "0", "0 is not from 1 to 100", id="zero-fall"),
        pytest.param("--healthy-threshold", "1.5", "'1.5' is not a whole number", id="half-rise"),
    ],
)  # fmt: skip
def test_bad_values_are_usage_errors_naming_the_flag(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["local", "dataplane", f"{flag}={value}"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {message}" in err
