#!/usr/bin/env bash
# Issue 16: kubectl drain's behaviour and habits, against the real control plane.
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
e2e_cleanup_hooks+=("kubectl -n default patch pod e2e-finalized --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]' >/dev/null 2>&1")
fin_running() { [ "$(kubectl -n default get pod e2e-finalized -o jsonpath='{.status.phase}')" = Running ]; }
check "a pod with a finalizer runs on $node" wait_until 60 fin_running
drainer_run skipwait drain "$node" --force --timeout 60s --skip-wait-for-delete-timeout 3
check_rc "drain $node --force --skip-wait-for-delete-timeout 3 completes past the pod its finalizer holds" 0 skipwait
check "... the pod is still there, deleting (its finalizer holds it)" bash -c "[ -n \"\$('$KUBECTL' -n default get pod e2e-finalized -o jsonpath='{.metadata.deletionTimestamp}')\" ]"
check_eq "... $node drained" drained "$(node_ann "$node" drainer.io/state)"
kubectl -n default patch pod e2e-finalized --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
drainer_run skipwait-uncordon uncordon "$node"
check_rc "uncordon $node" 0 skipwait-uncordon

finish
