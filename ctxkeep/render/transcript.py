"""A transcript (``service.transcripts.TranscriptResult``) as one self-contained HTML
page or one Markdown file, and the index of sessions linking them.

HTML: messages are Markdown rendered with markdown-it-py (CommonMark, tables,
strikethrough; raw HTML in a message is shown as text, never interpreted), code
highlighted with Pygments (its CSS inline); tool calls, thinking and compaction
summaries are folded in ``<details>`` whose summary gives the tool, the result's
size and its error flag; edits (Claude Code ``Edit``/``MultiEdit`` arguments
``old_string``/``new_string``, Codex ``apply_patch`` patches) are shown as diffs;
images the store keeps (``media``) inline as ``data:`` URIs. Nothing is loaded from
elsewhere: no remote ``src``/``href`` (a link in a message becomes its text and its
address, unless it points within the page; an image link its alt text and address), CSS in a ``<style>``,
one inline script that opens every fold before printing (and, on a page opened at an
entry, one that marks it and scrolls it into view: ``_FOCUS_JS``).

Times are shown in the zone ``tz`` (IANA name).
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import html
import json
import re
from collections.abc import Callable
from zoneinfo import ZoneInfo

from ctxkeep.service.transcripts import SessionSummary, TranscriptResult, Turn

#: marks the start of each message in the Markdown export (one per ``message`` turn):
#: ``<!-- ctxkeep:message role=user entry=ID -->``
MD_MESSAGE_MARK = "<!-- ctxkeep:message"

#: the only links a message keeps as links: anchors within the page (any other
#: address, remote or a path of the agent's machine, is shown as text)
_SAFE_SCHEME = re.compile(r"^#[\w-]*$")


# ---------------------------------------------------------------- Markdown → HTML


@functools.cache
def _md():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "highlight": highlight}).enable(["table", "strikethrough"])

    def link_open(_self, tokens, idx, _options, env):
        href = tokens[idx].attrGet("href") or ""
        local = bool(_SAFE_SCHEME.match(href))
        env.setdefault("_links", []).append(None if local else href)
        return f'<a href="{html.escape(href)}">' if local else '<span class="link">'

    def link_close(_self, tokens, idx, _options, env):
        links = env.get("_links") or []
        href = links.pop() if links else None
        if href is None:
            return "</a>"
        return f'</span> <span class="addr">&lt;{html.escape(href)}&gt;</span>'

    def image(_self, tokens, idx, _options, env):
        t = tokens[idx]
        alt = "".join(c.content for c in (t.children or []))
        return f'<span class="img">[image: {html.escape(alt)}] &lt;{html.escape(t.attrGet("src") or "")}&gt;</span>'

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("link_close", link_close)
    md.add_render_rule("image", image)
    return md


def markdown_html(text: str) -> str:
    """``text`` (Markdown) as HTML: raw HTML escaped, code highlighted, links to other
    places shown as text (see the module docstring)."""
    return _md().render(text or "", {})


@functools.lru_cache(maxsize=256)
def _lexer(lang: str):
    """The Pygments lexer of a language alias or file extension (plain text when
    unknown); lexers hold no state between calls, so one serves every block."""
    from pygments.lexers import TextLexer, get_lexer_by_name, get_lexer_for_filename
    from pygments.util import ClassNotFound

    if lang:
        try:
            return get_lexer_by_name(lang)
        except ClassNotFound:
            try:
                return get_lexer_for_filename(f"x.{lang}")
            except ClassNotFound:
                pass
    return TextLexer()


@functools.lru_cache(maxsize=1)
def _formatter():
    """One HTML formatter for every block (building one builds its style table: ~1 ms,
    paid once per block before)."""
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(cssclass="hl", wrapcode=True)


def highlight(code: str, lang: str | None, _attrs=None) -> str:
    """``code`` as highlighted HTML (``<pre class="hl">…``), the lexer by ``lang``
    (a Pygments alias or file extension; unknown: plain text)."""
    from pygments import highlight as pyg

    lang = (lang or "").strip().split()[0] if (lang or "").strip() else ""
    return pyg(code, _lexer(lang), _formatter())


def _lang_of(path: str | None) -> str:
    return path.rsplit(".", 1)[-1] if path and "." in path.rsplit("/", 1)[-1] else ""


# ---------------------------------------------------------------- times


def local_time(ts: str | None, tz: str, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """Stored-time text ``ts`` (ISO-8601 UTC) as local time in ``tz``; '' for none;
    the text itself when it does not parse."""
    if not ts:
        return ""
    try:
        t = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return ts
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.astimezone(ZoneInfo(tz)).strftime(fmt)


def duration(started: str | None, ended: str | None) -> str:
    """``1h 04m``, ``12m``, ``40s`` between two stored times ('' when unknown)."""
    try:
        a = dt.datetime.fromisoformat((started or "").replace("Z", "+00:00"))
        b = dt.datetime.fromisoformat((ended or "").replace("Z", "+00:00"))
    except ValueError:
        return ""
    s = int((b - a).total_seconds())
    if s < 60:
        return f"{max(s, 0)}s"
    h, m = divmod(s // 60, 60)
    if h >= 48:
        return f"{h // 24}d {h % 24}h"
    return f"{h}h {m:02d}m" if h else f"{m}m"


def size(n: int | None) -> str:
    """Bytes as people read them (decimal units)."""
    n = n or 0
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:,.1f} {unit}"
    return f"{n:,} B"


def cost(v: float | None) -> str:
    return "" if v is None else f"${v:,.2f}"


#: a session's logged tokens the agent did not record (Crush, Go opencode: a cost only)
TOKENS_NOT_RECORDED = "not recorded by the agent"


def tokens(v: int | None, short: bool = False) -> str:
    """``12,345``; None: the agent logged a cost but no tokens (``-`` when ``short``)."""
    return ("-" if short else TOKENS_NOT_RECORDED) if v is None else f"{v:,}"


# ---------------------------------------------------------------- tool calls


def _args(text: str) -> dict | None:
    try:
        v = json.loads(text)
    except (ValueError, TypeError):
        return None
    return v if isinstance(v, dict) else None


def edit_diff(turn: Turn) -> str | None:
    """The unified diff an edit tool call makes, or None when it is not an edit:
    ``old_string``/``new_string`` (Claude Code ``Edit``), ``edits`` of them
    (``MultiEdit``), or a patch text (Codex ``apply_patch``, ``*** Begin Patch``)."""
    text = turn.text or ""
    if "*** Begin Patch" in text[:2000]:
        a = _args(text)
        patch = a.get("input") or a.get("patch") or text if a else text
        return patch if isinstance(patch, str) else text
    a = _args(text)
    if not a:
        return None
    edits_v = a.get("edits")
    edits = edits_v if isinstance(edits_v, list) else [a]
    path = str(a.get("file_path") or a.get("path") or "file")
    out: list[str] = []
    for e in edits:
        if not isinstance(e, dict) or not isinstance(e.get("old_string"), str) or "new_string" not in e:
            return None
        out.extend(
            difflib.unified_diff(
                e["old_string"].splitlines(),
                str(e["new_string"]).splitlines(),
                f"a/{path}",
                f"b/{path}",
                lineterm="",
            )
        )
    return "\n".join(out)


def tool_summary(turn: Turn) -> str:
    """The one-line label of a folded tool call: tool, what it was given in brief, the
    result's size and ``error`` when it failed."""
    a = _args(turn.text) or {}
    brief = next(
        (
            str(a[k])
            for k in ("command", "file_path", "path", "pattern", "query", "description", "url")
            if a.get(k)
        ),
        "",
    )
    brief = " ".join(brief.split())[:90]
    parts = [turn.tool_name or "tool"]
    if brief:
        parts.append(brief)
    if turn.result_bytes is not None:
        parts.append(f"result {size(turn.result_bytes)}")
    else:
        parts.append("no result stored")
    if turn.result_error:
        parts.append("ERROR")
    return " · ".join(parts)


def _tool_body_html(turn: Turn) -> str:
    diff = edit_diff(turn)
    a = _args(turn.text)
    if diff is not None:
        body = highlight(diff, "diff")
    elif a is not None and isinstance(a.get("command"), str | list):
        cmd = a["command"] if isinstance(a["command"], str) else " ".join(map(str, a["command"]))
        rest = {k: v for k, v in a.items() if k != "command"}
        body = highlight(cmd, "bash") + (
            highlight(json.dumps(rest, indent=2, ensure_ascii=False), "json") if rest else ""
        )
    elif a is not None and isinstance(a.get("content"), str) and a.get("file_path"):
        body = highlight(a["content"], _lang_of(str(a["file_path"])))
    elif a is not None:
        body = highlight(json.dumps(a, indent=2, ensure_ascii=False), "json")
    else:
        body = highlight(turn.text, "")
    if turn.result_text is not None:
        cls = "result error" if turn.result_error else "result"
        body += f'<div class="{cls}"><div class="label">result ({size(turn.result_bytes)})</div>'
        body += highlight(turn.result_text, "") + "</div>"
    return body


def _media_html(turn: Turn) -> str:
    out = []
    for m in turn.media:
        if m.media_type.startswith("image/"):
            out.append(
                f'<img class="media" alt="image ({size(m.bytes)})" '
                f'src="data:{html.escape(m.media_type)};base64,{m.data_base64}">'
            )
        else:
            out.append(
                f'<div class="media">{html.escape(m.media_type)} ({size(m.bytes)}) kept in the store</div>'
            )
    return "".join(out)


# ---------------------------------------------------------------- one page


def _session_a(href: str, text_html: str, target: str | None) -> str:
    """A link to a session's page: ``text_html`` (escaped already) under ``href``,
    opened in the browsing context ``target`` (None: this one)."""
    t = f' target="{html.escape(target)}"' if target else ""
    return f'<a href="{html.escape(href)}"{t}>{text_html}</a>'


def turn_html(turn: Turn, tz: str, link: Callable[[str], str | None], target: str | None = None) -> str:
    """One turn as an HTML block (``<section>`` for a message, ``<details>`` for a
    folded one). ``link(session_id)`` gives the href of a session's page (None: not
    exported)."""
    when = html.escape(local_time(turn.ts, tz))
    anchor = f' id="e-{html.escape(turn.entry_id)}"' if turn.entry_id else ""
    if turn.kind == "message":
        return (
            f'<section class="msg {html.escape(turn.role)}"{anchor}><div class="meta"><b>{html.escape(turn.role)}</b>'
            f" · {when}</div>{markdown_html(turn.text)}{_media_html(turn)}</section>"
        )
    if turn.kind == "tool_call":
        err = " error" if turn.result_error else ""
        return (
            f'<details class="tool{err}"{anchor}><summary><span class="tag">tool</span> {html.escape(tool_summary(turn))}'
            f' <span class="when">{when}</span></summary>{_tool_body_html(turn)}{_media_html(turn)}</details>'
        )
    if turn.kind == "tool_result":
        err = " error" if turn.result_error else ""
        label = f"{turn.tool_name or 'tool'} result {size(turn.result_bytes)}" + (
            " · ERROR" if turn.result_error else ""
        )
        return (
            f'<details class="tool{err}"{anchor}><summary><span class="tag">result</span> {html.escape(label)} (its call is not stored)'
            f' <span class="when">{when}</span></summary>{highlight(turn.text, "")}{_media_html(turn)}</details>'
        )
    if turn.kind == "thinking":
        if not turn.text.strip():
            return f'<div class="thinking empty"{anchor}><span class="tag">thinking</span> its text is not stored (the agent keeps it encrypted) · {when}</div>'
        return (
            f'<details class="thinking"{anchor}><summary><span class="tag">thinking</span> {size(len(turn.text.encode()))}'
            f' <span class="when">{when}</span></summary>{markdown_html(turn.text)}</details>'
        )
    if turn.kind == "compaction":
        return (
            f'<details class="compaction"{anchor}><summary><span class="tag">compaction</span> context compacted here · {when}'
            f" ({size(len(turn.text.encode()))} of summary)</summary>{markdown_html(turn.text)}</details>"
        )
    if turn.kind == "summary":
        return (
            f'<details class="summary"{anchor}><summary><span class="tag">summary</span> {when}</summary>'
            f"{markdown_html(turn.text)}</details>"
        )
    if turn.kind == "subagent":
        href = link(turn.ref or "")
        title = html.escape(turn.text or turn.ref or "")
        shown = _session_a(href, title, target) if href else title
        return f'<div class="subagent"><span class="tag">sub-agent</span> started · {when}: {shown}</div>'
    return ""


def page_html(
    t: TranscriptResult,
    *,
    tz: str,
    link: Callable[[str], str | None],
    index_href: str | None,
    focus: str | None = None,
    window: tuple[int, int] | None = None,
    target: str | None = None,
) -> str:
    """The whole HTML page of transcript ``t`` (see the module docstring). ``focus``:
    an entry id to open at (a search hit; a tool result opens its call's fold).
    ``window``: ``(start, stop)``, only ``t.turns[start:stop]`` are drawn, under a line
    saying which of how many (the app's pages of a long session: its largest on a 2 GB
    store has ~17,000 turns, 28 MB of HTML whole); the facts stay the session's.
    Default: ``t.window`` (the turns whose texts were read), else every turn.
    ``target``: where links to other sessions (``link``: parent, sub-agents) open
    (the app: ``_top``, as its frame would load the whole app inside itself; they are
    then resolved against the top window's address, ``_TOP_LINKS_JS``)."""
    window = window if window is not None else t.window
    s = t.session
    title = s.title or s.session_id
    head = [
        f'<p class="nav"><a href="{html.escape(index_href)}">← all sessions</a></p>' if index_href else "",
        f"<h1>{html.escape(title)}</h1>",
        '<table class="facts">',
    ]
    facts = [
        ("agent", s.agent),
        ("session", s.session_id),
        ("project", s.project_dir or ""),
        ("started", local_time(s.started, tz) + f" ({tz})"),
        ("duration", duration(s.started, s.ended)),
        ("messages", f"{t.messages:,}"),
        ("tool calls", f"{s.tool_calls:,}"),
        ("tokens", tokens(s.tokens)),
        ("cost", cost(s.cost_usd) or "unknown"),
    ]
    head += [f"<tr><th>{k}</th><td>{html.escape(v)}</td></tr>" for k, v in facts]
    if s.parent_session_id:
        href = link(s.parent_session_id)
        p = html.escape(s.parent_session_id)
        head.append(f"<tr><th>parent</th><td>{_session_a(href, p, target) if href else p}</td></tr>")
    head.append("</table>")
    if t.subagents:
        items = []
        for k in t.subagents:
            href = link(k.session_id)
            name = html.escape(k.title or k.session_id)
            items.append(f"<li>{_session_a(href, name, target) if href else name}</li>")
        head.append(f"<h2>Sub-agents</h2><ul>{''.join(items)}</ul>")
    shown = t.turns if window is None else t.turns[window[0] : window[1]]
    if not t.turns:
        body = '<p class="empty">This session holds no messages or tool calls.</p>'
    else:
        body = "\n".join(turn_html(x, tz, link, target) for x in shown)
        if len(shown) < len(t.turns):
            first = (window or (0, 0))[0]
            body = (
                f'<p class="window">Turns {first + 1:,}–{first + len(shown):,} of {len(t.turns):,}.</p>\n'
                + body
            )
    script = ""
    if focus:
        owner = next(
            (x.entry_id for x in shown if focus in (x.entry_id, x.result_entry_id) and x.entry_id), None
        )
        if owner:
            script = "<script>" + _FOCUS_JS.replace("ENTRY_ID", json.dumps("e-" + owner)) + "</script>"
    if target == "_top":
        script += f"<script>{_TOP_LINKS_JS}</script>"
    return _document(
        f"{title[:80]} · ctxkeep",
        "\n".join(head) + '\n<main class="transcript">\n' + body + "\n</main>" + script,
    )


#: the script of a page opened at an entry (a search hit): the entry marked (``.focus``),
#: its fold opened, and scrolled into view. In the app (``ctxkeep ui``) the page is the
#: ``srcdoc`` of a same-origin iframe that marimo (0.25, ``__resizeIframe`` in its
#: index.html) grows to its content's height after the page's ``load``: the frame itself
#: never scrolls, so scrolling there (what this script did first) moved nothing once
#: marimo had sized it, and the hit stayed thousands of pixels below the app's fold.
#: Here the script waits until the frame is sized (its viewport as tall as its
#: document), then ``scrollIntoView`` scrolls the app's page (Chromium scrolls every
#: scrolling ancestor, across a same-origin frame); for 10 s it scrolls again whenever
#: the app's own layout (its table, charts) moves the entry out of view, until the user
#: scrolls, types or clicks. A standalone page (no frame) scrolls at once.
_FOCUS_JS = """(()=>{const e=document.getElementById(ENTRY_ID);if(!e)return;
if(e.tagName==='DETAILS')e.open=true;e.classList.add('focus');
let f=null;try{f=window.frameElement}catch(_){}
const top=f?window.parent:window,t0=Date.now();let done=false;
for(const w of new Set([window,top]))for(const k of ['wheel','touchmove','keydown','mousedown'])
w.addEventListener(k,()=>{done=true},{once:true,passive:true});
const tick=()=>{if(done)return;const sized=!f||innerHeight>=document.documentElement.scrollHeight-2;
if(sized){const r=e.getBoundingClientRect(),y=r.top+(f?f.getBoundingClientRect().top:0),h=top.innerHeight;
if(y<0||y+Math.min(r.height,h/2)>h)e.scrollIntoView({block:r.height>h*0.8?'start':'center'});}
if(Date.now()-t0<10000)setTimeout(tick,100)};tick()})()"""


#: links that open in the top window (``target="_top"``: the app's links to other
#: sessions) resolved against the top window's address: marimo serves a large frame
#: from a file of its own (``/@file/….html``), against which ``?tab=…`` would name
#: that file, not the app
_TOP_LINKS_JS = """(()=>{try{const base=window.top.location.href;
for(const a of document.querySelectorAll('a[target=_top]'))a.href=new URL(a.getAttribute('href'),base).href}
catch(_){}})()"""


def index_html(
    sessions: list[SessionSummary], *, tz: str, link: Callable[[str], str | None], note: str = ""
) -> str:
    """The index page: one row per session (sub-agents indented under their parent)."""
    rows = []
    for s in sessions:
        href = link(s.session_id)
        title = html.escape(_short(s.title, 90) or "(no prompt)")
        cell = f'<a href="{html.escape(href)}">{title}</a>' if href else title
        cls = ' class="sub"' if s.depth else ""
        rows.append(
            f"<tr{cls}><td>{html.escape(s.agent)}</td><td>{'↳ ' if s.depth else ''}{cell}</td>"
            f'<td class="proj">{html.escape(s.project_dir or "")}</td>'
            f"<td>{html.escape(local_time(s.started, tz, '%Y-%m-%d %H:%M'))}</td>"
            f'<td class="n">{html.escape(duration(s.started, s.ended))}</td><td class="n">{s.messages:,}</td>'
            f'<td class="n">{s.tool_calls:,}</td><td class="n">{tokens(s.tokens, short=True)}</td><td class="n">{cost(s.cost_usd)}</td></tr>'
        )
    table = (  # in its own horizontal scroll box: the page stays the screen's width (390 px)
        '<div class="wide"><table class="index"><thead><tr><th>agent</th><th>session</th><th>project</th>'
        f"<th>started ({html.escape(tz)})</th><th>duration</th><th>messages</th><th>tools</th><th>tokens</th><th>cost</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    if not sessions:
        table = '<p class="empty">No sessions: run <code>ctxkeep ingest</code> first.</p>'
    return _document("ctxkeep sessions", f"<h1>Sessions</h1><p>{html.escape(note)}</p>{table}", "index")


@functools.cache
def page_css() -> str:
    """The pages' stylesheet: layout, print rules and Pygments' ``.hl`` colours."""
    from pygments.formatters import HtmlFormatter

    return _CSS + HtmlFormatter(style="default").get_style_defs(".hl")


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;
line-height:1.5;color:#1f2328;background:#fff}
h1{font-size:1.5rem;margin:.3rem 0 1rem}
table.facts th{text-align:left;padding-right:1rem;color:#59636e;font-weight:500}
table.index{border-collapse:collapse;width:100%;font-size:.9rem}
table.index th,table.index td{border-bottom:1px solid #d1d9e0;padding:.25rem .4rem;text-align:left;vertical-align:top}
table.index td.n{text-align:right;white-space:nowrap}
tr.sub td{background:#f6f8fa}
.msg{border:1px solid #d1d9e0;border-radius:6px;padding:.2rem .9rem;margin:.8rem 0}
.msg.user{background:#f0f6ff;border-color:#b6d4fe}
.msg.assistant{background:#fff}
.msg.system{background:#fff8e6}
.meta,.when{color:#59636e;font-size:.8rem}
details{border-left:3px solid #d1d9e0;margin:.35rem 0;padding:.1rem .6rem}
details>summary{cursor:pointer;font-size:.88rem;color:#33393f}
details.tool.error{border-left-color:#cf222e}
details.tool.error>summary{color:#cf222e}
details.compaction,.compaction{border-left-color:#bf8700;background:#fff8c5}
.thinking.empty{color:#59636e;font-size:.85rem;margin:.35rem 0}
.subagent{margin:.5rem 0;padding:.3rem .6rem;background:#f6f0ff;border-left:3px solid #8250df}
.tag{display:inline-block;font-size:.72rem;font-weight:600;text-transform:uppercase;letter-spacing:.03em;
padding:0 .35rem;border-radius:3px;background:#e7ecf0;color:#33393f;margin-right:.3rem}
details.tool.error .tag{background:#ffebe9;color:#cf222e}
details.compaction .tag{background:#fff1a8}
.subagent .tag{background:#e9dcff}
body.index{max-width:90rem}
table.index td.proj{max-width:18rem;min-width:9rem;overflow-wrap:anywhere;color:#59636e;font-size:.85em}
.wide{overflow-x:auto}
.result .label{color:#59636e;font-size:.8rem;margin-top:.4rem}
.result.error pre{background:#ffebe9}
pre{overflow-x:auto;font-size:.82rem;padding:.5rem;background:#f6f8fa;border-radius:4px;white-space:pre-wrap;
word-break:break-word}
code{font-size:.88em}
.addr,.img{color:#59636e;font-size:.85em;word-break:break-all}
img.media{max-width:100%;border:1px solid #d1d9e0;margin:.4rem 0}
.empty{color:#59636e}
.focus{outline:3px solid #bf8700;outline-offset:2px}
@media print{body{max-width:none}details{break-inside:avoid-page}.nav{display:none}pre{white-space:pre-wrap}}
"""


def _short(text: str | None, n: int) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= n else t[: n - 1] + "…"


def _document(title: str, body: str, cls: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{page_css()}</style></head>\n"
        f'<body class="{cls}">\n{body}\n'
        "<script>addEventListener('beforeprint',()=>document.querySelectorAll('details')"
        ".forEach(d=>d.open=true))</script>\n</body></html>\n"
    )


# ---------------------------------------------------------------- Markdown


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text or "")), default=2)
    f = "`" * (longest + 1)
    return f"{f}{lang}\n{text}\n{f}"


def turn_markdown(turn: Turn, tz: str, link: Callable[[str], str | None]) -> str:
    """One turn as Markdown: a message as a heading line and its text (marked with
    ``MD_MESSAGE_MARK``); tool calls, thinking and compactions folded in
    ``<details>`` (GitHub and most viewers render them)."""
    when = local_time(turn.ts, tz)
    if turn.kind == "message":
        return f"{MD_MESSAGE_MARK} role={turn.role} entry={turn.entry_id} -->\n### {turn.role} · {when}\n\n{turn.text}\n"
    if turn.kind == "tool_call":
        diff = edit_diff(turn)
        body = (
            _fence(diff, "diff")
            if diff is not None
            else _fence(turn.text, "json" if _args(turn.text) else "")
        )
        if turn.result_text is not None:
            body += (
                f"\n\nresult ({size(turn.result_bytes)}{', error' if turn.result_error else ''}):\n\n"
                + _fence(turn.result_text)
            )
        return f"<details><summary>tool: {html.escape(tool_summary(turn))} · {when}</summary>\n\n{body}\n\n</details>\n"
    if turn.kind == "tool_result":
        flag = " · ERROR" if turn.result_error else ""
        return f"<details><summary>result: {turn.tool_name or 'tool'} {size(turn.result_bytes)}{flag} · {when}</summary>\n\n{_fence(turn.text)}\n\n</details>\n"
    if turn.kind == "thinking":
        if not turn.text.strip():
            return f"*thinking (its text is not stored) · {when}*\n"
        return f"<details><summary>thinking · {when}</summary>\n\n{turn.text}\n\n</details>\n"
    if turn.kind == "compaction":
        return f"---\n\n<details><summary>context compacted here · {when}</summary>\n\n{turn.text}\n\n</details>\n\n---\n"
    if turn.kind == "summary":
        return f"<details><summary>summary · {when}</summary>\n\n{turn.text}\n\n</details>\n"
    if turn.kind == "subagent":
        href = link(turn.ref or "")
        name = turn.text or turn.ref or ""
        return (
            f"> sub-agent started · {when}: "
            + (f"[{_md_label(name)}]({href})" if href else _md_label(name))
            + "\n"
        )
    return ""


def _md_label(text: str) -> str:
    return re.sub(r"([\[\]\\`*_<>])", r"\\\1", " ".join((text or "").split())[:120])


def page_markdown(
    t: TranscriptResult, *, tz: str, link: Callable[[str], str | None], index_href: str | None
) -> str:
    """Transcript ``t`` as one Markdown document."""
    s = t.session
    lines = [f"# {_md_label(s.title or s.session_id)}", ""]
    if index_href:
        lines += [f"[← all sessions]({index_href})", ""]
    lines += [
        f"- agent: {s.agent}",
        f"- session: `{s.session_id}`",
        f"- project: {_md_code(s.project_dir, 'unknown')}",
        f"- started: {local_time(s.started, tz)} ({tz}), duration {duration(s.started, s.ended) or '?'}",
        f"- messages: {t.messages:,}; tool calls: {s.tool_calls:,}; tokens: {tokens(s.tokens)}; cost: {cost(s.cost_usd) or 'unknown'}",
    ]
    if s.parent_session_id:
        href = link(s.parent_session_id)
        lines.append(
            f"- parent: [{s.parent_session_id}]({href})" if href else f"- parent: `{s.parent_session_id}`"
        )
    for k in t.subagents:
        href = link(k.session_id)
        name = _md_label(k.title or k.session_id)
        lines.append(f"- sub-agent: [{name}]({href})" if href else f"- sub-agent: {name}")
    lines.append("")
    lines += [turn_markdown(x, tz, link) for x in t.turns]
    return "\n".join(lines) + "\n"


def _md_code(text: str | None, empty: str) -> str:
    """``text`` as inline code, or ``empty`` (plain) when there is none: an empty code
    span renders as two backticks."""
    return f"`{text}`" if text else empty


def index_markdown(
    sessions: list[SessionSummary], *, tz: str, link: Callable[[str], str | None], note: str = ""
) -> str:
    """The index as a Markdown table."""
    out = ["# Sessions", "", note, "", f"| agent | session | project | started ({tz}) | messages | tools | tokens | cost |",
           "|---|---|---|---|--:|--:|--:|--:|"]  # fmt: skip
    for s in sessions:
        href = link(s.session_id)
        name = _md_label(s.title or "(no prompt)").replace("|", "\\|")
        cell = ("↳ " if s.depth else "") + (f"[{name}]({href})" if href else name)
        out.append(
            f"| {s.agent} | {cell} | {_md_code((s.project_dir or '').replace('|', '/'), '-')} | {local_time(s.started, tz, '%Y-%m-%d %H:%M')} "
            f"| {s.messages:,} | {s.tool_calls:,} | {tokens(s.tokens, short=True)} | {cost(s.cost_usd)} |"
        )
    if not sessions:
        out.append("\nNo sessions: run `ctxkeep ingest` first.")
    return "\n".join(out) + "\n"
