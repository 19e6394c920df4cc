#!/usr/bin/env bash
# drainer guard against the real control plane and real kubelets: it
# holds a DRA driver pod while its node is drained by someone else, installed on the
# dra-driver DaemonSet with the deploy/driver-guard component: a native sidecar
# (`drainer guard --listen $(POD_IP):9465`, an init container with restartPolicy
# Always) from drainer's own image (deploy/image/build's archive, which the nodes'
# runtime serves as localhost/drainer:VERSION), and the plugin container's preStop an
# httpGet to it. The kubelet sends that GET and bounds it by the grace period; no
# binary is copied anywhere. Judged from the API server: its objects, Events and its
# audit log (the guard's requests carry the token bound to their pod).
#
#  A. without the guard, an autoscaler-style drain (taint ToBeDeletedByClusterAutoscaler,
#     then evict every pod of the node at once, the driver included) leaves the claim
#     holders hanging in Terminating until the driver returns;
#  B. the component renders as it should (kubectl kustomize: the sidecar, the httpGet
#     preStop, no copy; the exec form of deploy/driver-guard/exec too); installed, each
#     driver pod runs the sidecar from drainer's image, and a rolling restart of the
#     driver on nodes that are not draining is not delayed: each old pod's preStop
#     reached its guard (audit), which read only the Node, and the pod was gone within
#     4 s + 1 of its deletion; no FailedPreStopHook Event;
#  C. run directly, the guard tells draining (cordon, each drain taint) from not draining,
#     gives up with exit 3 naming what is held, and exits 1/2 on bad setups; its server
#     form answers GET /guard 200 (not draining) or 504 (gave up, counting what is held)
#     and nothing but GET /guard;
#  D. with the guard, the same drain on up to GUARD_LOAD (20) nodes at once: every driver
#     pod stays Terminating until its node's claims are released and its claim holders
#     are done (reported terminal by their kubelet, which unprepared their claims first;
#     the real kubelet deletes the object a moment later), every node ends empty, and the
#     guards (20 of them: one sidecar per drained node, plus direct runs when the cluster
#     has fewer nodes) send no request beyond one list and one watch per resource
#     (counted from the audit log, printed);
#  E. the kubelet's grace period bounds the preStop: on a draining node whose claim
#     holders stay, an eviction of the driver pod asking for 12 s is held by the guard
#     (6 s and more) and ends within those 12 s (the kubelet's final DELETE, from the
#     audit log), the claims still allocated; the guard answered before the kubelet gave up
#     (no FailedPreStopHook).
# Needs DRAINER_CLUSTER_NODES=real (skipped on the simulator, which runs no sidecar and no
# httpGet hook). The DaemonSet, RBAC, taints and the test namespace are restored at the end.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ns=guard-test
guard_user=system:serviceaccount:dra-system:dra-driver
sim_log=$DRAINER_CLUSTER_DIR/drainer-sim.log
real_nodes=false
[ "${DRAINER_CLUSTER_NODES:-sim}" = real ] && real_nodes=true
# A kubelet's requests: the simulator's user, or a real kubelet's (system:node:NODE).
kubelet_re='^(drainer-sim|system:node:.+)$'
# (in the DRA API the cluster serves: tests/cluster/dra-manifest)
manifest=$e2e_tmp/dra-driver.yaml
"$e2e_root/tests/cluster/dra-manifest" "$e2e_dra_api" <"$e2e_root/tests/cluster/manifests/dra-driver.yaml" >"$manifest"
load=${GUARD_LOAD:-20}
ca_taint=ToBeDeletedByClusterAutoscaler

api_url=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
admin_tok=$(kubectl config view --raw --minify -o jsonpath='{.users[0].user.token}')
kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$e2e_tmp/ca.crt"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- preconditions: real kubelets, drainer's image, the build's drainer for direct runs ----
if ! $real_nodes; then
	# The sidecar and its httpGet preStop are the kubelet's own work: the simulator
	# has neither (tests/run-all runs this script on real nodes only).
	echo "  skipped: the guard sidecar needs real kubelets (DRAINER_CLUSTER_NODES=real)"
	finish
	exit 0
fi
# The sidecar runs drainer's own image: the archive deploy/image/build makes, served by
# the nodes' runtime as localhost/drainer:VERSION (as test-deploy.sh does);
# DRAINER_E2E_POD_IMAGE=drainer.test/drainer:dev runs the build's drainer instead.
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$e2e_root/meson.build" | head -n 1)
pod_image=${DRAINER_E2E_POD_IMAGE:-localhost/drainer:$version}
img_manifest=
if [ "$pod_image" = "localhost/drainer:$version" ]; then
	serve_drainer_image "$version"
	img_manifest=$image_manifest
fi
# Direct runs (parts C, D) use the build's drainer, the one drainer.test/drainer:dev runs.
guard_bin=$(readlink -f "$DRAINER_CLUSTER_DIR/guard-drainer")
if ! grep -q -- '--listen' <<<"$("$guard_bin" guard --help 2>/dev/null)"; then
	fail "$guard_bin has no guard verb with --listen: build it (ninja -C build)"
	finish
	exit 1
fi
echo "  guard sidecar image: $pod_image; direct runs: $guard_bin"

# ---- helpers ----
nodes=$(kubectl get nodes -o name | sed 's|^node/||' | sort -V)
n_nodes=$(echo "$nodes" | grep -c .)

g_driver_pods() { # NODE: driver pods on NODE (JSON list)
	kubectl -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin --field-selector "spec.nodeName=$1" -o json | jq -c .items
}
g_driver_running() {
	[ "$(g_driver_pods "$1" | jq '[.[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running"
		and any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length')" -ge 1 ]
}
g_slice_published() {
	[ "$(kubectl get resourceslices --field-selector "spec.nodeName=$1" -o json | jq '.items | length')" -ge 1 ]
}
g_nonmirror_pods() { # NODE: pods on NODE except mirror pods
	kubectl get pods -A --field-selector "spec.nodeName=$1" -o json |
		jq -c '[.items[] | select(.metadata.annotations["kubernetes.io/config.mirror"] == null)]'
}
g_nodes_empty() { [ -z "$(g_pods_of "$@")" ]; }
# Claims on NODE by the DESIGN.md rule, [{ns, name}], from the API server.
g_claims_on_node() {
	local uids
	uids=$(kubectl get pods -A --field-selector "spec.nodeName=$1" -o json | jq -c '[.items[].metadata.uid]')
	kubectl get resourceclaims -A -o json | jq -c --arg n "$1" --argjson uids "$uids" '[.items[]
		| select(((.status.reservedFor // []) | any(.uid as $u | $uids | index($u)))
			or ((.status.allocation.nodeSelector.nodeSelectorTerms // []) as $t
			    | ($t | length) == 1 and ($t[0].matchFields // []) == [{"key": "metadata.name", "operator": "In", "values": [$n]}])
			or ((.status.allocation.devices.results // []) | any(.pool == $n)))
		| {ns: .metadata.namespace, name: .metadata.name}]'
}
g_ds_has_hook() {
	kubectl -n dra-system get ds dra-driver -o json | jq -e '([.spec.template.spec.containers[].lifecycle.preStop // empty] | length > 0)
		or ((.spec.template.spec.initContainers // []) | length > 0)' >/dev/null
}
g_rollout() { kubectl -n dra-system rollout status ds/dra-driver --timeout=180s >/dev/null; }
g_drivers_ready() {
	local n
	for n in $nodes; do
		g_driver_running "$n" && g_slice_published "$n" || return 1
	done
}

# The workload of a node: 2 pods with one GPU each (generated claims) and a 2 s preStop
# sleep (a workload that takes a moment to stop: the real kubelet then unprepares after
# the driver evicted with it is gone), 1 pod with a GPU and a 4 s preStop sleep (it
# takes longer to go), 1 pod without claims.
g_workload() { # NODE
	cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-$1, namespace: $ns}
spec:
  replicas: 2
  selector: {matchLabels: {app: gpu-$1}}
  template:
    metadata: {labels: {app: gpu-$1}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $1}
      terminationGracePeriodSeconds: 10
      containers:
      - name: main
        image: registry.example.com/inference:v1
        resources: {claims: [{name: gpu}]}
        lifecycle: {preStop: {sleep: {seconds: 2}}}
      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: slow-$1, namespace: $ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: slow-$1}}
  template:
    metadata: {labels: {app: slow-$1}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $1}
      terminationGracePeriodSeconds: 30
      containers:
      - name: main
        image: registry.example.com/trainer:v1
        resources: {claims: [{name: gpu}]}
        lifecycle: {preStop: {sleep: {seconds: 4}}}
      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-$1, namespace: $ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: web-$1}}
  template:
    metadata: {labels: {app: web-$1}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $1}
      terminationGracePeriodSeconds: 2
      containers:
      - {name: main, image: registry.example.com/web:v1}
EOF
}
g_apply_workload() { # NODES...
	local n sep=
	{
		cat <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $ns}
---
EOF
		claim_template "$ns" gpu
		for n in "$@"; do
			printf '%s' "$sep"
			g_workload "$n"
			sep=$'---\n'
		done
	} | kubectl apply -f - >/dev/null
}
g_workload_running() { # NODES...: 4 running pods of the workload and 3 claims on each node
	local n
	for n in "$@"; do
		[ "$(kubectl -n $ns get pods --field-selector "spec.nodeName=$n,status.phase=Running" -o json |
			jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length')" = 4 ] || return 1
		[ "$(g_claims_on_node "$n" | jq --arg ns $ns '[.[] | select(.ns == $ns)] | length')" = 3 ] || return 1
	done
}

# Eviction API (policy/v1) as Cluster Autoscaler uses it, retried on 429 every second for 60 s.
g_evict() { # NS NAME
	local end=$((SECONDS + 60)) code
	while :; do
		code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$e2e_tmp/ca.crt" -H "Authorization: Bearer $admin_tok" \
			-H 'Content-Type: application/json' -X POST "$api_url/api/v1/namespaces/$1/pods/$2/eviction" \
			-d "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"namespace\":\"$1\",\"name\":\"$2\"}}")
		case $code in
		200 | 201 | 404) return 0 ;;
		esac
		[ "$SECONDS" -lt "$end" ] || { echo "  eviction of $1/$2: HTTP $code for 60 s" >&2; return 1; }
		sleep 1
	done
}
# autoscaler_drain NODES...: Cluster Autoscaler's scale-down, default settings: taint each
# node ToBeDeletedByClusterAutoscaler:NoSchedule, then evict every pod of the nodes at
# once (DaemonSet pods, the DRA driver, included; mirror pods cannot be evicted).
g_taint() { # NODES...
	local n
	for n in "$@"; do
		kubectl taint node "$n" "$ca_taint=$(date +%s):NoSchedule" --overwrite >/dev/null || return 1
	done
}
g_pods_of() { # NODES...: "ns name" of every pod on these nodes but mirror pods, one list call
	kubectl get pods -A -o json | jq -r --args '$ARGS.positional as $nodes | .items[]
		| select(.spec.nodeName as $n | $nodes | index($n)) | select(.metadata.annotations["kubernetes.io/config.mirror"] == null)
		| "\(.metadata.namespace) \(.metadata.name)"' "$@"
}
g_evict_all() { # NODES...
	local pids=() p rc=0 pns pname
	while read -r pns pname; do
		[ -n "$pname" ] || continue
		g_evict "$pns" "$pname" &
		pids+=($!)
	done < <(g_pods_of "$@")
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return $rc
}
g_untaint() { # NODES...
	local n
	for n in "$@"; do kubectl taint node "$n" "$ca_taint:NoSchedule-" >/dev/null 2>&1; done
	return 0
}

# g_jq_checks JQ-ARGS...: jq -r printing "ok TEXT" / "FAIL TEXT" lines, each one a check
# (lib.sh's jq_checks: an empty input or no verdict at all fails too).
g_jq_checks() { jq_checks "$@"; }

# Audit events since line N (ResponseComplete only: one per request), as JSON lines.
g_audit_since() { tail -n +"$(($1 + 1))" "$AUDIT" | jq -c 'select(.stage == "ResponseComplete")'; }
# jq: seconds (fractional) of an audit timestamp.
jq_ts='def ts: capture("^(?<s>[^.Z]+)(?:\\.(?<f>[0-9]+))?Z$") | ((.s + "Z") | fromdateiso8601) + (("0." + (.f // "0")) | tonumber);'

# Puts the cluster back: taints off, guard removed (DaemonSet as tests/cluster/up applied it,
# no drainer-guard RBAC), test namespace gone, every driver running.
restore() {
	[ -n "${direct_pids:-}" ] && kill $direct_pids 2>/dev/null
	[ -n "${undo_drain:-}" ] && eval "$undo_drain" >/dev/null 2>&1
	undo_drain=
	# shellcheck disable=SC2086
	g_untaint $nodes
	if g_ds_has_hook || kubectl get clusterrole drainer-guard >/dev/null 2>&1; then
		kubectl apply -f "$manifest" >/dev/null
		g_rollout
		kubectl delete clusterrolebinding,clusterrole drainer-guard --ignore-not-found >/dev/null
	fi
	kubectl delete namespace $ns --ignore-not-found --wait=true --timeout=120s >/dev/null
	wait_until 120 g_drivers_ready
}
e2e_cleanup_hooks+=("restore")

# A leftover of an interrupted run would skew part A.
if g_ds_has_hook || kubectl get namespace $ns >/dev/null 2>&1; then
	echo "  cleaning up a previous run"
	restore
fi
check "every driver runs and publishes its slice before the test" wait_until 60 g_drivers_ready

# The node for parts A and B: the one with the fewest pods of others (the last on a tie).
x=$(for n in $nodes; do echo "$(g_nonmirror_pods "$n" | jq '[.[] | select(.metadata.namespace != "dra-system")] | length') $n"; done |
	sort -k1,1n -k2,2Vr | head -n 1 | cut -d' ' -f2)
echo "  node for the single-node drains: $x ($n_nodes nodes in the cluster)"

# =====================================================================
echo "--- A. without the guard: Cluster Autoscaler's drain strands the claim holders"
check "the driver DaemonSet has no preStop hook yet" bash -c "! kubectl -n dra-system get ds dra-driver -o json | jq -e '[.spec.template.spec.containers[].lifecycle.preStop // empty] | length > 0' >/dev/null"
g_apply_workload "$x"
check "workload on $x: 3 claim holders running, 3 claims on the node" wait_until 90 g_workload_running "$x"
g_nonmirror_pods "$x" | jq -c '[.[] | {ns: .metadata.namespace, name: .metadata.name, uid: .metadata.uid,
	holder: (((.spec.resourceClaims // []) | length) > 0), driver: (.metadata.labels["app.kubernetes.io/component"] == "kubeletplugin")}]' >"$e2e_tmp/a-pods.json"
g_taint "$x"
t0=$(now)
g_evict_all "$x"
check "every pod of $x evicted (the driver included)" test $? = 0
check "the driver pod goes at once (the DaemonSet does not bring it back under the taint)" \
	wait_until 20 bash -c "[ \"\$(kubectl -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin --field-selector spec.nodeName=$x -o name | grep -c .)\" = 0 ]"
sleep 8
kubectl get pods -A --field-selector "spec.nodeName=$x" -o json >"$e2e_tmp/a-after.json"
hung=$(jq -r --argjson before "$(cat "$e2e_tmp/a-pods.json")" '[$before[] | select(.holder) | .uid] as $h
	| [.items[] | select(.metadata.uid as $u | $h | index($u)) | select(.metadata.deletionTimestamp != null and .status.phase == "Running")] | length' "$e2e_tmp/a-after.json")
check_eq "$(since "$t0") s after the evictions all 3 claim holders still hang in Terminating (phase Running)" 3 "$hung"
check_eq "their 3 claims are still on $x" 3 "$(g_claims_on_node "$x" | jq --arg ns $ns '[.[] | select(.ns == $ns)] | length')"
g_untaint "$x"
t1=$(now)
holders_gone() {
	[ "$(kubectl get pods -A --field-selector "spec.nodeName=$x" -o json | jq --argjson before "$(cat "$e2e_tmp/a-pods.json")" \
		'[$before[] | select(.holder) | .uid] as $h | [.items[] | select(.metadata.uid as $u | $h | index($u))] | length')" = 0 ]
}
check "once the driver is back (taint removed), the stranded holders finish" wait_until 60 holders_gone
echo "  stranded holders released $(since "$t1") s after the taint was removed"
check "the workload is back on $x" wait_until 90 g_workload_running "$x"
check "driver of $x running" wait_until 60 g_driver_running "$x"

# =====================================================================
echo "--- B. the guard installed; a rolling restart is not delayed"
kdir=$e2e_tmp/kustomize
# The guard's image: drainer's own (localhost/drainer, retargeted as a user would).
guard_kustomize "$kdir" "$manifest" "$pod_image"
# The rendering, checked before it is applied: the sidecar from drainer's image, the
# plugin's httpGet preStop to it, no copy of a binary anywhere.
kubectl kustomize "$kdir/overlay" >"$e2e_tmp/guard-rendered.yaml"
check_eq "kubectl kustomize of the overlay with deploy/driver-guard" 0 $?
"$KUBECTL" create --dry-run=client -o json -f "$e2e_tmp/guard-rendered.yaml" 2>/dev/null | jq -s '[.[] | select(.kind == "DaemonSet")][0]' >"$e2e_tmp/guard-ds.json"
g_jq_checks --arg img "$pod_image" '.spec.template.spec as $s
	| ($s.initContainers // [] | map(select(.name == "drainer-guard")) | first) as $g
	| ($s.containers[] | select(.name == "plugin")) as $p
	| (if $g.restartPolicy == "Always" and $g.image == $img and $g.command == ["/usr/bin/drainer"]
	      and $g.args == ["guard", "--listen", "$(POD_IP):9465"]
	   then "ok rendered: native sidecar drainer-guard (restartPolicy Always), image \($img), drainer guard --listen $(POD_IP):9465"
	   else "FAIL rendered sidecar: \($g | tojson)" end),
	  (if ($g.env | map(select(.name == "POD_IP"))[0].valueFrom.fieldRef.fieldPath) == "status.podIP"
	      and ([$g.env[].name] | index("NODE_NAME") != null and index("POD_NAME") != null and index("POD_NAMESPACE") != null)
	   then "ok rendered: POD_IP, NODE_NAME, POD_NAME, POD_NAMESPACE from the downward API" else "FAIL rendered env: \($g.env | tojson)" end),
	  (if $g.securityContext.runAsNonRoot == true and $g.securityContext.readOnlyRootFilesystem == true
	      and $g.securityContext.allowPrivilegeEscalation == false and $g.securityContext.capabilities.drop == ["ALL"]
	      and $g.startupProbe.tcpSocket.port == 9465
	   then "ok rendered: the sidecar runs as non-root, read-only, no capabilities, a TCP startup probe" else "FAIL rendered securityContext/startupProbe: \($g | tojson)" end),
	  (if $p.lifecycle.preStop == {httpGet: {path: "/guard", port: 9465}}
	   then "ok rendered: the plugin container preStop is httpGet /guard on port 9465" else "FAIL rendered preStop: \($p.lifecycle | tojson)" end),
	  (if $s.terminationGracePeriodSeconds == 300 then "ok rendered: terminationGracePeriodSeconds 300" else "FAIL grace \($s.terminationGracePeriodSeconds)" end),
	  (if ([.. | strings | select(test("(^|/)cp$|/guard/drainer"))] | length) == 0 and ([$s.volumes[]? | select(.name == "drainer-guard")] | length) == 0
	   then "ok rendered: no copy of a binary (no cp, no /guard/drainer, no drainer-guard volume)" else "FAIL rendered: a copy is still there" end)
	' "$e2e_tmp/guard-ds.json"
# The exec form (for driver images that contain drainer) renders too: the same RBAC,
# preStop exec /usr/bin/drainer guard, no sidecar.
mkdir -p "$kdir/exec"
printf 'resources: [../base]\ncomponents: [%s]\n' "$(realpath --relative-to="$kdir/exec" "$e2e_root/deploy/driver-guard/exec")" >"$kdir/exec/kustomization.yaml"
kubectl kustomize "$kdir/exec" | "$KUBECTL" create --dry-run=client -o json -f - 2>/dev/null | jq -s '.' >"$e2e_tmp/guard-exec.json"
g_jq_checks '([.[] | select(.kind == "DaemonSet")][0].spec.template.spec) as $s
	| (if ($s.containers[] | select(.name == "plugin") | .lifecycle.preStop.exec.command) == ["/usr/bin/drainer", "guard"]
	      and ($s.initContainers // [] | length) == 0
	   then "ok deploy/driver-guard/exec renders: preStop exec /usr/bin/drainer guard, no sidecar" else "FAIL exec form: \($s | tojson)" end),
	  (if ([.[] | select(.metadata.name == "drainer-guard") | .kind] | sort) == ["ClusterRole", "ClusterRoleBinding"]
	   then "ok deploy/driver-guard/exec has the same ClusterRole and binding" else "FAIL exec form RBAC" end)' "$e2e_tmp/guard-exec.json"
t0=$(now)
kubectl apply -k "$kdir/overlay" >/dev/null
check "kubectl apply -k of an overlay with the deploy/driver-guard component" test $? = 0
# The RBAC goes to the driver's own ServiceAccount, the one its pods run as, and to no
# other identity of its namespace (its "default" is every other pod's there).
ds_sa=$(kubectl -n dra-system get ds dra-driver -o jsonpath='{.spec.template.spec.serviceAccountName}')
check_eq "the guard's ClusterRoleBinding names exactly the DaemonSet's own ServiceAccount" \
	"[\"ServiceAccount/dra-system/${ds_sa:-none}\"]" \
	"$(kubectl get clusterrolebinding drainer-guard -o json | jq -c '[.subjects[] | "\(.kind)/\(.namespace)/\(.name)"]')"
check_eq "... which is not the namespace's default" false "$([ "${ds_sa:-default}" = default ] && echo true || echo false)"
check_eq "dra-system's default ServiceAccount may not list ResourceClaims" no \
	"$(kubectl auth can-i list resourceclaims.resource.k8s.io --as=system:serviceaccount:dra-system:default 2>/dev/null)"
check_eq "the driver's ServiceAccount may (the guard's RBAC)" yes \
	"$(kubectl auth can-i list resourceclaims.resource.k8s.io --as=$guard_user 2>/dev/null)"
g_rollout
t_install=$(since "$t0")
check "the DaemonSet has the guard: the drainer-guard sidecar, the plugin's httpGet preStop, terminationGracePeriodSeconds 300" \
	bash -c "kubectl -n dra-system get ds dra-driver -o json | jq -e '.spec.template.spec | (.containers[0].lifecycle.preStop.httpGet.path == \"/guard\") and .terminationGracePeriodSeconds == 300 and (.initContainers[0].name == \"drainer-guard\" and .initContainers[0].restartPolicy == \"Always\")' >/dev/null"
check "drivers ready after the install rollout" wait_until 60 g_drivers_ready
# Each driver pod runs the sidecar from drainer's image (its imageID: the archive's manifest).
g_guard_images() {
	kubectl -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin -o json | jq -r '[.items[]
		| select(.metadata.deletionTimestamp == null) | .status.initContainerStatuses[]? | select(.name == "drainer-guard")
		| "\(.started) \(.imageID)"] | unique | join(",")'
}
want_id=${img_manifest:+localhost/drainer@$img_manifest}
check_eq "every driver pod's sidecar started, from drainer's image" "true ${want_id:-$pod_image}" "$(g_guard_images)"
audit_from=$(audit_lines)
old_drivers=$(kubectl -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin -o jsonpath='{.items[*].metadata.name}')
t0=$(now)
kubectl -n dra-system rollout restart ds/dra-driver >/dev/null
g_rollout
t_restart=$(since "$t0")
check "drivers ready after the restart" wait_until 60 g_drivers_ready
echo "  rollout of the guard (old pods without hook): $t_install s; rolling restart with the guard on $n_nodes nodes: $t_restart s"
sleep 1
g_audit_since "$audit_from" >"$e2e_tmp/b-audit.json"
# From the audit log, per old driver pod: its deletion request -> its guard's first
# request (the preStop's GET reached the sidecar: a list of the Node with the token
# bound to that pod) -> the kubelet's final DELETE. The guard saw no drain: it listed
# nothing but the Node. And the kubelet reported no failed hook (FailedPreStopHook).
jq -rs --arg kre "$kubelet_re" --arg u "$guard_user" --arg old "$old_drivers" "$jq_ts"'
	. as $ev | ($old | split(" ")) as $olds
	| $olds[] as $p
	| ([$ev[] | select(.objectRef.resource == "pods" and .objectRef.namespace == "dra-system" and .objectRef.name == $p
		and .verb == "delete" and .objectRef.subresource == null and (.user.username | test($kre) | not))
		| .requestReceivedTimestamp | ts] | min) as $asked
	| ([$ev[] | select(.objectRef.resource == "pods" and .objectRef.name == $p and .verb == "delete" and .objectRef.subresource == null
		and (.user.username | test($kre)) and .responseStatus.code == 200) | .requestReceivedTimestamp | ts] | max) as $gone
	| ([$ev[] | select(.user.username == $u and ((.userAgent // "") | startswith("drainer/"))
		and ((.user.extra["authentication.kubernetes.io/pod-name"] // []) | index($p)))]) as $g
	| "\($p) \($asked // "null") \($gone // "null") \(([$g[] | select(.objectRef.resource == "nodes") | .requestReceivedTimestamp | ts] | min) // "null") \([$g[] | select(.objectRef.resource != "nodes")] | length)"
	' "$e2e_tmp/b-audit.json" >"$e2e_tmp/b-guards.txt"
awk '{ printf "    %s: deleted; its guard read the Node %s s later; gone %s s after the deletion (%d requests beyond the Node)\n", $1,
	($4 == "null" || $2 == "null") ? "?" : sprintf("%.2f", $4 - $2), ($3 == "null" || $2 == "null") ? "?" : sprintf("%.2f", $3 - $2), $5 }' "$e2e_tmp/b-guards.txt"
check_eq "each of the $n_nodes old driver pods' preStop reached its guard between its deletion and its end (audit: the Node list with the token bound to that pod)" \
	"$n_nodes" "$(awk '$2 != "null" && $3 != "null" && $4 != "null" && $4 >= $2 && $4 <= $3 { n++ } END { print n + 0 }' "$e2e_tmp/b-guards.txt")"
check_eq "... and none of those guards read pods, claims or slices (the node was not draining)" 0 \
	"$(awk '{ n += $5 } END { print n + 0 }' "$e2e_tmp/b-guards.txt")"
check_eq "no FailedPreStopHook Event for those $n_nodes pods (the kubelet reached the guard)" 0 \
	"$(kubectl -n dra-system get events --field-selector reason=FailedPreStopHook -o json |
		jq --arg old "$old_drivers" '($old | split(" ")) as $o | [.items[] | select(.involvedObject.name as $n | $o | index($n))] | length')"
# From the audit log: each old driver pod's deletion request -> the kubelet's final DELETE.
g_audit_since "$audit_from" | jq -rs --arg kre "$kubelet_re" "$jq_ts"'
	[.[] | select(.objectRef.resource == "pods" and .objectRef.namespace == "dra-system" and .verb == "delete" and .objectRef.subresource == null)]
	| group_by(.objectRef.name)[]
	| (map(select(.user.username | test($kre) | not)) | map(.requestReceivedTimestamp | ts) | min) as $asked
	| (map(select((.user.username | test($kre)) and .responseStatus.code == 200)) | map(.requestReceivedTimestamp | ts) | max) as $gone
	| select($asked != null and $gone != null)
	| "\(.[0].objectRef.name) \($gone - $asked)"' >"$e2e_tmp/b-stops.txt"
while read -r pod secs; do printf '    %s: deletion to gone %.2f s\n' "$pod" "$secs"; done <"$e2e_tmp/b-stops.txt"
if $real_nodes; then
	# The real kubelet's own time to end a pod whose container exits at SIGTERM
	# (about 1-2 s here), with room for a loaded machine; a guard that held the
	# driver would hold it until its deadline (300 s).
	delay=4s
else
	delay=$(sed -n 's/.*terminate-delay \([^,]*\),.*/\1/p' "$sim_log" | tail -n 1)
fi
delay_s=$(echo "${delay:-2s}" | sed -n 's/^\([0-9.]*\)s$/\1/p')
check_eq "each old driver pod was gone within ${delay:-2s} + 1 s of its deletion" "$n_nodes 0" \
	"$(grep -c . "$e2e_tmp/b-stops.txt") $(awk -v d="${delay_s:-2}" '$2 > d + 1 { n++ } END { print n + 0 }' "$e2e_tmp/b-stops.txt")"

# g_token_kubeconfig NS SA FILE: a kubeconfig with a token of that ServiceAccount.
g_token_kubeconfig() {
	local tok
	tok=$(kubectl -n "$1" create token "$2" --duration=15m) || return 1
	cat >"$3" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$api_url", certificate-authority-data: "$(base64 -w0 <"$e2e_tmp/ca.crt")"}
users:
- name: u
  user: {token: "$tok"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
EOF
	chmod 600 "$3"
}

# =====================================================================
echo "--- C. the guard's decisions and exit codes (run directly, with the driver's identity)"
# The direct runs use the driver's ServiceAccount (dra-system/dra-driver) as the hooks do,
# so that the audit log attributes every guard request to that one user.
g_token_kubeconfig dra-system dra-driver "$e2e_tmp/guard.kubeconfig"
guard() { env -u POD_NAME -u POD_NAMESPACE -u NODE_NAME KUBECONFIG="$e2e_tmp/guard.kubeconfig" "$guard_bin" guard "$@"; }
t0=$(now)
guard --node "$x" >"$e2e_tmp/d.log" 2>&1
check_eq "node not draining: exit 0 at once ($(since "$t0") s)" 0 $?
for how in cordon "taint karpenter.sh/disrupted:NoSchedule" "taint karpenter.sh/disruption=disrupting:NoSchedule" \
	"taint drainer.io/draining:NoSchedule"; do
	spec=${how#taint }
	case $how in
	cordon) undo_drain="kubectl uncordon $x" && kubectl cordon "$x" >/dev/null ;;
	*) undo_drain="kubectl taint node $x ${spec%%[=:]*}:NoSchedule-" && kubectl taint node "$x" "$spec" >/dev/null ;;
	esac
	t0=$(now)
	guard --node "$x" --deadline 2s >"$e2e_tmp/d.log" 2>&1
	rc=$?
	eval "$undo_drain" >/dev/null
	undo_drain=
	check_eq "node draining ($how), claims held: exit 3 after --deadline 2s ($(since "$t0") s)" 3 "$rc"
	named=0
	for c in $(g_claims_on_node "$x" | jq -r --arg ns $ns '.[] | select(.ns == $ns) | .name') \
		$(kubectl -n $ns get pods --field-selector "spec.nodeName=$x" -o jsonpath='{.items[*].metadata.name}'); do
		case $c in web-*) continue ;; esac
		grep -q "still held:.*$ns/$c[,)]" "$e2e_tmp/d.log" && named=$((named + 1))
	done
	check_eq "  its 'still held' line names the 3 claims and the 3 claim holders still there" 6 "$named"
	check "  its last line counts them" grep -Eq 'gave up.*still held: [0-9]+ ResourceClaims? on the node; [0-9]+ claim-holding pods?$' "$e2e_tmp/d.log"
done
sed 's/^/    /' "$e2e_tmp/d.log" | tail -n 2 | cut -c1-400
guard --node no-such-node >"$e2e_tmp/d.log" 2>&1
check_eq "unknown node: exit 1" 1 $?
check "  and says so" grep -q 'node "no-such-node" not found' "$e2e_tmp/d.log"
guard >"$e2e_tmp/d.log" 2>&1
check_eq "no --node and no \$NODE_NAME: exit 2" 2 $?
guard --node "$x" --deadline 5s --grace-period-seconds 30 >/dev/null 2>&1
check_eq "--deadline with --grace-period-seconds: exit 2" 2 $?
g_token_kubeconfig $ns default "$e2e_tmp/norbac.kubeconfig"
env -u POD_NAME -u POD_NAMESPACE KUBECONFIG="$e2e_tmp/norbac.kubeconfig" "$guard_bin" guard --node "$x" >"$e2e_tmp/d.log" 2>&1
check_eq "an identity without the guard's RBAC: exit 1 (the hook then lets the driver go)" 1 $?
check "  and names the refusal" grep -qi 'forbidden' "$e2e_tmp/d.log"

# The server form, run directly on loopback (what the sidecar runs on the pod IP): one
# run per GET /guard, its answer by status; nothing else is served.
env -u POD_NAME -u POD_NAMESPACE -u NODE_NAME KUBECONFIG="$e2e_tmp/guard.kubeconfig" \
	"$guard_bin" guard --node "$x" --listen 127.0.0.1:0 --deadline 3s >"$e2e_tmp/srv.log" 2>&1 &
srv_pid=$!
track_pid $srv_pid
srv_port() { sed -n 's/.*GET \/guard on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' "$e2e_tmp/srv.log"; }
wait_until 10 grep -q '(port [0-9]*)' "$e2e_tmp/srv.log"
check "guard --listen 127.0.0.1:0 listens, on a free port ($(srv_port))" test -n "$(srv_port)"
srv=http://127.0.0.1:$(srv_port)
t0=$(now)
check_eq "GET /guard, node not draining: 200 at once ($(since "$t0") s)" 200 "$(curl -s -o "$e2e_tmp/srv.body" -w '%{http_code}' --max-time 10 "$srv/guard")"
check "  its body says why" grep -q 'is not being drained' "$e2e_tmp/srv.body"
undo_drain="kubectl uncordon $x" && kubectl cordon "$x" >/dev/null
t0=$(now)
code=$(curl -s -o "$e2e_tmp/srv.body" -w '%{http_code}' --max-time 10 "$srv/guard")
secs=$(since "$t0")
eval "$undo_drain" >/dev/null
undo_drain=
check_eq "GET /guard, node cordoned, claims held: 504 after --deadline 3s (${secs} s)" 504 "$code"
check "  its body counts the claims and claim holders still there (3 and more each)" bash -c "grep -Eo 'still held: [0-9]+ ResourceClaims? on the node; [0-9]+ claim-holding pods?' '$e2e_tmp/srv.body' | awk '{ exit !(\$3 >= 3 && \$8 >= 3) }'"
check "  and names none of them (the guard's log does)" bash -c "! grep -q '$ns/' '$e2e_tmp/srv.body' && grep -q 'still held:.*$ns/' '$e2e_tmp/srv.log'"
sed 's/^/    /' "$e2e_tmp/srv.body" | cut -c1-300
check_eq "POST /guard: 405" 405 "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "$srv/guard")"
check_eq "HEAD /guard: 405" 405 "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -I "$srv/guard")"
check_eq "GET /metrics: 404 (one path only)" 404 "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$srv/metrics")"
# SIGTERM while a GET waits (node cordoned, claims held): that GET is answered 503, then
# the server stops with exit 0.
undo_drain="kubectl uncordon $x" && kubectl cordon "$x" >/dev/null
n_waiting=$(grep -c 'waiting: ' "$e2e_tmp/srv.log")
curl -s -o "$e2e_tmp/srv.body" -w '%{http_code}' --max-time 10 "$srv/guard" >"$e2e_tmp/srv.code" &
curl_pid=$!
wait_until 5 bash -c "[ \$(grep -c 'waiting: ' '$e2e_tmp/srv.log') -gt $n_waiting ]"
kill -TERM $srv_pid
wait $srv_pid
check_eq "SIGTERM: the server stops, exit 0" 0 $?
untrack_pid $srv_pid
wait $curl_pid
eval "$undo_drain" >/dev/null
undo_drain=
check_eq "  the GET that was waiting got 503 ($(cat "$e2e_tmp/srv.body" 2>/dev/null | head -c 60))" 503 "$(cat "$e2e_tmp/srv.code")"

# =====================================================================
if [ "$n_nodes" -ge "$load" ]; then
	drain_nodes=$(echo "$nodes" | head -n "$load" | tr '\n' ' ')
else
	drain_nodes=$x
fi
# shellcheck disable=SC2086
set -- $drain_nodes
drain_arr=("$@")
n_drain=$#
n_direct=$((load - n_drain))
echo "--- D. the guard on $n_drain drained node(s) at once ($n_drain sidecar(s) + $n_direct direct guard run(s) = $load guards)"
g_apply_workload "$@"
check "workload running on the $n_drain node(s)" wait_until 180 g_workload_running "$@"
check "drivers ready" wait_until 60 g_drivers_ready
for n in "$@"; do
	g_nonmirror_pods "$n" | jq -c --arg node "$n" '[.[] | {node: $node, ns: .metadata.namespace, name: .metadata.name, uid: .metadata.uid,
		holder: (((.spec.resourceClaims // []) | length) > 0), driver: (.metadata.labels["app.kubernetes.io/component"] == "kubeletplugin")}]'
done | jq -sc 'add' >"$e2e_tmp/c-pods.json"
for n in "$@"; do g_claims_on_node "$n" | jq -c --arg node "$n" 'map(. + {node: $node})'; done | jq -sc 'add' >"$e2e_tmp/c-claims.json"
echo "  before: $(jq '[.[] | select(.holder)] | length' "$e2e_tmp/c-pods.json") claim holders, $(jq length "$e2e_tmp/c-claims.json") claims, $(jq '[.[] | select(.driver)] | length' "$e2e_tmp/c-pods.json") driver pods"

audit_from=$(audit_lines)
g_taint "$@"
direct_pids=
for i in $(seq 1 "$n_direct"); do
	node=${drain_arr[$(((i - 1) % n_drain))]}
	env -u POD_NAME -u POD_NAMESPACE KUBECONFIG="$e2e_tmp/guard.kubeconfig" \
		"$guard_bin" guard --node "$node" --grace-period-seconds 120 >"$e2e_tmp/direct-$i.log" 2>&1 &
	direct_pids+=" $!"
done
sleep 1
t0=$(now)
g_evict_all "$@"
check "every pod of the $n_drain node(s) evicted at once (drivers included)" test $? = 0
check "every drained node ends empty" wait_until 120 g_nodes_empty "$@"
t_empty=$(since "$t0")
direct_rc=0
for p in $direct_pids; do wait "$p" || direct_rc=1; done
direct_pids=
[ "$n_direct" = 0 ] || check "the $n_direct direct guard runs exited 0" test "$direct_rc" = 0
[ "$n_direct" = 0 ] || grep -h 'letting the driver stop\|gave up\|error' "$e2e_tmp"/direct-*.log | cut -d' ' -f2- | sed 's/waited [0-9.]* s/waited N s/' | sort | uniq -c | sed 's/^/    /' | head -5
echo "  nodes empty $t_empty s after the evictions"
sleep 1
g_audit_since "$audit_from" >"$e2e_tmp/c-audit.json"

# Per node: the driver pod's final DELETE (by the kubelet, after its hook returned and its
# containers stopped) came after every claim holder's final DELETE and after the last write
# of the resourceclaim controller to each claim of the node; and it had been Terminating
# since its eviction.
g_jq_checks -s --argjson pods "$(cat "$e2e_tmp/c-pods.json")" --argjson claims "$(cat "$e2e_tmp/c-claims.json")" \
	--arg kre "$kubelet_re" "$jq_ts"'
	. as $ev
	| def gone($uid; $name): [$ev[] | select((.user.username | test($kre)) and .verb == "delete" and .objectRef.resource == "pods"
		and .objectRef.subresource == null and .objectRef.name == $name and .responseStatus.code == 200) | .requestReceivedTimestamp | ts] | min;
	# A claim holder is done when the kubelet reported it terminal: its last status
	# write before its final DELETE (the kubelet unprepares its claims first). The
	# real kubelet deletes the object a moment later, the driver may go in between.
	def done($uid; $name): gone($uid; $name) as $g
		| if $g == null then null
		  else ([$ev[] | select((.user.username | test($kre)) and .objectRef.resource == "pods" and .objectRef.subresource == "status"
			and .objectRef.name == $name and (.verb | IN("patch", "update")) and .responseStatus.code == 200)
			| .requestReceivedTimestamp | ts | select(. <= $g)] | max) // $g end;
	def evicted($name): [$ev[] | select(.verb == "create" and .objectRef.subresource == "eviction" and .objectRef.name == $name
		and (.responseStatus.code // 0) < 300) | .requestReceivedTimestamp | ts] | min;
	def released($c): [$ev[] | select(.user.username == "system:kube-controller-manager" and .objectRef.resource == "resourceclaims"
		and .objectRef.namespace == $c.ns and .objectRef.name == $c.name and (.verb | IN("update", "patch", "delete"))) | .requestReceivedTimestamp | ts] | max;
	($pods | map(.node) | unique) as $nodes
	| [$nodes[] as $n
	   | ($pods[] | select(.node == $n and .driver)) as $d
	   | evicted($d.name) as $t0
	   | gone($d.uid; $d.name) as $td
	   | ([$pods[] | select(.node == $n and .holder) | done(.uid; .name)]) as $th
	   | ([$claims[] | select(.node == $n) | released(.)]) as $tc
	   | {n: $n, d: $d.name, t0: $t0, td: $td, th: $th, tc: $tc,
	      ok: ($t0 != null and $td != null and ($th | length) == 3 and ($th | all(. != null and . < $td))
	           and ($tc | length) == 3 and ($tc | all(. != null and . < $td)))}] as $r
	| ([$r[] | select(.ok | not)]) as $bad
	| (if ($r | length) == 0 then "FAIL no drained node with a driver pod in the snapshot: nothing to check"
	   elif ($bad | length) == 0
	   then "ok on all \($r | length) node(s) the driver pod stayed Terminating until every claim holder was done (reported terminal by its kubelet) and every claim released (audit log)"
	   else "FAIL driver pod gone too early on \($bad | map("\(.n) (driver \(.d): evicted \(.t0), gone \(.td); holders done \(.th); claims released \(.tc))") | join("; "))" end),
	  ([$r[] | .td - .t0] | select(length > 0) | "ok drivers held \(min * 100 | round / 100)..\(max * 100 | round / 100) s after their eviction (claim holders done \([$r[] | (.th | max) - .t0] | max * 100 | round / 100) s, last claim released \([$r[] | (.tc | max) - .t0] | max * 100 | round / 100) s at the latest)")
	' "$e2e_tmp/c-audit.json"
left=0
for n in "$@"; do left=$((left + $(g_claims_on_node "$n" | jq length))); done
check_eq "no ResourceClaim left on the drained node(s)" 0 "$left"

# Load: every request of the guards (user $guard_user, drainer's User-Agent: on real nodes
# the driver's plugin runs as the same ServiceAccount) in this part, by verb and resource.
jq -s --arg u "$guard_user" '[.[] | select(.user.username == $u and ((.userAgent // "") | startswith("drainer/")))]' "$e2e_tmp/c-audit.json" >"$e2e_tmp/c-guard.json"
echo "  requests of the $load guards (audit log, user $guard_user), by verb and resource:"
jq -r 'group_by([.verb, .objectRef.resource]) | .[] | "    \(length)\t\(.[0].verb) \(.[0].objectRef.resource)"' "$e2e_tmp/c-guard.json"
total=$(jq length "$e2e_tmp/c-guard.json")
echo "  $total requests in all, $(awk -v t="$total" -v g="$load" 'BEGIN { printf "%.1f", t / g }') per guard, over $t_empty s"
g_jq_checks --argjson g "$load" '
	(if ([.[] | select(.verb | IN("list", "watch", "get") | not)] | length) == 0 then "ok the guards only read"
	 else "FAIL the guards wrote: \([.[] | select(.verb | IN("list", "watch", "get") | not) | "\(.verb) \(.objectRef.resource)"] | unique | join(", "))" end),
	(if ([.[] | select(.verb == "get")] | length) == 0 then "ok no GET at all (no polling)"
	 else "FAIL \([.[] | select(.verb == "get")] | length) GETs: \([.[] | select(.verb == "get") | .requestURI] | unique | .[0:3] | join(", "))" end),
	# (a list of a resource.k8s.io version the server does not serve, answered 404, is
	# how drainer finds the served one: v1, then v1beta2, then v1beta1; none on a v1
	# cluster, one per resource on 1.33 serving v1beta2; counted apart)
	([.[] | select(.verb == "list" and .objectRef.apiGroup == "resource.k8s.io" and .responseStatus.code == 404)]) as $probe
	| ([.[] | select((.verb == "list" and .objectRef.apiGroup == "resource.k8s.io" and .responseStatus.code == 404) | not)]) as $rq
	| (["nodes", "pods", "resourceclaims", "resourceslices"][] as $r
	 | ([$rq[] | select(.objectRef.resource == $r and .verb == "list")] | length) as $l
	 | ([$rq[] | select(.objectRef.resource == $r and .verb == "watch")] | length) as $w
	 | if $l <= $g and $w <= $g and $l >= 1 then "ok \($r): \($l) lists, \($w) watches for \($g) guards (at most one each)"
	   else "FAIL \($r): \($l) lists, \($w) watches for \($g) guards" end),
	(if ($probe | length) <= 4 * $g then "ok \($probe | length) lists of a DRA API version not served (404: the version probe) for \($g) guards: at most 2 per resource each"
	 else "FAIL \($probe | length) lists answered 404 for \($g) guards: more than the version probe (2 per resource each)" end),
	(if ($rq | length) <= 8 * $g then "ok \($rq | length) requests for \($g) guards (beyond the version probe): no more than their 4 lists + 4 watches"
	 else "FAIL \($rq | length) requests for \($g) guards: more than 4 lists + 4 watches each" end)
	' "$e2e_tmp/c-guard.json"

# =====================================================================
if $real_nodes; then
	echo "--- E. the real kubelet's grace period bounds the guard (an eviction asking for 12 s)"
	# The node drains (taint), its claim holders stay (nobody evicts them); only the
	# driver pod is evicted, asking for a 12 s grace period. The sidecar's guard reads
	# its pod's deletionGracePeriodSeconds and answers the preStop's GET 5 s before it
	# ends (504, counting what was still held); the kubelet then stops the plugin, then
	# the sidecar: the driver pod is gone within the grace period although the claims
	# are still on the node.
	g_untaint "$x"
	check "workload back on $x" wait_until 120 g_workload_running "$x"
	wait_until 60 g_driver_running "$x"
	drv=$(g_driver_pods "$x" | jq -r '[.[] | select(.metadata.deletionTimestamp == null)][0].metadata.name')
	# The sidecar's log, followed through the kubelet until the container ends (shown only).
	kubectl -n dra-system logs -f "$drv" -c drainer-guard --since=1s >"$e2e_tmp/e-guard.log" 2>&1 &
	e_logs=$!
	track_pid $e_logs
	audit_from=$(audit_lines)
	g_taint "$x"
	t0=$(now)
	code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$e2e_tmp/ca.crt" -H "Authorization: Bearer $admin_tok" \
		-H 'Content-Type: application/json' -X POST "$api_url/api/v1/namespaces/dra-system/pods/$drv/eviction" \
		-d "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"namespace\":\"dra-system\",\"name\":\"$drv\"},\"deleteOptions\":{\"gracePeriodSeconds\":12}}")
	check_eq "driver pod $drv evicted with deleteOptions.gracePeriodSeconds 12" 201 "$code"
	drv_gone() { ! kubectl -n dra-system get pod "$drv" >/dev/null 2>&1; }
	check "the driver pod is gone within its grace period" wait_until 30 drv_gone
	echo "  driver pod gone $(since "$t0") s after its eviction"
	sleep 1
	g_audit_since "$audit_from" >"$e2e_tmp/e-audit.json"
	g_jq_checks -s --arg drv "$drv" --arg kre "$kubelet_re" --arg ns "$ns" "$jq_ts"'
		([.[] | select(.verb == "create" and .objectRef.subresource == "eviction" and .objectRef.name == $drv and .responseStatus.code == 201)
			| {t: (.requestReceivedTimestamp | ts), g: .requestObject.deleteOptions.gracePeriodSeconds}] | first) as $ev
		| ([.[] | select((.user.username | test($kre)) and .verb == "delete" and .objectRef.resource == "pods" and .objectRef.subresource == null
			and .objectRef.name == $drv and .responseStatus.code == 200) | .requestReceivedTimestamp | ts] | min) as $gone
		| ([.[] | select(.user.username == "system:kube-controller-manager" and .objectRef.resource == "resourceclaims"
			and .objectRef.namespace == $ns and (.verb | IN("update", "patch", "delete"))) | .requestReceivedTimestamp | ts] | min) as $released
		| if $ev == null or $gone == null then "FAIL no eviction (\($ev)) or no final DELETE by the kubelet (\($gone)) of \($drv)"
		  else ($gone - $ev.t) as $held
		  | (if $ev.g == 12 and $held >= 6 and $held <= 12 + 3
		     then "ok the kubelet held driver pod \($drv) \($held * 10 | round / 10) s: its guard waited (>= 6 s, a node that is not draining lets it go at once) and the 12 s grace period of the eviction bounded it (kubelet DELETE within 12 s + 3)"
		     else "FAIL driver pod \($drv): eviction grace \($ev.g), gone \($held) s after it (want 6..15 s)" end),
		    (if $released == null or $released > $gone then "ok the claims of the node were still allocated when the driver went (the guard gave up at its deadline, it was not released)"
		     else "FAIL a claim of \($ns) was released at \($released), before the driver went at \($gone)" end)
		  end' "$e2e_tmp/e-audit.json"
	# The preStop's GET reached the guard of that pod, which held (it read the node's
	# pods and claims, with the token bound to the pod) and answered: the kubelet
	# recorded no failed hook.
	g_jq_checks -s --arg drv "$drv" --arg u "$guard_user" '
		[.[] | select(.user.username == $u and ((.userAgent // "") | startswith("drainer/"))
			and ((.user.extra["authentication.kubernetes.io/pod-name"] // []) | index($drv)))] as $g
		| if ([$g[] | select(.objectRef.resource == "resourceclaims" and .verb == "watch")] | length) >= 1
		     and ([$g[] | select(.objectRef.resource == "pods" and .verb == "watch")] | length) >= 1
		  then "ok the guard of \($drv) held: it watched the node'"'"'s pods and the claims (\($g | length) requests, audit)"
		  else "FAIL the guard of \($drv) did not hold: \([$g[] | "\(.verb) \(.objectRef.resource)"] | join(", "))" end' "$e2e_tmp/e-audit.json"
	check_eq "no FailedPreStopHook Event for $drv" 0 \
		"$(kubectl -n dra-system get events --field-selector "reason=FailedPreStopHook,involvedObject.name=$drv" -o json | jq '.items | length')"
	wait_until 10 bash -c "! kill -0 $e_logs 2>/dev/null"
	reap_pid "$e_logs"
	sed 's/^/    sidecar: /' "$e2e_tmp/e-guard.log" | cut -c1-300 | tail -n 6
	check_eq "the 3 claims are still on $x" 3 "$(g_claims_on_node "$x" | jq --arg ns $ns '[.[] | select(.ns == $ns)] | length')"
	g_untaint "$x"
	check "driver of $x back once the node is no longer draining" wait_until 60 g_driver_running "$x"
fi

# =====================================================================
echo "--- restoring the cluster"
g_untaint $nodes
t0=$(now)
kubectl apply -f "$manifest" >/dev/null
g_rollout
kubectl delete clusterrolebinding,clusterrole drainer-guard >/dev/null
echo "  guard removed in $(since "$t0") s (old pods ran their guard hook: nodes not draining)"
check "the DaemonSet is back as tests/cluster/up applied it (no hook, no sidecar)" bash -c "! kubectl -n dra-system get ds dra-driver -o json | jq -e '([.spec.template.spec.containers[].lifecycle.preStop // empty] | length > 0) or ((.spec.template.spec.initContainers // []) | length > 0)' >/dev/null"
kubectl delete namespace $ns --wait=true --timeout=120s >/dev/null
check "test namespace deleted" test $? = 0
check "every driver runs again and publishes its slice" wait_until 120 g_drivers_ready
finish
