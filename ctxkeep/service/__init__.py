"""The service layer: the typed questions every front end asks (the CLI, the MCP
server, the app).

One module per question (``search``, ``fetch``, ``conversation``, ``stats``,
``sessions``, ``resume``, ``index``, ``purge``, ``transcripts``, …). Each has a
``<Q>Request`` and a ``<Q>Result`` pydantic model and one function
``<q>(home: Path, req: <Q>Request) -> <Q>Result``:

- a request validates once (``Request.parse``): defaults, ranges and what an option
  means live in its fields (``Limit``, ``Budget``, ``Names``, ``ProjectDir``, ``When``
  below), the same for every front end; a bad value raises ``errors.UsageError`` whose
  ``where`` is the field's name (each front end shows it in its own words);
- a result serializes (``Result.as_json``) as the command's ``--json`` output and the
  MCP tool's ``structuredContent``; objects carry ``"schema": 1``. docs/cli.md's
  ``--json`` sections and the MCP tools' input schemas are generated from the models
  (``model_json_schema``).

Front ends import only ``ctxkeep.service``, ``ctxkeep.errors`` and ``ctxkeep.schema``
(an import-linter contract): they render; they decide nothing.

The interactive paths (docs/design.md, "Latency budget") ask without pydantic: ingest
and ``compress --check`` have dataclass requests; ``ctxkeep search``, ``show
--session`` and ``stats`` ask ``search_core``, ``conversation_core`` and
``stats_core`` (what ``search``, ``conversation`` and ``stats`` wrap in their models),
their typed options read by the rules of ``args`` (the pydantic-free home of the
defaults and ranges the models use too).

Importing this package imports nothing (``service.store``, which every command's
``--home`` goes through, stays free of pydantic: a no-op ingest never loads it); a
question's module imports pydantic (``service.model``) and what it needs
(``service.search`` never imports Prefect, Polars or DuckDB).
"""
