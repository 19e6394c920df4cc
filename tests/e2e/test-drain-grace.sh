#!/usr/bin/env bash
# A claim-holding pod is never deleted with grace period 0,
# whatever the flags. `drain --grace-period=0` and `drain --disable-eviction
# --grace-period=0 --force` on node-1 with the demo workload: from the audit log
# (evictions and pod DELETEs are logged with their request bodies, see the audit
# policy in tests/cluster/up), every request drainer sent for a claim holder asked
# for a grace period other than 0, and every claim holder was then deleted by the
# kubelet (drainer-sim or a real one) after it terminated, i.e. it went through termination and
# its devices were unprepared. drainer says that it clamped the grace period.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_grace() {
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_grace)

run_case() { # tag args...
	local tag=$1
	shift
	demo || { fail "$tag: demo workload"; return; }
	pods_on_node "$node" "$e2e_tmp/$tag.pods.json"
	classify_pods "$e2e_tmp/$tag.pods.json" >"$e2e_tmp/$tag.classes.json"
	claims_on_node "$node" >"$e2e_tmp/$tag.claims.json"
	drainer_run "$tag" drain "$node" --timeout 90s "$@"
	check_rc "$tag: drain $*" 0 "$tag"
	audit_window "$run_start" "$e2e_tmp/$tag.audit"
	check_grace "$e2e_tmp/$tag.audit" "$e2e_tmp/$tag.classes.json"
	check_order "$e2e_tmp/$tag.audit" "$e2e_tmp/$tag.classes.json" "$e2e_tmp/$tag.claims.json" "$node"
	check "$tag: drainer says it clamped the grace period" grep -Eiq 'grace' "$e2e_tmp/$tag.err" "$e2e_tmp/$tag.out"
	check_eq "$tag: no ResourceClaim on $node" "[]" "$(claims_on_node "$node")"
	drainer_run "$tag-uncordon" uncordon "$node"
	check_rc "$tag: uncordon" 0 "$tag-uncordon"
}

run_case grace0 --grace-period=0
check_eq "grace0: drainer used the Eviction API only (no DELETE)" "" \
	"$(drainer_writes "$e2e_tmp/grace0.audit" | grep '^delete ' || true)"

run_case delete0 --disable-eviction --grace-period=0 --force
check_eq "delete0: no eviction with --disable-eviction" "" \
	"$(drainer_writes "$e2e_tmp/delete0.audit" | grep 'pods/eviction' || true)"
check "delete0: every claim holder was DELETEd by drainer" bash -c "
	for p in \$(jq -r '.[] | select(.cls | startswith(\"holder\")) | \"\(.ns)/\(.name)\"' '$e2e_tmp/delete0.classes.json'); do
		jq -e --arg k \"\$p\" 'any(.[]; (.userAgent | startswith(\"drainer/\")) and .verb == \"delete\" and \"\(.objectRef.namespace)/\(.objectRef.name)\" == \$k)' '$e2e_tmp/delete0.audit' >/dev/null || exit 1
	done"
demo || fail "demo workload restored"
finish
