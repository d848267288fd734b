"""A small JSON Schema (draft 2020-12) validator for the subset zod's toJSONSchema emits.

The protocol's JSON Schemas (schemas/*.json, exported from src/worker/protocol.ts by
``npm run schemas``) are the contract; jsonschema is not a dependency, so this checks the keywords
those files use: type, properties, required, additionalProperties, items, prefixItems, min/maxItems,
enum, const, anyOf, oneOf, allOf, minimum, maximum, exclusiveMinimum/Maximum, pattern,
propertyNames, $ref into $defs.
An unknown keyword is an error, so a schema that outgrows this validator fails loudly.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")
_IGNORED = {"$schema", "$id", "title", "description", "default", "examples", "format", "$defs", "definitions", "id"}
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


def load_schema(name: str) -> dict[str, Any] | None:
    """schemas/<name>.json, or None when the export has not been run."""
    path = os.path.join(SCHEMA_DIR, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def validate(value: Any, schema: dict[str, Any]) -> list[str]:
    """Every violation as 'path: problem'; empty when value conforms."""
    errors: list[str] = []
    _check(value, schema, schema, "$", errors)
    return errors


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#"):
        raise ValueError(f"unsupported $ref {ref}")
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _check(value: Any, schema: Any, root: dict[str, Any], path: str, errors: list[str]) -> None:
    if schema is True:
        return
    if schema is False:
        errors.append(f"{path}: no value allowed")
        return
    for key, rule in schema.items():
        if key in _IGNORED:
            continue
        if key == "$ref":
            _check(value, _resolve(rule, root), root, path, errors)
        elif key == "type":
            types = rule if isinstance(rule, list) else [rule]
            if not any(_TYPES[t](value) for t in types):
                errors.append(f"{path}: expected {'/'.join(types)}, got {type(value).__name__}")
        elif key == "enum":
            if value not in rule:
                errors.append(f"{path}: {value!r} not in {rule}")
        elif key == "const":
            if value != rule or isinstance(value, bool) != isinstance(rule, bool):
                errors.append(f"{path}: expected {rule!r}, got {value!r}")
        elif key in ("anyOf", "oneOf"):
            matches = sum(1 for sub in rule if not validate_sub(value, sub, root, path))
            if matches == 0 or (key == "oneOf" and matches > 1):
                errors.append(f"{path}: matches {matches} of the {key} alternatives")
        elif key == "allOf":
            for sub in rule:
                _check(value, sub, root, path, errors)
        elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if _TYPES["number"](value) and not _bound_ok(key, value, rule):
                errors.append(f"{path}: {value} violates {key} {rule}")
        elif key == "pattern":
            if isinstance(value, str) and not re.search(rule, value):
                errors.append(f"{path}: {value!r} does not match {rule}")
        elif key == "propertyNames":
            if isinstance(value, dict):
                for name in value:
                    _check(name, rule, root, f"{path}[{name!r}]", errors)
        elif key in ("properties", "required", "additionalProperties"):
            if isinstance(value, dict):
                _check_object(key, value, schema, root, path, errors)
        elif key in ("items", "prefixItems", "minItems", "maxItems"):
            if isinstance(value, list):
                _check_array(key, value, schema, root, path, errors)
        else:
            raise ValueError(f"schema keyword {key!r} at {path} is not supported by schema_check")


def validate_sub(value: Any, schema: Any, root: dict[str, Any], path: str) -> list[str]:
    errors: list[str] = []
    _check(value, schema, root, path, errors)
    return errors


def _bound_ok(key: str, value: float, bound: float) -> bool:
    return {
        "minimum": value >= bound,
        "maximum": value <= bound,
        "exclusiveMinimum": value > bound,
        "exclusiveMaximum": value < bound,
    }[key]


def _check_object(key: str, value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], path: str, errors: list[str]) -> None:
    props = schema.get("properties", {})
    if key == "properties":
        for name, sub in props.items():
            if name in value:
                _check(value[name], sub, root, f"{path}.{name}", errors)
    elif key == "required":
        for name in schema["required"]:
            if name not in value:
                errors.append(f"{path}.{name}: missing")
    else:
        extra_rule = schema["additionalProperties"]
        for name in value:
            if name in props:
                continue
            if extra_rule is False:
                errors.append(f"{path}.{name}: not allowed (additionalProperties: false)")
            elif isinstance(extra_rule, dict):
                _check(value[name], extra_rule, root, f"{path}.{name}", errors)


def _check_array(key: str, value: list[Any], schema: dict[str, Any], root: dict[str, Any], path: str, errors: list[str]) -> None:
    prefix = schema.get("prefixItems", [])
    if key == "prefixItems":
        for i, sub in enumerate(prefix):
            if i < len(value):
                _check(value[i], sub, root, f"{path}[{i}]", errors)
    elif key == "items":
        rule = schema["items"]
        for i in range(len(prefix), len(value)):
            _check(value[i], rule, root, f"{path}[{i}]", errors)
    elif key == "minItems" and len(value) < schema["minItems"]:
        errors.append(f"{path}: {len(value)} items < minItems {schema['minItems']}")
    elif key == "maxItems" and len(value) > schema["maxItems"]:
        errors.append(f"{path}: {len(value)} items > maxItems {schema['maxItems']}")
