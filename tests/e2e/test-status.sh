#!/usr/bin/env bash
# drainer status NODE against the real control plane with the demo workload on
# node-1: the pods and ResourceClaims it reports are the ones the API server
# holds (classified by the DESIGN.md rules, computed here independently with
# jq over kubectl's JSON), bad input gets the documented exit codes, and every
# request drainer made was a read.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$e2e_root/tests/cluster/demo" >/dev/null || { fail "demo workload"; finish; exit 1; }
start_line=$(audit_lines)

out=$e2e_tmp/status.json
"$DRAINER" status node-1 -o json >"$out"
check_eq "status exits 0" 0 $?
kubectl get pods -A --field-selector spec.nodeName=node-1 -o json >"$e2e_tmp/pods.json"
kubectl get resourceclaims -A -o json >"$e2e_tmp/claims.json"

# Every pod on the node is reported exactly once.
want=$(jq -r '.items[] | "\(.metadata.namespace)/\(.metadata.name)"' "$e2e_tmp/pods.json" | sort)
got=$(jq -r '.pods[][] | "\(.namespace)/\(.name)"' "$out" | sort)
check_eq "pods reported = pods on node-1 per the API server" "$want" "$got"
check "demo workload has pods on node-1" [ "$(echo "$want" | grep -c .)" -ge 8 ]

# Claim holders: pods with spec.resourceClaims whose claim exists (name or generated).
want=$(jq -r '.items[] | select(.metadata.labels["app.kubernetes.io/component"] != "kubeletplugin")
	| select(.status.phase != "Succeeded" and .status.phase != "Failed")
	| select(((.spec.resourceClaims // []) | map(select(.resourceClaimName != null)) | length) > 0
	         or ((.status.resourceClaimStatuses // []) | map(select(.resourceClaimName != null)) | length) > 0
	         or .status.extendedResourceClaimStatus != null)
	| "\(.metadata.namespace)/\(.metadata.name)"' "$e2e_tmp/pods.json" | sort)
got=$(jq -r '.pods.claimHolders[] | "\(.namespace)/\(.name)"' "$out" | sort)
check_eq "claim holders" "$want" "$got"
check "at least 3 claim holders in the demo" [ "$(echo "$got" | grep -c .)" -ge 3 ]

want=$(jq -r '.items[] | select(.metadata.annotations["kubernetes.io/config.mirror"] != null) | "\(.metadata.namespace)/\(.metadata.name)"' "$e2e_tmp/pods.json" | sort)
got=$(jq -r '.pods.mirror[] | "\(.namespace)/\(.name)"' "$out" | sort)
check_eq "mirror pods" "$want" "$got"
check "the demo has a mirror pod" [ -n "$got" ]

want=$(jq -r '.items[] | select(.metadata.labels["app.kubernetes.io/component"] == "kubeletplugin") | "\(.metadata.namespace)/\(.metadata.name)"' "$e2e_tmp/pods.json" | sort)
got=$(jq -r '.pods.driver[] | "\(.namespace)/\(.name)"' "$out" | sort)
check_eq "DRA driver pods" "$want" "$got"
check "one driver pod" [ "$(echo "$got" | grep -c .)" = 1 ]

# Claims on the node: reserved for a pod of node-1, or allocated with the node-local selector.
uids=$(jq -c '[.items[].metadata.uid]' "$e2e_tmp/pods.json")
want=$(jq -r --argjson uids "$uids" '.items[]
	| select(((.status.reservedFor // []) | map(.uid) | any(. as $u | $uids | index($u))) or
	         ((.status.allocation.nodeSelector.nodeSelectorTerms // [])
	           | (length == 1 and (.[0].matchFields // []) == [{"key":"metadata.name","operator":"In","values":["node-1"]}])))
	| "\(.metadata.namespace)/\(.metadata.name)"' "$e2e_tmp/claims.json" | sort)
got=$(jq -r '.claims[] | "\(.namespace)/\(.name)"' "$out" | sort)
check_eq "claims on node-1" "$want" "$got"
check "the shared claim is reported with two reservations" \
	[ "$(jq '[.claims[] | select((.reservedFor | length) == 2)] | length' "$out")" -ge 1 ]
want=$(jq -r '[.items[] | select(.status.allocation != null) | .status.allocation.devices.results[] | select(.pool == "node-1") | .device] | sort | join(",")' "$e2e_tmp/claims.json")
got=$(jq -r '[.claims[].devices[].device] | sort | join(",")' "$out")
check_eq "devices of the claims on node-1" "$want" "$got"

# Node and slices.
check_eq "node schedulable" false "$(jq -r .node.unschedulable "$out")"
check_eq "slice of node-1" "node-1" "$(jq -r '.resourceSlices[0].pool' "$out")"

# The text form names the same claims.
"$DRAINER" status node-1 >"$e2e_tmp/status.txt"
check "text output lists every claim" bash -c "jq -r '.claims[].name' '$out' | while read -r c; do grep -q \"/\$c \" '$e2e_tmp/status.txt' || exit 1; done"

# A value anyone who may patch the Node can write (a node's token can: the node policy
# admits drainer.io/message): clear-screen, a window-title OSC ended by BEL, a CR that
# would overwrite the line, the C1 CSI. The text output shows them escaped, and carries
# no control character but newlines; -o json keeps the value as it is.
msg=$'took over\e[2J\e]0;owned\a\rcheck \xc2\x9b31m done'
kubectl annotate node node-1 --overwrite "drainer.io/message=$msg" >/dev/null
"$DRAINER" status node-1 >"$e2e_tmp/status-ctl.txt"
check_eq "status with a hostile message exits 0" 0 $?
check "text output has no control character but newlines" \
	bash -c "! LC_ALL=C grep -q \$'[\x01-\x09\x0b-\x1f\x7f]\\|\xc2[\x80-\x9f]' '$e2e_tmp/status-ctl.txt'"
check "the message is shown with its escapes visible" \
	grep -qF 'drainer.io/message: took over\x1b[2J\x1b]0;owned\x07\x0dcheck \u009b31m done' "$e2e_tmp/status-ctl.txt"
"$DRAINER" status node-1 -o json >"$e2e_tmp/status-ctl.json"
check_eq "-o json keeps the value as the API holds it" "$msg" \
	"$(jq -r '.node.drainerAnnotations["drainer.io/message"] // empty' "$e2e_tmp/status-ctl.json")"
kubectl annotate node node-1 drainer.io/message- >/dev/null

# A Node whose status holds a lifecycle condition twice (anyone who may patch
# nodes/status can write that; the node policy admits a node's token to): drainer
# reads it like any other Node, it does not abort (it did, with exit 134).
dup_cond='{"type":"DrainInProgress","status":"True","reason":"Drainer","message":"e2e duplicate",'
dup_cond+='"lastTransitionTime":"2026-01-01T00:00:00Z","lastHeartbeatTime":"2026-01-01T00:00:00Z"}'
drop_dup_conditions() { # removes the DrainInProgress entries of node-2's status, last first
	local i ops
	ops=$(kubectl get node node-2 -o json | jq -c '[.status.conditions | to_entries[]
		| select(.value.type == "DrainInProgress") | .key] | reverse
		| map({op: "test", path: "/status/conditions/\(.)/type", value: "DrainInProgress"},
		      {op: "remove", path: "/status/conditions/\(.)"})')
	[ "$ops" = "[]" ] || kubectl patch node node-2 --subresource=status --type=json -p "$ops" >/dev/null
}
e2e_cleanup_hooks+=(drop_dup_conditions)
kubectl patch node node-2 --subresource=status --type=json \
	-p "[{\"op\":\"add\",\"path\":\"/status/conditions/-\",\"value\":$dup_cond},{\"op\":\"add\",\"path\":\"/status/conditions/-\",\"value\":$dup_cond}]" >/dev/null
check_eq "node-2 holds DrainInProgress twice" 2 \
	"$(kubectl get node node-2 -o json | jq '[.status.conditions[] | select(.type == "DrainInProgress")] | length')"
"$DRAINER" status node-2 >"$e2e_tmp/status-dup.txt" 2>&1
check_eq "status of a Node with a condition twice exits 0" 0 $?
"$DRAINER" status node-2 -o json >"$e2e_tmp/status-dup.json" 2>/dev/null
check_eq "... and -o json names it" node-2 "$(jq -r '.node.name // empty' "$e2e_tmp/status-dup.json" 2>/dev/null)"
drop_dup_conditions

# Bad input: documented exit codes and a one-line message.
"$DRAINER" status no-such-node >/dev/null 2>"$e2e_tmp/err"
check_eq "unknown node exits 8 (the node does not exist)" 8 $?
check "unknown node is named" grep -q 'node "no-such-node" not found' "$e2e_tmp/err"
"$DRAINER" status >/dev/null 2>&1
check_eq "missing NODE exits 2" 2 $?
"$DRAINER" status node-1 --bogus >/dev/null 2>&1
check_eq "unknown flag exits 2" 2 $?
"$DRAINER" status node-1 --driver-selector 'a in (' >/dev/null 2>&1
check_eq "bad selector exits 2" 2 $?
"$DRAINER" --context nope status node-1 >/dev/null 2>"$e2e_tmp/err"
check_eq "unknown context exits 9 (the kubeconfig is invalid)" 9 $?
check "unknown context is named" grep -q nope "$e2e_tmp/err"
env -u NODE_NAME "$DRAINER" serve >/dev/null 2>"$e2e_tmp/err"
check_eq "serve without a node exits 2" 2 $?

# Every request drainer made was a read, and no token reached its output.
sleep 1
verbs=$(tail -n +"$((start_line + 1))" "$AUDIT" | grep '"userAgent":"drainer/' | jq -r .verb | sort -u | tr '\n' ' ')
check_eq "drainer only read (audit log verbs)" "get list " "$verbs"
token=$(sed -n 's/^\([^,]*\),admin,.*/\1/p' "$DRAINER_CLUSTER_DIR/pki/tokens.csv" 2>/dev/null)
if [ -n "$token" ]; then
	"$DRAINER" -vv status node-1 -o json >"$e2e_tmp/all" 2>&1
	check "the bearer token never appears in -vv output" bash -c "! grep -qF '$token' '$e2e_tmp/all'"
fi
finish
