#!/usr/bin/env bash
# `drainer serve` per node (a drain on request, and the idle cost), against the
# real control plane with the demo workload on node-1. Everything is asserted on
# what the API server holds (Nodes, pods, claims, slices, Events) and on its
# audit log, not on drainer's output:
#  - `kubectl annotate node node-1 drainer.io/request=drain` leaves node-1
#    drained: unschedulable, drain taint, driver pod gone, no claim on the node,
#    drainer.io/state=drained, the request kept; drainer evicted in the safe order
#    (claim holders first, the driver last, after the claims were released);
#  - once the slice is wiped (the driver stayed down), `kubectl annotate
#    --overwrite node node-1 drainer.io/request=uncordon` brings the driver pod
#    back Running and Ready, the slice back (published before the node was made
#    schedulable), the node schedulable, and no drainer.io/ annotation left;
#  - removing the request in wait-released undoes the drain: the driver pod is
#    never evicted, drained is never reached, the node is back in service;
#  - a daemon for node-1 ignores a request on node-2; a daemon for $NODE_NAME
#    (node-2) picks up a request made before it started; removing the request
#    after the drain restores node-2;
#  - idle for 60 s, the node-1 daemon sends nothing but its one watch on its own
#    Node (counted and printed from the audit log), and that watch stays open;
#  - SIGTERM ends it with exit 0.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1
node2=node-2
idle_secs=${DRAINER_E2E_IDLE_SECONDS:-60}

cleanup_serve() {
	local t
	for t in "${!serve_pids[@]}"; do serve_stop "$t" KILL; done
	reset_node "$node2"
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_serve)

demo || { fail "demo workload"; finish; exit 1; }
for n in "$node" "$node2"; do
	[ "$(node_drainer_anns "$n")" = "{}" ] || reset_node "$n"
done
driver_before=$(driver_pod "$node")
pods_on_node "$node" "$e2e_tmp/pods.json"
classify_pods "$e2e_tmp/pods.json" >"$e2e_tmp/classes.json"
claims_on_node "$node" >"$e2e_tmp/claims.json"
check "node-1 has claims before the drain ($(jq length "$e2e_tmp/claims.json"))" [ "$(jq length "$e2e_tmp/claims.json")" -ge 3 ]

serve_start_line=$(audit_lines)
serve_start a serve --node "$node" --max-parallel 0
check "serve --node $node opens its watch on node $node" wait_until 20 watch_opened "$serve_start_line" "metadata.name%3D$node"

# ---- 1. drain on request ----------------------------------------------------------
echo "- kubectl annotate node $node drainer.io/request=drain"
drain_line=$(audit_lines)
delete_node_events "$node"
nodes_watch_start "$e2e_tmp/drain.watch" "$node"
kubectl annotate node "$node" drainer.io/request=drain >/dev/null
if check "node-1 reaches drainer.io/state=drained (<= 90 s)" wait_until 90 state_is "$node" drained; then
	:
else
	echo "    state now: $(node_state "$node"); message: $(node_ann "$node" drainer.io/message)"
	serve_log a 30
fi
sleep 0.5
echo "  phases seen: $(phases_seen "$e2e_tmp/drain.watch")"
check_eq "node-1 unschedulable" true "$(node_unschedulable "$node")"
check_eq "node-1 has the drain taint" true "$(node_tainted "$node")"
check "node-1's driver pod is gone" no_driver_pod "$node"
check_eq "no ResourceClaim on node-1" "[]" "$(claims_on_node "$node")"
check_eq "the request stays (drainer.io/request=drain)" drain "$(node_ann "$node" drainer.io/request)"
ds=$(node_ann "$node" drainer.io/driver-stop)
check "drainer.io/driver-stop records what was done ($ds)" [ -n "$ds" ]
remaining=$(kubectl get pods -A --field-selector "spec.nodeName=$node" -o json |
	jq -r '[.items[] | select(.metadata.annotations["kubernetes.io/config.mirror"] == null) | "\(.metadata.namespace)/\(.metadata.name)"] | join(", ")')
check_eq "only the mirror pod is left on node-1" "" "$remaining"
node_events "$node" "$e2e_tmp/events.json"
check "a DrainerDone Event on the Node" jq_true 'any(.[]; .reason == "DrainerDone")' "$e2e_tmp/events.json"
audit_window "$drain_line" "$e2e_tmp/drain.audit"
check_order "$e2e_tmp/drain.audit" "$e2e_tmp/classes.json" "$e2e_tmp/claims.json" "$node"
check_grace "$e2e_tmp/drain.audit" "$e2e_tmp/classes.json"
check_eq "drainer wrote only to node-1, its pods and Events" "" \
	"$(drainer_writes "$e2e_tmp/drain.audit" except-events | grep -v -e "^patch nodes /$node\$" -e '^create pods/eviction ' || true)"

# The driver stays stopped while drained: its slice is wiped, as by the kubelet.
wipe=${DRAINER_SIM_SLICE_WIPE_DELAY:-30s}
wipe_s=${wipe%s}
if [[ "$wipe_s" =~ ^[0-9]+$ ]] && [ "$wipe_s" -le 60 ]; then
	check "the slice of node-1 is wiped while drained (<= $((wipe_s + 20)) s)" wait_until $((wipe_s + 20)) no_slice "$node"
	check "still drained" state_is "$node" drained
	check "no driver pod came back while drained" no_driver_pod "$node"
else
	echo "  (slice wipe delay $wipe: not waited for)"
fi

# ---- 2. uncordon on request -------------------------------------------------------
echo "- kubectl annotate --overwrite node $node drainer.io/request=uncordon"
: >"$e2e_tmp/slices.watch"
"$KUBECTL" get resourceslices -w -o json --output-watch-events --request-timeout=300s \
	> >(jq --unbuffered -c '{type, node: .object.spec.nodeName, rv: (.object.metadata.resourceVersion | tonumber)}' >>"$e2e_tmp/slices.watch" 2>/dev/null) 2>/dev/null &
sw_pid=$!
e2e_cleanup_hooks+=("kill $sw_pid 2>/dev/null")
sleep 0.5
kubectl annotate --overwrite node "$node" drainer.io/request=uncordon >/dev/null
if ! check "node-1 back in service: driver Running+Ready, slice published, schedulable, no drainer.io annotation (<= 90 s)" \
	wait_until 90 node_restored "$node"; then
	echo "    annotations: $(node_drainer_anns "$node"); unschedulable: $(node_unschedulable "$node")"
	serve_log a 30
fi
sleep 0.5
nodes_watch_stop
kill "$sw_pid" 2>/dev/null
echo "  phases seen: $(phases_seen "$e2e_tmp/drain.watch")"
check_node_invariants "$e2e_tmp/drain.watch" false
check_eq "no drainer.io/ annotation left (the request cleared too)" "{}" "$(node_drainer_anns "$node")"
check "a new driver pod runs on node-1" bash -c "p=\$('$KUBECTL' -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin --field-selector spec.nodeName=$node -o name); [ -n \"\$p\" ] && [ \"\${p#pod/}\" != '${driver_before#*/}' ]"
# The node was made schedulable only after the slice was published again (one
# etcd, so resourceVersions of Nodes and slices are ordered alike).
slice_rv=$(jq -rs --arg n "$node" '[.[] | select(.node == $n and .type == "ADDED") | .rv] | min // empty' "$e2e_tmp/slices.watch")
uncordon_rv=$(jq -rs '[foreach .[] as $v ({prev: false, hit: null}; {prev: $v.unsched, hit: (if .prev and ($v.unsched | not) then $v.rv else null end)}; .hit // empty)] | first // empty' "$e2e_tmp/drain.watch")
if [ -n "$slice_rv" ] && [ -n "$uncordon_rv" ]; then
	check "node-1 uncordoned (rv $uncordon_rv) after its slice was published again (rv $slice_rv)" [ "$uncordon_rv" -gt "$slice_rv" ]
else
	fail "cannot order uncordon (rv '${uncordon_rv}') and slice publication (rv '${slice_rv}')"
fi

# ---- 3. the request removed in wait-released: undo --------------------------------
demo || fail "demo workload"
# A pod held by a finalizer once it is deleted, so that wait-released lasts until the
# test has removed the request (a real kubelet ends the demo's pods at once; a 6 s
# preStop sleep was not always long enough on a loaded machine).
hold_pod_start
driver_uid=$(driver_pods_json "$node" | jq -r '.items[0].metadata.uid')
driver_before=$(driver_pod "$node")
undo_line=$(audit_lines)
nodes_watch_start "$e2e_tmp/undo.watch" "$node"
echo "- kubectl annotate node $node drainer.io/request=drain; removed as soon as the Node says wait-released"
kubectl annotate node "$node" drainer.io/request=drain >/dev/null
if wait_watch "$e2e_tmp/undo.watch" 60 '.state == "wait-released"'; then
	kubectl annotate node "$node" drainer.io/request- >/dev/null
	# The version our patch made (the first without the request) carries the state then.
	wait_watch "$e2e_tmp/undo.watch" 10 '.request == ""' >/dev/null
	check "$hold_pod was still there (deleting) when the request was removed" hold_pod_deleting
	hold_pod_release
	at=$(jq -rs '[foreach .[] as $v ({seen: false, hit: null}; {seen: (.seen or $v.request == "drain"), hit: (if .seen and $v.request == "" then $v.state else null end)}; .hit // empty)] | first // "?"' "$e2e_tmp/undo.watch")
	check_eq "the request was removed while the Node said wait-released" wait-released "$at"
else
	fail "node-1 never showed wait-released; phases: $(phases_seen "$e2e_tmp/undo.watch")"
	serve_log a 30
	kubectl annotate node "$node" drainer.io/request- >/dev/null
	hold_pod_release
fi
if ! check "node-1 back in service after the request was removed (<= 60 s)" wait_until 60 node_restored "$node"; then
	echo "    annotations: $(node_drainer_anns "$node")"
	serve_log a 30
fi
sleep 0.5
nodes_watch_stop
seen=$(phases_seen "$e2e_tmp/undo.watch")
echo "  phases seen: $seen"
check "the drain stopped: neither stop-drivers nor drained was reached" bash -c "! grep -qwE 'stop-drivers|drained' <<<'$seen'"
check "the undo went through restore-drivers or uncordon" bash -c "grep -qwE 'restore-drivers|uncordon' <<<'$seen'"
check_node_invariants "$e2e_tmp/undo.watch" false
check_eq "the driver pod was never touched (same uid)" "$driver_uid" "$(driver_pods_json "$node" | jq -r '.items[0].metadata.uid')"
audit_window "$undo_line" "$e2e_tmp/undo.audit"
check_eq "drainer never evicted or deleted the driver pod" "" \
	"$(drainer_writes "$e2e_tmp/undo.audit" | grep -F " pods" | grep -F "${driver_before}" || true)"
check_eq "no drainer.io/ annotation left" "{}" "$(node_drainer_anns "$node")"
kubectl -n demo delete deployment e2e-hold --wait=false >/dev/null

# ---- 4. per-node scope; $NODE_NAME; the request removed after the drain -----------
echo "- kubectl annotate node $node2 drainer.io/request=drain (only a daemon for $node runs)"
scope_line=$(audit_lines)
kubectl annotate node "$node2" drainer.io/request=drain >/dev/null
sleep 3
audit_window "$scope_line" "$e2e_tmp/scope.audit"
check_eq "the daemon of $node leaves $node2 alone (no drainer request about it in 3 s)" 0 \
	"$(jq --arg n "$node2" '[.[] | select((.userAgent | startswith("drainer/")) and (.requestURI | contains($n)))] | length' "$e2e_tmp/scope.audit")"
check_eq "$node2 has no drainer.io/state" "" "$(node_state "$node2")"
check_eq "$node2 schedulable" false "$(node_unschedulable "$node2")"
b_line=$(audit_lines)
serve_env=(NODE_NAME="$node2")
serve_start b serve --max-parallel 0
serve_env=()
check "NODE_NAME=$node2 drainer serve watches $node2" wait_until 20 watch_opened "$b_line" "metadata.name%3D$node2"
if ! check "$node2 drained on the request made before its daemon started (<= 60 s)" wait_until 60 state_is "$node2" drained; then
	serve_log b 30
fi
check_eq "$node2 unschedulable" true "$(node_unschedulable "$node2")"
check "$node2's driver pod is gone" no_driver_pod "$node2"
echo "- kubectl annotate node $node2 drainer.io/request-   (after the drain)"
kubectl annotate node "$node2" drainer.io/request- >/dev/null
if ! check "$node2 back in service after its request was removed (<= 60 s)" wait_until 60 node_restored "$node2"; then
	echo "    annotations: $(node_drainer_anns "$node2")"
	serve_log b 30
fi
serve_stop b
check_eq "the $node2 daemon exits 0 on SIGTERM" 0 "$serve_rc"

# ---- 5. idle ----------------------------------------------------------------------
sleep 2 # the last writes of the undo settle
check "the $node daemon is still running" serve_alive a
idle_from=$(audit_lines)
idle_t0=$(now_rfc3339)
echo "- idle for $idle_secs s"
sleep "$idle_secs"
idle_t1=$(now_rfc3339)
audit_since "$idle_from" "$e2e_tmp/idle.audit"
n_idle=$(jq '[.[] | select(.userAgent | startswith("drainer/"))] | group_by(.auditID) | length' "$e2e_tmp/idle.audit")
echo "  drainer's requests while idle ($idle_t0 .. $idle_t1): $n_idle"
drainer_request_table "$e2e_tmp/idle.audit" | sed 's/^/    /'
check_eq "idle: every drainer request is a watch on its own Node (metadata.name=$node)" "" \
	"$(jq -r --arg n "$node" '.[] | select(.userAgent | startswith("drainer/"))
		| select((.verb == "watch" and (.requestURI | startswith("/api/v1/nodes?")) and (.requestURI | contains("fieldSelector=metadata.name%3D" + $n))) | not)
		| "\(.verb) \(.requestURI)"' "$e2e_tmp/idle.audit" | sort -u)"
audit_since "$serve_start_line" "$e2e_tmp/all.audit"
open=$(jq -r '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "watch")] | group_by(.auditID)
	| map(select(all(.stage != "ResponseComplete"))) | map(.[0].requestURI | sub("&resourceVersion=[0-9]+"; "") | sub("&timeoutSeconds=[0-9]+"; "")) | .[]' "$e2e_tmp/all.audit")
echo "  drainer's watches open at the end: ${open:-none}"
check_eq "idle: exactly one watch is open, on its own Node" 1 "$(grep -c "fieldSelector=metadata.name%3D$node&" <<<"$open")"
n_open=$(grep -c . <<<"$open")
check_eq "idle: no other watch is open" 1 "$n_open"
if [ "$n_open" != 1 ]; then
	# Whose: a client's Audit-IDs share their first half (kube/client.c), so each open
	# watch is named by the daemon whose own Node watch has the same prefix, with when
	# it was opened.
	jq -r '[.[] | select(.userAgent | startswith("drainer/"))] as $all
		| ($all | map(select(.verb == "watch" and (.requestURI | startswith("/api/v1/nodes?"))))) as $nw
		| ($all | map(select(.verb == "watch")) | group_by(.auditID) | map(select(all(.stage != "ResponseComplete")))
			| .[] | .[0]) as $w
		| ($w.auditID[0:23]) as $p
		| ([$nw[] | select(.auditID[0:23] == $p) | .requestURI | capture("metadata.name%3D(?<n>[^&]+)").n] | first // "?") as $who
		| "    open since \($w.stageTimestamp) (\($w.stage)), Audit-ID \($w.auditID), the daemon watching \($who): \($w.requestURI)"' \
		"$e2e_tmp/all.audit"
	serve_log a 40 'namespaces|pause|informer'
	serve_log b 40 'namespaces|pause|informer|SIGTERM|stopp'
fi

serve_stop a
check_eq "the $node daemon exits 0 on SIGTERM" 0 "$serve_rc"
finish
