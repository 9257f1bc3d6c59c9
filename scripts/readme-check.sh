#!/usr/bin/env bash
# Runs every ```sh block of README.md as written, in order, in a scratch
# directory, so a newcomer's first commands are known to work. Each
# "go run ./cmd/X ..." runs the X binary built from this tree (the same
# program, without compiling it once per line). A line ending in "&" starts a
# server; the script waits until it listens and stops it at the end. A line
# whose comment says "retry" is retried for up to 60 s (the witnessed
# checkpoint exists only once the witness has cosigned). Any other failing
# line fails the check, naming it. scripts/test.sh runs this.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="/usr/local/go/bin:$PATH"
scratch="$(mktemp -d)"
pids=()
cleanup() {
	# A server runs as a child of the subshell that started it: end both.
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	pkill -f "^$scratch/bin/" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$scratch"
}
trap cleanup EXIT

for port in 8080 7380 7381; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "readme-check: port $port is in use; the README's servers listen there" >&2
		exit 1
	fi
done

mkdir -p "$scratch/bin" "$scratch/work"
(cd "$root" && go build -o "$scratch/bin/" ./cmd/journal ./cmd/witness ./cmd/auditor)

# The blocks, one command per entry (continuation lines joined).
mapfile -t cmds < <(awk '
	/^```sh$/ { inblock = 1; next }
	/^```/    { inblock = 0; next }
	inblock {
		if (cont != "") { line = cont " " $0 } else { line = $0 }
		if (line ~ /\\$/) { sub(/\\$/, "", line); cont = line; next }
		cont = ""; print line
	}' "$root/README.md")

cd "$scratch/work"
go() { # "go run ./cmd/X args" runs the built X; the two commands' test line is this script's caller
	if [ "$1" = run ] && [[ "$2" == ./cmd/* ]]; then
		local prog="${2#./cmd/}"
		shift 2
		"$scratch/bin/$prog" "$@"
	else
		command go "$@"
	fi
}
wait_port() {
	local i
	for i in $(seq 1 300); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "readme-check: nothing listens on $1 after 30 s" >&2
	return 1
}

n=0
for c in "${cmds[@]}"; do
	case "$c" in
	"bash scripts/test.sh"*) continue ;; # the test command itself
	"go run ./cmd/journal serve    #"*) continue ;; # the first of the two commands: the walk below serves with a policy
	esac
	n=$((n + 1))
	echo "readme-check: \$ $c"
	if [[ "$c" =~ \&[[:space:]]*(#.*)?$ ]]; then
		bare="${c%%#*}"
		bare="${bare%&*}"
		eval "$bare" >"$scratch/server$n.log" 2>&1 &
		pids+=($!)
		case "$bare" in
		*"witness serve"*) wait_port 7380 ;;
		*"journal serve"*) wait_port 8080 ;;
		esac
		continue
	fi
	if [[ "$c" == *"# "*retry* ]]; then
		ok=0
		for i in $(seq 1 120); do
			if eval "$c" >/dev/null 2>&1; then ok=1; break; fi
			sleep 0.5
		done
		[ "$ok" = 1 ] || { echo "readme-check: still failing after 60 s: $c" >&2; exit 1; }
		continue
	fi
	if ! eval "$c"; then
		echo "readme-check: README command failed: $c" >&2
		exit 1
	fi
done
echo "readme-check: $n README commands ran as written"
