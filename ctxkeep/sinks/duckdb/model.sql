-- The DuckDB analytics model (docs/analytics.md). Run by sinks.duckdb.connect on every
-- writable open, after the tables; {archive} is replaced by the archive's SELECT.
-- Statements are separated by lines holding only ';'.

-- the Parquet retention archive (<home>/archive/**/*.parquet); no files: no rows
CREATE OR REPLACE VIEW archive AS {archive}
;
-- the entries of the hot store and of the archive, once each (store first)
CREATE OR REPLACE VIEW all_entries AS
SELECT e.sqlite_rowid, {columns}, false AS archived,
       (e.kind = 'tool_result' AND e.entry_id IN (SELECT entry_id FROM tool_errors)) AS is_error
FROM entries e
UNION ALL
SELECT NULL::BIGINT, {columns}, true, (e.kind = 'tool_result' AND starts_with(coalesce(e.text, ''), '[error]'))
FROM (SELECT * FROM archive a WHERE a.entry_id NOT IN (SELECT entry_id FROM entries)
      QUALIFY row_number() OVER (PARTITION BY a.entry_id ORDER BY a.archived_at DESC) = 1) e
;
-- entries that count as history: every status but rewound
CREATE OR REPLACE VIEW history AS
SELECT * FROM all_entries WHERE status IS DISTINCT FROM 'rewound'
;
CREATE OR REPLACE MACRO cost_in_mode(mode, logged, calculated) AS
CASE mode WHEN 'auto' THEN coalesce(logged, calculated) WHEN 'calculate' THEN calculated
          WHEN 'display' THEN logged END
;
-- a sum of USD amounts that does not depend on the order of the rows (exact in DECIMAL)
CREATE OR REPLACE MACRO usd_sum(x) AS CAST(sum(CAST(x AS DECIMAL(38, 12))) AS DOUBLE)
;
-- usage_buckets holds every timed usage row (sinks.duckdb.buckets_fresh; query.reports)
CREATE OR REPLACE MACRO buckets_fresh() AS
(SELECT count(*) FROM usage WHERE ts IS NOT NULL) = (SELECT coalesce(sum(responses), 0) FROM usage_buckets)
;
CREATE OR REPLACE MACRO daily_usage(tz) AS TABLE
SELECT CAST(timezone(tz, ts) AS DATE) AS day, agent, model, project_dir,
       count(*) AS responses,
       sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
       sum(cache_read_tokens) AS cache_read_tokens,
       sum(cache_creation_tokens) AS cache_creation_tokens,
       sum(reasoning_tokens) AS reasoning_tokens,
       -- NULL when no response of the row recorded a token (Crush, Go opencode: a logged
       -- cost only, "not recorded", never 0: newuser19 F1)
       CASE WHEN count(input_tokens) + count(output_tokens) + count(cache_read_tokens)
                 + count(cache_creation_tokens) > 0 THEN
       sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(cache_read_tokens, 0)
           + coalesce(cache_creation_tokens, 0)
           -- the reasoning an agent logs beside its output (schema.REASONING_OUTSIDE_OUTPUT)
           + (CASE WHEN agent IN ('gemini-cli', 'opencode', 'qwen-code') THEN coalesce(reasoning_tokens, 0) ELSE 0 END)) END AS total_tokens,
       usd_sum(cost_usd) AS cost_usd,
       count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_responses
FROM usage GROUP BY ALL
;
CREATE OR REPLACE VIEW daily_usage AS SELECT * FROM daily_usage('UTC')
;
CREATE OR REPLACE VIEW context_growth AS
SELECT agent, session_id,
       CAST(sum(CASE WHEN kind = 'message' AND role = 'user' THEN 1 ELSE 0 END) OVER w AS BIGINT) AS turn,
       entry_id, ts, kind, role, token_estimate, archived,
       CAST(sum(coalesce(token_estimate, 0)) OVER w AS BIGINT) AS cumulative_tokens
FROM history
WINDOW w AS (PARTITION BY agent, session_id
             ORDER BY ts NULLS LAST, source_offset, sqlite_rowid, entry_id
             ROWS UNBOUNDED PRECEDING)
;
CREATE OR REPLACE VIEW context_turns AS
SELECT agent, session_id, turn, min(ts) AS started, max(ts) AS ended, count(*) AS entries,
       sum(coalesce(token_estimate, 0)) AS turn_tokens, max(cumulative_tokens) AS cumulative_tokens,
       bool_or(kind = 'summary') AS compaction
FROM context_growth GROUP BY agent, session_id, turn
;
CREATE OR REPLACE VIEW tool_calls AS
WITH calls AS (
    SELECT agent, session_id, native_id, tool_name, token_estimate FROM history WHERE kind = 'tool_call'),
first_call AS (
    SELECT agent, session_id, native_id, tool_name FROM calls WHERE native_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY agent, session_id, native_id ORDER BY tool_name) = 1),
results AS (
    SELECT r.agent, coalesce(r.tool_name, c.tool_name) AS tool_name, r.is_error, r.text_bytes,
           r.token_estimate
    FROM history r LEFT JOIN first_call c
      ON c.agent = r.agent AND c.session_id = r.session_id AND c.native_id = r.native_id
    WHERE r.kind = 'tool_result'),
c AS (SELECT agent, tool_name, count(*) AS calls, count(DISTINCT session_id) AS sessions,
             sum(token_estimate) AS token_estimate FROM calls GROUP BY ALL),
r AS (SELECT agent, tool_name, count(*) AS results, count(*) FILTER (WHERE is_error) AS errors,
             sum(text_bytes) AS output_bytes, sum(token_estimate) AS output_tokens
      FROM results GROUP BY ALL)
SELECT agent, tool_name, coalesce(c.calls, 0) AS calls, coalesce(c.sessions, 0) AS sessions,
       coalesce(r.results, 0) AS results, coalesce(r.errors, 0) AS errors,
       CASE WHEN r.results > 0 THEN r.errors / r.results END AS error_rate,
       coalesce(r.output_bytes, 0) AS output_bytes, coalesce(r.output_tokens, 0) AS output_tokens,
       coalesce(c.token_estimate, 0) AS token_estimate
FROM c FULL OUTER JOIN r USING (agent, tool_name)
;
CREATE OR REPLACE VIEW sessions AS
WITH e AS (SELECT * FROM history),
proj AS (
    SELECT agent, session_id, project_dir FROM (
        SELECT agent, session_id, project_dir, count(*) AS n,
               min(ts) AS first_ts, min(coalesce(sqlite_rowid, 9223372036854775807)) AS first_row
        FROM e WHERE coalesce(project_dir, '') <> '' GROUP BY ALL)
    QUALIFY row_number() OVER (PARTITION BY agent, session_id
                               ORDER BY n DESC, first_ts NULLS LAST, first_row, project_dir) = 1),
parent AS (
    SELECT agent, session_id, parent_session_id FROM (
        SELECT agent, session_id, parent_session_id, count(*) AS n, min(ts) AS first_ts
        FROM e WHERE coalesce(parent_session_id, '') <> '' GROUP BY ALL)
    QUALIFY row_number() OVER (PARTITION BY agent, session_id
                               ORDER BY n DESC, first_ts NULLS LAST, parent_session_id) = 1),
agg AS (
    SELECT agent, session_id, min(ts) AS started, max(ts) AS ended, count(*) AS entries,
           count(*) FILTER (WHERE kind = 'message') AS messages,
           count(*) FILTER (WHERE kind = 'tool_call') AS tool_calls,
           count(*) FILTER (WHERE kind = 'tool_result' AND is_error) AS tool_errors,
           count(*) FILTER (WHERE kind = 'summary') AS compactions,
           sum(token_estimate) AS token_estimate, sum(text_bytes) AS text_bytes,
           bool_or(is_sidechain) AS is_sidechain, bool_or(archived) AS has_archived
    FROM e GROUP BY agent, session_id),
u AS (
    SELECT agent, session_id, count(*) AS responses,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           sum(cache_read_tokens) AS cache_read_tokens,
           sum(cache_creation_tokens) AS cache_creation_tokens,
           sum((CASE WHEN agent IN ('gemini-cli', 'opencode', 'qwen-code') THEN coalesce(reasoning_tokens, 0) ELSE 0 END)) AS reasoning_beside,
           usd_sum(cost_usd) AS cost_usd, count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_responses,
           max(coalesce(input_tokens, 0) + coalesce(cache_read_tokens, 0)
               + coalesce(cache_creation_tokens, 0)) AS largest_context_tokens
    FROM usage GROUP BY agent, session_id),
g AS (SELECT agent, session_id, max(cumulative_tokens) AS final_context_estimate
      FROM context_growth GROUP BY ALL),
a AS (  -- titles and first prompts of archived entries (their texts left SQLite)
    SELECT agent, session_id,
           arg_min(regexp_replace(trim(left(text, 200)), '\s+', ' ', 'g'), ts)
               FILTER (WHERE kind = 'meta' AND tool_name = 'session' AND trim(coalesce(text, '')) <> '') AS title,
           arg_min(regexp_replace(trim(left(text, 200)), '\s+', ' ', 'g'), ts)
               FILTER (WHERE kind = 'message' AND role = 'user' AND trim(coalesce(text, '')) <> '') AS first_prompt
    FROM archive WHERE status IS DISTINCT FROM 'rewound' GROUP BY agent, session_id)
SELECT agg.agent, agg.session_id, parent.parent_session_id, proj.project_dir,
       coalesce(t.title, a.title, t.first_prompt, a.first_prompt) AS title, agg.started, agg.ended, agg.entries,
       agg.messages, agg.tool_calls, agg.tool_errors, agg.compactions,
       agg.token_estimate, agg.text_bytes, agg.is_sidechain, agg.has_archived,
       u.responses, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_creation_tokens,
       -- NULL for a session whose responses recorded no token (a logged cost only: not 0);
       -- 0 for one without any response
       CASE WHEN u.responses > 0 AND u.input_tokens IS NULL AND u.output_tokens IS NULL
                 AND u.cache_read_tokens IS NULL AND u.cache_creation_tokens IS NULL THEN NULL ELSE
       coalesce(u.input_tokens, 0) + coalesce(u.output_tokens, 0) + coalesce(u.cache_read_tokens, 0)
           + coalesce(u.cache_creation_tokens, 0) + coalesce(u.reasoning_beside, 0) END AS total_tokens,
       u.cost_usd, u.unpriced_responses, u.largest_context_tokens, g.final_context_estimate
FROM agg
LEFT JOIN proj USING (agent, session_id)
LEFT JOIN parent USING (agent, session_id)
LEFT JOIN session_text t USING (agent, session_id)
LEFT JOIN u USING (agent, session_id)
LEFT JOIN g USING (agent, session_id)
LEFT JOIN a USING (agent, session_id)
;
CREATE OR REPLACE VIEW compression AS
SELECT run_id, started_at, finished_at, status, path, agent,
       bytes_before, bytes_after, bytes_before - bytes_after AS bytes_saved,
       tokens_before, tokens_after, image_tokens,
       -- the text's tokens and the images and documents `inline` moved out of the file
       -- (an image is no text: its placeholder alone made a run save -39 tokens)
       tokens_before - tokens_after + coalesce(image_tokens, 0) AS tokens_saved
FROM compress_files
