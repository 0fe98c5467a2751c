"""Where the store lives and what the user configured.

The ctxkeep home is, in order: the ``--home`` option, ``$CTXKEEP_HOME``, or the
platform data dir from platformdirs (``~/.local/share/ctxkeep`` on Linux,
``~/Library/Application Support/ctxkeep`` on macOS, ``%LOCALAPPDATA%\\ctxkeep`` on
Windows). It holds ``store.db`` (SQLite, system of record), ``analytics.duckdb``
(derived), ``config.toml`` (optional), ``archive/`` and ``ingest.lock``. Everything is
created user-only (0700 directories, 0600 files).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxkeep.errors import ConfigError, StoreError

APP = "ctxkeep"
#: the user's settings in the home (listed with the other store files in ``sinks.files``)
CONFIG_FILE = "config.toml"


#: the process's umask before ``narrow_umask`` first narrowed it (None: not narrowed)
_user_umask: int | None = None


def narrow_umask() -> None:
    """Make everything ctxkeep creates from now on user-only (umask 0o077: its store,
    archives, backups, temp files), remembering the umask the process was started with
    (the user's) the first time, for the files ctxkeep writes back for an agent
    (``new_file_mode``)."""
    global _user_umask
    old = os.umask(0o077)
    if _user_umask is None:
        _user_umask = old


def new_file_mode() -> int:
    """The permission bits a new file gets from a program run by the user: 0o666 less the
    user's umask (``narrow_umask`` remembered it; else the process's own): 0o644 under
    the usual 022. What ``vault restore`` gives a file it writes back for an agent."""
    mask = _user_umask
    if mask is None:
        mask = os.umask(0)
        os.umask(mask)
    return 0o666 & ~mask


def resolve_home(home: str | os.PathLike | None = None) -> Path:
    """Return the ctxkeep home directory (not created).

    Args: ``home``, an explicit path (the CLI's ``--home``), else ``$CTXKEEP_HOME``,
    else the platform user data dir. ``~`` is expanded.
    """
    raw = home or os.environ.get("CTXKEEP_HOME")
    if raw:
        return Path(raw).expanduser().resolve()
    import platformdirs  # (~5 ms: only when no home is given)

    return Path(platformdirs.user_data_dir(APP, appauthor=False))


def ensure_home(home: Path) -> Path:
    """Create ``home`` with mode 0700 if missing and return it.

    Raises StoreError when ``home`` (or, if it does not exist yet, its nearest existing
    parent) has no owner-write permission bit: "the store at HOME is read-only" for an
    existing home with files in it, else "cannot create the store in HOME". The bits are checked rather than
    ``os.access``, so that root, who may write anywhere, still never creates a store
    inside a read-only tree (e.g. ``HOME`` pointed at a read-only copy of sessions).
    """

    if Path(home).exists() and not Path(home).is_dir():
        raise StoreError(
            f"cannot use {home} as the store: it is a file, not a directory",
            hint="pass --home DIR (or CTXKEEP_HOME) naming a directory",
        )
    probe = Path(home)
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        writable = bool(probe.stat().st_mode & 0o200)
    except OSError:
        writable = False
    if not writable and probe == Path(home) and any(probe.iterdir()):
        raise StoreError(
            f"the store at {home} is read-only: the directory has no write permission, and this "
            "command writes to the store",
            hint=f"make it writable (chmod u+w {home}) or pass --home DIR (or CTXKEEP_HOME) for "
            "another store; search, show and stats read it as it is",
        )
    if not writable:
        raise StoreError(
            f"cannot create the store in {home}: {probe} is read-only",
            hint="set CTXKEEP_HOME or pass --home DIR",
        )
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        os.chmod(home, 0o700)
    except OSError:
        pass
    return home


@dataclass
class AgentConfig:
    """One agent's settings: ``enabled`` and extra session dirs (``session_dirs``)."""

    enabled: bool = True
    session_dirs: list[Path] = field(default_factory=list)


def _ge(n: int, default):
    """A dataclass field with ``default`` whose value must be an integer ``>= n`` (the
    bound is read by ``_validate``, through pydantic)."""
    return field(default=default, metadata={"ge": n})


@dataclass
class CompressConfig:
    """``[compress]``: when a session file is compressed and what it keeps (sizes in
    KiB, counts of lines or messages, minutes, days)."""

    max_size_kb: int = _ge(1, 500)
    max_lines: int = _ge(1, 300)
    keep_messages: int = _ge(1, 100)
    keep_system_lines: int = _ge(0, 5)
    active_minutes: int = _ge(0, 10)
    keep_backups: int = _ge(1, 3)
    backup_max_age_days: int = _ge(1, 30)
    #: KiB; base64 images/documents and tool outputs larger than this in kept lines are
    #: moved to the store and replaced by a placeholder (0: off)
    inline_max_kb: int = _ge(0, 32)
    #: KiB; the same for strings of Claude Code's ``toolUseResult`` (its UI copy of a
    #: tool result, never sent to the model; 0: as inline_max_kb)
    tool_use_result_max_kb: int = _ge(0, 4)


@dataclass
class IngestConfig:
    """``[ingest]``: ``max_line_mb``, the line cap in MiB: a JSONL line (or a document
    its agent rewrites whole) longer than this is quarantined as its SHA-256, size and head,
    never held in memory whole (``sources.contract.max_line_bytes``; the environment's
    ``CTXKEEP_MAX_LINE_MB`` wins)."""

    max_line_mb: int = _ge(1, 16)


@dataclass
class RetentionConfig:
    """``[retention]``: days (24 h periods) after an entry's last status change before a
    consumed/archived entry moves out of the store to Parquet (0: at the next run; unset,
    the default: never, so what compress cut stays in the store, searchable and shown,
    as the README promises), and before archive files are deleted."""

    archive_after_days: int | None = _ge(0, None)
    delete_archives_after_days: int = _ge(1, 30)


@dataclass
class BackupConfig:
    """``[backup]``: store backups kept in ``<home>/backups`` (``maintenance.backup``)."""

    keep: int = _ge(1, 7)


@dataclass
class VaultConfig:
    """``[vault]``: ``enabled`` (default true): whether ingest and compress keep what
    they read in the vault (``sinks.vault``; ``CTXKEEP_VAULT=0`` turns it off too).
    Off, nothing is captured: ``reparse`` and the rebuilds from the vault cover only
    what was captured while it was on.

    Generation retention (``ctxkeep retention``, ``sinks.vault.prune``; default: keep
    every generation): ``keep_generations`` keeps each file's newest K generations,
    ``generation_max_age_days`` drops a generation superseded (its next generation
    started) more than N days ago; a generation goes when either says so (a file's
    newest is always kept), and never one the kept generations cannot stand in for
    (``maintenance.retention``)."""

    enabled: bool = True
    keep_generations: int | None = _ge(1, None)
    generation_max_age_days: int | None = _ge(1, None)


@dataclass
class McpConfig:
    #: extra directories MCP ``ctx_index`` may read besides the project and home dirs
    index_roots: list[str] = field(default_factory=list)
    #: the largest note ``ctx_index`` takes (text or file), in MB (``service.index``)
    max_index_mb: int = 8


@dataclass
class PurgeConfig:
    """``[purge]``: the scheduled purge policies (run by the purge flow from ``serve``).

    ``projects``: project dirs never to keep (each purged with what lies below it);
    ``agents``: agent names whose sessions are never kept; ``older_than_days``:
    sessions whose last entry is older than this many days (None: no age rule);
    ``every_hours``: how often ``serve`` runs the policies (default 24)."""

    projects: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    older_than_days: int | None = _ge(1, None)
    every_hours: int = _ge(1, 24)


@dataclass
class Config:
    """The parsed ``config.toml``. Values of a wrong type or out of range raise
    ConfigError (one line per problem, naming the file and the key); unknown keys are
    reported in ``warnings`` with the closest valid key.

    Example::

        [agents.codex]
        enabled = false
        [agents.claude-code]
        session_dirs = ["~/work/.claude/projects"]
        [agents.crush]                 # project roots to scan for .crush/crush.db
        session_dirs = ["~/src", "/srv/repos"]
        [tools.goose]                  # the compression seed's form is accepted too
        sessionDir = "~/.local/share/goose/sessions"
        enabled = true
        [compress]
        max_size_kb = 800
        [purge]                        # scheduled purge policies (absent: none)
        projects = ["~/clients/acme"]
        older_than_days = 365

    ``load_config`` applies the environment overrides (``CTXKEEP_DISABLE``,
    ``CTXKEEP_ENABLE``, ``CTXKEEP_<AGENT>_DIRS``) on top of the file. ``purge`` is None
    when the file has no ``[purge]`` section.
    """

    agents: dict[str, AgentConfig] = field(default_factory=dict)
    compress: CompressConfig = field(default_factory=CompressConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    backup: BackupConfig = field(default_factory=BackupConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    vault: VaultConfig = field(default_factory=VaultConfig)
    purge: PurgeConfig | None = None
    #: this machine's name in a team lake (``machine = "laptop"``; None: the hostname,
    #: ``sinks.machine``); checked to be a Hive partition value at load
    machine: str | None = None
    path: Path | None = None
    #: one line per unknown key or table (``unknown key compress.max_sizekb - did you
    #: mean max_size_kb?``)
    warnings: list[str] = field(default_factory=list)

    def agent(self, name: str) -> AgentConfig:
        return self.agents.get(name) or AgentConfig()


#: the tables of ``config.toml`` with a fixed set of keys, and their dataclass
SECTIONS = {
    "compress": CompressConfig,
    "ingest": IngestConfig,
    "retention": RetentionConfig,
    "backup": BackupConfig,
    "mcp": McpConfig,
    "vault": VaultConfig,
    "purge": PurgeConfig,
}
#: the keys of an ``[agents.<name>]`` / ``[tools.<name>]`` table (``session_dirs`` and
#: the compression seed's spellings of it)
AGENT_KEYS = ("enabled", "session_dirs", "sessionDir", "sessionDirs", "session_dir")
#: top-level keys that are values, not tables (``machine``: checked by check_machine_name)
TOP_VALUES = ("machine",)
TOP_LEVEL = ("agents", "tools", *SECTIONS, *TOP_VALUES)


def closest(name: str, valid) -> str | None:
    """The valid name closest to a misspelt ``name`` (``difflib``, ratio ≥ 0.6; ``-``
    and ``_`` count as the same), or None."""
    import difflib

    norm = {v.replace("-", "_").lower(): v for v in valid}
    got = difflib.get_close_matches(name.replace("-", "_").lower(), list(norm), n=1, cutoff=0.6)
    return norm[got[0]] if got else None


def _unknown(kind: str, name: str, valid) -> str:
    near = closest(name.split(".")[-1], valid)
    return f"unknown {kind} {name}" + (
        f" - did you mean {near}?" if near else f" (known: {', '.join(valid)})"
    )


def _section_model(cls):
    """The pydantic model of a section dataclass: its fields, strict types, the ``ge``
    bounds of their metadata, no other keys (``extra="forbid"``)."""

    from pydantic import ConfigDict, Field, create_model

    hints = typing.get_type_hints(cls)
    fields = {}
    for f in dataclasses.fields(cls):
        default = (
            Field(default_factory=f.default_factory)
            if f.default_factory is not dataclasses.MISSING
            else Field(f.default, **dict(f.metadata))
        )
        fields[f.name] = (hints[f.name], default)
    return create_model(cls.__name__, __config__=ConfigDict(extra="forbid", strict=True), **fields)


def _validate(data: dict, path: Path) -> list[str]:
    """Check the parsed ``config.toml`` ``data`` with pydantic: raises ConfigError with
    one line per wrong type or out-of-range value (``<path>: compress.max_size_kb = -5:
    Input should be greater than or equal to 1``); returns the unknown keys and tables
    as warning lines, each with the closest valid name."""
    from pydantic import ValidationError

    problems, warnings = [], []
    for top, v in data.items():
        if top in TOP_VALUES:
            continue
        if top not in TOP_LEVEL:
            warnings.append(_unknown("table", f"[{top}]", TOP_LEVEL))
            continue
        if not isinstance(v, dict):
            problems.append(f"{top} = {v!r}: must be a table ([{top}])")
            continue
        if top in ("agents", "tools"):
            for name, a in v.items():
                if not isinstance(a, dict):
                    problems.append(f"{top}.{name} = {a!r}: must be a table ([{top}.{name}])")
                    continue
                warnings += [
                    _unknown("key", f"{top}.{name}.{k}", AGENT_KEYS) for k in a if k not in AGENT_KEYS
                ]
            continue
        cls = SECTIONS[top]
        known = {f.name for f in dataclasses.fields(cls)}
        raw = {k.replace("-", "_"): x for k, x in v.items()}
        warnings += [_unknown("key", f"{top}.{k}", sorted(known)) for k in raw if k not in known]
        try:
            _section_model(cls).model_validate({k: x for k, x in raw.items() if k in known})
        except ValidationError as e:
            for err in e.errors():
                key = ".".join([top, *(str(x) for x in err["loc"])])
                problems.append(f"{key} = {_toml_value(err.get('input'))}: {err['msg']}")
    if problems:
        raise ConfigError(
            "\n".join(f"{path}: {p}" for p in problems),
            hint="fix config.toml",
            problems=[f"{path}: {p}" for p in problems],
            warnings=[f"{path}: {w}" for w in warnings],
        )
    return warnings


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


#: in the user cache dir (platformdirs), one file per config path: the SHA-256 of the
#: last content that passed ``_validate`` (and its warnings), so that pydantic (0.15-0.3 s
#: to import and build the models) runs only when the file changed; kept out of the
#: home, which read-only commands never write
CONFIG_STAMP_DIR = "config-checked"


def _stamp_path(path: Path) -> Path:
    import hashlib

    import platformdirs

    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return Path(platformdirs.user_cache_dir(APP, appauthor=False)) / CONFIG_STAMP_DIR / f"{key}.json"


def _rules_digest() -> str:
    """A digest of the validation rules (every section's fields, defaults and bounds,
    the agent keys): a stamp written under other rules is not trusted."""
    import hashlib

    rules = repr(
        [
            (
                n,
                [
                    (
                        f.name,
                        f.type,
                        None if f.default is dataclasses.MISSING else f.default,
                        dict(f.metadata),
                    )
                    for f in dataclasses.fields(c)
                ],
            )
            for n, c in SECTIONS.items()
        ]
        + [AGENT_KEYS, TOP_LEVEL]
    )
    return hashlib.sha256(rules.encode()).hexdigest()[:16]


def _checked(path: Path, text: bytes) -> list[str]:
    """The warnings of ``config.toml`` (``text``, its bytes), validating it only when
    its content differs from the last validated one (``_stamp_path``; a stamp that
    cannot be written only costs the next call another validation)."""
    import hashlib

    ver = _rules_digest()
    digest = hashlib.sha256(text).hexdigest()
    stamp = _stamp_path(path)
    try:
        got = json.loads(stamp.read_text(encoding="utf-8"))
        if got.get("sha256") == digest and got.get("version") == ver:
            return list(got.get("warnings") or [])
    except (OSError, ValueError, AttributeError):
        pass
    import tomllib

    data = tomllib.loads(text.decode("utf-8"))
    warnings = _validate(data, path)
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"sha256": digest, "version": ver, "warnings": warnings}), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, stamp)
    except OSError:  # a cache: a full or read-only disk only costs the next check
        with contextlib.suppress(OSError, UnboundLocalError):
            tmp.unlink(missing_ok=True)
    return warnings


def _section(cls, raw: Any):
    """A section dataclass from its (validated) table: ``-`` in keys read as ``_``,
    unknown keys dropped (``_validate`` reported them)."""
    if raw is None:
        return cls()
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k.replace("-", "_"): v for k, v in raw.items() if k.replace("-", "_") in known})


#: names the compression seed's ``tools:`` section used for agents ctxkeep names otherwise
AGENT_ALIASES = {"claude": "claude-code", "gemini": "gemini-cli", "sst-opencode": "opencode"}

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _bool(v: Any, where: str, path: Path) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    raise ConfigError(f"{path}: {where} = {v!r}: must be true or false", hint="fix config.toml")


def _dirs(v: Any, where: str, path: Path) -> list[Path]:
    """A string or a list of strings → absolute paths: ``~`` and ``$VARS`` expanded,
    relative paths taken from the folder of ``config.toml``."""
    if v is None:
        return []
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(
            f"{path}: {where} = {v!r}: must be a path or a list of paths", hint="fix config.toml"
        )
    out = []
    for d in v:
        p = Path(os.path.expandvars(d)).expanduser()
        out.append(p if p.is_absolute() else (path.parent / p))
    return out


def load_config(home: Path, env: dict[str, str] | None = None) -> Config:
    """Read ``<home>/config.toml`` (missing file: defaults).

    Agents are configured as ``[agents.<name>]`` with ``enabled`` (bool) and
    ``session_dirs`` (a path or a list of paths), or in the compression seed's form
    ``[tools.<name>]`` with ``enabled`` and ``sessionDir``; ``~`` and ``$VARS`` are
    expanded, relative paths are relative to the config file. A configured dir that
    does not exist is *not* an error (``missing_dirs`` reports it; discovery notes it).
    The other tables are ``SECTIONS``, checked by pydantic models of their dataclasses
    (types strict, ``ge`` bounds) when the file changed since its last check
    (``_stamp_path``, in the user cache dir).

    Environment overrides (``env``, default ``os.environ``), applied after the file:
    ``CTXKEEP_DISABLE=a,b`` disables agents, ``CTXKEEP_ENABLE=a,b`` enables agents the
    file disabled, ``CTXKEEP_<AGENT>_DIRS`` (agent upper-cased, ``-`` as ``_``,
    ``os.pathsep``-separated) adds session dirs.

    Raises ConfigError on a file that does not parse, or with one line per value of a
    wrong type or out of range (``problems``). Unknown keys and tables are not errors:
    ``Config.warnings`` names each with the closest valid name.
    """
    env = dict(os.environ if env is None else env)
    path = home / CONFIG_FILE
    data: dict[str, Any] = {}
    warnings: list[str] = []
    if path.exists():
        import tomllib  # (~4 ms: only when there is a config file)

        try:
            raw = path.read_bytes()
            data = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(
                f"config.toml does not parse: {e}", where=str(path), hint="fix or remove the file"
            ) from None
        warnings = _checked(path, raw)
    cfg = Config(path=path if path.exists() else None, warnings=warnings)
    raw_agents: list[tuple[str, Any, str]] = []
    for section in ("agents", "tools"):
        sec = data.get(section) or {}
        raw_agents += [(name, a, section) for name, a in sec.items()]
    for name, a, section in raw_agents:
        name = AGENT_ALIASES.get(name, name)
        ac = cfg.agents.setdefault(name, AgentConfig())
        if "enabled" in a:
            ac.enabled = _bool(a["enabled"], f"{section}.{name}.enabled", path)
        for key in AGENT_KEYS[1:]:
            if key in a:
                ac.session_dirs += _dirs(a[key], f"{section}.{name}.{key}", path)
    cfg.compress = _section(CompressConfig, data.get("compress"))
    cfg.ingest = _section(IngestConfig, data.get("ingest"))
    cfg.retention = _section(RetentionConfig, data.get("retention"))
    cfg.backup = _section(BackupConfig, data.get("backup"))
    cfg.mcp = _section(McpConfig, data.get("mcp"))
    cfg.vault = _section(VaultConfig, data.get("vault"))
    cfg.purge = _section(PurgeConfig, data["purge"]) if "purge" in data else None
    if data.get("machine") is not None:
        cfg.machine = check_machine_name(data["machine"], str(path))
    for var, flag in (("CTXKEEP_DISABLE", False), ("CTXKEEP_ENABLE", True)):
        for name in filter(None, (x.strip() for x in env.get(var, "").split(","))):
            cfg.agents.setdefault(AGENT_ALIASES.get(name, name), AgentConfig()).enabled = flag
    for key, val in env.items():
        if key.startswith("CTXKEEP_") and key.endswith("_DIRS") and val:
            name = key[len("CTXKEEP_") : -len("_DIRS")].lower().replace("_", "-")
            ac = cfg.agents.setdefault(AGENT_ALIASES.get(name, name), AgentConfig())
            ac.session_dirs += [Path(os.path.expandvars(d)).expanduser() for d in val.split(os.pathsep) if d]
    return cfg


#: a machine name is a Hive partition value (``machine=<name>``): letters, digits, ``.``,
#: ``_``, ``-``; no ``/`` or ``=`` (they split the path), no spaces or ``%`` (escaped
#: differently by pyarrow, Spark and Trino), at most 64 characters
MACHINE_NAME_RE = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def check_machine_name(name: Any, where: str = "machine") -> str:
    """``name`` if it can name a lake partition (``MACHINE_NAME_RE``), else ConfigError."""

    if not isinstance(name, str) or not re.fullmatch(MACHINE_NAME_RE, name):
        raise ConfigError(
            f"machine name {name!r} cannot name a lake partition (machine=<name>)",
            where=where,
            hint='set machine = "..." in config.toml: letters, digits, ".", "_" or "-", at most 64',
        )
    return name


def missing_dirs(cfg: Config) -> dict[str, list[Path]]:
    """Configured session dirs that do not exist, per agent (reported, never fatal)."""
    out = {}
    for name, ac in cfg.agents.items():
        miss = [d for d in ac.session_dirs if not d.exists()]
        if miss:
            out[name] = miss
    return out


def unknown_agents(cfg: Config, known) -> list[str]:
    """Agent names in the config (or environment, or ``[purge] agents``) that no
    source module has."""
    named = set(cfg.agents) | set(cfg.purge.agents if cfg.purge else ())
    return sorted(named - set(known))


def unknown_agent_lines_of_file(home: Path, known) -> list[str]:
    """``unknown_agent_lines`` of the ``[agents.NAME]`` tables of ``<home>/config.toml``
    read as plain TOML, for when the file has an error (no ``Config``): said beside
    the error, so the user fixes both in one round (newuser17 F15). Empty when the
    file cannot be read or parsed (the error says so)."""
    import tomllib

    try:
        data = tomllib.loads((Path(home) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeError, tomllib.TOMLDecodeError):
        return []
    agents = data.get("agents")
    names = sorted(agents) if isinstance(agents, dict) else []
    return _agent_lines([n for n in names if n not in set(known)], known)


def unknown_agent_lines(cfg: Config, known) -> list[str]:
    """One line per agent name of the config that no source has, with the closest
    known name (``config.toml names agent 'codx', which ctxkeep has no source for -
    did you mean codex?``)."""
    return _agent_lines(unknown_agents(cfg, known), known)


def _agent_lines(names, known) -> list[str]:
    out = []
    for name in names:
        near = closest(name, list(known))
        out.append(
            f"config.toml names agent {name!r}, which ctxkeep has no source for"
            + (f" - did you mean {near}?" if near else f" (known: {', '.join(known)})")
        )
    return out
