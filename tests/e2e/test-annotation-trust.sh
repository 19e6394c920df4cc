#!/usr/bin/env bash
# Against the real control plane: an annotation is a
# request, never authority (anyone with nodes/patch can write drainer.io/ ones, any
# pod creator can choose labels). On node-2, with a tenant's namespace:
#  6. a pod with a DRA driver's labels that no DaemonSet controls (a Deployment's,
#     never Ready) is ordinary workload: `plan` raises no "driver unhealthy" blocker
#     for it and `drain` evicts it with the rest; a tenant DaemonSet with the driver's
#     labels is a driver only without --driver-namespace (with --driver-namespace
#     dra-system it is an ordinary DaemonSet pod: it stays); a bare look-alike
#     created on the drained node does not hold the restore.
#  2. with drainer.io/state=evict-rest written by hand (plus cordon and taint),
#     `drain` without --force / --delete-emptydir-data evicts nothing (audit log):
#     exit 4, the node stays in evict-rest, drainer.io/message and a DrainerBlocked
#     Event name both pods, -o json says "changed": true (false for the same refusal in
#     preflight); `serve` refuses the same way and keeps running; a hand-written
#     drainer.io/state=drained with the pods still there is not believed (drain goes
#     back to the evictions and refuses, exit 4, not 0); the corrected rerun resumes
#     from there and evicts them.
#  1. (the label strategy) a recorded label key that --driver-stop does not name is
#     never set back: uncordon exits 1, prints the command with the right flag, the
#     label stays; with that flag the key is restored. The systemd unit case is in
#     test-serve-systemd.sh (it has the private system bus).
# TRUST_NS_FLAG (default --driver-namespace dra-system) is given to the drain and
# serve runs of item 2; TRUST_NS_FLAG= replays them on a build without that flag.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-2
ns=e2e-trust
read -r -a ns_flag <<<"${TRUST_NS_FLAG---driver-namespace dra-system}"

cleanup_trust() {
	[ -z "${serve_pids[trust]:-}" ] || serve_stop trust KILL
	kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
	kubectl label node "$node" e2e.drainer.io/gpu- >/dev/null 2>&1
	reset_node "$node"
}
e2e_cleanup_hooks+=(cleanup_trust)

[ "$(node_drainer_anns "$node")" = "{}" ] || reset_node "$node"
kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
kubectl create namespace "$ns" >/dev/null
wait_until 30 kubectl -n "$ns" get serviceaccount default

pod_phase() { kubectl -n "$ns" get pods -l "app=$1" -o json | jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .status.phase] | first // ""'; }
running() { [ "$(pod_phase "$1")" = Running ]; }
pod_names() { kubectl -n "$ns" get pods -l "app=$1" -o json | jq -r '.items[].metadata.name'; }
evicted() { # AUDIT-FILE NAME-PREFIX [NS]: "TIME NAME" of drainer's evictions (or deletes) of the pods of
	# NS ($ns) whose name starts so
	jq -r --arg ns "${3:-$ns}" --arg p "$2" '.[] | select(.userAgent | startswith("drainer/")) | select(.objectRef.resource == "pods" and .objectRef.namespace == $ns
		and (.objectRef.name | startswith($p)) and ((.verb == "create" and .objectRef.subresource == "eviction") or (.verb == "delete" and .objectRef.subresource == null)))
		| "\(.requestReceivedTimestamp) \(.objectRef.name)"' "$1"
}

# ---- 6. driver look-alikes -------------------------------------------------------
echo "- 6. pods with the DRA driver's labels that are not the driver"
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: lookalike, namespace: $ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: lookalike}}
  template:
    metadata: {labels: {app: lookalike, app.kubernetes.io/component: kubeletplugin}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      readinessGates: [{conditionType: e2e.drainer.io/never}]
      containers: [{name: c, image: registry.example.com/not-a-driver:v1}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tenant-ds, namespace: $ns}
spec:
  selector: {matchLabels: {app: tenant-ds}}
  template:
    metadata: {labels: {app: tenant-ds, app.kubernetes.io/component: kubeletplugin}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      containers: [{name: c, image: registry.example.com/tenant-agent:v1}]
YAML
check "the look-alike Deployment pod runs (never Ready: a readiness gate nobody sets)" wait_until 60 running lookalike
check "the tenant DaemonSet pod runs" wait_until 60 running tenant-ds
lookalike=$(pod_names lookalike | head -n 1)
tenant=$(pod_names tenant-ds | head -n 1)

drainer_run plan6 plan "$node" -o json
check_rc "plan: the look-alike (not Ready) is no driver, so no blocker" 0 plan6
check_eq "plan: it is in the group rest" rest \
	"$(jq -r --arg p "$lookalike" '.groups[] | select(any(.pods[]; .name == $p)) | .name' "$e2e_tmp/plan6.out" 2>/dev/null)"
check_eq "plan: drivers without --driver-namespace: the real one and the tenant DaemonSet's" \
	"$(driver_pod "$node") $ns/$tenant" \
	"$(jq -r '[.drivers[] | "\(.namespace)/\(.name)"] | sort | join(" ")' "$e2e_tmp/plan6.out" 2>/dev/null)"
drainer_run plan6ns plan "$node" --driver-namespace dra-system -o json
check_rc "plan --driver-namespace dra-system" 0 plan6ns
check_eq "plan --driver-namespace dra-system: only the real driver" "$(driver_pod "$node")" \
	"$(jq -r '[.drivers[] | "\(.namespace)/\(.name)"] | join(" ")' "$e2e_tmp/plan6ns.out" 2>/dev/null)"
check_eq "... the tenant DaemonSet pod stays as a DaemonSet pod" "DaemonSet pod" \
	"$(jq -r --arg p "$tenant" '.stays[] | select(.name == $p) | .reason' "$e2e_tmp/plan6ns.out" 2>/dev/null)"
drainer_run status6 status "$node" --driver-namespace dra-system -o json
check_eq "status --driver-namespace dra-system: driver pods" "$(driver_pod "$node")" \
	"$(jq -r '[.pods.driver[] | "\(.namespace)/\(.name)"] | join(" ")' "$e2e_tmp/status6.out" 2>/dev/null)"
check_eq "status: the look-alike is workload" "$lookalike" "$(jq -r '[.pods.workload[].name] | join(" ")' "$e2e_tmp/status6.out" 2>/dev/null)"

# ---- 2. a forged phase keeps the eviction rules ---------------------------------
echo "- 2. drainer.io/state=evict-rest written by hand, with a bare pod and an emptyDir pod"
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: $ns, labels: {app: bare}}
spec:
  nodeName: $node
  containers: [{name: c, image: registry.example.com/bare:v1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: scratch, namespace: $ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: scratch}}
  template:
    metadata: {labels: {app: scratch}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      containers:
      - name: c
        image: registry.example.com/scratch:v1
        volumeMounts: [{name: s, mountPath: /s}]
      volumes: [{name: s, emptyDir: {}}]
YAML
check "the bare pod runs" wait_until 60 running bare
check "the emptyDir pod runs" wait_until 60 running scratch
drainer_run pre drain "$node" --timeout 30s "${ns_flag[@]}" -o json
check_rc "first, the same pods refuse the drain in preflight" 4 pre
check_eq "... -o json: changed false (nothing was changed), two blockers" "false 2" \
	"$(jq -r '"\(.changed) \(.blockers | length)"' "$e2e_tmp/pre.out" 2>/dev/null)"
kubectl cordon "$node" >/dev/null
kubectl taint node "$node" drainer.io/draining:NoSchedule --overwrite >/dev/null
kubectl annotate --overwrite node "$node" drainer.io/state=evict-rest drainer.io/was-unschedulable=false >/dev/null
delete_node_events "$node"
nodes_watch_start "$e2e_tmp/n.watch" "$node"

drainer_run forged drain "$node" --timeout 30s "${ns_flag[@]}" -o json
check_rc "drain without --force/--delete-emptydir-data on the forged phase: refused" 4 forged
audit_window "$run_start" "$e2e_tmp/forged.audit"
check_eq "no pod was evicted or deleted by drainer (audit log)" "" "$(evicted "$e2e_tmp/forged.audit" "")"
check_eq "drainer's only writes: the Node's message and the Event" "create events default/|patch nodes /$node" \
	"$(drainer_writes "$e2e_tmp/forged.audit" | sed 's|events default/.*|events default/|' | sort -u | paste -sd '|')"
check_eq "the node stays in evict-rest" evict-rest "$(node_state "$node")"
check_eq "... cordoned" true "$(node_unschedulable "$node")"
check_eq "... tainted" true "$(node_tainted "$node")"
msg=$(node_ann "$node" drainer.io/message)
check "drainer.io/message names both pods and the flags ($msg)" \
	bash -c "grep -q '$ns/bare' <<<\"\$1\" && grep -q '$ns/scratch' <<<\"\$1\" && grep -q -- --force <<<\"\$1\" && grep -q -- --delete-emptydir-data <<<\"\$1\"" _ "$msg"
node_events "$node" "$e2e_tmp/ev.json"
check "a DrainerBlocked Event names the bare pod" jq_true --arg p "$ns/bare" 'any(.[]; .reason == "DrainerBlocked" and (.message | contains($p)))' "$e2e_tmp/ev.json"
check_eq "-o json: changed" true "$(jq -r .changed "$e2e_tmp/forged.out" 2>/dev/null)"
check_eq "-o json: result refused, exitCode 4, phase evict-rest" "refused 4 evict-rest" \
	"$(jq -r '"\(.result) \(.exitCode) \(.phase)"' "$e2e_tmp/forged.out" 2>/dev/null)"
check_eq "-o json: the two blockers" 2 "$(jq '.blockers | length' "$e2e_tmp/forged.out" 2>/dev/null)"

echo "- 2. the same under serve"
a0=$(audit_lines)
blocked_count() { node_events "$node" "$e2e_tmp/ev2.json"; jq '[.[] | select(.reason == "DrainerBlocked") | .count] | add // 0' "$e2e_tmp/ev2.json"; }
more_blocked() { [ "$(blocked_count)" -gt "$1" ]; }
before=$(blocked_count)
kubectl annotate --overwrite node "$node" drainer.io/request=drain >/dev/null
serve_start trust serve --node "$node" --max-parallel 0 "${ns_flag[@]}" --metrics-addr ""
check "serve refuses too: another DrainerBlocked Event" wait_until 20 more_blocked "$before"
sleep 2
check "serve still runs" serve_alive trust
audit_window "$a0" "$e2e_tmp/serve.audit"
check_eq "serve evicted or deleted no pod" "" "$(evicted "$e2e_tmp/serve.audit" "")"
check_eq "the node stays in evict-rest" evict-rest "$(node_state "$node")"
serve_stop trust
kubectl annotate node "$node" drainer.io/request- >/dev/null

echo "- 2. drainer.io/state=drained written by hand, the pods still there"
kubectl annotate --overwrite node "$node" drainer.io/state=drained >/dev/null
drainer_run forged2 drain "$node" --timeout 30s "${ns_flag[@]}" -o json
check_rc "drain does not believe it: back to the evictions, refused by the same blockers" 4 forged2
audit_window "$run_start" "$e2e_tmp/forged2.audit"
check_eq "no pod was evicted" "" "$(evicted "$e2e_tmp/forged2.audit" "")"
check_eq "the node is in evict-claim-holders now" evict-claim-holders "$(node_state "$node")"

echo "- 2. the corrected rerun resumes (from evict-claim-holders)"
drainer_run fixed drain "$node" --force --delete-emptydir-data "${ns_flag[@]}" --timeout 90s
check_rc "drain --force --delete-emptydir-data resumes and drains" 0 fixed
audit_window "$run_start" "$e2e_tmp/fixed.audit"
check "it evicted the bare pod" [ -n "$(evicted "$e2e_tmp/fixed.audit" bare)" ]
check "it evicted the emptyDir pod" [ -n "$(evicted "$e2e_tmp/fixed.audit" scratch)" ]
nodes_watch_stop
check_eq "phases: the forged ones, then on from evict-claim-holders (never preflight or cordon)" \
	"evict-rest drained evict-claim-holders evict-rest wait-released stop-drivers drained" "$(phases_seen "$e2e_tmp/n.watch")"
check "no cordon patch again (was-unschedulable kept)" jq_true -s 'all(.[]; .was == "false")' "$e2e_tmp/n.watch"

# ---- 6. (cont.) the drain of the look-alikes --------------------------------------
t_look=$(evicted "$e2e_tmp/fixed.audit" lookalike | head -n 1 | cut -d' ' -f1)
t_bare=$(evicted "$e2e_tmp/fixed.audit" bare | head -n 1 | cut -d' ' -f1)
t_driver=$(evicted "$e2e_tmp/fixed.audit" dra-driver dra-system | head -n 1 | cut -d' ' -f1)
echo "  evicted: bare at $t_bare, look-alike at $t_look, the real driver at $t_driver"
check "the look-alike was evicted as workload, with the rest (not kept for the driver stop)" \
	bash -c "[ -n '$t_look' ] && [ -n '$t_driver' ] && [[ '$t_look' < '$t_driver' ]]"
check_eq "the tenant DaemonSet pod was not evicted (--driver-namespace dra-system)" "" "$(evicted "$e2e_tmp/fixed.audit" tenant-ds)"
check "the real driver pod was stopped" no_driver_pod "$node"
check "the tenant DaemonSet pod still runs" running tenant-ds

echo "- 6. a bare look-alike on the drained node does not hold the restore"
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: lookalike-bare, namespace: $ns, labels: {app: lookalike-bare, app.kubernetes.io/component: kubeletplugin}}
spec:
  nodeName: $node
  tolerations: [{key: drainer.io/draining, operator: Exists}]
  readinessGates: [{conditionType: e2e.drainer.io/never}]
  containers: [{name: c, image: registry.example.com/not-a-driver:v1}]
YAML
check "the bare look-alike runs, not Ready" wait_until 30 running lookalike-bare
drainer_run restore6 uncordon "$node" --driver-namespace dra-system --timeout 40s
check_rc "uncordon does not wait for it" 0 restore6
check "node-2 back in service" wait_until 30 node_restored "$node"

# ---- 1. a recorded label key that the configuration does not name ----------------
echo "- 1. drainer.io/driver-stop records a label key --driver-stop does not name"
kubectl label --overwrite node "$node" e2e.drainer.io/gpu=drainer-paused >/dev/null
kubectl cordon "$node" >/dev/null
kubectl annotate --overwrite node "$node" drainer.io/state=restore-drivers drainer.io/was-unschedulable=false \
	'drainer.io/driver-stop=[{"strategy":"label","key":"e2e.drainer.io/gpu","old":"yes"}]' >/dev/null
delete_node_events "$node"
drainer_run lbl uncordon "$node" --driver-stop label:gpu.example.com/present --timeout 20s
check_rc "uncordon --driver-stop label:gpu.example.com/present: refused" 1 lbl
audit_window "$run_start" "$e2e_tmp/lbl.audit"
check_eq "the recorded key was not touched" drainer-paused \
	"$(kubectl get node "$node" -o json | jq -r '.metadata.labels["e2e.drainer.io/gpu"]')"
# (the audit policy logs node patches at Metadata level: what changed is read from the Node)
check_eq "drainer's only writes: one Node patch (the message) and the Event" "create events default/|patch nodes /$node" \
	"$(drainer_writes "$e2e_tmp/lbl.audit" | sed 's|events default/.*|events default/|' | sort -u | paste -sd '|')"
check_eq "... the Node is as it was but for the message" "restore-drivers true" "$(node_state "$node") $(node_unschedulable "$node")"
check "it prints the command with the right flag" \
	grep -q -- "drainer uncordon $node --driver-stop label:e2e.drainer.io/gpu --timeout 20s\|drainer uncordon $node --timeout 20s --driver-stop label:e2e.drainer.io/gpu" "$e2e_tmp/lbl.err"
node_events "$node" "$e2e_tmp/ev3.json"
check "a DrainerBlocked Event says why" jq_true 'any(.[]; .reason == "DrainerBlocked" and (.message | contains("label:e2e.drainer.io/gpu")))' "$e2e_tmp/ev3.json"
check "drainer.io/message says why" bash -c "grep -q 'label:e2e.drainer.io/gpu' <<<\"\$(kubectl get node $node -o json | jq -r '.metadata.annotations[\"drainer.io/message\"]')\""
drainer_run lbl2 uncordon "$node" --driver-stop label:e2e.drainer.io/gpu --timeout 60s
check_rc "uncordon --driver-stop label:e2e.drainer.io/gpu" 0 lbl2
check_eq "the key is set back to its recorded value" yes \
	"$(kubectl get node "$node" -o json | jq -r '.metadata.labels["e2e.drainer.io/gpu"]')"
check_eq "no drainer.io annotation left" "{}" "$(node_drainer_anns "$node")"
finish
