#!/usr/bin/env bash
# Crash safety of drain: for each drain phase X, start
# `drain --grace-period=0` slowed down by the client rate limit, SIGKILL it as soon
# as a watch on the Node shows drainer.io/state=X, run the same drain again: it
# continues from the Node's annotations and finishes (exit 0). Over both runs:
# rule 1 (order, from the audit log), rule 5 (no grace 0 for claim holders), and
# rule 3's precondition (on every observed version of the Node in a drain phase
# it is cordoned, tainted and remembers was-unschedulable=false with one
# started-at; uncordon then makes it schedulable). Reports the phase each kill
# actually landed in.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_crash() {
	[ -z "${dpid:-}" ] || kill -KILL "$dpid" 2>/dev/null
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_crash)
landed=()

crash_in() { # phase [signal: KILL, or TERM with -o json]
	local x=$1 sig=${2:-KILL} killed_in json=()
	[ "$sig" = KILL ] || { json=(-o json); x=$x.$sig; }
	echo "  --- SIG$sig in ${x%.*}"
	demo || { fail "$x: demo workload"; return; }
	pods_on_node "$node" "$e2e_tmp/$x.pods.json"
	classify_pods "$e2e_tmp/$x.pods.json" >"$e2e_tmp/$x.classes.json"
	claims_on_node "$node" >"$e2e_tmp/$x.claims.json"
	local first
	first=$(audit_lines)
	node_watch_start "$node" "$e2e_tmp/$x.watch"
	"$DRAINER" --kube-api-qps 2 --kube-api-burst 1 drain "$node" --grace-period=0 --timeout 60s "${json[@]}" \
		>"$e2e_tmp/$x.killed.out" 2>"$e2e_tmp/$x.killed.err" &
	dpid=$!
	if kill_at_phase "$dpid" "$e2e_tmp/$x.watch" "${x%.*}" 90 "$sig"; then
		killed_in=$(node_ann "$node" drainer.io/state)
		pass "$x: drainer SIG$sig when the Node showed ${x%.*} (state at the kill: $killed_in)"
		landed+=("$x->$killed_in")
		if [ "$sig" = TERM ]; then
			# an orderly stop: exit 143 (128 + SIGTERM), and -o json says where the Node stands
			check_eq "$x: exit 143 on SIGTERM (the state stays on the Node)" 143 "$killed_rc"
			check_eq "$x: -o json: exitCode 143" 143 "$(jq -r .exitCode "$e2e_tmp/$x.killed.out" 2>/dev/null)"
			check_eq "$x: -o json: result interrupted, in the phase the Node shows" "interrupted $killed_in" \
				"$(jq -r '"\(.result) \(.phase)"' "$e2e_tmp/$x.killed.out" 2>/dev/null)"
			check "$x: -o json: the message says how to resume" grep -q 'run the same command again' "$e2e_tmp/$x.killed.out"
		fi
	else
		wait "$dpid" 2>/dev/null
		fail "$x: drainer never showed $x before it ended (exit $?); phases: $(phases_seen "$e2e_tmp/$x.watch")"
		landed+=("$x->missed")
	fi
	dpid=
	drainer_run "$x.rerun" drain "$node" --grace-period=0 --timeout 90s
	check_rc "$x: the same drain run again finishes" 0 "$x.rerun"
	sleep 0.5
	node_watch_stop
	echo "  phases seen: $(phases_seen "$e2e_tmp/$x.watch")"
	audit_window "$first" "$e2e_tmp/$x.audit"
	check_order "$e2e_tmp/$x.audit" "$e2e_tmp/$x.classes.json" "$e2e_tmp/$x.claims.json" "$node"
	check_grace "$e2e_tmp/$x.audit" "$e2e_tmp/$x.classes.json"
	check_node_invariants "$e2e_tmp/$x.watch" false
	check_eq "$x: drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
	check_eq "$x: no ResourceClaim on $node" "[]" "$(claims_on_node "$node")"
	check "$x: no driver pod" no_driver_pod "$node"
	drainer_run "$x.uncordon" uncordon "$node"
	check_rc "$x: uncordon" 0 "$x.uncordon"
	check_eq "$x: schedulable again (drainer had cordoned it)" false "$(node_unschedulable "$node")"
	check_eq "$x: no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
}

# (the cordon is written with evict-claim-holders: a kill there lands right after it)
for x in ${CRASH_PHASES:-evict-claim-holders evict-rest wait-released stop-drivers}; do
	crash_in "$x"
done
# Ctrl-C or systemctl stop rather than a crash: SIGTERM, the -o json summary.
crash_in "${TERM_PHASE:-evict-rest}" TERM
echo "  kills (target->landed): ${landed[*]}"
finish
