"""Where the store lives and what the user configured.

The ctxkeep home is, in order: the ``--home`` option, ``$CTXKEEP_HOME``, or the
platform data dir from platformdirs (``~/.local/share/ctxkeep`` on Linux,
``~/Library/Application Support/ctxkeep`` on macOS, ``%LOCALAPPDATA%\\ctxkeep`` on
Windows). It holds ``store.db`` (SQLite, system of record), ``analytics.duckdb``
(derived), ``config.toml`` (optional), ``archive/`` and ``ingest.lock``. Everything is
created user-only (0700 directories, 0600 files).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ctxkeep.errors import ConfigError

APP = "ctxkeep"
#: the user's settings in the home (listed with the other store files in ``sinks.files``)
CONFIG_FILE = "config.toml"


def resolve_home(home: str | os.PathLike | None = None) -> Path:
    """Return the ctxkeep home directory (not created).

    Args: ``home``, an explicit path (the CLI's ``--home``), else ``$CTXKEEP_HOME``,
    else the platform user data dir. ``~`` is expanded.
    """
    raw = home or os.environ.get("CTXKEEP_HOME")
    if raw:
        return Path(raw).expanduser().resolve()
    return Path(platformdirs.user_data_dir(APP, appauthor=False))


def ensure_home(home: Path) -> Path:
    """Create ``home`` with mode 0700 if missing and return it.

    Raises StoreError when ``home`` (or, if it does not exist yet, its nearest existing
    parent) has no owner-write permission bit. The bits are checked rather than
    ``os.access``, so that root, who may write anywhere, still never creates a store
    inside a read-only tree (e.g. ``HOME`` pointed at a read-only copy of sessions).
    """
    from ctxkeep.errors import StoreError

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


@dataclass
class CompressConfig:
    max_size_kb: int = 500
    max_lines: int = 300
    keep_messages: int = 100
    keep_system_lines: int = 5
    active_minutes: int = 10
    keep_backups: int = 3
    backup_max_age_days: int = 30
    #: KiB; base64 images/documents and tool outputs larger than this in kept lines are
    #: moved to the store and replaced by a placeholder (0: off)
    inline_max_kb: int = 32
    #: KiB; the same for strings of Claude Code's ``toolUseResult`` (its UI copy of a
    #: tool result, never sent to the model; 0: as inline_max_kb)
    tool_use_result_max_kb: int = 4


@dataclass
class RetentionConfig:
    archive_after_days: int = 7
    delete_archives_after_days: int = 30


@dataclass
class BackupConfig:
    keep: int = 7  # store backups kept in <home>/backups (maintenance.backup)


@dataclass
class McpConfig:
    #: extra directories MCP ``ctx_index`` may read besides the project and home dirs
    index_roots: list[str] = field(default_factory=list)


@dataclass
class Config:
    """The parsed ``config.toml``. Unknown keys are ignored; bad types raise ConfigError.

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

    ``load_config`` applies the environment overrides (``CTXKEEP_DISABLE``,
    ``CTXKEEP_ENABLE``, ``CTXKEEP_<AGENT>_DIRS``) on top of the file.
    """

    agents: dict[str, AgentConfig] = field(default_factory=dict)
    compress: CompressConfig = field(default_factory=CompressConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    backup: BackupConfig = field(default_factory=BackupConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    #: this machine's name in a team lake (``machine = "laptop"``; None: the hostname,
    #: ``sinks.machine``); checked to be a Hive partition value at load
    machine: str | None = None
    path: Path | None = None

    def agent(self, name: str) -> AgentConfig:
        return self.agents.get(name) or AgentConfig()


def _section(cls, raw: Any, where: str):
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise ConfigError(f"[{where}] must be a table", where=where)
    obj = cls()
    for k, v in raw.items():
        k = k.replace("-", "_")
        if hasattr(obj, k):
            cur = getattr(obj, k)
            if isinstance(cur, int) and not (isinstance(v, int) and not isinstance(v, bool)):
                raise ConfigError(
                    f"{where}.{k} must be an integer, got {v!r}", where=where, hint="fix config.toml"
                )
            setattr(obj, k, v)
    return obj


#: names the compression seed's ``tools:`` section used for agents ctxkeep names otherwise
AGENT_ALIASES = {"claude": "claude-code", "gemini": "gemini-cli", "sst-opencode": "opencode"}

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _bool(v: Any, where: str, path: Path) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    raise ConfigError(f"{where} must be true or false, got {v!r}", where=str(path), hint="fix config.toml")


def _dirs(v: Any, where: str, path: Path) -> list[Path]:
    """A string or a list of strings → absolute paths: ``~`` and ``$VARS`` expanded,
    relative paths taken from the folder of ``config.toml``."""
    if v is None:
        return []
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(
            f"{where} must be a path or a list of paths, got {v!r}", where=str(path), hint="fix config.toml"
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

    Environment overrides (``env``, default ``os.environ``), applied after the file:
    ``CTXKEEP_DISABLE=a,b`` disables agents, ``CTXKEEP_ENABLE=a,b`` enables agents the
    file disabled, ``CTXKEEP_<AGENT>_DIRS`` (agent upper-cased, ``-`` as ``_``,
    ``os.pathsep``-separated) adds session dirs.

    Raises ConfigError on a file that does not parse or a value of the wrong type.
    """
    env = dict(os.environ if env is None else env)
    path = home / CONFIG_FILE
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(
                f"config.toml does not parse: {e}", where=str(path), hint="fix or remove the file"
            ) from None
    cfg = Config(path=path if path.exists() else None)
    raw_agents: list[tuple[str, Any, str]] = []
    for section in ("agents", "tools"):
        sec = data.get(section) or {}
        if not isinstance(sec, dict):
            raise ConfigError(f"[{section}] must be a table", where=str(path), hint="fix config.toml")
        raw_agents += [(name, a, section) for name, a in sec.items()]
    for name, a, section in raw_agents:
        name = AGENT_ALIASES.get(name, name)
        if not isinstance(a, dict):
            raise ConfigError(f"[{section}.{name}] must be a table", where=str(path), hint="fix config.toml")
        ac = cfg.agents.setdefault(name, AgentConfig())
        if "enabled" in a:
            ac.enabled = _bool(a["enabled"], f"{section}.{name}.enabled", path)
        for key in ("session_dirs", "sessionDir", "sessionDirs", "session_dir"):
            if key in a:
                ac.session_dirs += _dirs(a[key], f"{section}.{name}.{key}", path)
    cfg.compress = _section(CompressConfig, data.get("compress"), "compress")
    cfg.retention = _section(RetentionConfig, data.get("retention"), "retention")
    cfg.backup = _section(BackupConfig, data.get("backup"), "backup")
    cfg.mcp = _section(McpConfig, data.get("mcp"), "mcp")
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
    import re

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
    """Agent names in the config (or environment) that no source module has."""
    return sorted(set(cfg.agents) - set(known))
