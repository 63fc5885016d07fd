"""examples/external-provider reads its cloud config with kccm's loader: its mistakes are
reported as kccm reports its own (file:line, section, key, what is wrong)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kccm_example_provider import new_cloud

from kccm.cloudprovider import CloudConfigError, CloudProviderInitError, init_cloud_provider
from kccm.cloudprovider.errors import find_error


def test_machines_and_zone_come_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "machines.conf"
    path.write_text("[Global]\nzone = eu-1\nmachines = a=10.0.0.1\nmachines = b = ::1\n")
    with path.open() as stream:
        cloud = new_cloud(stream)
    assert (cloud.machines, cloud.zone) == ({"a": "10.0.0.1", "b": "::1"}, "eu-1")


@pytest.mark.parametrize(
    ("text", "issues"),
    [
        pytest.param(
            "[Global]\nmachines = node-a\n",
            ['machines.conf:2: section "Global": key "machines": expected "name=ip" \'node-a\''],
            id="no-ip-was-the-dict-update-sequence-error",
        ),
        pytest.param(
            "[Global]\nmachines = node-a=10.0.0.300\n",
            [
                'machines.conf:2: section "Global": key "machines": '
                "'10.0.0.300' is not an IP address 'node-a=10.0.0.300'"
            ],
            id="bad-ip",
        ),
        pytest.param(
            "[Global]\nmachine = node-a=10.0.0.1\nzone\n",
            [
                'machines.conf:2: section "Global": key "machine": unknown key',
                'machines.conf:3: section "Global": key "zone": '
                "needs a value (only bool keys may be written bare)",
            ],
            id="every-problem-at-once",
        ),
        pytest.param(
            "node-a = 10.0.0.1\n",
            [
                "machines.conf:1: syntax error: "
                "variable outside of any section (a [Section] header must come first)"
            ],
            id="the-old-sectionless-format",
        ),
    ],
)
def test_mistakes_name_file_line_key_and_what_is_wrong(
    tmp_path: Path, text: str, issues: list[str]
) -> None:
    path = tmp_path / "machines.conf"
    path.write_text(text)
    with pytest.raises(CloudConfigError) as caught, path.open() as stream:
        new_cloud(stream)
    assert [i.replace(str(tmp_path) + "/", "") for i in caught.value.issues] == issues


def test_the_daemon_path_reports_the_same(tmp_path: Path) -> None:
    path = tmp_path / "machines.conf"
    path.write_text("[Global]\nmachines = node-a\n")
    with pytest.raises(CloudProviderInitError) as caught:
        init_cloud_provider("example", path)
    found = find_error(caught.value, CloudConfigError)
    assert found is not None
    assert found.issues == [
        f'{path}:2: section "Global": key "machines": expected "name=ip" \'node-a\''
    ]
