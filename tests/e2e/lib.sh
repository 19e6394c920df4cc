# Shared helpers of drainer's e2e tests (sourced). They run against the cluster of
# tests/cluster (DRAINER_CLUSTER_DIR) and assert on what the API server holds and
# on its audit log, not on drainer's own log lines.
set -uo pipefail

e2e_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${DRAINER_CLUSTER_DIR:=/tmp/drainer-cluster}"
export KUBECONFIG=$DRAINER_CLUSTER_DIR/kubeconfig
DRAINER=${DRAINER:-$e2e_root/build/drainer}
KUBECTL=$DRAINER_CLUSTER_DIR/bin/kubectl
AUDIT=$DRAINER_CLUSTER_DIR/audit.log
e2e_tmp=$(mktemp -d)
e2e_checks=0
e2e_failed=0
trap 'e2e_cleanup' EXIT
e2e_cleanup_hooks=()
e2e_cleanup() {
	local h
	for h in "${e2e_cleanup_hooks[@]}"; do eval "$h" || true; done
	rm -rf "$e2e_tmp"
}

kubectl() { "$KUBECTL" "$@"; }

pass() { e2e_checks=$((e2e_checks + 1)); echo "  ok: $*"; }
fail() { e2e_checks=$((e2e_checks + 1)); e2e_failed=$((e2e_failed + 1)); echo "  FAIL: $*"; }
check() { # description command...
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
check_eq() { # description expected actual
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi
}
finish() {
	echo "$((e2e_checks - e2e_failed)) passed, $e2e_failed failed"
	[ "$e2e_failed" = 0 ]
}

# wait_until SECONDS command...: polls every 0.2 s.
wait_until() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done
}

# Audit events of requests made by drainer (its User-Agent), as JSON lines.
audit_drainer() {
	grep '"userAgent":"drainer/' "$AUDIT" | jq -c 'select(.stage == "ResponseComplete" or .stage == "Panic" or .stage == "ResponseStarted")'
}
audit_lines() { wc -l <"$AUDIT"; }
