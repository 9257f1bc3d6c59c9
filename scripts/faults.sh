#!/usr/bin/env bash
# Runs runseal's fault campaign (package faults, docs/faults.md): a full
# disk under serve, PostgreSQL restarts, misbehaving witnesses, clock jumps
# and serve killed while signing and publishing. Each scenario checks what
# must hold afterwards: no acknowledged write lost, no size signed twice,
# the log verifies, the service recovers or says what to do.
#
# It needs root (the full-disk scenario mounts a small tmpfs; without root
# that scenario is skipped, saying so) and PostgreSQL's server binaries,
# which .ci/postgres.sh installs when they are absent. The tests build the
# journal and witness commands themselves and run them as processes.
#
#   bash scripts/faults.sh                 # every scenario (as root)
#   bash scripts/faults.sh -run 'DiskFull' # one scenario (go test -run)
#
# It prints one line per scenario (PASS, FAIL or SKIP) and, last, the
# machine, the date and the load, for docs/faults.md's result column.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

if [ "$(id -u)" != 0 ]; then
	echo "faults.sh: not root: the full-disk scenario will be skipped (it mounts a tmpfs)" >&2
fi
if [ -f .ci/postgres.sh ]; then
	# shellcheck disable=SC1091
	source .ci/postgres.sh
fi
command -v mount >/dev/null || { echo "faults.sh: mount is needed" >&2; exit 1; }

args=("$@")
if [ ${#args[@]} -eq 0 ]; then
	args=(-run 'TestFault_')
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
RUNSEAL_FAULTS=1 go test -count=1 -timeout 30m -v "${args[@]}" ./faults/ >"$log" 2>&1 || status=$?
cat "$log"
echo
echo "== fault campaign =="
grep -E '^(--- (PASS|FAIL|SKIP)|ok |FAIL)' "$log" || true
echo "run: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load$(uptime | sed 's/.*load average//')"
exit "$status"
