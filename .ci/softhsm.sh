#!/usr/bin/env bash
# Makes sure SoftHSM2 (the PKCS#11 module and softhsm2-util) is on this
# machine for keyring/pkcs11's tests, which initialise their own throwaway
# token in a temporary directory. Installs the Debian package only when the
# module is absent. Sourced by .ci/run; also runnable by hand.
#
# Set RUNSEAL_SKIP_SOFTHSM=1 to skip the PKCS#11 tests on purpose (they fail
# otherwise when no SoftHSM2 can be had).
set -euo pipefail

have_softhsm() {
	command -v softhsm2-util >/dev/null 2>&1 || return 1
	[ -n "${RUNSEAL_SOFTHSM_MODULE:-}" ] && return 0
	compgen -G '/usr/lib/softhsm/libsofthsm2.so' >/dev/null || compgen -G '/usr/lib/*/softhsm/libsofthsm2.so' >/dev/null
}

if [ "${RUNSEAL_SKIP_SOFTHSM:-}" != "1" ]; then
	if ! have_softhsm; then
		echo "softhsm.sh: SoftHSM2 not found; installing softhsm2 from apt"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q --no-install-recommends softhsm2
	fi
	have_softhsm || { echo "softhsm.sh: still no SoftHSM2 after install" >&2; exit 1; }
fi
