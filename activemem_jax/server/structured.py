"""Structured output on the server: a request's `response_format` (OpenAI: text,
json_object, json_schema with strict), vLLM's `guided_json` / `guided_regex` /
`guided_choice` / `guided_grammar` or its newer `structured_outputs` object become one
engine `Constraint`, compiled before the request is queued. Anything wrong with it (two
constraints, an unsupported type, a schema too large, one no string satisfies, a regex
that explodes the automaton, a grammar the vocabulary cannot spell) is a 400 naming the
field, within `COMPILE_TIMEOUT_S`; the engine never sees it. See
docs/engine.md#structured-output."""

from __future__ import annotations

import asyncio
from typing import Optional

from activemem_jax.engine import Engine
from activemem_jax.engine.constraints import Constraint
from activemem_jax.server.schema import APIError, CommonRequest

COMPILE_TIMEOUT_S = 10.0  # a constraint not compiled by then is refused (llguidance's limits bound it anyway)
FIELDS = ("response_format", "guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs")
STRUCTURED_KEYS = {"json": "guided_json", "regex": "guided_regex", "choice": "guided_choice",
                   "grammar": "guided_grammar", "json_object": None}


def constraint_of(req: CommonRequest) -> tuple[Optional[Constraint], Optional[str]]:
    """(the request's constraint or None, the field it came from)."""
    given = [f for f in FIELDS if getattr(req, f) is not None]
    rf = req.response_format
    if rf is not None and rf.get("type") == "text" and len(rf) == 1:
        given.remove("response_format")  # plain text: no constraint
    if len(given) > 1:
        raise APIError(400, f"give at most one of {', '.join(given)}", given[1])
    if not given:
        return None, None
    field = given[0]
    try:
        if field == "response_format":
            return _response_format(rf), field
        if field == "structured_outputs":
            return _structured(req.structured_outputs), field
        return _guided(field.removeprefix("guided_"), getattr(req, field)), field
    except ValueError as e:
        raise APIError(400, f"{field}: {e}", field) from e


def _response_format(rf: dict) -> Constraint:
    kind = rf.get("type")
    if kind == "json_object":
        return Constraint.json_object()
    if kind == "json_schema":
        spec = rf.get("json_schema")
        if not isinstance(spec, dict):
            raise ValueError('type "json_schema" needs a json_schema object ({"name": ..., "schema": {...}})')
        strict = spec.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise ValueError("json_schema.strict must be a boolean")
        schema = spec.get("schema", {})
        return Constraint.json_schema(schema, strict=bool(strict))
    if kind == "text":
        raise ValueError('type "text" takes no other field')
    raise ValueError(f"type {kind!r} is not supported (use text, json_object or json_schema)")


def _guided(kind: str, value) -> Constraint:
    if kind == "json":
        return Constraint.json_schema(value)
    if kind == "regex":
        return Constraint.regex(value)
    if kind == "choice":
        return Constraint.choice(value)
    return Constraint.grammar(value)


def _structured(spec: dict) -> Constraint:
    keys = [k for k, v in spec.items() if v is not None and v is not False]
    unknown = [k for k in keys if k not in STRUCTURED_KEYS]
    if unknown or len(keys) != 1:
        raise ValueError(f"give exactly one of {', '.join(STRUCTURED_KEYS)}"
                         + (f" (unsupported: {', '.join(unknown)})" if unknown else ""))
    if keys[0] == "json_object":
        return Constraint.json_object()
    value = spec[keys[0]]
    if keys[0] in ("regex", "grammar") and not isinstance(value, str):
        raise ValueError(f"{keys[0]} must be a string")
    return _guided(keys[0], value)


async def checked(engine: Engine, req: CommonRequest) -> Optional[Constraint]:
    """The request's constraint, compiled (the engine keeps it for the request), or a 400."""
    constraint, field = constraint_of(req)
    if constraint is None:
        return None
    try:
        await asyncio.wait_for(asyncio.to_thread(engine.check_constraint, constraint), COMPILE_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise APIError(400, f"{field}: the constraint took longer than {COMPILE_TIMEOUT_S:g} s to compile; "
                            "simplify it", field) from None
    except ValueError as e:
        raise APIError(400, f"{field}: {e}", field) from e
    return constraint


__all__ = ["COMPILE_TIMEOUT_S", "FIELDS", "checked", "constraint_of"]
