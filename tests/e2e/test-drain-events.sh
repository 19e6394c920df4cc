#!/usr/bin/env bash
# Events: what an admin acts on
# posts an Event on the Node (namespace default, involvedObject the Node), so
# `kubectl describe node` tells the story: one DrainerPhase (Normal) when a drain
# starts and one when a restore starts (not one per phase), DrainerDone (Normal)
# at the end of drain and of uncordon, DrainerBlocked (Warning) naming the blocker
# on a preflight refusal, DrainerFailed (Warning) naming what remained on a
# timeout. And the Node writes are coalesced: every patch of drainer's enters a
# phase or writes a progress message (the driver-stop record goes with stop-drivers,
# the taint's removal with restore-drivers), from the audit log.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_events() {
	kubectl -n demo delete pod e2e-bare --wait=false >/dev/null 2>&1
	kubectl -n demo delete pdb e2e-hold >/dev/null 2>&1
	kubectl -n demo delete deployment e2e-hold --wait=false >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_events)

demo || { fail "demo workload"; finish; exit 1; }
uid=$(kubectl get node "$node" -o jsonpath='{.metadata.uid}')
ev=$e2e_tmp/events.json
show_events() { jq -r '.[] | "    event: \(.type) \(.reason) x\(.count): \(.message)"' "$ev"; }
# count_events REASON [TYPE]: how many times (sum of counts) REASON was reported.
count_events() { jq --arg r "$1" --arg t "${2:-}" '[.[] | select(.reason == $r and ($t == "" or .type == $t)) | .count] | add // 0' "$ev"; }

# 1. A preflight refusal: DrainerBlocked, naming the blocker.
kubectl apply -f "$e2e_root/tests/e2e/fixtures/bare-pod.yaml" >/dev/null
bare_running() { [ "$(kubectl -n demo get pod e2e-bare -o jsonpath='{.status.phase}')" = Running ]; }
check "bare pod runs" wait_until 30 bare_running
delete_node_events "$node"
drainer_run blocked drain "$node"
check_rc "drain refused by preflight" 4 blocked
node_events "$node" "$ev"
show_events
check_eq "one DrainerBlocked Warning" 1 "$(count_events DrainerBlocked Warning)"
check "DrainerBlocked names the pod e2e-bare" jq_true 'any(.[]; .reason == "DrainerBlocked" and (.message | test("e2e-bare")))' "$ev"
check_eq "no DrainerPhase on a refusal (nothing changed)" 0 "$(count_events DrainerPhase)"
check_eq "the Events are about this Node (uid)" "$uid" "$(jq -r '[.[].uid] | unique | join(",")' "$ev")"
kubectl -n demo delete pod e2e-bare --wait=true --timeout=30s >/dev/null

# node_patches FILE: drainer's accepted patches of $node in an audit window file.
node_patches() {
	jq --arg n "$node" '[.[] | select(.verb == "patch" and .objectRef.resource == "nodes" and .objectRef.name == $n
		and .objectRef.subresource == null and (.userAgent | startswith("drainer/")) and .responseStatus.code == 200)] | length' "$1"
}

# 2. A drain: one DrainerPhase when it starts, then DrainerDone.
delete_node_events "$node"
node_watch_start "$node" "$e2e_tmp/watch.jsonl"
first=$(audit_lines)
drainer_run drain drain "$node" --timeout 90s
check_rc "drain" 0 drain
sleep 1
node_watch_stop
phases=$(phases_entered "$e2e_tmp/watch.jsonl")
echo "  phases entered, seen by a watch on the Node: $phases"
node_events "$node" "$ev"
show_events
nphases=$(echo "$phases" | wc -w)
check "drain: the Node watch saw the phases of a drain" [ "$nphases" -ge 5 ]
check_eq "drain: one DrainerPhase (Normal), for its start, whatever the $nphases phases entered ($phases)" 1 "$(count_events DrainerPhase Normal)"
check "drain: it says the drain started" jq_true 'any(.[]; .reason == "DrainerPhase" and (.message | startswith("drain started: cordoned")))' "$ev"
check_eq "drain: one DrainerDone (Normal)" 1 "$(count_events DrainerDone Normal)"
audit_window "$first" "$e2e_tmp/drain.audit"
msgs=$(message_writes "$e2e_tmp/watch.jsonl")
check_eq "drain: drainer's Node patches = the $nphases phases entered + $msgs progress messages (the driver-stop record goes with stop-drivers)" \
	$((nphases + msgs)) "$(node_patches "$e2e_tmp/drain.audit")"
check_eq "drain: no Warning" 0 "$(jq '[.[] | select(.type == "Warning")] | length' "$ev")"
# (a real kubelet reports NodeNotSchedulable/NodeSchedulable about its Node too)
check "drain: the Drainer* Events reported by drainer" jq_true '[.[] | select(.reason | startswith("Drainer"))] | length > 0 and all(.[]; .component | test("drainer"))' "$ev"
kubectl describe node "$node" >"$e2e_tmp/describe.txt"
check "kubectl describe node shows DrainerPhase" grep -q DrainerPhase "$e2e_tmp/describe.txt"
check "kubectl describe node shows DrainerDone" grep -q DrainerDone "$e2e_tmp/describe.txt"

# 3. uncordon: one DrainerPhase when the restore starts, then DrainerDone.
delete_node_events "$node"
node_watch_start "$node" "$e2e_tmp/watch-u.jsonl"
first=$(audit_lines)
drainer_run uncordon uncordon "$node"
check_rc "uncordon" 0 uncordon
sleep 1
node_watch_stop
phases=$(phases_entered "$e2e_tmp/watch-u.jsonl")
echo "  phases entered, seen by a watch on the Node: $phases"
node_events "$node" "$ev"
show_events
nphases=$(echo "$phases" | wc -w)
check "uncordon: the watch saw restore-drivers" grep -qw restore-drivers <<<"$phases"
check_eq "uncordon: one DrainerPhase, for its start ($phases)" 1 "$(count_events DrainerPhase Normal)"
check "uncordon: it says the restore started" jq_true 'any(.[]; .reason == "DrainerPhase" and (.message | startswith("restore started: ")))' "$ev"
check_eq "uncordon: one DrainerDone" 1 "$(count_events DrainerDone Normal)"
audit_window "$first" "$e2e_tmp/uncordon.audit"
msgs=$(message_writes "$e2e_tmp/watch-u.jsonl")
check_eq "uncordon: drainer's Node patches = the $nphases phases entered + the end + $msgs progress messages (the taint's removal goes with restore-drivers)" \
	$((nphases + 1 + msgs)) "$(node_patches "$e2e_tmp/uncordon.audit")"

# 4. A timeout: DrainerFailed (Warning) naming what remained.
demo || fail "demo workload restored"
kubectl apply -f "$e2e_root/tests/e2e/fixtures/hold-deployment.yaml" >/dev/null
pdb demo e2e-hold e2e-hold minAvailable 1 | kubectl apply -f - >/dev/null
pdb_settled() { [ "$(kubectl -n demo get pdb e2e-hold -o jsonpath='{.status.currentHealthy}/{.status.disruptionsAllowed}')" = 1/0 ]; }
check "PDB e2e-hold allows 0 disruptions" wait_until 60 pdb_settled
hold_pod=$(kubectl -n demo get pods -l app=e2e-hold -o jsonpath='{.items[0].metadata.name}')
delete_node_events "$node"
drainer_run timeout drain "$node" --timeout 8s
check_rc "drain held back by a PDB times out" 3 timeout
node_events "$node" "$ev"
show_events
check_eq "one DrainerFailed (Warning)" 1 "$(count_events DrainerFailed Warning)"
check "DrainerFailed names the pod that remained ($hold_pod)" \
	jq_true --arg p "$hold_pod" 'any(.[]; .reason == "DrainerFailed" and (.message | test($p)))' "$ev"
check_eq "no DrainerDone after a timeout" 0 "$(count_events DrainerDone)"
kubectl -n demo delete pdb e2e-hold >/dev/null
kubectl -n demo delete deployment e2e-hold >/dev/null
drainer_run finish drain "$node" --timeout 60s
check_rc "the drain finishes once the PDB is gone" 0 finish
drainer_run uncordon2 uncordon "$node"
check_rc "uncordon" 0 uncordon2
finish
