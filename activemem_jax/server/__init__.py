"""OpenAI-compatible model server on the engine (FastAPI): `make_app(engine, names)`.

schema.py holds the request bodies (checked against their real bounds before anything
reaches the engine) and the errors in OpenAI's shape; routes.py the routes, as methods of
one object. `python -m activemem_jax.serve` runs it (activemem_jax/serve.py).
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from activemem_jax.engine import Engine
from activemem_jax.server.routes import Routes
from activemem_jax.server.schema import APIError, KeyCheck, error_response


def make_app(engine: Engine, model_names: Union[str, Sequence[str]], api_key: Optional[str] = None) -> FastAPI:
    """model_names: the ids a request may ask for (the first is the default in replies)."""
    names = [model_names] if isinstance(model_names, str) else list(dict.fromkeys(model_names))
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"model_names={model_names!r}: give at least one non-empty name")
    app = FastAPI(title="activemem-jax model server")
    app.add_exception_handler(APIError, _api_error_response)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    if api_key:
        app.add_middleware(KeyCheck, api_key=api_key)
    Routes(engine, names).register(app)
    return app


async def _api_error_response(_: Request, e: APIError):
    return error_response(e.status, e.message, e.param, e.code, e.headers, e.kind)


async def _validation_error(_: Request, e: RequestValidationError):
    first = e.errors()[0] if e.errors() else {}
    where = ".".join(str(x) for x in first.get("loc", ())[1:]) or None
    return error_response(400, f"invalid request: {first.get('msg', 'malformed body')}"
                          + (f" at '{where}'" if where else ""), param=where)


async def _http_error(_: Request, e: StarletteHTTPException):  # unknown path, wrong method, ...
    return error_response(e.status_code, f"{e.detail}", headers=getattr(e, "headers", None))


async def _unexpected(_: Request, e: Exception):
    return error_response(500, f"internal error: {type(e).__name__}: {e}")


def served_names(model: str, served_model_name=None) -> list[str]:
    """The ids a server answers to: --served-model-name's (comma-separated, first is the
    default id of replies), then the --model value as given and, for a path, its last
    component; "embedded" is also "smollm2-135m-instruct"."""
    extra = served_model_name or []
    extra = [n.strip() for n in extra.split(",")] if isinstance(extra, str) else list(extra)
    own = [model] + (["smollm2-135m-instruct"] if model == "embedded" else
                     [os.path.basename(os.path.normpath(model))])
    return list(dict.fromkeys(n for n in [*extra, *own] if n))


__all__ = ["make_app", "served_names"]
