#!/usr/bin/env bash
# The API server going away (test-faults has the faults short of that):
# kube-apiserver SIGKILLed and restarted inside each phase. For each drain phase X (evict-claim-holders, which carries the cordon, .. stop-drivers) a
# `drainer drain` slowed down by the client rate limit runs; as soon as a watch
# on the Node shows drainer.io/state=X the API server is killed, kept down for a
# few seconds (2-10, varied), and started again exactly as tests/cluster/up did
# (same flags, same log and audit log). The SAME drainer process must finish
# with exit 0 within its --timeout. The same for the undo side (restore-drivers
# of `drainer uncordon`), and once for `drainer serve` (killed
# mid-drain; it must finish the drain and then the uncordon request). Per run,
# from what the API server saw: the safety rules (check_order, check_grace,
# check_node_invariants over one audit log across the restart), the final
# state, and the client rate limit (check_rate: no window of drainer's requests
# beyond burst + qps * length + 1; what was held by a restarted server, or by
# drainer's first connection from its launch on, placed back). While the server is down drainer must not
# spin: its CPU time (from /proc) is bounded; its connection attempts (from
# its -vv log) are printed as a figure.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$e2e_root/tests/cluster/lib.sh"
need_drainer
node=node-1
qps=${APIKILL_QPS:-5}
burst=${APIKILL_BURST:-2}
ticks=$(getconf CLK_TCK)
figures=()

# ---- the API server ----------------------------------------------------------------
api_cmd=()
restarts=() # RFC 3339 times kube-apiserver was started again (for check_rate)
restarts_json() { printf '%s\n' "${restarts[@]}" | jq -Rsc 'split("\n") | map(select(. != ""))'; }
api_up() { [ "$(api_get /readyz 2>/dev/null)" = ok ]; }
# apiserver_kill: SIGKILLs kube-apiserver (remembering its command line) and
# waits until it is gone (a zombie of ours counts as gone, and is reaped).
apiserver_kill() {
	local apid
	apid=$(component_pid kube-apiserver) || return 1
	mapfile -d '' api_cmd <"/proc/$apid/cmdline"
	kill -KILL "$apid"
	while starttime "$apid" >/dev/null 2>&1; do sleep 0.02; done
	return 0
}
# apiserver_start: starts it again exactly as up did (same flags, log appended,
# the audit log is the same file), records it for tests/cluster/down, waits
# for /readyz.
apiserver_start() {
	local p
	restarts+=("$(now_rfc3339)")
	setsid "${api_cmd[@]}" >>"$DRAINER_CLUSTER_DIR/kube-apiserver.log" 2>&1 </dev/null &
	p=$!
	disown "$p"
	echo "$p $(starttime "$p")" >"$DRAINER_CLUSTER_DIR/pids/kube-apiserver.pid"
	wait_until 90 api_up
}
# apiserver_freeze / apiserver_thaw: SIGSTOP and SIGCONT instead of a kill and a
# start. Used on real nodes where kubelets delete pods while the server is away: a
# SIGKILL loses the audit events of requests in flight (the ResponseComplete line is
# written after the answer), and the order check needs the kubelet's DELETE of each
# pod and drainer's eviction of it. A frozen server keeps its sockets: what drainer
# sends meanwhile waits in the kernel and is read at once on SIGCONT (check_rate
# places that group back from the freeze on, as after a restart).
frozen=
# (the freeze's time for check_rate is taken once every thread has stopped: what
# the server received before has an earlier receive time)
apiserver_freeze() {
	frozen=$(component_pid kube-apiserver) || return 1
	kill -STOP "$frozen"
	stopped() { ! grep -qv '^State:[[:space:]]*T' < <(grep -h '^State:' /proc/"$frozen"/task/*/status); }
	wait_until 5 stopped || return 1
	restarts+=("$(now_rfc3339)")
}
apiserver_thaw() {
	[ -n "$frozen" ] || return 0
	kill -CONT "$frozen"
	frozen=
	wait_until 30 api_up
}
# Safety net: never leave the cluster without its API server.
apiserver_ensure() {
	apiserver_thaw
	if ! component_pid kube-apiserver >/dev/null && [ "${#api_cmd[@]}" -gt 0 ]; then
		echo "  (cleanup: starting kube-apiserver again)"
		apiserver_start
	fi
}

# ---- a Node watch that survives the restart ------------------------------------------
# wl_start FILE: kubectl get node -w in a loop (it ends when the server goes
# away; started again every 0.3 s), one node_watch_jq line per observed
# version appended to FILE. Own session, so wl_stop ends exactly it.
wl_pid=
wl_start() {
	: >"$1"
	setsid bash -c 'while :; do "$0" get node "$1" -w -o json --output-watch-events=false --request-timeout=0 2>/dev/null |
		jq --unbuffered -c "$2" >>"$3" 2>/dev/null; sleep 0.3; done' "$KUBECTL" "$node" "$node_watch_jq" "$1" </dev/null &
	wl_pid=$! wl_file=$1
	rm -f "$1.failed"
	wait_until 10 test -s "$1" || recorder_failed "$1" "the watch of node $node showed no version of it in 10 s"
}
wl_stop() {
	[ -n "$wl_pid" ] || return 0
	kill -0 "$wl_pid" 2>/dev/null || recorder_failed "$wl_file" "the watch loop ended before it was stopped"
	sleep 0.3
	kill -- -"$wl_pid" 2>/dev/null
	wait "$wl_pid" 2>/dev/null
	wl_pid=
}

cleanup_apikill() {
	[ -z "${dpid:-}" ] || kill -KILL "$dpid" 2>/dev/null
	wl_stop
	apiserver_ensure
	supervisor_stop
	[ "${#client_cmd[@]}" = 0 ] || clients_restart
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_apikill)

# wait_state FILE PHASE SECONDS PID: the watch in FILE shows PHASE while PID runs.
wait_state() {
	local end=$((SECONDS + $3))
	while :; do
		grep -q "\"state\":\"$2\"" "$1" && return 0
		kill -0 "$4" 2>/dev/null || return 1
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.02
	done
}
last_state() { tail -n 1 "$1" | jq -r '.state'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# outage TAG PID LOG DOWN: kills the API server (freezes it with outage_mode=freeze),
# keeps it down DOWN seconds, checks that PID (drainer) lives on without spinning,
# starts the server again (thaws it). Sets landed (the Node's last observed state
# before the kill).
outage() {
	local tag=$1 pid=$2 log=$3 down=$4 mode=${outage_mode:-kill} c0 c1 l0 n used
	landed=$(last_state "$e2e_tmp/$tag.watch")
	l0=$(wc -l <"$log")
	c0=$(cpu_ticks "$pid")
	if [ "$mode" = freeze ]; then
		apiserver_freeze || {
			fail "$tag: no kube-apiserver to freeze"
			return 1
		}
	elif ! apiserver_kill; then
		fail "$tag: no kube-apiserver to kill"
		return 1
	fi
	echo "  kube-apiserver $([ "$mode" = freeze ] && echo frozen || echo killed) (Node last seen in $landed), down for $down s"
	sleep "$down"
	c1=$(cpu_ticks "$pid")
	check "$tag: the same drainer process still runs while the API server is down" kill -0 "$pid"
	used=$((c1 - c0))
	n=$(tail -n +"$((l0 + 1))" "$log" | grep -c 'failed after' || true)
	# 0.5 s of CPU over an outage of at most 10 s: a reconnect loop without backoff burns a whole core.
	check "$tag: no busy loop while down: $((used * 1000 / ticks)) ms CPU in $down s (< 500 ms)" [ "$used" -lt $((ticks / 2)) ]
	figures+=("$tag: $([ "$mode" = freeze ] && echo frozen || echo down) ${down}s, landed in $landed, $((used * 1000 / ticks)) ms CPU, $n failed connection attempts")
	if [ "$mode" = freeze ]; then
		apiserver_thaw || {
			fail "$tag: kube-apiserver not ready after SIGCONT"
			return 1
		}
	elif ! apiserver_start; then
		fail "$tag: kube-apiserver did not come back"
		return 1
	fi
	pass "$tag: kube-apiserver back after $down s"
	control_plane_alive "$tag"
}
# control_plane_alive TAG: etcd survived (the clients are supervised; their exits
# are listed as figures).
control_plane_alive() {
	check "$1: etcd still runs" eval 'component_pid etcd >/dev/null'
}

# finish_drainer TAG PID SECONDS: waits for PID (at most SECONDS); sets run_rc.
finish_drainer() {
	local end=$((SECONDS + $3))
	while kill -0 "$2" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
	kill -KILL "$2" 2>/dev/null
	wait "$2"
	run_rc=$?
	dpid=
}

# ---- the other control-plane clients: tests/e2e/clients.sh ----------------------------
. "$e2e_root/tests/e2e/clients.sh"

# ---- drain (and uncordon) runs -------------------------------------------------------
# In wait-released the drain waits for the evicted pods to be gone, which real
# kubelets do within a second or two: too short a window to kill the API server in
# on a loaded machine (the drain was over before the kill). A pod of e2e-hold on
# the node, held by a finalizer until the API server is back, keeps the drain there
# (lib.sh: hold_pod_start). stop-drivers is as short where the kubelet removes the
# evicted driver pod at once: the driver pod is held the same way (hold_driver_start).

# drain_kill PHASE DOWN [UNDO-PHASE UNDO-DOWN]: a slowed-down drain, the API
# server killed in PHASE for DOWN s; then `drainer uncordon`, with the API server
# killed in UNDO-PHASE (restore-drivers) for UNDO-DOWN s if given.
drain_kill() {
	local x=$1 down=$2 ux=${3:-} udown=${4:-} tag=drain-$1 first launched
	restarts=()
	echo "  --- drain: kube-apiserver $([ "${outage_mode:-kill}" = freeze ] && echo frozen || echo killed) in $x for $down s${ux:+; uncordon: killed in $ux for $udown s}"
	demo || { fail "$x: demo workload"; return; }
	[ "$x" != wait-released ] || hold_pod_start
	[ "$x" != stop-drivers ] || hold_driver_start "$node"
	pods_on_node "$node" "$e2e_tmp/$tag.pods.json"
	classify_pods "$e2e_tmp/$tag.pods.json" >"$e2e_tmp/$tag.classes.json"
	claims_on_node "$node" >"$e2e_tmp/$tag.claims.json"
	first=$(audit_lines)
	wl_start "$e2e_tmp/$tag.watch"
	echo "  \$ drainer -vv --kube-api-qps $qps --kube-api-burst $burst drain $node --grace-period=0 --timeout ${timeout_s}s  &"
	launched=$(now_rfc3339)
	"$DRAINER" -vv --kube-api-qps "$qps" --kube-api-burst "$burst" drain "$node" --grace-period=0 --timeout "${timeout_s}s" \
		>"$e2e_tmp/$tag.out" 2>"$e2e_tmp/$tag.err" &
	dpid=$!
	if wait_state "$e2e_tmp/$tag.watch" "$x" 60 "$dpid"; then
		outage "$tag" "$dpid" "$e2e_tmp/$tag.err" "$down"
	else
		fail "$tag: the Node never showed $x while drainer ran; phases: $(phases_seen "$e2e_tmp/$tag.watch")"
	fi
	[ "$x" != wait-released ] || hold_pod_release
	[ "$x" != stop-drivers ] || hold_driver_release
	finish_drainer "$tag" "$dpid" $((timeout_s + 10))
	check_rc "$tag: the same drainer process finishes the drain within its --timeout" 0 "$tag"
	[ "$x" != wait-released ] || kubectl -n demo delete deployment e2e-hold --wait=false >/dev/null
	wl_stop
	echo "  phases seen: $(phases_seen "$e2e_tmp/$tag.watch")"
	audit_window "$first" "$e2e_tmp/$tag.audit"
	audit_since "$first" "$e2e_tmp/$tag.all"
	check_order "$e2e_tmp/$tag.audit" "$e2e_tmp/$tag.classes.json" "$e2e_tmp/$tag.claims.json" "$node"
	check_grace "$e2e_tmp/$tag.audit" "$e2e_tmp/$tag.classes.json"
	check_node_invariants "$e2e_tmp/$tag.watch" false
	check_rate "$e2e_tmp/$tag.all" "$qps" "$burst" drainer/ "$(restarts_json)" "$launched"
	check_eq "$tag: drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
	check_eq "$tag: unschedulable and tainted" "true true" "$(node_unschedulable "$node") $(node_tainted "$node")"
	check_eq "$tag: no ResourceClaim on $node" "[]" "$(claims_on_node "$node")"
	check "$tag: no driver pod" no_driver_pod "$node"
	if [ -n "$ux" ]; then
		outage_mode=kill undo_kill "$ux" "$udown" # (no pod is deleted in the undo)
	else
		drainer_run "$tag.uncordon" uncordon "$node" --timeout 60s
		check_rc "$tag: uncordon afterwards" 0 "$tag.uncordon"
		check "$tag: back in service (schedulable, no drainer.io annotation, driver runs, slice published)" \
			wait_until 30 node_restored "$node"
	fi
	clients_restart
}

# undo_kill PHASE DOWN: on a drained node, a slowed-down `drainer uncordon`, the
# API server killed in PHASE for DOWN s (restore-drivers: a node's uncordon is the
# restore's last write, with the end).
undo_kill() {
	local x=$1 down=$2 tag=undo-$1 first launched qps=$qps burst=$burst
	restarts=()
	first=$(audit_lines)
	wl_start "$e2e_tmp/$tag.watch"
	echo "  \$ drainer -vv --kube-api-qps $qps --kube-api-burst $burst uncordon $node --timeout ${timeout_s}s  &"
	launched=$(now_rfc3339)
	"$DRAINER" -vv --kube-api-qps "$qps" --kube-api-burst "$burst" uncordon "$node" --timeout "${timeout_s}s" \
		>"$e2e_tmp/$tag.out" 2>"$e2e_tmp/$tag.err" &
	dpid=$!
	if wait_state "$e2e_tmp/$tag.watch" "$x" 60 "$dpid"; then
		outage "$tag" "$dpid" "$e2e_tmp/$tag.err" "$down"
	else
		fail "$tag: the Node never showed $x while drainer ran; phases: $(phases_seen "$e2e_tmp/$tag.watch")"
	fi
	finish_drainer "$tag" "$dpid" $((timeout_s + 10))
	check_rc "$tag: the same drainer process finishes the uncordon within its --timeout" 0 "$tag"
	wl_stop
	echo "  phases seen: $(phases_seen "$e2e_tmp/$tag.watch")"
	audit_since "$first" "$e2e_tmp/$tag.all"
	check_node_invariants "$e2e_tmp/$tag.watch" false
	check_rate "$e2e_tmp/$tag.all" "$qps" "$burst" drainer/ "$(restarts_json)" "$launched"
	check_eq "$tag: no drainer.io annotation left" "{}" "$(node_drainer_anns "$node")"
	check_eq "$tag: schedulable, no drain taint" "false false" "$(node_unschedulable "$node") $(node_tainted "$node")"
	check "$tag: driver Running and Ready, slice published" wait_until 30 node_restored "$node"
}

# ---- serve -------------------------------------------------------------------------
serve_kill() { # PHASE DOWN
	local x=$1 down=$2 tag=serve first launched sqps=10 sburst=5
	restarts=()
	echo "  --- serve: kube-apiserver $([ "${outage_mode:-kill}" = freeze ] && echo frozen || echo killed) in $x for $down s, then the uncordon request"
	demo || { fail "serve: demo workload"; return; }
	pods_on_node "$node" "$e2e_tmp/$tag.pods.json"
	classify_pods "$e2e_tmp/$tag.pods.json" >"$e2e_tmp/$tag.classes.json"
	claims_on_node "$node" >"$e2e_tmp/$tag.claims.json"
	first=$(audit_lines)
	launched=$(now_rfc3339)
	serve_start "$tag" --kube-api-qps "$sqps" --kube-api-burst "$sburst" serve --node "$node" --max-parallel 0
	dpid=$serve_pid
	check "serve opens its watch on $node" wait_until 20 watch_opened "$first" "metadata.name%3D$node"
	wl_start "$e2e_tmp/$tag.watch"
	kubectl annotate node "$node" drainer.io/request=drain >/dev/null
	if wait_state "$e2e_tmp/$tag.watch" "$x" 60 "$dpid"; then
		outage "$tag" "$dpid" "$e2e_tmp/$tag.log" "$down"
	else
		fail "$tag: the Node never showed $x; phases: $(phases_seen "$e2e_tmp/$tag.watch")"
	fi
	if ! check "serve: $node reaches drainer.io/state=drained after the restart (<= $timeout_s s)" \
		wait_until "$timeout_s" state_is "$node" drained; then
		echo "    state: $(node_state "$node"); message: $(node_ann "$node" drainer.io/message)"
		serve_log "$tag" 30
	fi
	check_eq "serve: no ResourceClaim on $node" "[]" "$(claims_on_node "$node")"
	check "serve: no driver pod" no_driver_pod "$node"
	audit_window "$first" "$e2e_tmp/$tag.audit"
	check_order "$e2e_tmp/$tag.audit" "$e2e_tmp/$tag.classes.json" "$e2e_tmp/$tag.claims.json" "$node"
	check_grace "$e2e_tmp/$tag.audit" "$e2e_tmp/$tag.classes.json"
	kubectl annotate --overwrite node "$node" drainer.io/request=uncordon >/dev/null
	if ! check "serve: $node back in service after the uncordon request (<= 60 s)" wait_until 60 node_restored "$node"; then
		echo "    annotations: $(node_drainer_anns "$node")"
		serve_log "$tag" 30
	fi
	check "serve is still the same process" serve_alive "$tag"
	wl_stop
	echo "  phases seen: $(phases_seen "$e2e_tmp/$tag.watch")"
	check_node_invariants "$e2e_tmp/$tag.watch" false
	audit_since "$first" "$e2e_tmp/$tag.all"
	check_rate "$e2e_tmp/$tag.all" "$sqps" "$sburst" drainer/ "$(restarts_json)" "$launched"
	serve_stop "$tag"
	dpid=
	check_eq "serve exits 0 on SIGTERM" 0 "$serve_rc"
	clients_restart
}

# The client rate check must be able to fail: synthetic clients one request
# over the bucket, (a) burst + 2 at once, (b) qps + 1 per second for burst + 3 s.
selftest_rate() {
	local f=$e2e_tmp/rate-selftest.json out kind times
	for kind in burst sustained; do
		if [ "$kind" = burst ]; then
			times=$(jq -nc --argjson b "$burst" '[range(0; $b + 2) | 0]')
		else
			times=$(jq -nc --argjson q "$qps" --argjson b "$burst" '[range(0; $b + 3) as $s | range(0; $q + 1) | $s + . / ($q + 1)]')
		fi
		jq -n --argjson t "$times" '$t | to_entries | map({auditID: "t\(.key)", stage: "ResponseComplete", userAgent: "drainer/selftest",
			requestReceivedTimestamp: (1767225600 + .value | (floor | todate | .[0:19]) + "." + ((. - floor) * 1e6 | round | tostring | ("000000" + .)[-6:]) + "Z")})' >"$f"
		out=$(check_rate "$f" "$qps" "$burst")
		check "check_rate fails a synthetic $kind one request over the bucket: ${out#*: }" grep -q FAIL <<<"$out"
	done
}

timeout_s=${APIKILL_TIMEOUT:-180}
[ "$(node_drainer_anns "$node")" = "{}" ] || reset_node "$node"
t_start=$SECONDS
selftest_rate
client_cmds_save || { finish; exit 1; }
supervisor_start
clients_restart
# APIKILL_RUNS picks scenarios by their drain phase (serve: the serve run), e.g.
# "evict-claim-holders serve"; default all five (a node's cordon is written with
# evict-claim-holders: that run kills the server right after it).
want() { [[ " ${APIKILL_RUNS:-evict-claim-holders evict-rest wait-released stop-drivers serve} " == *" $1 "* ]]; }
# On real nodes the phases in which kubelets delete the evicted pods freeze the server
# instead (apiserver_freeze: a SIGKILL there loses the audit events the order check
# needs); APIKILL_FREEZE="..." names other phases, "" none.
if [ "${DRAINER_CLUSTER_NODES:-sim}" = real ]; then
	freeze_in=${APIKILL_FREEZE-evict-claim-holders evict-rest serve}
else
	freeze_in=${APIKILL_FREEZE-}
fi
mode() { [[ " $freeze_in " == *" $1 "* ]] && echo freeze || echo kill; }
want evict-claim-holders && outage_mode=$(mode evict-claim-holders) drain_kill evict-claim-holders 4 restore-drivers 5
want evict-rest && outage_mode=$(mode evict-rest) drain_kill evict-rest 6
want wait-released && outage_mode=$(mode wait-released) drain_kill wait-released 8
want stop-drivers && outage_mode=$(mode stop-drivers) drain_kill stop-drivers 10
want serve && outage_mode=$(mode serve) serve_kill evict-claim-holders 7
echo "  figures:"
printf '    %s\n' "${figures[@]}"
[ ! -s "$e2e_tmp/supervisor.log" ] || sed 's/^/    cluster: /' "$e2e_tmp/supervisor.log"
echo "  runtime $((SECONDS - t_start)) s (without the final cleanup)"
finish
