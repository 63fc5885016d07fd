"""Reading ``azure.json`` values the way upstream's Go code reads them.

Upstream parses the file with ``sigs.k8s.io/yaml`` ``Unmarshal`` (``pkg/provider/config/env.go``
``ParseConfig`` and ``pkg/azclient/configloader/loader_yaml.go``, v1.36.5): the text is read as
YAML (JSON is YAML), turned into JSON, and decoded by Go's ``encoding/json`` into ``Config``.
What follows from that, and what :func:`decode` reproduces:

- keys match exactly, else case-insensitively (``encoding/json``); a key that names no field
  is ignored without a word (not strict);
- ``null`` leaves a field as it was;
- a number or a boolean given for a *string* field of ``Config`` itself is turned into its text
  (``sigs.k8s.io/yaml`` ``convertToJSONableObject``: ``5`` -> ``"5"``, ``true`` ->
  ``"true"``); it only looks one level down, so the fields ``Config`` embeds
  (``AzureClientConfig``: ``cloud``, ``tenantId``, ``subscriptionId``, the ``aad*`` keys ...)
  get no such help and refuse a number;
- any other mismatch (``"true"`` for a bool, ``1.5`` for an int, an object for a string) is
  an error that names the key; so is a number out of an ``int32`` field's range.

Each problem is one line: ``<source>: "<key>": <what is wrong>``.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping
from typing import Any

from kccm.providers.azure.config_fields import AzureConfig, json_fields

__all__ = ["decode", "go_float32_text", "json_type"]

_INT_RANGES = {"int": (-(2**63), 2**63 - 1), "int32": (-(2**31), 2**31 - 1)}
_FIRST_DIRECT = "cloudConfigType"
"""The first key of ``Config``'s own fields (the ones before it are embedded)."""


def json_type(value: Any) -> str:
    """The JSON type name Go's errors use."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def go_float32_text(value: float) -> str:
    """``strconv.FormatFloat(v, 'g', -1, 32)``: the shortest text of the float32."""
    target = struct.pack("<f", value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if struct.pack("<f", float(text)) == target:
            break
    mantissa, _, exponent = text.partition("e")
    if exponent:
        sign = exponent[0] if exponent[0] in "+-" else "+"
        text = f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0').rjust(2, '0')}"
    return text


def _coerced(value: Any) -> Any:
    """A YAML number or boolean as the text ``sigs.k8s.io/yaml`` makes of it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float32_text(value)
    return value


def _mismatch(value: Any, go_type: str) -> ValueError:
    if isinstance(value, str | int | float | bool):
        return ValueError(f"cannot unmarshal {json_type(value)} {value!r} into a Go {go_type}")
    return ValueError(f"cannot unmarshal {json_type(value)} into a Go {go_type}")


def _string(value: Any, direct: bool) -> str:
    value = _coerced(value) if direct else value
    if not isinstance(value, str):
        raise _mismatch(value, "string")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _mismatch(value, "bool")
    return value


def _int(value: Any, kind: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _mismatch(value, kind)
    low, high = _INT_RANGES[kind]
    if not low <= value <= high:
        raise ValueError(f"the number {value} does not fit a Go {kind}")
    return value


def _float(value: Any, kind: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _mismatch(value, kind)
    return float(value)


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _mismatch(value, "map[string]string")
    out = {}
    for key, item in value.items():
        text = _coerced(item)
        if not isinstance(text, str):
            raise _mismatch(item, "string (map value)")
        out[str(_coerced(key))] = text
    return out


def _value(kind: str, value: Any, direct: bool) -> Any:
    if kind == "string":
        return _string(value, direct)
    if kind == "bool" or kind == "bool-ptr":
        return _bool(value)
    if kind in _INT_RANGES:
        return _int(value, kind)
    if kind in ("float32", "float64"):
        return _float(value, kind)
    if kind == "string-map":
        return _string_map(value)
    if kind == "array":
        if not isinstance(value, list):
            raise _mismatch(value, "slice")
        return tuple(value)
    if not isinstance(value, Mapping):
        raise _mismatch(value, "struct")
    return dict(value)


def _field_for(key: str, fields: Mapping[str, dataclasses.Field[Any]]) -> str | None:
    if key in fields:
        return key
    folded = key.casefold()
    for name in fields:
        if name.casefold() == folded:
            return name
    return None


def decode(raw: Mapping[str, Any], source: str) -> tuple[AzureConfig, list[str], list[str]]:
    """``raw`` (the parsed file) as :class:`AzureConfig`; also every problem, one line each,
    and the keys that name no field (upstream ignores them)."""
    fields = json_fields()
    order = list(fields)
    direct = set(order[order.index(_FIRST_DIRECT) :])
    values: dict[str, Any] = {}
    issues: list[str] = []
    unknown: list[str] = []
    for key, value in raw.items():
        name = _field_for(str(key), fields)
        if name is None:
            unknown.append(str(key))
            continue
        if value is None:
            if fields[name].metadata["kind"] == "bool-ptr":
                values.pop(fields[name].name, None)
            continue
        try:
            decoded = _value(str(fields[name].metadata["kind"]), value, name in direct)
        except ValueError as err:
            issues.append(f'{source}: "{key}": {_redacted(err, fields[name])}')
            continue
        values[fields[name].name] = decoded
    return AzureConfig(**values), issues, unknown


def _redacted(err: ValueError, field: dataclasses.Field[Any]) -> str:
    """The error, without the value when the field holds a secret."""
    if field.metadata.get("secret"):
        return "not a string (the value is a secret and not shown)"
    return str(err)
