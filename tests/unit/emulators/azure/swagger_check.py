"""A small checker of JSON bodies against Swagger 2.0 definitions, enough for the Azure REST API
specs vendored under ``tests/data/azure-specs`` (see the README there).

What it checks, for an answer body and the definition the spec names for it:

- every property of an object is one its definition has: its own ``properties`` plus those of
  every ``allOf`` parent (ARM's ``Resource``/``SubResource``), recursively; an object with
  ``additionalProperties`` takes any key, each value checked against that schema; an object
  schema with neither (``"type": "object"`` alone) is free-form;
- JSON types: ``string``, ``integer`` (not a boolean), ``number``, ``boolean``, ``array`` (each
  item), ``object``; ``null`` only where the spec says ``x-nullable``;
- enums: a value outside ``enum`` is an error unless ``x-ms-enum.modelAsString`` is true (an
  extensible enum, any string goes);
- ``$ref`` across the vendored files (``./loadBalancer.json#/definitions/X``); a definition left
  out of the trimmed extract (marked ``x-kccm-not-vendored``) or a file not vendored at all is
  an error only when a body actually reaches it, so what is checked is never silently skipped.

``x-ms-client-flatten`` changes the SDKs' models, not the wire: the body keeps its nested
``properties`` object, and so does this check. ``readOnly`` properties are what ARM answers
with, so they are allowed in answers (request bodies are not checked here).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Specs", "load_specs"]

Schema = dict[str, Any]
SPECS_DIR = Path(__file__).resolve().parents[3] / "data" / "azure-specs"


@dataclass
class Specs:
    """The vendored files of one resource provider and API version, by file name."""

    files: dict[str, dict[str, Any]]
    errors: list[str] = field(default_factory=list)

    def check(self, body: Any, ref: str, where: str = "$") -> list[str]:
        """The mismatches of ``body`` against ``ref`` (``file.json#/definitions/Name``)."""
        self.errors = []
        file, _, pointer = ref.partition("#")
        self._ref(body, file, f"#{pointer}", where)
        return list(self.errors)

    def _ref(self, value: Any, file: str, ref: str, where: str) -> None:
        target_file, schema = self._resolve(file, ref)
        if schema is None:
            self.errors.append(f"{where}: {ref} (from {file}) is not vendored")
            return
        self._value(value, schema, target_file, where)

    def _resolve(self, file: str, ref: str) -> tuple[str, Schema | None]:
        path, _, pointer = ref.partition("#")
        target = Path(path).name if path else file
        doc = self.files.get(target)
        name = pointer.removeprefix("/definitions/")
        if doc is None or name not in doc["definitions"]:
            return target, None
        schema: Schema = doc["definitions"][name]
        return target, None if schema.get("x-kccm-not-vendored") else schema

    def _value(self, value: Any, schema: Schema, file: str, where: str) -> None:
        if "$ref" in schema:
            self._ref(value, file, schema["$ref"], where)
            return
        if value is None:
            if not schema.get("x-nullable"):
                self.errors.append(f"{where}: null where the spec has no x-nullable")
            return
        kind = schema.get("type") or ("object" if self._is_object(schema) else None)
        if kind is not None and not _is_type(value, kind):
            self.errors.append(f"{where}: {type(value).__name__} {value!r:.60} is not {kind}")
            return
        if "enum" in schema:
            self._enum(value, schema, where)
        if kind == "array":
            for i, item in enumerate(value):
                self._value(item, schema.get("items", {}), file, f"{where}[{i}]")
        elif kind == "object":
            self._object(value, schema, file, where)

    def _enum(self, value: Any, schema: Schema, where: str) -> None:
        extensible = bool((schema.get("x-ms-enum") or {}).get("modelAsString"))
        if value not in schema["enum"] and not (extensible and isinstance(value, str)):
            self.errors.append(f"{where}: {value!r} is not one of {schema['enum']}")

    @staticmethod
    def _is_object(schema: Schema) -> bool:
        return any(k in schema for k in ("properties", "allOf", "additionalProperties"))

    def _object(self, value: dict[str, Any], schema: Schema, file: str, where: str) -> None:
        props = self._properties(schema, file)
        extra = schema.get("additionalProperties")
        if not props and extra is None and not self._is_object(schema):
            return  # free-form object
        for key, item in value.items():
            if key in props:
                owner, prop = props[key]
                self._value(item, prop, owner, f"{where}.{key}")
            elif isinstance(extra, dict):
                self._value(item, extra, file, f"{where}.{key}")
            elif extra is not True:
                self.errors.append(f"{where}.{key}: not a property of its definition")

    def _properties(self, schema: Schema, file: str) -> dict[str, tuple[str, Schema]]:
        """Own and inherited (``allOf``) properties, each with the file it is defined in."""
        found: dict[str, tuple[str, Schema]] = {}
        for parent in schema.get("allOf", []):
            owner, resolved = (
                self._resolve(file, parent["$ref"]) if "$ref" in parent else (file, parent)
            )
            if resolved is None:
                self.errors.append(f"allOf parent {parent} (from {file}) is not vendored")
                continue
            found.update(self._properties(resolved, owner))
        for name, prop in (schema.get("properties") or {}).items():
            found[name] = (file, prop)
        return found


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    expected = {"string": str, "boolean": bool, "array": list, "object": dict}.get(kind)
    return expected is None or isinstance(value, expected)


def load_specs(provider: str, version: str) -> Specs:
    """The vendored files of ``provider`` (``network``, ``compute``) at ``version``."""
    folder = SPECS_DIR / provider / version
    return Specs({p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))})
