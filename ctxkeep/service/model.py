"""The base of every service question: ``Request`` (validated once, errors as
``errors.UsageError`` naming the field), ``Result`` (serialized with ``"schema": 1``)
and the option types every request shares, so that an option means one thing in every
command and tool:

- ``Limit``: 1 … ``MAX_LIMIT`` (default ``DEFAULT_LIMIT``); above the maximum it is
  clamped with a note (``Request.notes``), below 1 a usage error;
- ``PageLimit``: rows of a list people read (``sessions``), at least 1, default
  ``DEFAULT_PAGE``; no maximum (``all`` lists every row);
- ``Budget``: tokens, 1 … ``MAX_BUDGET``, clamped the same way;
- ``Names``, ``AgentNames`` (``names_check``): repeatable and comma-separated (``["codex,crush", "aider"]`` →
  ``["codex", "crush", "aider"]``), lower-cased, each checked against ``choices``;
- ``Texts``: a list of strings, also given as one string or as a JSON array in a
  string (what models send MCP tools);
- ``ProjectDir``: "this directory or below" (``paths.normalize_dir`` against the
  caller's working directory: ``.``, ``~`` and relative paths work);
- ``When``: a ``--since``/``--until`` value, checked by the one parser
  (``timeutil.read_when``) and kept as written.

Lenient scalars, as MCP clients send them: numbers also as strings, booleans also as
``"true"``/``"false"`` (pydantic's lax mode).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic import ValidationInfo as _Info

from ctxkeep.errors import UsageError
from ctxkeep.service.args import (
    DEFAULT_LIMIT,
    DEFAULT_PAGE,
    JSON_SCHEMA,
    MAX_BUDGET,
    MAX_LIMIT,
    in_order,
    names,
    out_of_range,
    project_dir,
    refuse_nul,
    when,
)

#: the defaults and ranges live in ``service.args`` (pydantic-free); the models use them
__all__ = ["DEFAULT_LIMIT", "DEFAULT_PAGE", "JSON_SCHEMA", "MAX_BUDGET", "MAX_LIMIT"]


class Clamp:
    """Field metadata: a number above ``hi`` is taken as ``hi`` and the request's
    ``notes`` say so (``Request.parse``)."""

    def __init__(self, hi: int) -> None:
        self.hi = hi


Limit = Annotated[
    int,
    Clamp(MAX_LIMIT),
    Field(ge=1, description=f"at most this many hits, 1-{MAX_LIMIT} (more is taken as {MAX_LIMIT})"),
]
PageLimit = Annotated[
    int, Field(ge=1, description=f"at most this many rows (default {DEFAULT_PAGE}; all: every row)")
]
Budget = Annotated[
    int,
    Clamp(MAX_BUDGET),
    Field(ge=1, description=f"a token budget, 1-{MAX_BUDGET:,} (more is taken as {MAX_BUDGET:,})"),
]


def _texts(v: Any, info: _Info) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        s = v.strip()
        if not s.startswith("["):
            return [s] if s else []
        try:
            v = json.loads(s)
        except json.JSONDecodeError:
            raise UsageError(
                f"{info.field_name} is not a valid JSON array: {s[:60]}",
                where=info.field_name,
                hint='pass an array like ["a", "b"]',
            ) from None
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v if str(x).strip()]
    raise UsageError(f"{info.field_name} must be an array of strings", where=info.field_name)


Texts = Annotated[list[str], BeforeValidator(_texts)]


def names_check(choices: Callable[[], Sequence[str]] | None = None, *, lower: bool = True) -> BeforeValidator:
    """The validator of a repeatable, comma-separated list of names (``--agent``,
    ``--kind``, ``--tool``): split (``split_values``), lower-cased unless ``lower`` is
    false, and with ``choices`` (a function giving the valid names) each checked: an
    unknown one is a usage error naming the closest valid one. None when none is given."""

    def check(v: Any, info: _Info) -> list[str] | None:
        return names(info.field_name or "value", v, None if choices is None else choices(), lower=lower)

    return BeforeValidator(check)


def _agents() -> tuple[str, ...]:
    from ctxkeep import schema

    return schema.AGENTS


#: names of any kind, unchecked (lower-cased)
Names = Annotated[list[str] | None, names_check()]
#: agent names, each one of ``schema.AGENTS``
AgentNames = Annotated[list[str] | None, names_check(_agents)]


def _project_dir(v: str | None, info: _Info) -> str | None:
    return project_dir(v, (info.context or {}).get("cwd"))


ProjectDir = Annotated[
    str | None,
    AfterValidator(_project_dir),
    Field(description="this directory or below it (., ~ and relative paths are from the caller's directory)"),
]


def _user_path(v: Any, info: _Info) -> Any:
    from ctxkeep.paths import absolute_file

    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return [_user_path(x, info) for x in v]
    return Path(absolute_file(v, (info.context or {}).get("cwd")))


#: a file or folder the user named, made absolute where it enters
#: (``paths.absolute_file`` against the caller's directory; newuser24 F1): a path stored
#: as typed (``.claude/projects/x.jsonl``) was a second name of the file
UserPath = Annotated[Path, AfterValidator(_user_path)]


def _when(v: str | None, info: _Info) -> str | None:
    return when(v, info.field_name or "since/until")


When = Annotated[
    str | None,
    AfterValidator(_when),
    Field(description="a date (a whole day), a datetime (UTC unless it names an offset) or an age: 7d, 12h"),
]


def _in_order(req: Any) -> Any:
    """Raise UsageError when the request's ``since`` is after its ``until``
    (``timeutil.check_window``)."""
    in_order(req.since, req.until)
    return req


#: the validator of a request with ``since`` and ``until`` (``When`` fields):
#: ``_window = window_in_order``
window_in_order = model_validator(mode="after")(_in_order)


class Request(BaseModel):
    """A question's arguments, validated once (``parse``). Unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    #: notes on how the arguments were read (a clamped limit), set by ``parse``
    _notes: list[str] = PrivateAttr(default_factory=list)
    #: a request whose text may hold NUL characters (a text to redact); others refuse them
    nul_allowed: ClassVar[bool] = False

    @property
    def notes(self) -> list[str]:
        """How the arguments were read, one line each (``limit 500 clamped to 200``)."""
        return self._notes

    @classmethod
    def parse(cls, data: dict | None = None, *, cwd: str | os.PathLike | None = None, **kw: Any):
        """The request for ``data`` (and keyword fields; None values are dropped: the
        default applies), relative paths taken from ``cwd`` (default: this process's
        directory). Raises UsageError naming the field (``where``) for a bad value."""
        values = {k: v for k, v in {**(data or {}), **kw}.items() if v is not None}
        if not cls.nul_allowed:
            refuse_nul(values)
        notes = cls.prepare(values) + _clamp(cls, values)
        try:
            req = cls.model_validate(values, context={"cwd": str(cwd)} if cwd else {})
        except ValidationError as e:
            raise _usage_error(cls, e) from None
        req._notes = notes
        return req

    @classmethod
    def prepare(cls, values: dict) -> list[str]:
        """Rewrite ``values`` (the arguments as given) before validation, returning a
        note per change; a request that reads lenient forms overrides it."""
        return []


def _clamp_of(f) -> int | None:
    """The ``Clamp`` maximum of a field (also of ``Budget | None``), or None."""
    metas = list(f.metadata) if f is not None else []
    for arg in get_args(f.annotation) if f is not None else ():
        metas += getattr(arg, "__metadata__", ())
    return next((m.hi for m in metas if isinstance(m, Clamp)), None)


def _clamp(cls: type[BaseModel], values: dict) -> list[str]:
    notes = []
    for name, f in cls.model_fields.items():
        hi = _clamp_of(f)
        key = name if name in values else f.alias if f.alias in values else None
        if hi is None or key is None or isinstance(values[key], bool):
            continue
        try:
            n = int(str(values[key]).strip())
        except ValueError:
            continue
        if n > hi:
            values[key] = hi
            notes.append(f"{key} {n} clamped to {hi}")
    return notes


def _usage_error(cls: type[BaseModel], e: ValidationError) -> UsageError:
    """The first problem of ``e`` as one UsageError: what, the field (``where``), what
    to do."""
    err = e.errors()[0]
    name = ".".join(str(x) for x in err["loc"] if not isinstance(x, int)) or "arguments"
    field = name.split(".")[-1]
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        hi = _clamp_of(cls.model_fields.get(field)) or ctx.get("le")
        return out_of_range(field, value, ctx.get("ge", ctx.get("gt")), hi)
    if kind == "literal_error":
        return UsageError(f"unknown {field} {value!r}", where=field, hint=f"use {ctx.get('expected', '')}")
    if kind == "missing":
        return UsageError(f"{field} is required", where=field, hint=f"give {field}")
    if kind == "extra_forbidden":
        parent = [str(x) for x in err["loc"][:-1] if not isinstance(x, int)]
        model = cls
        for p in parent:  # the nested model the unknown key was given in (``filters``)
            ann = model.model_fields[p].annotation
            model = next(
                (a for a in (ann, *get_args(ann)) if isinstance(a, type) and issubclass(a, BaseModel)), model
            )
        # as the schema names them (``sessionId``, not the field ``session``: newuser17 F9)
        known = ", ".join(f.alias or n for n, f in model.model_fields.items())
        what = f"unknown {parent[-1].removesuffix('s')}" if parent else "unknown argument"
        return UsageError(f"{what} {field}", where=parent[-1] if parent else field, hint=f"known: {known}")
    if kind.startswith("int_") or kind.startswith("float_"):
        return UsageError(
            f"{field} must be a whole number, got {value!r}", where=field, hint="give digits only, e.g. 10"
        )
    if kind.startswith("bool_"):
        return UsageError(
            f"{field} must be true or false, got {value!r}", where=field, hint="give true or false"
        )
    if kind.startswith("string_"):
        return UsageError(f"{field} must be a string", where=field, hint="give it as text in quotes")
    return UsageError(
        f"{field}: {err['msg']}", where=field, hint="see the tool's input schema for this field"
    )


class Item(BaseModel):
    """A part of a result (a hit, an entry): serialized as its fields."""

    model_config = ConfigDict(populate_by_name=True, defer_build=True)


class EntryHead(Item):
    """What names an entry and where it sits, the first keys of a search hit and of a
    fetched entry alike."""

    entry_id: str = Field(description="the entry's full id (what `ctxkeep show` and ctx_fetch take)")
    agent: str = Field(description="agent name")
    session_id: str = Field(description="session id")
    session_short_id: str = Field(description="the shortest prefix of session_id naming it in the store")
    project_dir: str | None = Field(description="project directory (null: unknown)")
    ts: str | None = Field(description="record time, ISO-8601 UTC")
    role: str = Field(description="user, assistant, system, tool")
    kind: str = Field(description="message, tool_call, tool_result, thinking, summary, meta")
    tool_name: str | None = Field(description="tool of a call or result (null: none)")


class Result(BaseModel):
    """A question's answer; ``as_json`` is the ``--json`` object and the MCP tool's
    ``structuredContent``."""

    model_config = ConfigDict(populate_by_name=True, defer_build=True)

    schema_version: int = Field(
        JSON_SCHEMA,
        alias="schema",
        description="the version of this shape (raised when a key changes meaning)",
    )

    def as_json(self) -> dict:
        """The result as JSON-ready data: ``"schema"`` first, then the fields that were
        given (a key a result leaves out, such as ``--all``'s or ``--dry-run``'s, stays
        out rather than showing as null), unknown keys kept."""
        data = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        data.pop("schema", None)
        return {"schema": self.schema_version, **data}


class Shape(Result):
    """A result whose keys vary with the options (dry runs, ``--all``): declared keys
    documented and typed, keys a later version adds kept (a test compares what the
    commands print with the declarations)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", defer_build=True)


class Row(Item):
    """An item of a result whose keys vary (a hook, a per-file line); keys kept."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", defer_build=True)


def tool_schema(model: type[BaseModel]) -> dict:
    """An MCP tool's ``inputSchema``, generated from its request model: references
    inlined (clients differ in what ``$ref`` they follow), titles dropped, and each
    number, boolean and array also allowed as a string, as the request reads them
    (``"5"``, ``"true"``, ``'["a"]'``: what models send)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
        node = {k: walk(v) for k, v in node.items() if k != "title"}
        if node.get("type") in ("integer", "boolean", "array", "number"):
            node["type"] = [node["type"], "string"]
        return node

    out = walk(schema)
    out.pop("description", None)
    return out
