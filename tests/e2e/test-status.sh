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

# Bad input: documented exit codes and a one-line message.
"$DRAINER" status no-such-node >/dev/null 2>"$e2e_tmp/err"
check_eq "unknown node exits 1" 1 $?
check "unknown node is named" grep -q 'node "no-such-node" not found' "$e2e_tmp/err"
"$DRAINER" status >/dev/null 2>&1
check_eq "missing NODE exits 2" 2 $?
"$DRAINER" status node-1 --bogus >/dev/null 2>&1
check_eq "unknown flag exits 2" 2 $?
"$DRAINER" status node-1 --driver-selector 'a in (' >/dev/null 2>&1
check_eq "bad selector exits 2" 2 $?
"$DRAINER" --context nope status node-1 >/dev/null 2>"$e2e_tmp/err"
check_eq "unknown context exits 1" 1 $?
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
