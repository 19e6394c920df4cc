# The control plane's client-go programs after a kube-apiserver restart, for the
# scripts that kill the API server (sourced after lib.sh and tests/cluster/lib.sh).
# kube-controller-manager, kube-scheduler and drainer-sim (simulated nodes) are client-go
# programs: after an API server restart their reflectors back off (up to 30 s,
# x2 jitter, reset only after 2 min without failure), and kube-scheduler may
# exit on a cache inconsistency it finds after relisting ("Scheduler cache is
# corrupted", klog fatal). A 1.37 controller whose informer is behind its own writes
# does nothing meanwhile ("read version N is not as new as written version M"): seen
# after test-watch-restart's restart, the ReplicaSet controller made no pod for 26 s,
# a PDB held the next script's drain, and CI's ASan pass of test-drain-order failed
# right after it. On a real control-plane node the kubelet restarts a
# static pod that exits; here a supervisor does that from the command lines
# saved at the start (printed as figures: it is the cluster, not drainer), and
# clients_restart starts them afresh between runs, so that one run's outage
# does not slow the next run, nor the tests that run after this one.
# Real kubelets are left alone: they reconnect by themselves, and one restarted from
# its command line would run outside its node's mount namespace.
clients=(kube-controller-manager kube-scheduler)
[ "${DRAINER_CLUSTER_NODES:-sim}" = sim ] && clients+=(drainer-sim)
declare -A client_cmd=()
client_cmds_save() {
	local c pid
	for c in "${clients[@]}"; do
		pid=$(component_pid "$c") || { fail "$c is not running"; return 1; }
		client_cmd[$c]=$(tr '\0' '\n' <"/proc/$pid/cmdline" | base64 -w0)
	done
}
client_start() { # NAME
	local cmd pid
	mapfile -t cmd < <(base64 -d <<<"${client_cmd[$1]}")
	setsid "${cmd[@]}" >>"$DRAINER_CLUSTER_DIR/$1.log" 2>&1 </dev/null &
	pid=$!
	disown "$pid"
	echo "$pid $(starttime "$pid")" >"$DRAINER_CLUSTER_DIR/pids/$1.pid"
}
sup_pid=
supervisor_start() {
	(
		while :; do
			if ! [ -e "$e2e_tmp/supervisor.pause" ]; then
				for c in "${clients[@]}"; do
					if ! component_pid "$c" >/dev/null; then
						echo "$(date -u +%T) $c had exited; started again" >>"$e2e_tmp/supervisor.log"
						client_start "$c"
					fi
				done
			fi
			sleep 0.5
		done
	) </dev/null >/dev/null 2>&1 &
	sup_pid=$!
}
supervisor_stop() {
	[ -n "$sup_pid" ] || return 0
	kill "$sup_pid" 2>/dev/null
	wait "$sup_pid" 2>/dev/null
	sup_pid=
}
# clients_restart: SIGTERM to each client's process group (as tests/cluster/down
# does), start again with the same command line (log appended, recorded for
# down), wait until healthy and every node Ready.
clients_restart() {
	local c pid pids=() end
	: >"$e2e_tmp/supervisor.pause"
	sleep 0.6 # the supervisor's current round is over
	for c in "${clients[@]}"; do
		pid=$(component_pid "$c") || continue
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
		pids+=("$pid")
	done
	end=$((SECONDS + 15))
	for pid in "${pids[@]}"; do
		while starttime "$pid" >/dev/null 2>&1 && [ "$SECONDS" -lt "$end" ]; do sleep 0.05; done
		kill -KILL -- "-$pid" 2>/dev/null
	done
	for c in "${clients[@]}"; do client_start "$c"; done
	rm -f "$e2e_tmp/supervisor.pause"
	healthz() { [ "$(curl -sk --max-time 2 "https://127.0.0.1:$1/healthz")" = ok ]; }
	nodes_ready() { [ "$(kubectl get nodes -o json | jq '[.items[] | select(any(.status.conditions[]; .type == "Ready" and .status == "True"))] | length')" = "${DRAINER_NODE_COUNT:-${DRAINER_SIM_NODES:-3}}" ]; }
	wait_until 30 healthz "$DRAINER_CLUSTER_CM_PORT" && wait_until 30 healthz "$DRAINER_CLUSTER_SCHEDULER_PORT" &&
		wait_until 30 nodes_ready || fail "controller-manager, scheduler or simulator not healthy after their restart"
}
