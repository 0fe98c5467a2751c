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

from .errors import ConfigError

APP = "ctxkeep"


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
    """Create ``home`` with mode 0700 if missing and return it."""
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


@dataclass
class RetentionConfig:
    archive_after_days: int = 7
    delete_archives_after_days: int = 30


@dataclass
class Config:
    """The parsed ``config.toml``. Unknown keys are ignored; bad types raise ConfigError.

    Example::

        [agents.codex]
        enabled = false
        [agents.claude-code]
        session_dirs = ["~/work/.claude/projects"]
        [compress]
        max_size_kb = 800
    """

    agents: dict[str, AgentConfig] = field(default_factory=dict)
    compress: CompressConfig = field(default_factory=CompressConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
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
                raise ConfigError(f"{where}.{k} must be an integer, got {v!r}", where=where,
                                  hint="fix config.toml")
            setattr(obj, k, v)
    return obj


def load_config(home: Path) -> Config:
    """Read ``<home>/config.toml`` (missing file: defaults).

    Environment overrides: ``CTXKEEP_DISABLE=agent1,agent2`` disables agents;
    ``CTXKEEP_<AGENT>_DIRS`` (agent upper-cased, ``-`` as ``_``, ``os.pathsep``-separated)
    adds session dirs. Raises ConfigError on a malformed file.
    """
    path = home / "config.toml"
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"config.toml does not parse: {e}", where=str(path),
                              hint="fix or remove the file") from None
    cfg = Config(path=path if path.exists() else None)
    # Accept both `agents` and the seed's `tools: {name: {sessionDir, enabled}}`.
    agents_raw = dict(data.get("agents") or {})
    for name, t in (data.get("tools") or {}).items():
        if isinstance(t, dict):
            agents_raw.setdefault(name, {})
            if "sessionDir" in t:
                agents_raw[name].setdefault("session_dirs", []).append(t["sessionDir"])
            if "enabled" in t:
                agents_raw[name]["enabled"] = t["enabled"]
    for name, a in agents_raw.items():
        if not isinstance(a, dict):
            raise ConfigError(f"[agents.{name}] must be a table", where=str(path))
        dirs = a.get("session_dirs") or a.get("sessionDir") or []
        if isinstance(dirs, str):
            dirs = [dirs]
        cfg.agents[name] = AgentConfig(
            enabled=bool(a.get("enabled", True)),
            session_dirs=[Path(os.path.expandvars(d)).expanduser() for d in dirs],
        )
    cfg.compress = _section(CompressConfig, data.get("compress"), "compress")
    cfg.retention = _section(RetentionConfig, data.get("retention"), "retention")
    for name in filter(None, os.environ.get("CTXKEEP_DISABLE", "").split(",")):
        cfg.agents.setdefault(name.strip(), AgentConfig()).enabled = False
    for name in list(cfg.agents) + _known_agent_env():
        env = os.environ.get(f"CTXKEEP_{name.upper().replace('-', '_')}_DIRS")
        if env:
            ac = cfg.agents.setdefault(name, AgentConfig())
            ac.session_dirs += [Path(d).expanduser() for d in env.split(os.pathsep) if d]
    return cfg


def _known_agent_env() -> list[str]:
    out = []
    for k in os.environ:
        if k.startswith("CTXKEEP_") and k.endswith("_DIRS"):
            out.append(k[len("CTXKEEP_"):-len("_DIRS")].lower().replace("_", "-"))
    return out
