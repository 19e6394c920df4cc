#!/usr/bin/env bash
# PodDisruptionBudgets: a PDB that allows no disruption of a
# claim-less pod on node-1 holds its eviction back. `drain --timeout 20s` exits 3
# after about 20 s, naming the PDB and what remained; the audit log shows the
# eviction retried with 429 answers, spaced by a backoff (fewer than 20 tries in
# 20 s); the node stays in a drain phase, cordoned, and its DRA driver is NOT
# stopped (a pod is still there). Once the PDB allows a disruption, a second
# drain resumes from the Node's annotations (same started-at) and finishes.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_pdb() {
	kubectl -n demo delete pdb e2e-budget --wait=false >/dev/null 2>&1
	kubectl -n demo delete deployment e2e-hold --wait=false >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_pdb)

demo || { fail "demo workload"; finish; exit 1; }
pdb_budget_start e2e-budget
hold_pod=$budget_pod
driver=$(driver_pod "$node")
pods_on_node "$node" "$e2e_tmp/pods.json"
classify_pods "$e2e_tmp/pods.json" >"$e2e_tmp/classes.json"
claims_on_node "$node" >"$e2e_tmp/claims.json"
first_line=$(audit_lines)

drainer_run drain1 drain "$node" --timeout 20s -o json
check_rc "drain with a PDB holding a pod back times out" 3 drain1
check "it gave up after about 20 s (19..40 s: $run_secs)" awk -v s="$run_secs" 'BEGIN { exit !(s >= 19 && s <= 40) }'
check_eq "-o json: result" timeout "$(jq -r .result "$e2e_tmp/drain1.out" 2>/dev/null)"
check_eq "-o json: exitCode" 3 "$(jq -r .exitCode "$e2e_tmp/drain1.out" 2>/dev/null)"
cat "$e2e_tmp/drain1.out" "$e2e_tmp/drain1.err" >"$e2e_tmp/drain1.all"
check "drainer names the PDB (e2e-budget)" grep -q 'e2e-budget' "$e2e_tmp/drain1.all"
check "drainer names the pod that remained ($hold_pod)" grep -q "$hold_pod" "$e2e_tmp/drain1.all"
audit_window "$run_start" "$e2e_tmp/audit1.json"
jq_checks --arg pod "$hold_pod" '
	[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .objectRef.name == $pod)] as $e
	| ($e | map(.requestReceivedTimestamp | sub("\\.(?<f>[0-9]+)Z$"; "Z") | fromdateiso8601)) as $s
	| ($e | map(.requestReceivedTimestamp | capture("\\.(?<f>[0-9]+)Z$").f | ("0." + .) | tonumber)) as $f
	| [range(0; $e | length) | $s[.] + $f[.]] as $t
	| [range(1; $t | length) | $t[.] - $t[. - 1]] as $gaps
	| (if ($e | length) >= 2 then "ok the eviction of \($pod) was retried: \($e | length) attempts"
	   else "FAIL \($e | length) eviction attempts for \($pod) in 20 s (want retries)" end),
	  (if ($e | length) < 20 then "ok not hammering: \($e | length) attempts in 20 s (< 20)"
	   else "FAIL \($e | length) eviction attempts in 20 s" end),
	  (if ([$e[] | select(.responseStatus.code != 429)] | length) == 0 then "ok every attempt was answered 429"
	   else "FAIL answers other than 429: \([$e[].responseStatus.code] | unique)" end),
	  (if ($gaps | length) == 0 then empty
	   elif ($gaps | min) >= 0.5 then "ok attempts spaced by at least 0.5 s (gaps \($gaps | map(. * 10 | floor / 10) | join(" ")) s)"
	   else "FAIL attempts closer than 0.5 s (gaps \($gaps | map(. * 100 | floor / 100) | join(" ")) s)" end),
	  (if ($gaps | length) < 3 then empty
	   elif ($gaps[-1] > $gaps[0]) then "ok the backoff grows (first gap \($gaps[0] * 10 | floor / 10) s, last \($gaps[-1] * 10 | floor / 10) s)"
	   else "FAIL no backoff: first gap \($gaps[0]) s, last \($gaps[-1]) s" end)' "$e2e_tmp/audit1.json"
state=$(node_ann "$node" drainer.io/state)
case $state in
cordon | evict-claim-holders | evict-rest | wait-released) pass "node still in a drain phase after the timeout (drainer.io/state=$state)" ;;
*) fail "drainer.io/state after the timeout: expected a drain phase, got [$state]" ;;
esac
check_eq "node still cordoned" true "$(node_unschedulable "$node")"
check_eq "node still tainted" true "$(node_tainted "$node")"
check_eq "the DRA driver was not stopped (same pod, not deleting)" "$driver" "$(driver_pod "$node")"
check_eq "no request for the driver pod" "" "$(drainer_writes "$e2e_tmp/audit1.json" | grep "dra-system/" || true)"
check "the held pod is still on the node" budget_pod_running
started=$(node_ann "$node" drainer.io/started-at)
check "drainer.io/started-at recorded ($started)" [ -n "$started" ]
# Relax the PDB; the second run resumes and finishes.
kubectl -n demo patch pdb e2e-budget --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
pdb_free() { [ "$(kubectl -n demo get pdb e2e-budget -o jsonpath='{.status.disruptionsAllowed}')" -ge 1 ]; }
check "PDB relaxed" wait_until 30 pdb_free
drainer_run drain2 drain "$node" --timeout 60s
check_rc "second drain finishes" 0 drain2
audit_window "$run_start" "$e2e_tmp/audit2.json"
check_eq "drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
check_eq "drainer.io/started-at kept from the first run (resumed, not restarted)" "$started" "$(node_ann "$node" drainer.io/started-at)"
check_eq "drainer.io/was-unschedulable=false kept" false "$(node_ann "$node" drainer.io/was-unschedulable)"
check_eq "the second run evicted only what was left (the held pod) and the driver" \
	"$(printf '%s\n' "demo/$hold_pod" "$driver" | sort)" \
	"$(jq -r '.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .responseStatus.code == 201) | "\(.objectRef.namespace)/\(.objectRef.name)"' "$e2e_tmp/audit2.json" | sort -u)"
# Rule 1 over both runs.
audit_window "$first_line" "$e2e_tmp/audit.json"
check_order "$e2e_tmp/audit.json" "$e2e_tmp/classes.json" "$e2e_tmp/claims.json" "$node"
check_eq "no ResourceClaim on $node" "[]" "$(claims_on_node "$node")"
check "no driver pod on $node" no_driver_pod "$node"

drainer_run uncordon uncordon "$node"
check_rc "uncordon" 0 uncordon
check_eq "node schedulable again" false "$(node_unschedulable "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
finish
