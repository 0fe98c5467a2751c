#!/bin/sh
# Regenerate tests/fixtures/ccusage/daily_by_agent_utc.json: ccusage's own daily report
# (npm package ccusage 20.0.24 with @ccusage/ccusage-linux-x64 20.0.24, offline pricing)
# over the shared corpus home. The tests read the JSON; they never run node or ccusage.
#   CCUSAGE=/path/to/node_modules/.bin/ccusage tests/tools/regen_ccusage_golden.sh
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
corpus_home=${CORPUS_HOME:-$here/../shared/corpus/home}
ccusage=${CCUSAGE:-/work/tools-ccusage/node_modules/.bin/ccusage}
out=$here/tests/fixtures/ccusage/daily_by_agent_utc.json
"$ccusage" --version >/dev/null
HOME=$corpus_home "$ccusage" daily --json --by-agent -z UTC --offline > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
