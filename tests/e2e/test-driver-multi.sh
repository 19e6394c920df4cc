#!/usr/bin/env bash
# Driver drains (plan, maintain, drain and uncordon --driver), on real nodes with two DRA drivers on node-1:
# gpu.example.com (the demo's claim holders) and nic.example.com (the second test
# driver, tests/cluster/manifests/dra-driver-nic.yaml: this script applies it and labels
# node-1 nic.example.com/present=true unless DRAINER_CLUSTER_NIC_NODES did, and removes
# both at the end), plus a
# holder of a nic claim and two plain pods.
#  1. plan --driver NAME without --driver-stop: label, KEY read from the driver
#     DaemonSet's nodeSelector (kubernetes.io/os not counted), said in the plan; the
#     other driver's pod stays.
#  2. maintain node-1 --driver gpu.example.com -- CMD: from the API server's record,
#     exactly gpu's claim holders evicted; the node never cordoned; the nic driver,
#     its holder and the plain pods untouched (same UIDs); while CMD runs no gpu claim
#     on node-1 and a new pod needing a GPU gets one on another node; the gpu driver
#     stopped only after its claims were released; back Running, Ready, its slice
#     published; the DeviceTaintRule gone; no drainer.io/ annotation left.
#  3. Both drivers drained in one run (drain --driver A --driver B): each its own
#     state keys and rule, both drivers stopped, the node still schedulable; then each
#     restored by its own process, both at once (uncordon --driver A & --driver B).
# Prints the time the gpu driver was out and the pods that stayed, against what a
# whole-node drain of node-1 would evict (its plan).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1
gpu=gpu.example.com
nic=nic.example.com

if [ "${DRAINER_CLUSTER_NODES:-real}" != real ]; then
	echo "  skipped: the second DRA driver runs on real nodes only (DRAINER_CLUSTER_NODES=real)"
	finish
	exit 0
fi
served=$(kubectl api-resources --api-group resource.k8s.io -o name 2>/dev/null)
if ! grep -qx devicetaintrules.resource.k8s.io <<<"$served"; then
	echo "  skipped: the API server serves no DeviceTaintRule (the cordon fallback is test-driver-drain's)"
	finish
	exit 0
fi

nic_pods_json() { kubectl -n nic-system get pods -l app=nic-driver --field-selector "spec.nodeName=$1" -o json; }
nic_running() {
	[ "$(nic_pods_json "$1" | jq '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running"
		and ([.status.conditions // [] | .[] | select(.type == "Ready" and .status == "True")] | length > 0))] | length')" -ge 1 ]
}
no_nic_pod() { [ "$(nic_pods_json "$1" | jq '.items | length')" = 0 ]; }
nic_slice() {
	[ "$(kubectl get resourceslices -o json | jq --arg n "$1" '[.items[] | select(.spec.nodeName == $n and .spec.driver == "nic.example.com")] | length')" -ge 1 ]
}
rules_of() { # NODE DRIVER: the names of drainer's DeviceTaintRules of the driver on the node
	kubectl get devicetaintrules -o json | jq -r --arg p "$(rule_prefix "$1")" --arg d "$2" '[.items[] | select((.metadata.name | startswith($p)) and .spec.deviceSelector.driver == $d) | .metadata.name] | join(",")'
}

no_nic_user() { [ "$(kubectl -n demo get pods -l app=e2e-nic-user -o json | jq '.items | length')" = 0 ]; }

# The second driver: applied here unless up did (DRAINER_CLUSTER_NIC_NODES), and removed
# again at the end with its slices (no plugin republishes them; the kubelet would wipe
# them 30 s later).
applied_nic=0
if ! kubectl -n nic-system get ds nic-driver >/dev/null 2>&1; then
	kubectl apply -f "$e2e_root/tests/cluster/manifests/dra-driver-nic.yaml" >/dev/null || { fail "apply the second driver"; finish; exit 1; }
	applied_nic=1
fi
labelled_nic=0
[ "$(kubectl get node "$node" -o json | jq -r '.metadata.labels["nic.example.com/present"] // ""')" = true ] || labelled_nic=1
cleanup_multi() {
	kubectl -n demo delete pod e2e-plain-a e2e-plain-b e2e-gpu-late --wait=false >/dev/null 2>&1
	kubectl -n demo delete deployment e2e-nic-user --wait=false >/dev/null 2>&1
	kubectl -n demo delete resourceclaimtemplate e2e-nic >/dev/null 2>&1
	kubectl get devicetaintrules -o name 2>/dev/null | grep "/$(rule_prefix "$node")" | xargs -r kubectl delete >/dev/null 2>&1
	reset_node "$node"
	# Driver last, here too: the kubelet unprepares the nic claim of a deleted holder
	# through the nic plugin, and a holder whose plugin left first stays Terminating
	# with its claim reserved (and every later demo workload times out).
	if ! wait_until 90 no_nic_user; then
		echo "  cleanup: a holder of a $nic claim is still on $node after 90 s; its driver stays"
	elif [ "$labelled_nic" = 1 ]; then
		kubectl label node "$node" nic.example.com/present- >/dev/null 2>&1
		wait_until 60 no_nic_pod "$node"
		kubectl delete resourceslices --field-selector "spec.driver=$nic" >/dev/null 2>&1
	else
		kubectl label node "$node" nic.example.com/present=true --overwrite >/dev/null 2>&1
	fi
	if [ "$applied_nic" = 1 ] && no_nic_user; then
		kubectl delete -f "$e2e_root/tests/cluster/manifests/dra-driver-nic.yaml" --wait=true --timeout=60s >/dev/null 2>&1
		kubectl delete resourceslices --field-selector "spec.driver=$nic" >/dev/null 2>&1
	fi
	demo
}
e2e_cleanup_hooks+=(cleanup_multi)

t_nic=$SECONDS
[ "$labelled_nic" = 0 ] || kubectl label node "$node" nic.example.com/present=true --overwrite >/dev/null
check "the second driver $nic runs on $node" wait_until 90 nic_running "$node"
check "its ResourceSlice is published" wait_until 30 nic_slice "$node"
echo "  figure: $nic up on $node in $((SECONDS - t_nic)) s"
check "DaemonSet nic-system/nic-driver's pod is a driver pod for drainer (the plugin directory names $nic)" \
	[ "$(nic_pods_json "$node" | jq -r '[.items[0].spec.volumes[] | .hostPath.path // empty] | any(endswith("/plugins/nic.example.com"))')" = true ]

demo || { fail "demo workload"; finish; exit 1; }
plain_pods "$node" e2e-plain-a e2e-plain-b
{ claim_template demo e2e-nic "$nic" nic; cat <<YAML; } | kubectl apply -f - >/dev/null
apiVersion: apps/v1
kind: Deployment
metadata:
  name: e2e-nic-user
  namespace: demo
spec:
  replicas: 1
  selector:
    matchLabels: {app: e2e-nic-user}
  template:
    metadata:
      labels: {app: e2e-nic-user}
    spec:
      nodeSelector:
        kubernetes.io/hostname: $node
      terminationGracePeriodSeconds: 5
      containers:
      - name: c
        image: registry.example.com/nic-user:v1
        resources:
          claims:
          - name: nic
      resourceClaims:
      - name: nic
        resourceClaimTemplateName: e2e-nic
YAML
plain_running() {
	[ "$(kubectl -n demo get pods -l app=e2e-plain --field-selector spec.nodeName=$node -o json |
		jq '[.items[] | select(.status.phase == "Running")] | length')" = 2 ]
}
nic_user_running() {
	[ "$(kubectl -n demo get pods -l app=e2e-nic-user --field-selector spec.nodeName=$node -o json |
		jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" = 1 ]
}
check "two plain pods run on $node" wait_until 60 plain_running
check "a holder of a $nic claim runs on $node" wait_until 60 nic_user_running

pods_on_node "$node" "$e2e_tmp/pods.json"
# Each pod's class and the drivers of its claims: [{ns, name, uid, cls, drivers}].
kubectl get resourceclaims -A -o json >"$e2e_tmp/claims-all.json"
classify_pods "$e2e_tmp/pods.json" | jq -c --slurpfile c "$e2e_tmp/claims-all.json" --slurpfile p "$e2e_tmp/pods.json" '
	($c[0].items | map({key: "\(.metadata.namespace)/\(.metadata.name)", value: [.status.allocation.devices.results[]?.driver]}) | from_entries) as $cd
	| ($p[0].items | map({key: .metadata.uid, value: [(.status.resourceClaimStatuses // [])[].resourceClaimName, (.spec.resourceClaims // [])[].resourceClaimName | select(. != null)]}) | from_entries) as $pc
	| map(. as $x | . + {drivers: ([$pc[$x.uid][]? | $cd["\($x.ns)/\(.)"][]?] | unique)})' >"$e2e_tmp/classes.json"
echo "  pods: $(jq -r '[.[] | "\(.name)=\(.cls)\(if (.drivers | length) > 0 then "(" + (.drivers | join(",")) + ")" else "" end)"] | join(" ")' "$e2e_tmp/classes.json")"
gpu_holders=$(jq -c '[.[] | select((.cls | startswith("holder")) and (.drivers | index("gpu.example.com"))) | "\(.ns)/\(.name)"] | sort' "$e2e_tmp/classes.json")
check "claim holders of $gpu on $node" [ "$(jq length <<<"$gpu_holders")" -ge 1 ]
check "the holder of a $nic claim holds no $gpu claim" \
	jq -e 'any(.[]; (.drivers == ["nic.example.com"]) and (.name | startswith("e2e-nic-user")))' "$e2e_tmp/classes.json" >/dev/null
gpu_driver=$(driver_pod "$node")
nic_driver=$(nic_pods_json "$node" | jq -r '.items[0] | "\(.metadata.namespace)/\(.metadata.name)"')

# 1. The default stop: label, KEY from each driver's DaemonSet.
drainer_run plangpu plan "$node" --driver "$gpu" -o json
check_rc "plan --driver $gpu without --driver-stop" 0 plangpu
check_eq "its stop: label gpu.example.com/present, from DaemonSet dra-system/dra-driver" \
	"label gpu.example.com/present DaemonSet dra-system/dra-driver" \
	"$(jq -r '.drivers | map("\(.strategy) \(.arg) \(.argFrom)") | join(";")' "$e2e_tmp/plangpu.out")"
check_eq "the $nic driver pod stays (another driver's)" "DRA driver pod of another driver: not drained" \
	"$(jq -r --arg n "${nic_driver#*/}" '.stays[] | select(.name == $n) | .reason' "$e2e_tmp/plangpu.out")"
drainer_run plannic plan "$node" --driver "$nic"
check_rc "plan --driver $nic (text)" 0 plannic
check "the plan says KEY nic.example.com/present from the nodeSelector (kubernetes.io/os not counted)" \
	grep -q "stop DRA drivers (label): (KEY nic.example.com/present from the nodeSelector of DaemonSet nic-system/nic-driver)" "$e2e_tmp/plannic.out"
drainer_run planboth plan "$node" --driver "$gpu" --driver "$nic" -o json
check_rc "plan with both drivers" 0 planboth
check_eq "one plan per driver" "gpu.example.com nic.example.com" "$(jq -r '[.items[].scope.drivers[]] | join(" ")' "$e2e_tmp/planboth.out")"
# What a whole-node drain of node-1 would do, for the figure.
drainer_run plannode plan "$node" -o json
node_evicts=$(jq '[.groups[] | .pods[]] | length' "$e2e_tmp/plannode.out")
node_stops=$(jq '.drivers | length' "$e2e_tmp/plannode.out")

# 2. maintain --driver gpu -- CMD, CMD recording what the cluster looks like meanwhile.
cat >"$e2e_tmp/during.sh" <<SH
#!/usr/bin/env bash
k() { "$KUBECTL" "\$@"; }
k get node $node -o json >"$e2e_tmp/during-node.json"
k get pods -A --field-selector spec.nodeName=$node -o json >"$e2e_tmp/during-pods.json"
k get devicetaintrules -o json >"$e2e_tmp/during-rules.json"
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: e2e-gpu-late, namespace: demo}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: c
    image: registry.example.com/gpu-late:v1
    resources: {claims: [{name: gpu}]}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: single-gpu}]
YAML
for _ in \$(seq 1 150); do
	[ -n "\$(k -n demo get pod e2e-gpu-late -o jsonpath='{.spec.nodeName}')" ] && break
	sleep 0.2
done
k -n demo get pod e2e-gpu-late -o json >"$e2e_tmp/during-late.json"
k get resourceclaims -A -o json >"$e2e_tmp/during-claims.json"
k get resourceslices -o json >"$e2e_tmp/during-slices.json"
SH
chmod +x "$e2e_tmp/during.sh"
kubectl get node "$node" --watch -o jsonpath='{.metadata.resourceVersion}|{.spec.unschedulable}|{.metadata.labels.gpu\.example\.com/present}|{.metadata.labels.nic\.example\.com/present}{"\n"}' \
	>"$e2e_tmp/node-watch.txt" 2>/dev/null &
watch_pid=$!
track_pid "$watch_pid"
e2e_cleanup_hooks+=("reap_pid $watch_pid")
sleep 0.5
DRAINER_RUN_TIMEOUT=200 drainer_run maintain maintain "$node" --driver "$gpu" -o json --timeout 80s -- "$e2e_tmp/during.sh"
check_rc "maintain $node --driver $gpu -- CMD" 0 maintain
maintain_secs=$run_secs
audit_window "$run_start" "$e2e_tmp/audit.json"
pods_on_node "$node" "$e2e_tmp/pods-after.json"

jq_checks --argjson h "$gpu_holders" '
	[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods"
		and ((.verb == "create" and .objectRef.subresource == "eviction") or .verb == "delete"))
		| "\(.objectRef.namespace)/\(.objectRef.name)"] | unique as $ev
	| if $ev == $h then "ok evicted exactly the claim holders of gpu.example.com (\($h | join(", ")))"
	  else "FAIL evicted \($ev) but the gpu claim holders are \($h)" end' "$e2e_tmp/audit.json"
jq_checks --slurpfile before "$e2e_tmp/classes.json" '
	[.items[] | {key: "\(.metadata.namespace)/\(.metadata.name)", value: .metadata.uid}] | from_entries as $now
	| [$before[0][] | select((.drivers | index("gpu.example.com")) == null and (.name | startswith("dra-driver-") | not))] as $stay
	| ($stay | map(select($now["\(.ns)/\(.name)"] != .uid)) | map("\(.ns)/\(.name)")) as $gone
	| if ($stay | map(select(.ns == "nic-system")) | length) != 1 then "FAIL the nic driver pod is not among the pods that must stay"
	  elif $gone == [] then "ok the nic driver, the nic claim holder and every other pod without a gpu claim run with the same UIDs (\($stay | length))"
	  else "FAIL pods that hold no gpu claim changed or are gone: \($gone)" end' "$e2e_tmp/pods-after.json"
check_eq "no version of the Node was unschedulable" "" "$(awk -F'|' '$2 == "true"' "$e2e_tmp/node-watch.txt")"
check "the Node was seen with the gpu label paused while $gpu was out" grep -q '|drainer-paused|true$' "$e2e_tmp/node-watch.txt"
check_eq "the nic label never changed" "" "$(awk -F'|' '$4 != "true"' "$e2e_tmp/node-watch.txt")"
# While CMD ran.
check_eq "during CMD: the node schedulable" false "$(jq -r '.spec.unschedulable // false' "$e2e_tmp/during-node.json")"
check_eq "during CMD: no gpu driver pod on $node" 0 \
	"$(jq '[.items[] | select(.metadata.labels["app.kubernetes.io/component"] == "kubeletplugin" and .metadata.namespace == "dra-system")] | length' "$e2e_tmp/during-pods.json")"
check_eq "during CMD: the nic driver pod the same" "$nic_driver" \
	"$(jq -r '.items[] | select(.metadata.namespace == "nic-system") | "\(.metadata.namespace)/\(.metadata.name)"' "$e2e_tmp/during-pods.json")"
jq_checks --arg n "$node" --arg p "$(rule_prefix "$node")" '[.items[] | select(.metadata.name | startswith($p))] as $r
	| if ($r | length) == 1 and $r[0].spec.deviceSelector.driver == "gpu.example.com" and $r[0].spec.deviceSelector.pool == $n
		and $r[0].spec.taint.effect == "NoSchedule"
	  then "ok during CMD: one NoSchedule DeviceTaintRule, for gpu.example.com pool \($n) (\($r[0].metadata.name))"
	  else "FAIL during CMD: rules of \($n): \($r | map({name: .metadata.name, spec}))" end' "$e2e_tmp/during-rules.json"
jq_checks --arg n "$node" --slurpfile late "$e2e_tmp/during-late.json" --slurpfile sl "$e2e_tmp/during-slices.json" '
	($sl[0].items | map({key: "\(.spec.driver)/\(.spec.pool.name)", value: .spec.nodeName}) | from_entries) as $pool
	| [.items[] | select(.status.allocation) | . as $c
		| [.status.allocation.devices.results[] | select(.driver == "gpu.example.com") | $pool["\(.driver)/\(.pool)"]] | select(index($n))
		| "\($c.metadata.namespace)/\($c.metadata.name)"] as $on
	| ($late[0].spec.nodeName // "") as $ln
	| ([.items[] | select(.metadata.namespace == "demo" and (.metadata.ownerReferences // [] | any(.name == "e2e-gpu-late")))] | first) as $lc
	| if $on != [] then "FAIL during CMD: gpu claims allocated on \($n): \($on)"
	  elif $ln == $n then "FAIL during CMD: the new gpu pod was scheduled to \($n)"
	  elif $ln == "" then "ok during CMD: no gpu claim on \($n); the new gpu pod waits (not scheduled)"
	  elif ($lc.status.allocation.devices.results[0].pool // "") == $ln then "ok during CMD: no gpu claim on \($n); the new gpu pod got a GPU on \($ln)"
	  else "FAIL during CMD: the new gpu pod on \($ln) with claim \($lc.status.allocation // null)" end' "$e2e_tmp/during-claims.json"
# The gpu driver stopped only after every evicted holder was deleted by its kubelet and
# every claim of the holders released.
jq_checks --arg drvpod "${gpu_driver#*/}" --argjson h "$gpu_holders" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	([.[] | select(.objectRef.resource == "pods" and .verb == "delete" and .objectRef.name == $drvpod
		and .user.username == "system:kube-controller-manager")] | first) as $l
	| [.[] | select((.user.username | test("^system:node:")) and .verb == "delete" and .objectRef.resource == "pods"
		and (key as $k | $h | index($k)))] as $kdel
	| [.[] | select(.user.username == "system:kube-controller-manager" and .objectRef.resource == "resourceclaims"
		and .verb == "update" and .objectRef.namespace == "demo")] as $rel
	| if $l == null then "FAIL the DaemonSet controller never deleted driver pod \($drvpod)"
	  elif ($kdel | length) == 0 then "FAIL no kubelet DELETE of an evicted holder"
	  elif ([$kdel[] | select(.requestReceivedTimestamp > $l.requestReceivedTimestamp)] | length) > 0
	  then "FAIL the gpu driver pod was deleted before a holder was gone"
	  elif ([$rel[] | select(.requestReceivedTimestamp > $l.requestReceivedTimestamp and .requestReceivedTimestamp < ($kdel | last).requestReceivedTimestamp)] | length) > 0
	  then "FAIL a claim was released after the driver pod was deleted"
	  else "ok the gpu driver pod was deleted (\($l.requestReceivedTimestamp)) after the kubelets deleted the \($kdel | length) evicted holders and \($rel | length) claim updates" end' "$e2e_tmp/audit.json"
check "the gpu driver pod is Running and Ready again" driver_running "$node"
check "its ResourceSlice is published" slice_published "$node"
check_eq "the DeviceTaintRule is gone" "" "$(rules_of "$node" "$gpu")"
check_eq "no drainer.io/ annotation left" "{}" "$(node_drainer_anns "$node")"
check_eq "the gpu label is back" true "$(kubectl get node "$node" -o json | jq -r '.metadata.labels["gpu.example.com/present"]')"
reap_pid "$watch_pid"
out=$(jq -r --arg drvpod "${gpu_driver#*/}" 'def t: .requestReceivedTimestamp | sub("\\.[0-9]+Z$"; "Z") | fromdate;
	([.[] | select(.objectRef.resource == "pods" and .verb == "delete" and .objectRef.name == $drvpod)] | first) as $a
	| ([.[] | select((.userAgent | startswith("drainer/")) and (.verb | IN("patch", "delete")) and .objectRef.resource != "events")] | last) as $b
	| if $a and $b then ($b | t) - ($a | t) else "?" end' "$e2e_tmp/audit.json")
stayed=$(jq '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running")] | length' "$e2e_tmp/pods-after.json")
echo "  figure: $gpu out of service on $node for ~${out} s (maintain ${maintain_secs} s); evicted $(jq length <<<"$gpu_holders") pods, $(jq length "$e2e_tmp/classes.json") - $(jq length <<<"$gpu_holders") stayed (running after: $stayed); a whole-node drain would evict $node_evicts pods and stop $node_stops drivers"
kubectl -n demo delete pod e2e-gpu-late --wait=false >/dev/null 2>&1

# 3. Both drivers at once.
wait_until 60 nic_user_running
demo >/dev/null 2>&1
nic_user=$(kubectl -n demo get pods -l app=e2e-nic-user -o json | jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0].metadata.uid')
DRAINER_RUN_TIMEOUT=150 drainer_run both drain "$node" --driver "$gpu" --driver "$nic" -o json --timeout 100s
check_rc "drain $node --driver $gpu --driver $nic" 0 both
both_secs=$run_secs
check_eq "a summary per driver" "gpu.example.com done,nic.example.com done" \
	"$(jq -r '[.items[] | "\(.scope.drivers[0]) \(.result)"] | join(",")' "$e2e_tmp/both.out")"
check_eq "each driver's state under its own key" "drained drained" \
	"$(node_ann "$node" "drainer.io/state.$gpu") $(node_ann "$node" "drainer.io/state.$nic")"
check_eq "no node-level state" "" "$(node_ann "$node" drainer.io/state)"
one_rule_each() { [ -n "$(rules_of "$node" "$gpu")" ] && [ -n "$(rules_of "$node" "$nic")" ]; }
check "a DeviceTaintRule each ($(rules_of "$node" "$gpu") $(rules_of "$node" "$nic"))" one_rule_each
check "the gpu driver pod is gone" no_driver_pod "$node"
check "the nic driver pod is gone" wait_until 30 no_nic_pod "$node"
check_eq "the node is schedulable" false "$(node_unschedulable "$node")"
check "no claim on $node" no_claims_on_node "$node"
check_eq "the plain pods the same" "$(jq -c '[.[] | select(.name | startswith("e2e-plain")) | .uid] | sort' "$e2e_tmp/classes.json")" \
	"$(kubectl -n demo get pods -l app=e2e-plain -o json | jq -c '[.items[].metadata.uid] | sort')"
check_eq "the nic claim holder was evicted" "" \
	"$(kubectl -n demo get pods -l app=e2e-nic-user --field-selector spec.nodeName=$node -o json | jq -r --arg u "$nic_user" '.items[] | select(.metadata.uid == $u and .metadata.deletionTimestamp == null) | .metadata.name')"
"$DRAINER" status "$node" -o json >"$e2e_tmp/status.json" 2>/dev/null
check_eq "status shows both drivers out of service" "gpu.example.com drained,nic.example.com drained" \
	"$(jq -r '.node.driversOutOfService // [] | map("\(.driver) \(.state)") | sort | join(",")' "$e2e_tmp/status.json")"
# Restored by two processes at once: the state on the Node decides (conditional writes).
run_start=$(audit_lines)
t0=$SECONDS
"$DRAINER" uncordon "$node" --driver "$gpu" -o json --timeout 100s >"$e2e_tmp/up-gpu.out" 2>"$e2e_tmp/up-gpu.err" &
p1=$!
"$DRAINER" uncordon "$node" --driver "$nic" -o json --timeout 100s >"$e2e_tmp/up-nic.out" 2>"$e2e_tmp/up-nic.err" &
p2=$!
wait "$p1"
rc1=$?
wait "$p2"
rc2=$?
echo "    -> two uncordons at once: exit $rc1 and $rc2 in $((SECONDS - t0)) s"
check_eq "both uncordons succeed" "0 0" "$rc1 $rc2"
[ "$rc1" = 0 ] || tail -n 15 "$e2e_tmp/up-gpu.err" | sed 's/^/    stderr: /'
[ "$rc2" = 0 ] || tail -n 15 "$e2e_tmp/up-nic.err" | sed 's/^/    stderr: /'
check "the gpu driver is back" driver_running "$node"
check "the nic driver is back" nic_running "$node"
both_slices() { slice_published "$node" && nic_slice "$node"; }
check "both slices published" both_slices
check_eq "no rule left" "" "$(rules_of "$node" "$gpu")$(rules_of "$node" "$nic")"
check_eq "no drainer.io/ annotation left" "{}" "$(node_drainer_anns "$node")"
audit_window "$run_start" "$e2e_tmp/audit-up2.json"
check_eq "the two processes met 409 Conflicts or none, and no write failed otherwise" "" \
	"$(jq -r '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "nodes" and .verb == "patch" and (.responseStatus.code // 200) >= 400 and .responseStatus.code != 409)] | map(.responseStatus.code) | join(",")' "$e2e_tmp/audit-up2.json")"
echo "  figure: both drivers drained in ${both_secs} s, restored by two processes in $((SECONDS - t0)) s"
finish
