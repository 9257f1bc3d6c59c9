#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries the store/postgres tests start
# a throwaway server from (initdb, pg_ctl) are on this machine, and that
# there is a "postgres" OS user to run them as when CI runs as root.
# Installs the Debian package only when initdb is absent. Sourced by .ci/run;
# also runnable by hand.
#
# Set RUNSEAL_POSTGRES_DSN to test against an existing server instead; set
# RUNSEAL_SKIP_POSTGRES=1 to skip the PostgreSQL tests on purpose (they fail
# otherwise when no server can be had).
set -euo pipefail

have_initdb() {
	command -v initdb >/dev/null 2>&1 && return 0
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

if [ -z "${RUNSEAL_POSTGRES_DSN:-}" ] && [ "${RUNSEAL_SKIP_POSTGRES:-}" != "1" ]; then
	if ! have_initdb; then
		echo "postgres.sh: initdb not found; installing PostgreSQL from apt"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q --no-install-recommends postgresql
	fi
	if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
		useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi
	have_initdb || { echo "postgres.sh: still no initdb after install" >&2; exit 1; }
fi
