#!/usr/bin/env bash
# Maintenance waves an admin steers, on the real control plane: one `drainer serve
# --all-nodes` (cluster mode) over the three nodes. Judged from the Nodes and the
# audit log:
#  - --max-parallel 67% of 3 nodes is 2: all three asked at once, two drain, the
#    third waits saying "--max-parallel 67%"; drainer writes only Leases
#    drainer-slot-0 and -1; never three nodes out at once (one watch of every Node);
#  - drainer.io/pause=true on the Lease namespace: a drain in flight (node-1, the
#    demo's claims) finishes; a new request (node-2) waits, its Node saying it is
#    paused, written once by drainer while paused (audit), never cordoned; an undo
#    (node-1) goes on; `drainer status --all -o json` names node-2 waiting for
#    "pause"; removing the annotation lets node-2 drain;
#  - --maintenance-window "daily HH:MM-HH:MM UTC" computed from `date` to open a
#    minute or two after serve starts: node-3's request waits ("waiting for the
#    maintenance window (next opens T)", written once: audit), status --all says
#    "window", it is not cordoned before T, and drains once the window opened;
#  - bad windows and percentages are refused at once with exit code 2.
# Cleanup: the Lease namespace deleted, the nodes reset, the demo restored.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
nodes=(node-1 node-2 node-3)
lease_ns=e2e-serve-waves

cleanup_waves() {
	local t n
	for t in "${!serve_pids[@]}"; do serve_stop "$t" KILL; done
	kubectl delete namespace "$lease_ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
	for n in "${nodes[@]}"; do reset_node "$n"; done
	demo
}
e2e_cleanup_hooks+=(cleanup_waves)

echo "== bad input: refused before anything runs (exit 2)"
for bad in "--maintenance-window mon-fri" "--maintenance-window 'mon 10:00-11:00 Mars/Olympus'" \
	"--maintenance-window 'mon 25:00-26:00'" "--max-parallel 0%" "--max-parallel 101%" "--max-parallel 5%%"; do
	eval "set -- $bad"
	"$DRAINER" serve --all-nodes "$@" >"$e2e_tmp/bad.out" 2>"$e2e_tmp/bad.err"
	rc=$?
	if [ "$rc" = 2 ] && grep -q -- "${1#--}" "$e2e_tmp/bad.err"; then pass "serve $bad: exit 2 ($(head -c 120 "$e2e_tmp/bad.err" | tr '\n' ' '))"
	else fail "serve $bad: exit $rc: $(head -c 300 "$e2e_tmp/bad.err")"; fi
done

demo || { fail "demo workload"; finish; exit 1; }
for n in "${nodes[@]}"; do
	[ "$(node_drainer_anns "$n")" = "{}" ] || reset_node "$n"
done
kubectl delete namespace "$lease_ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
kubectl create namespace "$lease_ns" >/dev/null

state() { node_ann "$1" drainer.io/state; }
is_state() { [ "$(state "$1")" = "$2" ]; }
in_service() { [ "$(node_drainer_anns "$1")" = "{}" ] && [ "$(node_unschedulable "$1")" = false ]; }
past_waiting() { local s; s=$(state "$1"); [ -n "$s" ] && [ "$s" != waiting ]; }
undo_all() {
	local n
	for n in "$@"; do kubectl annotate node "$n" drainer.io/request=uncordon --overwrite >/dev/null; done
	for n in "$@"; do
		wait_until 90 in_service "$n" || { fail "$n back in service"; return 1; }
		kubectl annotate node "$n" drainer.io/request- >/dev/null
	done
}
# drainer's patches of NODE in an audit window file
drainer_node_patches() {
	jq --arg n "$2" '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "patch"
		and .objectRef.resource == "nodes" and .objectRef.name == $n and (.responseStatus.code // 0) < 300)] | length' "$1"
}
status_reason() { # NODE: its reason in drainer status --all -o json
	"$DRAINER" status --all -o json | jq -r --arg n "$1" '.notInService[] | select(.name == $n) | .reason // ""'
}

echo "== --max-parallel 67% of 3 nodes: 2 at once"
nodes_watch_start "$e2e_tmp/nodes.watch"
start=$(audit_lines)
serve_start w1 serve --all-nodes --max-parallel 67% --lease-namespace "$lease_ns" --identity e2e-waves --metrics-addr ""
check "serve watches every Node" wait_until 20 watch_opened "$start" "/api/v1/nodes?"
kubectl annotate nodes "${nodes[@]}" drainer.io/request=drain --overwrite >/dev/null
two_drained() { [ "$(for n in "${nodes[@]}"; do state "$n"; echo; done | grep -c '^drained$')" = 2 ]; }
check "two of three nodes drained" wait_until 120 two_drained
sleep 3
waiter=
for n in "${nodes[@]}"; do is_state "$n" waiting && waiter=$n; done
if [ -n "$waiter" ]; then
	msg=$(node_ann "$waiter" drainer.io/message)
	case $msg in *"(--max-parallel 67%) since "*) pass "$waiter waits: $msg" ;; *) fail "$waiter's message: $msg" ;; esac
	check_eq "$waiter is not cordoned" false "$(node_unschedulable "$waiter")"
else
	fail "no node waits (states: $(for n in "${nodes[@]}"; do printf '%s=%s ' "$n" "$(state "$n")"; done))"
fi
check_eq "status --all: the waiter waits for a slot" slot "$(status_reason "${waiter:-none}")"
drained=()
for n in "${nodes[@]}"; do [ "$n" = "$waiter" ] || drained+=("$n"); done
undo_all "${drained[@]}"
[ -z "$waiter" ] || check "$waiter drains once a slot is free" wait_until 120 is_state "$waiter" drained
[ -z "$waiter" ] || undo_all "$waiter"
serve_stop w1
audit_window "$start" "$e2e_tmp/pct.audit"
jq_checks '([.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "leases"
		and (.verb | IN("create", "update", "patch", "delete"))) | .objectRef.name] | unique) as $w
	| if $w == ["drainer-slot-0", "drainer-slot-1"] then "ok drainer wrote Leases drainer-slot-0 and -1 only"
	  else "FAIL Leases written: \($w | join(", "))" end' "$e2e_tmp/pct.audit"
nodes_watch_stop
most_out=$(jq -s '[foreach .[] as $e ({}; .[$e.name] = ($e.unsched or ($e.state != "" and $e.state != "waiting")); [.[] | select(.)] | length)] | max // 0' "$e2e_tmp/nodes.watch")
check_eq "never more than 2 nodes out at once (Node watch)" 2 "$most_out"

echo "== drainer.io/pause=true on $lease_ns"
start=$(audit_lines)
serve_start w2 serve --all-nodes --max-parallel 3 --lease-namespace "$lease_ns" --identity e2e-waves --metrics-addr ""
check "serve watches every Node" wait_until 20 watch_opened "$start" "/api/v1/nodes?"
kubectl annotate node node-1 drainer.io/request=drain --overwrite >/dev/null
check "node-1's drain is under way" wait_until 60 past_waiting node-1
kubectl annotate namespace "$lease_ns" drainer.io/pause=true --overwrite >/dev/null
paused_at=$(audit_lines)
if is_state node-1 drained; then fail "node-1 drained before the pause: nothing in flight to check"; fi
check "node-1's drain in flight finishes while paused" wait_until 120 is_state node-1 drained
kubectl annotate node node-2 drainer.io/request=drain --overwrite >/dev/null
check "node-2 waits" wait_until 30 is_state node-2 waiting
sleep 8
msg=$(node_ann node-2 drainer.io/message)
case $msg in *"drains are paused (drainer.io/pause=true on namespace $lease_ns)"*) pass "node-2 says: $msg" ;; *) fail "node-2's message: $msg" ;; esac
check_eq "node-2 is not cordoned while paused" false "$(node_unschedulable node-2)"
check_eq "status --all: node-2 waits for the pause" pause "$(status_reason node-2)"
kubectl annotate node node-1 drainer.io/request=uncordon --overwrite >/dev/null
check "node-1's undo goes on while paused" wait_until 90 in_service node-1
kubectl annotate node node-1 drainer.io/request- >/dev/null
audit_window "$paused_at" "$e2e_tmp/paused.audit"
check_eq "node-2 written once by drainer while paused" 1 "$(drainer_node_patches "$e2e_tmp/paused.audit" node-2)"
kubectl annotate namespace "$lease_ns" drainer.io/pause- >/dev/null
check "node-2 drains once the pause is removed" wait_until 120 is_state node-2 drained
undo_all node-2
serve_stop w2

echo "== --maintenance-window opening during the test"
# the next minute boundary at least 50 s away, for an hour (UTC)
open_at=$(( ($(date +%s) + 50 + 59) / 60 * 60 ))
window="daily $(date -u -d "@$open_at" +%H:%M)-$(date -u -d "@$((open_at + 3600))" +%H:%M) UTC"
open_rfc=$(date -u -d "@$open_at" +%Y-%m-%dT%H:%M:%SZ)
start=$(audit_lines)
serve_start w3 serve --all-nodes --max-parallel 1 --lease-namespace "$lease_ns" --identity e2e-waves --metrics-addr "" \
	--maintenance-window "$window"
check "serve watches every Node" wait_until 20 watch_opened "$start" "/api/v1/nodes?"
kubectl annotate node node-3 drainer.io/request=drain --overwrite >/dev/null
check "node-3 waits" wait_until 30 is_state node-3 waiting
msg=$(node_ann node-3 drainer.io/message)
check_eq "node-3 says when the window opens" "waiting for the maintenance window (next opens $open_rfc)" "$msg"
check_eq "status --all: node-3 waits for the window" window "$(status_reason node-3)"
check "node-3 drains once the window opened" wait_until 240 is_state node-3 drained
# From the audit log (the API server's clock, as the window's): before the window
# opened drainer wrote node-3 once (waiting), and its first write after that is at or
# after the opening.
audit_window "$start" "$e2e_tmp/window.audit"
jq_checks --arg open "${open_rfc%Z}" '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "patch"
		and .objectRef.resource == "nodes" and .objectRef.name == "node-3" and (.responseStatus.code // 0) < 300)
		| .requestReceivedTimestamp] as $p
	| ([$p[] | select(. < $open)] | length) as $before
	| ([$p[] | select(. >= $open)] | min) as $first
	| (if $before == 1 then "ok node-3 written once by drainer while the window was closed"
	   else "FAIL node-3 written \($before) times by drainer while the window was closed" end),
	  (if $first != null then "ok drainer next wrote node-3 at \($first[11:23]), after the window opened (\($open[11:19]))"
	   else "FAIL no write of node-3 by drainer after the window opened" end)' "$e2e_tmp/window.audit"
undo_all node-3
serve_stop w3

finish
