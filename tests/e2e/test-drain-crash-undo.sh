#!/usr/bin/env bash
# Crash safety of uncordon and maintain:
#  - uncordon SIGKILLed in restore-drivers (held there: the simulator reports the
#    restored driver pod not Ready, and drainer must wait for Ready before it
#    uncordons); run again once the driver is Ready: it finishes, the node is
#    schedulable, the driver runs, its slice is published, no annotation is left;
#    the node was never uncordoned while drainer.io/state was restore-drivers.
#  - maintain on the already cordoned node-2, SIGKILLed while its command runs
#    (state drained), run again: it resumes (the node is already drained), runs
#    the command, restores; node-2 is still cordoned (rule 3).
#  - maintain --grace-period=0 on node-1 SIGKILLed in evict-rest, run again:
#    finishes; rules 1 and 5 held over both runs (audit log); the command ran once.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1
node2=node-2

cleanup_crash_undo() {
	[ -z "${dpid:-}" ] || kill -KILL "$dpid" 2>/dev/null
	[ -z "${cpid:-}" ] || kill -KILL "$cpid" 2>/dev/null
	reset_node "$node2"
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_crash_undo)

# 1. uncordon killed in restore-drivers.
demo || { fail "demo workload"; finish; exit 1; }
drainer_run drain drain "$node" --timeout 90s
check_rc "drain $node" 0 drain
kubectl annotate node "$node" sim.drainer.io/driver-not-ready=true --overwrite >/dev/null
node_watch_start "$node" "$e2e_tmp/u.watch"
"$DRAINER" uncordon "$node" >"$e2e_tmp/u.killed.out" 2>"$e2e_tmp/u.killed.err" &
dpid=$!
in_restore() { grep -q '"state":"restore-drivers"' "$e2e_tmp/u.watch"; }
check "uncordon reaches restore-drivers" wait_until 30 in_restore
sleep 3
check "uncordon still waits for the not-Ready driver after 3 s" kill -0 "$dpid"
check_eq "state still restore-drivers" restore-drivers "$(node_ann "$node" drainer.io/state)"
check_eq "node still cordoned while the driver is not Ready" true "$(node_unschedulable "$node")"
check "the driver pod was recreated (drain taint removed)" bash -c "[ \"\$('$KUBECTL' -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin --field-selector spec.nodeName=$node -o name | wc -l)\" -ge 1 ]"
kill -KILL "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
dpid=
pass "uncordon SIGKILLed in restore-drivers"
kubectl annotate node "$node" sim.drainer.io/driver-not-ready- >/dev/null
drainer_run u.rerun uncordon "$node"
check_rc "the same uncordon run again finishes" 0 u.rerun
sleep 0.5
node_watch_stop
echo "  phases seen: $(phases_seen "$e2e_tmp/u.watch")"
check_node_invariants "$e2e_tmp/u.watch" false
check_eq "node schedulable" false "$(node_unschedulable "$node")"
check_eq "drain taint gone" false "$(node_tainted "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
check "driver Running and Ready" driver_running "$node"
check "slice published" slice_published "$node"

# 2. maintain on a cordoned node, killed while its command runs.
check "$node2 starts clean" reset_node "$node2" cordon
marker=$e2e_tmp/maintain.marker
node_watch_start "$node2" "$e2e_tmp/m2.watch"
"$DRAINER" maintain "$node2" --timeout 90s -- sh -c "echo run >>'$marker'; sleep 20" \
	>"$e2e_tmp/m2.killed.out" 2>"$e2e_tmp/m2.killed.err" &
dpid=$!
cmd_started() { [ -s "$marker" ]; }
check "maintain drains $node2 and starts its command" wait_until 60 cmd_started
check_eq "the command runs with the node drained" drained "$(node_ann "$node2" drainer.io/state)"
cpid=$(pgrep -P "$dpid" | head -n 1)
kill -KILL "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
dpid=
[ -z "$cpid" ] || kill -KILL "$cpid" 2>/dev/null
cpid=
pass "maintain SIGKILLed while its command ran"
drainer_run m2.rerun maintain "$node2" --timeout 90s -- sh -c "echo run >>'$marker'"
check_rc "the same maintain run again finishes" 0 m2.rerun
sleep 0.5
node_watch_stop
echo "  phases seen: $(phases_seen "$e2e_tmp/m2.watch")"
check_node_invariants "$e2e_tmp/m2.watch" true
check_eq "the command ran again in the second run" 2 "$(wc -l <"$marker")"
check_eq "$node2 is still cordoned (rule 3)" true "$(node_unschedulable "$node2")"
check_eq "drain taint gone" false "$(node_tainted "$node2")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node2")"
check "driver Running and Ready on $node2" driver_running "$node2"
kubectl uncordon "$node2" >/dev/null

# 3. maintain killed in evict-rest.
demo || fail "demo workload"
pods_on_node "$node" "$e2e_tmp/m1.pods.json"
classify_pods "$e2e_tmp/m1.pods.json" >"$e2e_tmp/m1.classes.json"
claims_on_node "$node" >"$e2e_tmp/m1.claims.json"
first=$(audit_lines)
marker1=$e2e_tmp/maintain1.marker
node_watch_start "$node" "$e2e_tmp/m1.watch"
"$DRAINER" --kube-api-qps 2 --kube-api-burst 1 maintain "$node" --grace-period=0 --timeout 90s -- sh -c "echo run >>'$marker1'" \
	>"$e2e_tmp/m1.killed.out" 2>"$e2e_tmp/m1.killed.err" &
dpid=$!
if kill_at_phase "$dpid" "$e2e_tmp/m1.watch" evict-rest 60; then
	pass "maintain SIGKILLed in evict-rest (state at the kill: $(node_ann "$node" drainer.io/state))"
else
	wait "$dpid" 2>/dev/null
	fail "maintain never showed evict-rest; phases: $(phases_seen "$e2e_tmp/m1.watch")"
fi
dpid=
check "the command did not run before the kill" test ! -e "$marker1"
drainer_run m1.rerun maintain "$node" --grace-period=0 --timeout 90s -- sh -c "echo run >>'$marker1'"
check_rc "the same maintain run again finishes" 0 m1.rerun
sleep 0.5
node_watch_stop
echo "  phases seen: $(phases_seen "$e2e_tmp/m1.watch")"
audit_window "$first" "$e2e_tmp/m1.audit"
check_order "$e2e_tmp/m1.audit" "$e2e_tmp/m1.classes.json" "$e2e_tmp/m1.claims.json" "$node"
check_grace "$e2e_tmp/m1.audit" "$e2e_tmp/m1.classes.json"
check_node_invariants "$e2e_tmp/m1.watch" false
check_eq "the command ran once" 1 "$(wc -l <"$marker1" 2>/dev/null || echo 0)"
check_eq "$node schedulable again" false "$(node_unschedulable "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
check "driver Running and Ready" driver_running "$node"
finish
