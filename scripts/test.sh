#!/usr/bin/env bash
# Runs every test of runseal, after installing what the tests need and the
# machine lacks (PostgreSQL server binaries, SoftHSM2, Chromium: each .ci/*.sh
# below installs its package only when it is absent, which needs root or
# sudo-less apt-get). This is the README's test command, and .ci/run calls it.
#
#   bash scripts/test.sh            # everything, as CI runs it
#   RUNSEAL_QUICK=1 bash scripts/test.sh   # go test ./... only, no race runs
#   RUNSEAL_MEASURE=1 bash scripts/test.sh # also the tests that measure what
#                                          # the machine decides (page cache,
#                                          # resident memory); on a quiet machine
#
# Without RUNSEAL_MEASURE no test asserts page-cache residency, RSS, wall or
# CPU time (internal/measure): a loaded or fresh machine runs it green.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
go version

# System packages the tests need; each script is sourced so that what it
# exports (paths, module locations) reaches the tests.
for dep in .ci/postgres.sh .ci/softhsm.sh .ci/chromium.sh; do
	if [ -f "$dep" ]; then
		# shellcheck disable=SC1090
		source "$dep"
	fi
done

test -z "$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
go vet ./...
# The browser verifier's main builds for js/wasm only, so vet it there.
GOOS=js GOARCH=wasm go vet ./cmd/verify-wasm
go test -timeout 30m ./...
# The README's commands, as written, in a scratch directory.
bash scripts/readme-check.sh
if [ "${RUNSEAL_QUICK:-}" = "1" ]; then
	exit 0
fi
# The concurrent packages under the race detector: group commit, the
# conformance suites' races and the decorators, the HTTP API, the witness
# and its publisher, tiles, lifecycle races.
go test -race -count=1 -timeout 30m ./internal/... ./store/sqlite/... ./store/storetest/... ./store/sealed/... \
	./store/faulty/... ./api/... ./connlimit/... ./witness/... ./publish/... ./tiles/... ./cmd/witness/... \
	./lifecycle/... ./cmd/journal/... ./keyring/...
# The shared backend under the race detector, and its multi-process
# active-active test for more rounds than the default run.
go test -race -count=1 -timeout 30m ./store/postgres/...
RUNSEAL_PG_AA_ROUNDS=6 go test -count=1 -run '^TestActiveActive$' ./store/postgres/
