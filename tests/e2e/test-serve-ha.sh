#!/usr/bin/env bash
# Cluster mode, highly available: two `drainer serve --all-nodes --leader-elect`
# replicas (short durations: lease 6 s, renew deadline 4 s, retry period 1 s), each as
# its own user (--as, with the admin's group) so the audit log tells whose request is
# whose. Against the real control plane with the demo workload on node-1, judged from
# what the API server saw:
#  - exactly one replica holds the Lease drainer-leader; the other sends no write;
#  - the leader SIGKILLed in a phase of a drain (HA_KILL_PHASES, default
#    "evict-claim-holders wait-released"; every phase: "evict-claim-holders
#    evict-rest wait-released stop-drivers"): the standby takes the Lease once it
#    expired, resumes the drain from the Node and finishes it; no write of the killed
#    replica after the new leader's first; the safe order holds over the whole drain
#    (claim holders first, every claim released before the driver's eviction), the
#    node stayed cordoned and tainted through every drain phase; then an uncordon
#    request restores the node;
#  - the leader frozen (SIGSTOP) in a phase until its Lease expired and the standby
#    wrote, then woken (SIGCONT): it writes nothing more, not even its Lease, and
#    exits (exit 1, "lost the leader Lease"); the drain finishes under the new leader;
#  - a node-bound token of the per-node DaemonSet cannot write the Lease drainer-leader
#    (is in test-security: the node policy lets it write only drainer-slot-N).
# Cleanup: both replicas killed, the Lease namespace deleted, node-1 reset, the demo
# workload restored.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1
lease_ns=e2e-serve-ha
kill_phases=${HA_KILL_PHASES:-evict-claim-holders wait-released}
stop_phase=${HA_STOP_PHASE:-evict-rest}

cleanup_ha() {
	local t
	for t in "${!serve_pids[@]}"; do
		kill -CONT "${serve_pids[$t]}" 2>/dev/null
		serve_stop "$t" KILL
	done
	kubectl delete namespace "$lease_ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_ha)

demo || { fail "demo workload"; finish; exit 1; }
[ "$(node_drainer_anns "$node")" = "{}" ] || reset_node "$node"
kubectl delete namespace "$lease_ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
kubectl create namespace "$lease_ns" >/dev/null

replica() { # TAG: a replica as user e2e-ha-TAG, identity e2e-ha-TAG
	serve_start "$1" serve --all-nodes --max-parallel 1 --lease-namespace "$lease_ns" --identity "e2e-ha-$1" \
		--leader-elect --leader-elect-lease-duration 6s --leader-elect-renew-deadline 4s \
		--leader-elect-retry-period 1s --as "e2e-ha-$1" --as-group system:masters
}
holder() { kubectl -n "$lease_ns" get lease drainer-leader -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
leads() { [[ "$(holder)" == "e2e-ha-$1_"* ]]; }
leader_tag() {
	local h
	h=$(holder)
	h=${h#e2e-ha-}
	echo "${h%%_*}"
}
other() { [ "$1" = a ] && echo b || echo a; }

# writes_after AUDIT USER_OLD USER_NEW: the writes (create/update/patch/delete, any
# resource) of USER_OLD received after USER_NEW's first write, one line each.
writes_after() {
	jq -r --arg u_old "$2" --arg u_new "$3" '
		def w: .verb | IN("create", "update", "patch", "delete", "deletecollection");
		def who: .impersonatedUser.username // .user.username;
		([.[] | select(who == $u_new and w) | .requestReceivedTimestamp] | min) as $first
		| if $first == null then "(no write of \($u_new) at all)"
		  else .[] | select(who == $u_old and w and .requestReceivedTimestamp > $first)
		  | "\(.requestReceivedTimestamp) \(.verb) \(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end) \(.objectRef.namespace // "")/\(.objectRef.name // "") -> \(.responseStatus.code)" end' "$1"
}

start=$(audit_lines)
replica a
check "replica a takes the Lease drainer-leader (<= 20 s)" wait_until 20 leads a
replica b
sleep 3
check "replica b stays a standby while a renews" leads a
audit_window "$start" "$e2e_tmp/standby.audit"
check_eq "the standby (b) wrote nothing" "" \
	"$(jq -r '.[] | select((.impersonatedUser.username // .user.username) == "e2e-ha-b" and (.verb | IN("create", "update", "patch", "delete"))) | "\(.verb) \(.objectRef.resource) \(.objectRef.name)"' "$e2e_tmp/standby.audit")"
check_eq "the standby (b) watches no Node (it reads only the Lease)" 0 \
	"$(jq '[.[] | select((.impersonatedUser.username // .user.username) == "e2e-ha-b" and .objectRef.resource == "nodes")] | length' "$e2e_tmp/standby.audit")"
check "the standby (b) reads the Lease (its requests are in the audit log)" \
	jq -e '[.[] | select(.impersonatedUser.username == "e2e-ha-b" and .objectRef.resource == "leases")] | length > 0' "$e2e_tmp/standby.audit"

# drain_round HOW PHASE: asks for a drain of node-1, and when the Node says PHASE
# stops the leader with HOW (kill: SIGKILL; freeze: SIGSTOP, woken once the other
# replica leads and wrote); the other replica must finish the drain; then an
# uncordon request restores the node and the stopped replica comes back as a standby.
drain_round() {
	local how=$1 phase=$2 old new t0 line rc
	old=$(leader_tag)
	new=$(other "$old")
	echo "- round: the leader ($old) ${how} in phase $phase"
	demo || fail "demo workload"
	pods_on_node "$node" "$e2e_tmp/pods.json"
	classify_pods "$e2e_tmp/pods.json" >"$e2e_tmp/classes.json"
	claims_on_node "$node" >"$e2e_tmp/claims.json"
	line=$(audit_lines)
	nodes_watch_start "$e2e_tmp/$how-$phase.watch" "$node"
	kubectl annotate --overwrite node "$node" drainer.io/request=drain >/dev/null
	if ! kill_at_phase "${serve_pids[$old]}" "$e2e_tmp/$how-$phase.watch" "$phase" 90 "$([ "$how" = kill ] && echo KILL || echo STOP)"; then
		fail "the Node never showed drainer.io/state=$phase while the leader ($old) ran (phases: $(phases_seen "$e2e_tmp/$how-$phase.watch"))"
		serve_log "$old" 30
		nodes_watch_stop
		return
	fi
	t0=$SECONDS
	if [ "$how" = kill ]; then
		untrack_pid "${serve_pids[$old]}"
		unset "serve_pids[$old]"
	fi
	if wait_until 20 leads "$new"; then
		pass "replica $new takes the Lease after the leader's ${how} (<= 20 s; in $((SECONDS - t0)) s)"
	else
		fail "replica $new takes the Lease after the leader's ${how} (<= 20 s): the holder is $(holder)"
		serve_log "$new" 20 'leader|Lease|error'
	fi
	if [ "$how" = freeze ]; then
		# woken once the new leader has written (its first write is in the audit log)
		new_wrote() { tail -n +"$((line + 1))" "$AUDIT" | jq -e --arg u "e2e-ha-$new" 'select(.impersonatedUser.username == $u and (.verb | IN("create", "update", "patch")))' >/dev/null 2>&1; }
		check "the new leader ($new) writes while $old is frozen" wait_until 30 new_wrote
		kill -CONT "${serve_pids[$old]}" 2>/dev/null
		echo "    (SIGCONT to $old)"
		old_exited() { ! kill -0 "${serve_pids[$old]}" 2>/dev/null; }
		if wait_until 10 old_exited; then
			pass "the woken replica ($old) exits on its own (<= 10 s)"
			wait "${serve_pids[$old]}" 2>/dev/null
			rc=$?
			check_eq "its exit status is 1 (lost the leader Lease)" 1 "$rc"
			check "its log says it lost the Lease" grep -q "lost the leader Lease" "$e2e_tmp/$old.log"
		else
			fail "the woken replica ($old) exits on its own (<= 10 s)"
			serve_log "$old" 20 'leader|Lease|error'
		fi
		serve_stop "$old" KILL
	fi
	# (check records a failure and returns 0: the diagnosis needs its own branch)
	if wait_until 120 state_is "$node" drained; then
		pass "the new leader ($new) finishes the drain (<= 120 s)"
	else
		fail "the new leader ($new) finishes the drain (<= 120 s)"
		echo "    state: $(node_state "$node"); message: $(node_ann "$node" drainer.io/message)"
		kubectl get pods -A --field-selector "spec.nodeName=$node" -o wide 2>&1 | sed 's/^/    /'
		kubectl -n "$lease_ns" get leases -o wide 2>&1 | sed 's/^/    /'
		serve_log "$new" 60 'node-1|slot|lease|Lease|error|warning'
	fi
	sleep 0.5
	audit_window "$line" "$e2e_tmp/$how-$phase.audit"
	check_order "$e2e_tmp/$how-$phase.audit" "$e2e_tmp/classes.json" "$e2e_tmp/claims.json" "$node"
	check_eq "no write of the old leader ($old) after the new leader's first" "" \
		"$(writes_after "$e2e_tmp/$how-$phase.audit" "e2e-ha-$old" "e2e-ha-$new")"
	kubectl annotate --overwrite node "$node" drainer.io/request=uncordon >/dev/null
	check "the new leader ($new) restores node-1 on request (<= 90 s)" wait_until 90 node_restored "$node"
	sleep 0.5
	nodes_watch_stop
	echo "  phases seen: $(phases_seen "$e2e_tmp/$how-$phase.watch")"
	check_node_invariants "$e2e_tmp/$how-$phase.watch" false
	replica "$old"
	check "replica $old is a standby again" wait_until 10 serve_alive "$old"
}

for p in $kill_phases; do drain_round kill "$p"; done
drain_round freeze "$stop_phase"

# Both still there, one leader, and a clean stop: the leader gives the Lease back.
t=$(leader_tag)
serve_stop "$t" TERM
check_eq "the leader ($t) ends with exit 0 on SIGTERM" 0 "$serve_rc"
check "the other replica takes over at once after the release (<= 5 s)" wait_until 5 leads "$(other "$t")"
finish
