#!/usr/bin/env bash
# kubectl drain's behaviour and habits, against the real control plane.
#
# 1. A namespace being deleted (node-3): its pod is still on the node while the
#    namespace is Terminating (a ValidatingAdmissionPolicy of this test keeps the
#    namespace controller from deleting it for a while). Every eviction is answered
#    403 NamespaceTerminating; drainer retries it (as kubectl's pkg/drain does) and
#    says so on the Node, until the namespace controller deletes the pod, then waits
#    for it and the drain completes (exit 0). From the audit log: only evictions,
#    every one answered 403, retried, no DELETE by drainer; the pod was deleted by the
#    namespace controller (kube-controller-manager).
# 2. Finished pods, and kubectl drain --dry-run=server beside drainer drain
#    --dry-run=server (node-1: the demo workload, plus a finished Job's pod, a bare
#    Succeeded pod, a bare Failed pod, a DaemonSet pod without claims): both send
#    the cordon patch and their evictions with dryRun=All (the audit log: nothing
#    without it, nothing changed); kubectl's evictions are drainer's, and drainer
#    evicts in addition exactly the DRA driver pods it stops on purpose (and the
#    DaemonSet pods holding claims, none here); the lists are printed side by side.
#    Then the real drain, without --force: the finished pods are evicted, and what is
#    left on the node is what kubectl would leave but the driver: DaemonSet and mirror
#    pods.
# 3. kubectl's global flags: --as/--as-group (the audit log shows every request of
#    drainer made as the impersonated user and group), --request-timeout, and bad
#    values of the new flags are exit 2 with nothing sent; --skip-wait-for-delete-timeout
#    (a pod its finalizer holds after the eviction is not waited for past N s).
# 4. -l/--selector over two of the three nodes (node-1 with the demo workload, node-2),
#    node-3 untouched (its Node, its pods, and no request of drainer naming it in the
#    audit log). Bad usage (NODE and -l, a malformed selector) is exit 2 with nothing
#    sent, a selector matching no node exit 1 with only the Node list sent. One node at
#    a time by default: a budget holds node-1 in evict-rest, SIGTERM ends the command
#    (exit 1), node-1 keeps its phase, node-2 was never started; the same command with
#    --max-parallel 2 resumes node-1 where it was (no patch of it back to preflight or
#    cordon) and drains node-2. The audit trail on stdout (not a terminal): its
#    "evicting pod NS/NAME" lines are exactly the evictions the audit log shows accepted
#    (201), each followed by "pod/NAME evicted", and its claim lines name exactly the
#    claims that were on the nodes. uncordon -l --max-parallel 2 -o json: a List of two
#    summaries.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
jqq() { jq -e "$@" >/dev/null; }

# ---- 1. a namespace being deleted ------------------------------------------------
node=node-3
ns=e2e-nsterm
policy=e2e-hold-pod-deletion
kcm_user=system:kube-controller-manager

cleanup_nsterm() {
	kubectl delete validatingadmissionpolicybinding "$policy" --ignore-not-found >/dev/null 2>&1
	kubectl delete validatingadmissionpolicy "$policy" --ignore-not-found >/dev/null 2>&1
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1
	reset_node "$node"
}
e2e_cleanup_hooks+=(cleanup_nsterm)

echo "- 1. a pod whose namespace is being deleted"
check "$node starts clean" reset_node "$node"
audit_ns0=$(audit_lines)
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $ns, labels: {e2e.drainer.io/hold-pod-deletion: "true"}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $policy}
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector: {matchLabels: {e2e.drainer.io/hold-pod-deletion: "true"}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [pods]}
  validations:
  - expression: "request.userInfo.username != '$kcm_user'"
    message: "e2e: the namespace controller may not delete this pod yet"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: $policy}
spec: {policyName: $policy, validationActions: [Deny]}
YAML
wait_until 30 kubectl -n "$ns" get serviceaccount default
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: held, namespace: $ns}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 5
  containers: [{name: c, image: registry.example.com/held:v1}]
YAML
held_phase() { kubectl -n "$ns" get pod held -o jsonpath='{.status.phase}' 2>/dev/null; }
held_running() { [ "$(held_phase)" = Running ]; }
check "the pod runs on $node" wait_until 60 held_running
# The policy is in force once a (server dry run) delete as the controller is denied.
policy_denies() { ! kubectl -n "$ns" delete pod held --as="$kcm_user" --dry-run=server >/dev/null 2>&1; }
check "the policy holds the namespace controller's deletes" wait_until 30 policy_denies
kubectl delete namespace "$ns" --wait=false >/dev/null
ns_terminating() { [ "$(kubectl get namespace "$ns" -o jsonpath='{.status.phase}')" = Terminating ]; }
check "namespace $ns is Terminating" wait_until 30 ns_terminating
held_not_deleting() { [ -z "$(kubectl -n "$ns" get pod held -o jsonpath='{.metadata.deletionTimestamp}')" ]; }
check "... with its pod still there, not marked deleted" held_not_deleting

audit0=$(audit_lines)
(
	DRAINER_RUN_TIMEOUT=85 drainer_run nsterm drain "$node" --force --timeout 80s -o json
	echo "$run_rc" >"$e2e_tmp/nsterm.rc"
) &
drain_job=$!
# Two evictions answered 403 NamespaceTerminating (one retry), seen by the API server.
ns_refusals() {
	tail -n +"$audit0" "$AUDIT" | grep '"userAgent":"drainer/' |
		jq -c --arg ns "$ns" 'select(.stage == "ResponseComplete" and .objectRef.namespace == $ns and .objectRef.subresource == "eviction")' |
		jq -s '[.[] | select(.responseStatus.code == 403 and ((.responseStatus.details.causes // []) | any(.reason == "NamespaceTerminating")))] | length'
}
two_refusals() { [ "$(ns_refusals)" -ge 2 ]; }
check "the eviction was answered 403 NamespaceTerminating and retried" wait_until 40 two_refusals
node_names_held() { node_ann "$node" drainer.io/message | grep -q "namespaces being deleted: $ns/held"; }
check "the Node's drainer.io/message names $ns/held as waited for" wait_until 20 node_names_held
check "the drain is still running (not failed)" kill -0 "$drain_job"
# Let the namespace controller go on; a label change requeues the namespace at once.
kubectl delete validatingadmissionpolicybinding "$policy" >/dev/null
kubectl label namespace "$ns" e2e.drainer.io/poke="$(date +%s)" --overwrite >/dev/null 2>&1
wait "$drain_job"
check_eq "the drain ended with exit 0 (result done)" "0 done" \
	"$(cat "$e2e_tmp/nsterm.rc") $(jq -r .result "$e2e_tmp/nsterm.out" 2>/dev/null)"
check_eq "-o json names the pod it waited for" "[\"$ns/held\"]" \
	"$(jq -c '.waitedForNamespaceDeletion' "$e2e_tmp/nsterm.out" 2>/dev/null)"
audit_window "$audit0" "$e2e_tmp/nsterm.audit"
check_eq "drainer sent only evictions for $ns/held (no DELETE)" "" \
	"$(drainer_writes "$e2e_tmp/nsterm.audit" | grep " $ns/" | grep -v '^create pods/eviction ' || true)"
check "every eviction of $ns/held was answered 403" jqq --arg ns "$ns" \
	'[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.namespace == $ns and .objectRef.subresource == "eviction") | .responseStatus.code] | length >= 2 and all(. == 403)' \
	"$e2e_tmp/nsterm.audit"
audit_window "$audit_ns0" "$e2e_tmp/nsterm-all.audit"
check "the namespace controller deleted the pod (deletecollection, denied while held, then 200)" jqq --arg ns "$ns" --arg u "$kcm_user" \
	'[.[] | select(.user.username == $u and .verb == "deletecollection" and .objectRef.resource == "pods" and .objectRef.namespace == $ns) | .responseStatus.code] | any(. == 422) and any(. == 200)' \
	"$e2e_tmp/nsterm-all.audit"
check_eq "drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
no_held_pod() { ! kubectl -n "$ns" get pod held >/dev/null 2>&1; }
check "the pod is gone" no_held_pod
drainer_run nsterm-uncordon uncordon "$node"
check_rc "uncordon $node" 0 nsterm-uncordon
kubectl delete validatingadmissionpolicy "$policy" >/dev/null

# ---- 2. finished pods; kubectl drain --dry-run=server beside drainer's --------------
echo "- 2. finished pods, and the two server dry runs"
node=node-1
mixed=e2e-mixed
cleanup_mixed() {
	kubectl delete namespace "$mixed" --ignore-not-found --wait=false >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_mixed)
demo || { fail "demo workload"; finish; exit 1; }
kubectl create namespace "$mixed" >/dev/null
wait_until 30 kubectl -n "$mixed" get serviceaccount default
kubectl apply -f - >/dev/null <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: done, namespace: $mixed}
spec:
  template:
    metadata: {annotations: {sim.drainer.io/run-for: 1s}}
    spec:
      restartPolicy: Never
      nodeSelector: {kubernetes.io/hostname: $node}
      containers: [{name: c, image: drainer.test/sleep:dev, args: ["1"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: bare-succeeded, namespace: $mixed, annotations: {sim.drainer.io/run-for: 1s}}
spec:
  restartPolicy: Never
  nodeName: $node
  containers: [{name: c, image: drainer.test/sleep:dev, args: ["1"], volumeMounts: [{name: scratch, mountPath: /scratch}]}]
  volumes: [{name: scratch, emptyDir: {}}]
---
apiVersion: v1
kind: Pod
metadata: {name: bare-failed, namespace: $mixed}
spec:
  restartPolicy: Never
  nodeName: $node
  containers: [{name: c, image: drainer.test/sleep:dev, args: ["not-a-number"]}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: $mixed}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      containers: [{name: c, image: drainer.test/sleep:dev, args: ["3600"]}]
YAML
phase_of() { kubectl -n "$mixed" get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
is_phase() { [ "$(phase_of "$1")" = "$2" ]; }
# (real kubelets: sleep exits 1 on its argument; the simulator runs it forever, so the
# test reports its end as a kubelet would)
if [ "${DRAINER_CLUSTER_NODES:-}" = sim ]; then
	check "bare-failed runs" wait_until 60 is_phase bare-failed Running
	kubectl -n "$mixed" patch pod bare-failed --subresource=status --type=merge -p '{"status":{"phase":"Failed"}}' >/dev/null
fi
check "bare-failed is Failed" wait_until 60 is_phase bare-failed Failed
check "bare-succeeded is Succeeded" wait_until 60 is_phase bare-succeeded Succeeded
job_done() { [ "$(kubectl -n "$mixed" get pods -l job-name=done -o json | jq -r '[.items[].status.phase] | join(" ")')" = Succeeded ]; }
check "the Job's pod is Succeeded" wait_until 60 job_done
agent_runs() { [ "$(kubectl -n "$mixed" get pods -l app=agent -o json | jq -r '[.items[] | select(.status.phase == "Running")] | length')" = 1 ]; }
check "the DaemonSet pod runs" wait_until 60 agent_runs

all_pods() { kubectl get pods -A --field-selector "spec.nodeName=$node" -o json | jq -r '.items[] | select(.metadata.deletionTimestamp == null) | "\(.metadata.namespace)/\(.metadata.name)"' | sort; }
all_pods >"$e2e_tmp/all"
fp=$(node_fingerprint "$node")
uids=$(kubectl get pods -A --field-selector "spec.nodeName=$node" -o json | jq -c '[.items[].metadata.uid] | sort')
audit_k=$(audit_lines)
echo "  \$ kubectl drain $node --dry-run=server --ignore-daemonsets --delete-emptydir-data"
kubectl drain "$node" --dry-run=server --ignore-daemonsets --delete-emptydir-data >"$e2e_tmp/kubectl.out" 2>"$e2e_tmp/kubectl.err"
check_eq "kubectl drain --dry-run=server exits 0" 0 "$?"
drainer_run dryserver drain "$node" --dry-run=server --ignore-daemonsets --delete-emptydir-data
check_rc "drainer drain --dry-run=server --ignore-daemonsets (no --force)" 0 dryserver
evicted_list() { sed -n 's/^evicting pod \([^ ]*\) (server dry run)$/\1/p' "$1" | sort; }
evicted_list "$e2e_tmp/kubectl.out" >"$e2e_tmp/k.evicted"
evicted_list "$e2e_tmp/dryserver.out" >"$e2e_tmp/d.evicted"
comm -23 "$e2e_tmp/all" "$e2e_tmp/k.evicted" >"$e2e_tmp/k.left"
comm -23 "$e2e_tmp/all" "$e2e_tmp/d.evicted" >"$e2e_tmp/d.left"
echo "  pods on $node, and what each server dry run evicts (E) or leaves (-):"
printf '    %-52s %-8s %s\n' "pod" kubectl drainer
while read -r p; do
	printf '    %-52s %-8s %s\n' "$p" "$(grep -qx "$p" "$e2e_tmp/k.evicted" && echo E || echo -)" \
		"$(grep -qx "$p" "$e2e_tmp/d.evicted" && echo E || echo -)"
done <"$e2e_tmp/all"
drivers_on_node=$(driver_pods_json "$node" | jq -r '.items[] | "\(.metadata.namespace)/\(.metadata.name)"' | sort)
check_eq "every pod kubectl evicts, drainer evicts" "" "$(comm -23 "$e2e_tmp/k.evicted" "$e2e_tmp/d.evicted")"
check_eq "drainer evicts in addition exactly the DRA driver pods it stops" "$drivers_on_node" \
	"$(comm -13 "$e2e_tmp/k.evicted" "$e2e_tmp/d.evicted")"
for p in "$mixed/bare-succeeded" "$mixed/bare-failed" "$(kubectl -n "$mixed" get pods -l job-name=done -o name | sed "s|pod/|$mixed/|")"; do
	check "kubectl evicts the finished pod $p" grep -qx "$p" "$e2e_tmp/k.evicted"
	check "... drainer too (without --force)" grep -qx "$p" "$e2e_tmp/d.evicted"
done
check "both leave the DaemonSet pod and the mirror pod" bash -c "grep -q '^$mixed/agent-' '$e2e_tmp/d.left' && grep -q '^$mixed/agent-' '$e2e_tmp/k.left' && grep -q '^demo/node-agent-' '$e2e_tmp/d.left' && grep -q '^demo/node-agent-' '$e2e_tmp/k.left'"
audit_window "$audit_k" "$e2e_tmp/dry.audit"
# Every write of either tool in the window carried dryRun=All (URI or body).
dry_writes() { # USER-AGENT-PREFIX
	jq -r --arg ua "$1" '.[] | select((.userAgent | startswith($ua)) and (.verb == "create" or .verb == "patch" or .verb == "update" or .verb == "delete"))
		| "\(.verb) \(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end) \(.objectRef.name) \(if ((.requestURI | test("dryRun=All")) or ((.requestObject.deleteOptions.dryRun // []) | index("All"))) then "dry" else "REAL" end)"' "$e2e_tmp/dry.audit"
}
dry_writes drainer/ >"$e2e_tmp/d.writes"
dry_writes kubectl/ >"$e2e_tmp/k.writes"
check "drainer: one cordon patch of $node, with dryRun=All" grep -qx "patch nodes $node dry" "$e2e_tmp/d.writes"
check_eq "drainer: an eviction with dryRun=All per pod it lists" "$(wc -l <"$e2e_tmp/d.evicted")" \
	"$(grep -c '^create pods/eviction .* dry$' "$e2e_tmp/d.writes")"
check_eq "drainer: no write without dryRun=All" "" "$(grep ' REAL$' "$e2e_tmp/d.writes" | grep -v '^create events' || true)"
check_eq "kubectl: no write without dryRun=All (the same rule, for the comparison)" "" "$(grep ' REAL$' "$e2e_tmp/k.writes" || true)"
check_eq "nothing changed on the node" "$fp" "$(node_fingerprint "$node")"
check_eq "no pod was evicted" "$uids" "$(kubectl get pods -A --field-selector "spec.nodeName=$node" -o json | jq -c '[.items[].metadata.uid] | sort')"

# The real drain, without --force: the finished pods go; what stays is kubectl's list but the driver.
drainer_run real drain "$node" --delete-emptydir-data --timeout 90s
check_rc "drainer drain $node --delete-emptydir-data (no --force)" 0 real
left_now() { kubectl get pods -A --field-selector "spec.nodeName=$node" -o json | jq -r '.items[] | "\(.metadata.namespace)/\(.metadata.name)"' | sort; }
only_expected_left() { [ "$(left_now)" = "$(grep -vxF "$drivers_on_node" "$e2e_tmp/k.left")" ]; }
check "what is left on $node is what kubectl drain would leave but the driver (DaemonSet and mirror pods)" \
	wait_until 30 only_expected_left
echo "    left: $(left_now | tr '\n' ' ')"
drainer_run real-uncordon uncordon "$node"
check_rc "uncordon $node" 0 real-uncordon

# ---- 3. --as, --as-group, --request-timeout; bad values ---------------------------
echo "- 3. impersonation and the request timeout"
node=node-2
drainer_run as --as e2e-impersonated --as-group system:masters --as-group e2e-group --request-timeout 20s \
	drain "$node" --dry-run=server -o json
check_rc "drainer --as e2e-impersonated --as-group system:masters ... drain $node --dry-run=server" 0 as
check_eq "-o json: dryRun server, ok" "server true" "$(jq -r '"\(.dryRun) \(.ok)"' "$e2e_tmp/as.out" 2>/dev/null)"
audit_window "$run_start" "$e2e_tmp/as.audit"
check "the audit log: every request of drainer was made as e2e-impersonated in groups system:masters, e2e-group" jqq '
	[.[] | select(.userAgent | startswith("drainer/"))] as $d
	| ($d | length) > 0 and all($d[]; .impersonatedUser.username == "e2e-impersonated"
		and ((.impersonatedUser.groups // []) | index("system:masters") and index("e2e-group")))' "$e2e_tmp/as.audit"
check "... including its dryRun=All cordon patch" jqq --arg n "$node" \
	'any(.[]; .verb == "patch" and .objectRef.name == $n and (.requestURI | test("dryRun=All")) and .impersonatedUser.username == "e2e-impersonated")' \
	"$e2e_tmp/as.audit"
drainer_run as-denied --as e2e-nobody status "$node"
check "impersonating a user without rights is refused by the API server (named in the error)" \
	grep -q 'e2e-nobody' "$e2e_tmp/as-denied.err"
for bad in "--as-group g" "--request-timeout 5x" "--dry-run=maybe" "--ignore-daemonsets=false" "--skip-wait-for-delete-timeout -1"; do
	tag=bad-$(echo "$bad" | tr -c 'a-z0-9' -)
	# shellcheck disable=SC2086
	drainer_run "$tag" drain "$node" $bad
	check_rc "drain $node $bad: bad usage" 2 "$tag"
	audit_window "$run_start" "$e2e_tmp/$tag.audit"
	check_eq "drain $node $bad: nothing sent" 0 "$(drainer_requests "$e2e_tmp/$tag.audit" 2>/dev/null || echo 0)"
done
check_eq "$node untouched by all this" "{}" "$(node_drainer_anns "$node")"
check_eq "$node schedulable" false "$(node_unschedulable "$node")"

# --skip-wait-for-delete-timeout: a pod held by a finalizer after its eviction is not
# waited for once deleted longer than N s ago (claim holders always are: unit test).
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: e2e-finalized, namespace: default, finalizers: [e2e.drainer.io/hold]}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: drainer.test/sleep:dev, args: ["3600"]}]
YAML
e2e_cleanup_hooks+=("finalizers_clear default e2e-finalized")
fin_running() { [ "$(kubectl -n default get pod e2e-finalized -o jsonpath='{.status.phase}')" = Running ]; }
check "a pod with a finalizer runs on $node" wait_until 60 fin_running
drainer_run skipwait drain "$node" --force --timeout 60s --skip-wait-for-delete-timeout 3
check_rc "drain $node --force --skip-wait-for-delete-timeout 3 completes past the pod its finalizer holds" 0 skipwait
check "... the pod is still there, deleting (its finalizer holds it)" bash -c "[ -n \"\$('$KUBECTL' -n default get pod e2e-finalized -o jsonpath='{.metadata.deletionTimestamp}')\" ]"
check_eq "... $node drained" drained "$(node_ann "$node" drainer.io/state)"
finalizers_clear default e2e-finalized
drainer_run skipwait-uncordon uncordon "$node"
check_rc "uncordon $node" 0 skipwait-uncordon

# ---- 4. -l/--selector; the audit trail ---------------------------------------------
echo "- 4. -l/--selector over two of three nodes; an interrupted run resumed per node; the audit trail"
sel_key=e2e.drainer.io/batch
sel="$sel_key=e2e-sel"
cleanup_sel() {
	kubectl label node node-1 node-2 node-3 "$sel_key-" >/dev/null 2>&1
	kubectl -n default delete pdb e2e-sel-hold --ignore-not-found >/dev/null 2>&1
	kubectl -n default delete deployment e2e-sel-hold --ignore-not-found >/dev/null 2>&1
	reset_node node-1
	reset_node node-2
}
e2e_cleanup_hooks+=(cleanup_sel)
demo || fail "demo workload"
check "node-1 starts clean" reset_node node-1
check "node-2 starts clean" reset_node node-2
kubectl label node node-1 node-2 "$sel" --overwrite >/dev/null
fp3=$(node_fingerprint node-3)
pods3() { kubectl get pods -A --field-selector spec.nodeName=node-3 -o json | jq -c '[.items[] | {ns: .metadata.namespace, name: .metadata.name, uid: .metadata.uid}] | sort'; }
pods3_0=$(pods3)
fp2=$(node_fingerprint node-2)
claims0=$( { claims_on_node node-1; claims_on_node node-2; } | jq -rs 'add | .[] | "\(.ns)/\(.name)"' | sort)

drainer_run sel-both drain node-1 -l "$sel"
check_rc "drain NODE -l SELECTOR: bad usage" 2 sel-both
drainer_run sel-bad drain -l "$sel_key in (e2e-sel"
check_rc "drain -l 'a malformed selector': bad usage" 2 sel-bad
audit_window "$run_start" "$e2e_tmp/sel-bad.audit"
check_eq "... nothing sent" 0 "$(drainer_requests "$e2e_tmp/sel-bad.audit" 2>/dev/null || echo 0)"
drainer_run sel-none drain -l "$sel_key=no-such-batch"
check_rc "drain -l matching no node" 1 sel-none
check "... says No resources found" grep -q 'No resources found: no node matches the label selector' "$e2e_tmp/sel-none.err"
audit_window "$run_start" "$e2e_tmp/sel-none.audit"
check_eq "... its only request: the Node list with that labelSelector" "list nodes labelSelector=e2e.drainer.io%2Fbatch%3Dno-such-batch" \
	"$(jq -r '.[] | select(.userAgent | startswith("drainer/")) | "\(.verb) \(.objectRef.resource) \(.requestURI | capture("(?<q>labelSelector=[^&]*)").q)"' "$e2e_tmp/sel-none.audit")"

# A budget that allows no disruption holds node-1 in evict-rest.
{ pdb default e2e-sel-hold e2e-sel-hold maxUnavailable 0; cat <<YAML; } | kubectl apply -f - >/dev/null
apiVersion: apps/v1
kind: Deployment
metadata: {name: e2e-sel-hold, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: e2e-sel-hold}}
  template:
    metadata: {labels: {app: e2e-sel-hold}}
    spec:
      nodeSelector: {kubernetes.io/hostname: node-1}
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: drainer.test/sleep:dev, args: ["3600"]}]
YAML
hold_runs() { [ "$(kubectl -n default get pods -l app=e2e-sel-hold -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 1 ]; }
check "a pod under a budget of maxUnavailable 0 runs on node-1" wait_until 60 hold_runs
audit_sel1=$(audit_lines)
echo "  \$ drainer drain -l $sel --force --timeout 120s   (SIGTERM once node-1 is held in evict-rest)"
"$DRAINER" drain -l "$sel" --force --timeout 120s >"$e2e_tmp/sel1.out" 2>"$e2e_tmp/sel1.err" &
sel_pid=$!
track_pid "$sel_pid"
hold_429() {
	tail -n +"$audit_sel1" "$AUDIT" | grep '"userAgent":"drainer/' | jq -se 'any(.[]; .stage == "ResponseComplete" and .objectRef.subresource == "eviction"
		and (.objectRef.name | startswith("e2e-sel-hold-")) and .responseStatus.code == 429)' >/dev/null 2>&1
}
held_in_evict_rest() { state_is node-1 evict-rest && hold_429; }
check "node-1 is held in evict-rest by the budget (its eviction answered 429)" wait_until 60 held_in_evict_rest
check "... its claims released meanwhile" wait_until 60 no_claims_on_node node-1
check_eq "node-2 not started yet (one node at a time)" "$fp2" "$(node_fingerprint node-2)"
kill -TERM "$sel_pid"
wait "$sel_pid"
sel_rc=$?
untrack_pid "$sel_pid"
check_eq "SIGTERM: the command exits 143 (interrupted: 128 + SIGTERM)" 143 "$sel_rc"
check "... node-1 named as interrupted, node-2 as not started" bash -c "grep -q 'interrupted: the state is on node node-1' '$e2e_tmp/sel1.err' && grep -q 'of node node-2: not started' '$e2e_tmp/sel1.err'"
check_eq "node-1 keeps its phase (evict-rest), cordoned" "evict-rest true" "$(node_state node-1) $(node_unschedulable node-1)"
check_eq "node-2 untouched" "$fp2" "$(node_fingerprint node-2)"
audit_sel2=$(audit_lines)
kubectl -n default delete pdb e2e-sel-hold >/dev/null
# The phases each Node goes through in the second run, from watches of the two Nodes.
node_watch_start node-2 "$e2e_tmp/sel2-node2.watch"
w2_pid=$nw_pid
node_watch_start node-1 "$e2e_tmp/sel2-node1.watch"
drainer_run sel2 drain -l "$sel" --force --timeout 120s --max-parallel 2
check_rc "the same command again, --max-parallel 2: both nodes drained" 0 sel2
check_eq "drainer.io/state=drained on node-1 and node-2" "drained drained" "$(node_state node-1) $(node_state node-2)"
sleep 0.5
node_watch_stop
nw_pid=$w2_pid nw_file=$e2e_tmp/sel2-node2.watch node_watch_stop
sel_p1="$(jq -rs '.[0].state' "$e2e_tmp/sel2-node1.watch"): $(phases_entered "$e2e_tmp/sel2-node1.watch")"
echo "    node-1: $sel_p1; node-2: $(phases_entered "$e2e_tmp/sel2-node2.watch")"
check "node-1 resumed from evict-rest (no earlier phase entered again), to drained" \
	bash -c "[[ '$sel_p1' == 'evict-rest: '*' drained' ]] && ! [[ '$sel_p1' =~ (preflight|cordon|evict-claim-holders) ]]"
check "node-2 drained from the start, on its own state (evict-claim-holders, with the cordon, ... drained)" \
	bash -c "[[ '$(phases_entered "$e2e_tmp/sel2-node2.watch")' =~ ^evict-claim-holders\ .*drained$ ]]"
audit_window "$audit_sel2" "$e2e_tmp/sel2.audit"
audit_window "$audit_sel1" "$e2e_tmp/sel-all.audit"
check_eq "node-3: its Node unchanged" "$fp3" "$(node_fingerprint node-3)"
check_eq "node-3: its pods are all still there (the evicted ones may come to it)" "$pods3_0" \
	"$(pods3 | jq -c --argjson p "$pods3_0" '[.[] | select(. as $x | $p | index($x))]')"
check_eq "node-3: no request of drainer names it or one of its pods" "" \
	"$(jq -r --argjson p "$pods3_0" '.[] | select(.userAgent | startswith("drainer/")) | select(.objectRef.name == "node-3" or (.objectRef.name as $n | .objectRef.namespace as $s | $p | any(.name == $n and .ns == $s)) or (.requestURI | test("node-3"))) | .requestURI' "$e2e_tmp/sel-all.audit")"
# The audit trail of the two runs (stdout, not a terminal) against the audit log.
cat "$e2e_tmp/sel1.out" "$e2e_tmp/sel2.out" >"$e2e_tmp/sel.trail"
sed -n 's|^evicting pod \([^ ]*\)$|\1|p' "$e2e_tmp/sel.trail" | sort >"$e2e_tmp/sel.evicting"
jq -r '.[] | select((.userAgent | startswith("drainer/")) and .verb == "create" and .objectRef.subresource == "eviction" and .responseStatus.code == 201) | "\(.objectRef.namespace)/\(.objectRef.name)"' \
	"$e2e_tmp/sel-all.audit" | sort >"$e2e_tmp/sel.accepted"
check "the trail has evictions" test -s "$e2e_tmp/sel.evicting"
check_eq "trail: one \"evicting pod NS/NAME\" per eviction the audit log shows accepted (201)" \
	"$(cat "$e2e_tmp/sel.accepted")" "$(cat "$e2e_tmp/sel.evicting")"
# "pod/NAME evicted": for each pod the run saw go (a pod the interrupted run evicted may
# go while no drainer runs: the rerun did not evict it, and says nothing of it).
evicting_names() { sed -n 's|^evicting pod [^/]*/\([^ ]*\)$|\1|p' "$1" | sort; }
gone_names() { sed -n 's|^pod/\([^ ]*\) evicted$|\1|p' "$1" | sort; }
check_eq "trail of the completed run: \"pod/NAME evicted\" for each pod it evicted" \
	"$(evicting_names "$e2e_tmp/sel2.out")" "$(gone_names "$e2e_tmp/sel2.out")"
check_eq "trail of the interrupted run: \"pod/NAME evicted\" only for pods it evicted" "" \
	"$(comm -13 <(evicting_names "$e2e_tmp/sel1.out") <(gone_names "$e2e_tmp/sel1.out"))"
check_eq "trail: one \"resourceclaim NS/NAME released\" per claim that was on node-1 or node-2" "$claims0" \
	"$(sed -n 's|^resourceclaim \([^ ]*\) released from node/node-[12]$|\1|p' "$e2e_tmp/sel.trail" | sort)"
check_eq "trail of the completed run: \"node/N drained\" for node-1 and node-2 (kubectl drain's last line)" \
	"$(printf 'node/node-1 drained\nnode/node-2 drained')" "$(grep -E '^node/[^ ]+ drained$' "$e2e_tmp/sel2.out" | sort)"
check_eq "trail: no other line (but kubectl drain's \"node/N cordoned\", \"node/N drained\")" "" "$(grep -Ev '^(evicting pod [^ ]+|pod/[^ ]+ evicted|resourceclaim [^ ]+ released from node/node-[12]|node/node-[12] (cordoned|drained))$' "$e2e_tmp/sel.trail" || true)"
echo "    trail: $(wc -l <"$e2e_tmp/sel.trail") lines, $(wc -l <"$e2e_tmp/sel.accepted") evictions accepted in the audit log"
drainer_run sel-undo uncordon -l "$sel" --max-parallel 2 -o json
check_rc "uncordon -l --max-parallel 2" 0 sel-undo
check "-o json: a List (schemaVersion 1) of the two nodes' summaries, both done" jqq \
	'.schemaVersion == 1 and .kind == "List" and .exitCode == 0 and ([.items[] | "\(.node) \(.result) \(.exitCode)"] == ["node-1 done 0", "node-2 done 0"]) and (has("metrics") | not)' \
	"$e2e_tmp/sel-undo.out"
check_eq "node-1 and node-2 schedulable, no drainer annotations" "false {} false {}" \
	"$(node_unschedulable node-1) $(node_drainer_anns node-1) $(node_unschedulable node-2) $(node_drainer_anns node-2)"
check_eq "node-3 still untouched" "$fp3" "$(node_fingerprint node-3)"
kubectl -n default delete deployment e2e-sel-hold >/dev/null
kubectl label node node-1 node-2 "$sel_key-" >/dev/null

finish
