#!/bin/sh
# Regenerate the golden files under tests/fixtures/ccusage/: ccusage's own reports
# (npm package ccusage 20.0.24 with @ccusage/ccusage-linux-x64 20.0.24, offline pricing,
# UTC) over the shared corpus home. The tests read the JSON; they never need node or
# ccusage (tests/cli/test_cli_report_parity.py also compares live when ccusage is on
# $CCUSAGE or /tmp/peers).
#   CCUSAGE=/path/to/node_modules/.bin/ccusage tests/tools/regen_ccusage_golden.sh
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
corpus_home=${CORPUS_HOME:-$here/../shared/corpus/home}
ccusage=${CCUSAGE:-/tmp/peers/node_modules/.bin/ccusage}
dir=$here/tests/fixtures/ccusage
"$ccusage" --version >/dev/null
run() {  # run OUT ARGS...: ccusage ARGS into $dir/OUT (ccusage only reads HOME)
    out=$dir/$1
    shift
    HOME=$corpus_home "$ccusage" "$@" --json -z UTC --offline > "$out.tmp"
    mv "$out.tmp" "$out"
    echo "wrote $out"
}
run daily_by_agent_utc.json daily --by-agent
run monthly_utc.json monthly
run weekly_utc.json weekly
run session_utc.json session
run blocks_utc.json blocks
