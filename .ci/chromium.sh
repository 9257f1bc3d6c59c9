#!/usr/bin/env bash
# Makes sure a headless Chromium is on this machine for the browser tests of
# the operator console and the in-browser verifier (package
# internal/browsertest drives it through the DevTools protocol). Installs
# Debian's chromium only when no browser is found. Sourced by
# scripts/test.sh; also runnable by hand.
#
# The tests look for the browser in RUNSEAL_CHROMIUM, then on PATH
# (chromium, chromium-browser, google-chrome). Set RUNSEAL_SKIP_BROWSER=1 to
# skip the browser tests on purpose (they fail otherwise when no browser can
# be had).
set -euo pipefail

find_chromium() {
	if [ -n "${RUNSEAL_CHROMIUM:-}" ] && [ -x "$RUNSEAL_CHROMIUM" ]; then
		return 0
	fi
	local c
	for c in chromium chromium-browser google-chrome; do
		if command -v "$c" >/dev/null 2>&1; then
			RUNSEAL_CHROMIUM="$(command -v "$c")"
			return 0
		fi
	done
	return 1
}

if [ "${RUNSEAL_SKIP_BROWSER:-}" != "1" ]; then
	if ! find_chromium; then
		echo "chromium.sh: no Chromium found; installing chromium from apt"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
	fi
	find_chromium || { echo "chromium.sh: still no Chromium after install" >&2; exit 1; }
	export RUNSEAL_CHROMIUM
fi
