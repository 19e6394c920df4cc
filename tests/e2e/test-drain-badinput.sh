#!/usr/bin/env bash
# Bad input: an unknown node is exit 1 with a clear message
# and no write; drainer.io/ annotations edited by hand into nonsense are refused
# with exit 1 (never a crash) by drain, uncordon and maintain, the message says
# how to reset, nothing is written to the Node or the pods, and following the
# advice makes the node drainable again; invalid flags are exit 2 with no write.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_badinput() {
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_badinput)
demo || { fail "demo workload"; finish; exit 1; }

# Unknown node.
for verb in plan drain uncordon; do
	t=(--timeout 20s)
	[ "$verb" = plan ] && t=() # (plan takes no --timeout: it does not wait)
	drainer_run unknown-$verb $verb no-such-node "${t[@]}"
	check_rc "$verb no-such-node (8: no such node)" 8 unknown-$verb
	check "$verb: the message names the node" grep -q 'no-such-node' "$e2e_tmp/unknown-$verb.err"
	audit_window "$run_start" "$e2e_tmp/unknown-$verb.audit"
	check_eq "$verb no-such-node: no write" "" "$(drainer_writes "$e2e_tmp/unknown-$verb.audit")"
done
drainer_run unknown-maintain maintain no-such-node --timeout 20s -- true
check_rc "maintain no-such-node -- true (8: no such node)" 8 unknown-maintain
audit_window "$run_start" "$e2e_tmp/unknown-maintain.audit"
check_eq "maintain no-such-node: no write" "" "$(drainer_writes "$e2e_tmp/unknown-maintain.audit")"
check_eq "no Node no-such-node was created" "" "$(kubectl get node no-such-node -o name 2>/dev/null)"

# Nonsense annotations.
pod_uids() { kubectl get pods -A --field-selector "spec.nodeName=$node" -o json | jq -c '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.uid] | sort'; }
nonsense() { # annotation=value
	local ann=$1 key=${1%%=*} fp uids verb tag
	kubectl annotate node "$node" "$ann" --overwrite >/dev/null
	fp=$(node_fingerprint "$node")
	uids=$(pod_uids)
	for verb in drain uncordon maintain; do
		tag=bad-${key#drainer.io/}-$verb
		if [ $verb = maintain ]; then
			drainer_run "$tag" maintain "$node" --timeout 20s -- touch "$e2e_tmp/ran"
		else
			drainer_run "$tag" $verb "$node" --timeout 20s
		fi
		check_rc "$verb with $ann" 1 "$tag"
		check "$verb with $ann: the message names $key" grep -q "$key" "$e2e_tmp/$tag.err"
		check "$verb with $ann: the message says how to reset (a kubectl annotate command for $key)" \
			grep -Eq "kubectl annotate (--overwrite )?node $node .*$key" "$e2e_tmp/$tag.err"
		audit_window "$run_start" "$e2e_tmp/$tag.audit"
		check_eq "$verb with $ann: no write but Events" "" "$(drainer_writes "$e2e_tmp/$tag.audit" except-events)"
	done
	check "maintain with $ann did not run its command" test ! -e "$e2e_tmp/ran"
	check_eq "with $ann: node unchanged" "$fp" "$(node_fingerprint "$node")"
	check_eq "with $ann: pods unchanged" "$uids" "$(pod_uids)"
	drainer_run "bad-${key#drainer.io/}-plan" plan "$node"
	check "plan with $ann: no crash (exit $run_rc < 5)" [ "$run_rc" -lt 5 ]
	check "plan with $ann does not promise a drain that drain refuses (exit $run_rc != 0)" [ "$run_rc" != 0 ]
	follow_advice "$key" "$e2e_tmp/bad-${key#drainer.io/}-drain.err"
}
# follow_advice KEY ERRFILE: runs the kubectl annotate command the message gave
# (for was-unschedulable, choosing =false: the node was schedulable), then the
# nonsense must be gone.
follow_advice() {
	local cmd
	cmd=$(grep -Eo "kubectl annotate [^(;]*" "$2" | head -n 1 | sed 's/ *$//')
	echo "  advice: $cmd"
	if [ -z "$cmd" ]; then
		fail "no kubectl annotate command in the message for $1"
		kubectl annotate node "$node" "$1-" >/dev/null
		return
	fi
	[ "$1" != drainer.io/was-unschedulable ] || cmd=${cmd//=true/=false}
	# shellcheck disable=SC2086
	if "$KUBECTL" ${cmd#kubectl } >/dev/null; then
		pass "the advised command runs: $cmd"
	else
		fail "the advised command fails: $cmd"
		kubectl annotate node "$node" "$1-" >/dev/null
	fi
	local v
	v=$(node_ann "$node" "$1")
	if [ -z "$v" ] || { [ "$1" = drainer.io/was-unschedulable ] && [ "$v" = false ]; }; then
		pass "after following the advice $1 is gone or valid ([$v])"
	else
		fail "after following the advice $1 is still [$v]"
	fi
}

nonsense drainer.io/state=banana
nonsense drainer.io/was-unschedulable=maybe
nonsense drainer.io/started-at=yesterday
nonsense 'drainer.io/driver-stop=[{"strategy":"dynamite"}]'
nonsense drainer.io/request=explode
# After following every piece of advice the node drains and uncordons normally.
drainer_run drain-after drain "$node" --timeout 60s
check_rc "after the resets the node drains" 0 drain-after
drainer_run uncordon-after uncordon "$node"
check_rc "and uncordons" 0 uncordon-after
check_eq "schedulable" false "$(node_unschedulable "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
demo || fail "demo workload restored"

# Invalid flags: exit 2, no write; so is a flag of another verb (plan --timeout,
# uncordon --force, serve --dry-run: never silently ignored).
# One case a line, arguments separated by "|".
bad_flags=(
	"drain|$node|--bogus"
	"drain"
	"drain|$node|node-2"
	"drain|$node|--grace-period|abc"
	"drain|$node|--grace-period|-5"
	"drain|$node|--timeout|5x"
	"drain|$node|--timeout|inf"
	"drain|$node|--timeout|nan"
	"drain|$node|--timeout|1e30h"
	"drain|$node|--timeout|0x10s"
	"maintain|$node|--timeout|inf|--|true"
	"guard|--node|$node|--deadline|inf"
	"serve|--node|$node|--metrics-addr||--config|$e2e_tmp/inf.yaml"
	"drain|$node|--timeout"
	"drain|$node|--driver-stop|dynamite"
	"drain|$node|--driver-stop|label:"
	"drain|$node|--driver-stop|label:bad/key/x"
	"drain|$node|--driver-health|notaport"
	"drain|$node|--pod-selector|a in ("
	"drain|$node|--driver-selector|=x"
	"drain|$node|--driver-selector||--dry-run"
	"plan|$node|--driver-selector||-o|json"
	"status|$node|--driver-selector||--driver-selector|app=x"
	"guard|--node|$node|--driver-selector||--deadline|1s"
	"doctor|--driver-selector||--node|$node"
	"plan|$node|--bogus"
	"plan|$node|--timeout|5m"
	"plan|$node|--grace-period|3"
	"uncordon|$node|--force"
	"uncordon|$node|--dry-run"
	"drain|$node|--restore-on-failure"
	"serve|--node|$node|--dry-run"
	"serve|--node|$node|--ignore-daemonsets"
	"uncordon|$node|--bogus"
	"uncordon"
	"maintain|$node"
	"maintain|$node|--"
	"maintain|--|true"
	"nosuchverb|$node"
	"drain|-l|"
	"drain|--selector|a in (x"
	"drain|$node|-l|a=b"
	"drain|$node|--max-parallel|2"
	"drain|-l|a=b|--max-parallel|0"
	"uncordon|-l|a=b|--max-parallel|x"
	"plan|-l|a=b|--max-parallel|2"
	"maintain|-l|a=b|--|true"
	"plan|$node|--metrics-in-output"
)
# A duration in the YAML config goes through the same parser.
printf 'timeout: 1e30h\n' >"$e2e_tmp/inf.yaml"
start=$(audit_lines)
for c in "${bad_flags[@]}"; do
	IFS='|' read -ra argv <<<"$c"
	timeout 30 "$DRAINER" "${argv[@]}" >"$e2e_tmp/flags.out" 2>"$e2e_tmp/flags.err"
	rc=$?
	check_eq "drainer ${argv[*]}" 2 "$rc"
	[ "$rc" = 2 ] || sed 's/^/    stderr: /' "$e2e_tmp/flags.err" | tail -n 3
done
# (a request of the test's own after the runs: the audit log was recording meanwhile)
kubectl get node "$node" -o name >/dev/null
sleep 0.5
audit_window "$start" "$e2e_tmp/flags.audit"
check "the audit log recorded the window (the test's own request is in it)" \
	jq -e 'any(.[]; (.userAgent | startswith("kubectl")) and .objectRef.resource == "nodes")' "$e2e_tmp/flags.audit"
check_eq "bad usage: no request at all (refused before connecting)" 0 "$(drainer_requests "$e2e_tmp/flags.audit")"
check_eq "the node was not touched" "{}" "$(node_drainer_anns "$node")"
check_eq "node schedulable" false "$(node_unschedulable "$node")"
finish
