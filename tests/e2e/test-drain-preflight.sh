#!/usr/bin/env bash
# Preflight: drain refuses with exit 4, before anything on the
# cluster changes, when the DRA driver is unhealthy (grpc health NOT_SERVING with
# --driver-health, or its pod not Ready), a pod has no controller (no --force), a
# pod has emptyDir data (no --delete-emptydir-data), a claim-holding DaemonSet pod
# tolerates the drain taint, a pod is covered by two PodDisruptionBudgets, or
# --pod-selector leaves a claim holder out. For each refusal the audit log shows
# no write by drainer other than its Event, the Node and the pods are unchanged,
# and drainer names the blocker; `plan` reports the same blocker with exit 4 and
# only reads. --ignore-driver-health lifts the health refusal: that drain runs.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_preflight() {
	kubectl -n demo delete pod e2e-bare --wait=false >/dev/null 2>&1
	kubectl -n demo delete deployment e2e-scratch --wait=false >/dev/null 2>&1
	kubectl -n demo delete daemonset e2e-tolerating --wait=false >/dev/null 2>&1
	kubectl -n demo delete resourceclaimtemplate e2e-tol-gpu >/dev/null 2>&1
	kubectl -n demo delete pdb e2e-web2 >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_preflight)

demo || { fail "demo workload"; finish; exit 1; }

pod_uids() { kubectl get pods -A --field-selector "spec.nodeName=$node" -o json | jq -c '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.uid] | sort'; }

# refused NAME BLOCKER-PATTERN DRAIN-ARGS...: drain must exit 4 and change nothing.
refused() {
	local name=$1 pattern=$2
	shift 2
	local fp uids
	fp=$(node_fingerprint "$node")
	uids=$(pod_uids)
	drainer_run "$name" drain "$node" --timeout 15s "$@"
	check_rc "$name: drain refused" 4 "$name"
	audit_window "$run_start" "$e2e_tmp/$name.audit"
	check_eq "$name: no write by drainer but Events" "" "$(drainer_writes "$e2e_tmp/$name.audit" except-events)"
	check_eq "$name: node unchanged (annotations, labels, spec)" "$fp" "$(node_fingerprint "$node")"
	check_eq "$name: pods on the node unchanged" "$uids" "$(pod_uids)"
	if [ "$run_rc" != 4 ]; then
		# Not refused: put the node and the workload back for the next case.
		echo "  (restoring $node after the drain that should have been refused)"
		reset_node "$node"
		demo
	fi
	check "$name: drainer names the blocker (/$pattern/)" grep -Eq "$pattern" "$e2e_tmp/$name.err" "$e2e_tmp/$name.out"
	drainer_run "$name-plan" plan "$node" "$@"
	check_rc "$name: plan reports the blocker" 4 "$name-plan"
	audit_window "$run_start" "$e2e_tmp/$name-plan.audit"
	check_eq "$name: plan made no write at all" "" "$(drainer_writes "$e2e_tmp/$name-plan.audit")"
	check "$name: plan names the blocker (/$pattern/)" grep -Eq "$pattern" "$e2e_tmp/$name-plan.out" "$e2e_tmp/$name-plan.err"
}

# Sanity: without blockers plan says so.
drainer_run plan0 plan "$node"
check_rc "plan without blockers" 0 plan0

# 1. Driver unhealthy: gRPC health NOT_SERVING (simulator switch) with --driver-health.
driver=$(driver_pod "$node")
kubectl annotate node "$node" sim.drainer.io/driver-unhealthy=true --overwrite >/dev/null
sleep 1
refused unhealthy "${driver#*/}|SERVING|health" --driver-health 51515
kubectl annotate node "$node" sim.drainer.io/driver-unhealthy- >/dev/null

# 2. Driver pod not Ready (no health endpoint needed).
kubectl annotate node "$node" sim.drainer.io/driver-not-ready=true --overwrite >/dev/null
not_ready() { [ "$(driver_pods_json "$node" | jq -r '.items[0].status.conditions[] | select(.type == "Ready") | .status')" = False ]; }
check "the simulator reports the driver pod not Ready" wait_until 30 not_ready
refused not-ready "${driver#*/}|[Rr]eady"
kubectl annotate node "$node" sim.drainer.io/driver-not-ready- >/dev/null
check "driver Ready again" wait_until 30 driver_running "$node"

# 3. A pod without a controller.
kubectl apply -f "$e2e_root/tests/e2e/fixtures/bare-pod.yaml" >/dev/null
bare_running() { [ "$(kubectl -n demo get pod e2e-bare -o jsonpath='{.status.phase}')" = Running ]; }
check "bare pod runs" wait_until 30 bare_running
refused bare "e2e-bare"
kubectl -n demo delete pod e2e-bare --wait=true --timeout=30s >/dev/null

# 4. emptyDir data.
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: e2e-scratch
  namespace: demo
spec:
  replicas: 1
  selector:
    matchLabels: {app: e2e-scratch}
  template:
    metadata:
      labels: {app: e2e-scratch}
    spec:
      nodeSelector:
        kubernetes.io/hostname: node-1
      containers:
      - name: c
        image: registry.example.com/scratch:v1
        volumeMounts:
        - {name: scratch, mountPath: /scratch}
      volumes:
      - name: scratch
        emptyDir: {}
YAML
scratch_running() { [ "$(kubectl -n demo get pods -l app=e2e-scratch -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 1 ]; }
check "emptyDir pod runs" wait_until 30 scratch_running
refused emptydir "e2e-scratch|emptyDir"
kubectl -n demo delete deployment e2e-scratch >/dev/null
scratch_gone() { [ "$(kubectl -n demo get pods -l app=e2e-scratch -o name | wc -l)" = 0 ]; }
check "emptyDir pod gone" wait_until 30 scratch_gone

# 5. A claim-holding DaemonSet pod that tolerates the drain taint (it would come back).
{ claim_template demo e2e-tol-gpu; cat <<'YAML'; } | kubectl apply -f - >/dev/null
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: e2e-tolerating
  namespace: demo
spec:
  selector:
    matchLabels: {app: e2e-tolerating}
  template:
    metadata:
      labels: {app: e2e-tolerating}
    spec:
      nodeSelector:
        kubernetes.io/hostname: node-1
      tolerations:
      - {key: drainer.io/draining, operator: Exists, effect: NoSchedule}
      containers:
      - name: c
        image: registry.example.com/gpu-monitor:v1
        resources:
          claims:
          - name: gpu
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: e2e-tol-gpu
YAML
tol_running() { [ "$(kubectl -n demo get pods -l app=e2e-tolerating -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 1 ]; }
check "tolerating claim-holding DaemonSet pod runs" wait_until 60 tol_running
refused tolerating-ds "e2e-tolerating|tolerat"
kubectl -n demo delete daemonset e2e-tolerating >/dev/null
tol_gone() { [ "$(kubectl -n demo get pods -l app=e2e-tolerating -o name | wc -l)" = 0 ]; }
check "tolerating DaemonSet pod gone" wait_until 30 tol_gone

# 6. A pod covered by two PodDisruptionBudgets (the Eviction API would refuse it forever).
pdb demo e2e-web2 web maxUnavailable 1 | kubectl apply -f - >/dev/null
sleep 1
refused two-pdbs "e2e-web2|PodDisruptionBudget|PDB"
kubectl -n demo delete pdb e2e-web2 >/dev/null

# 7. --pod-selector that leaves claim holders out (their claims would never be released).
refused pod-selector "selector|gpu-inference|shared-workers" --pod-selector app=web

# --ignore-driver-health lifts the health refusal: the drain runs to the end.
kubectl annotate node "$node" sim.drainer.io/driver-unhealthy=true --overwrite >/dev/null
sleep 1
drainer_run lifted drain "$node" --timeout 90s --driver-health 51515 --ignore-driver-health
check_rc "drain --driver-health 51515 --ignore-driver-health with a NOT_SERVING driver" 0 lifted
check_eq "drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
check "driver stopped" no_driver_pod "$node"
kubectl annotate node "$node" sim.drainer.io/driver-unhealthy- >/dev/null
drainer_run uncordon uncordon "$node" --driver-health 51515
check_rc "uncordon (waits for SERVING)" 0 uncordon
check_eq "node schedulable" false "$(node_unschedulable "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
check "driver Running and Ready" driver_running "$node"
finish
