"""The shared annotation reader: Go's syntax, refuse or fall back with a warning."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.cloudprovider.annotations import (
    INVALID_ANNOTATION,
    OnInvalid,
    annotations_of,
    bool_annotation,
    choice_annotation,
    duration_annotation,
    int_annotation,
)
from kccm.cloudprovider.errors import InvalidServiceConfig
from kccm.cloudprovider.servicewarnings import ServiceWarning, collect_service_warnings

KEY = "example.com/value"


@pytest.mark.parametrize(
    ("read", "value", "want"),
    [
        pytest.param(bool_annotation, "true", True, id="bool-true"),
        pytest.param(bool_annotation, "F", False, id="bool-F"),
        pytest.param(bool_annotation, "1", True, id="bool-1"),
        pytest.param(int_annotation, "42", 42, id="int"),
        pytest.param(int_annotation, "-7", -7, id="int-negative"),
        pytest.param(int_annotation, "007", 7, id="int-leading-zeros-are-decimal"),
        pytest.param(duration_annotation, "1m30s", 90.0, id="duration"),
        pytest.param(duration_annotation, "0", 0.0, id="duration-zero"),
    ],
)
@pytest.mark.parametrize("on_invalid", list(OnInvalid), ids=lambda mode: mode.value)
def test_a_valid_value_is_read_as_go_reads_it(
    read: Any, value: str, want: Any, on_invalid: OnInvalid
) -> None:
    default = {bool_annotation: not want, int_annotation: 0, duration_annotation: 5.0}[read]
    with collect_service_warnings() as warnings:
        assert read({KEY: value}, KEY, default, on_invalid=on_invalid) == want
    assert len(warnings) == 0


@pytest.mark.parametrize(
    "annotations", [pytest.param({}, id="absent"), pytest.param({KEY: ""}, id="empty")]
)
@pytest.mark.parametrize("on_invalid", list(OnInvalid), ids=lambda mode: mode.value)
def test_not_set_gives_the_default_without_a_warning(
    annotations: dict[str, str], on_invalid: OnInvalid
) -> None:
    with collect_service_warnings() as warnings:
        assert bool_annotation(annotations, KEY, True, on_invalid=on_invalid) is True
        assert int_annotation(annotations, KEY, 3, on_invalid=on_invalid) == 3
        assert duration_annotation(annotations, KEY, 1.5, on_invalid=on_invalid) == 1.5
    assert len(warnings) == 0


INVALID = [
    pytest.param(bool_annotation, "maybe", False, "true or false", id="bool-maybe"),
    pytest.param(bool_annotation, "yes", False, "true or false", id="bool-yes"),
    pytest.param(bool_annotation, "tRUE", False, "true or false", id="bool-mixed-case"),
    pytest.param(bool_annotation, " true", False, "true or false", id="bool-space"),
    pytest.param(int_annotation, "1.5", 10, "a base-10 integer", id="int-fraction"),
    pytest.param(int_annotation, "0x10", 10, "a base-10 integer", id="int-hex"),
    pytest.param(int_annotation, " 3", 10, "a base-10 integer", id="int-space"),
    pytest.param(duration_annotation, "10", 5.0, "a duration", id="duration-no-unit"),
    pytest.param(duration_annotation, "1d", 5.0, "a duration", id="duration-days"),
]


@pytest.mark.parametrize(("read", "value", "default", "accepted"), INVALID)
def test_refuse_names_the_annotation_the_value_and_what_is_accepted(
    read: Any, value: str, default: Any, accepted: str
) -> None:
    with pytest.raises(InvalidServiceConfig) as raised:
        read({KEY: value}, KEY, default, on_invalid=OnInvalid.REFUSE)
    assert raised.value.key == KEY
    assert f'annotation {KEY}: invalid value "{value}": want {accepted}' in str(raised.value)


@pytest.mark.parametrize(("read", "value", "default", "accepted"), INVALID)
def test_fallback_uses_the_default_and_warns(
    read: Any, value: str, default: Any, accepted: str
) -> None:
    with collect_service_warnings() as warnings:
        assert read({KEY: value}, KEY, default, on_invalid=OnInvalid.FALLBACK) == default
    [warning] = list(warnings)
    assert warning.reason == INVALID_ANNOTATION
    assert f'annotation {KEY}: invalid value "{value}": want {accepted}' in warning.message


@pytest.mark.parametrize(
    ("read", "default", "shown"),
    [
        pytest.param(bool_annotation, False, "false", id="bool"),
        pytest.param(int_annotation, 10, "10", id="int"),
        pytest.param(duration_annotation, 300.0, "5m0s", id="duration"),
    ],
)
def test_fallback_shows_the_default_in_go_syntax(read: Any, default: Any, shown: str) -> None:
    with collect_service_warnings() as warnings:
        read({KEY: "?"}, KEY, default, on_invalid=OnInvalid.FALLBACK)
    [warning] = list(warnings)
    assert warning.message.endswith(f"; using the default {shown}")


@pytest.mark.parametrize(
    ("value", "minimum", "maximum", "accepted"),
    [
        pytest.param("1", 2, 60, "a base-10 integer from 2 to 60", id="below"),
        pytest.param("61", 2, 60, "a base-10 integer from 2 to 60", id="above"),
        pytest.param("0", 1, None, "a base-10 integer of at least 1", id="below-minimum"),
        pytest.param("9", None, 8, "a base-10 integer of at most 8", id="above-maximum"),
    ],
)
def test_an_integer_out_of_range_is_invalid(
    value: str, minimum: int | None, maximum: int | None, accepted: str
) -> None:
    with pytest.raises(InvalidServiceConfig, match=f"want {accepted}$"):
        int_annotation(
            {KEY: value}, KEY, 5, on_invalid=OnInvalid.REFUSE, minimum=minimum, maximum=maximum
        )


def test_refuse_raises_the_providers_own_error() -> None:
    class ProviderError(InvalidServiceConfig):
        pass

    with pytest.raises(ProviderError):
        bool_annotation(
            {KEY: "maybe"}, KEY, False, on_invalid=OnInvalid.REFUSE, error=ProviderError
        )


def test_annotations_of_a_service() -> None:
    assert annotations_of({"metadata": {"annotations": {KEY: "1"}}}) == {KEY: "1"}
    assert annotations_of({"metadata": {}}) == {}
    assert annotations_of({}) == {}


def test_warning_value_type() -> None:
    assert ServiceWarning("R", "m") == ServiceWarning("R", "m")


def test_presence_tested_annotations_refuse_an_empty_value() -> None:
    assert int_annotation({}, KEY, 2, on_invalid=OnInvalid.REFUSE, empty_is_unset=False) == 2
    with pytest.raises(InvalidServiceConfig, match=f'annotation {KEY}: invalid value ""'):
        int_annotation({KEY: ""}, KEY, 2, on_invalid=OnInvalid.REFUSE, empty_is_unset=False)


def test_a_default_of_none_means_unset() -> None:
    assert int_annotation({}, KEY, None, on_invalid=OnInvalid.REFUSE) is None
    with collect_service_warnings() as warnings:
        assert int_annotation({KEY: "x"}, KEY, None, on_invalid=OnInvalid.FALLBACK) is None
    [warning] = list(warnings)
    assert warning.message.endswith("; using the default unset")


CHOICES = {"true": True, "false": False}


@pytest.mark.parametrize(
    ("value", "want", "warned"),
    [
        pytest.param("true", True, False, id="true"),
        pytest.param("false", False, False, id="false"),
        pytest.param("True", None, True, id="other-case-is-invalid"),
        pytest.param("1", None, True, id="parsebool-spelling-is-invalid"),
        pytest.param("", None, True, id="empty-is-invalid-when-presence-tested"),
    ],
)
def test_choice_reads_exact_spellings_only(value: str, want: bool | None, warned: bool) -> None:
    with collect_service_warnings() as warnings:
        got = choice_annotation(
            {KEY: value}, KEY, None, CHOICES, on_invalid=OnInvalid.FALLBACK, empty_is_unset=False
        )
    assert got is want
    wanted = f'annotation {KEY}: invalid value "{value}": want one of true, false'
    assert [w.message for w in warnings] == (
        [f"{wanted}; using the default unset"] if warned else []
    )
