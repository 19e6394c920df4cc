# Karpenter in tests/cluster (DRAINER_CLUSTER_PEERS=karpenter; sourced by up, after lib.sh,
# real nodes only): Karpenter v1.15.0's controllers (build-karpenter, cached: main.go of
# karpenter/, Karpenter's own kwok/main.go with a cloud provider whose instances are the
# real kubelets) against this API server. See README.md, "Karpenter
# (DRAINER_CLUSTER_PEERS=karpenter)".
#
#  - the controller runs as the user karpenter (system:masters, its own token and
#    kubeconfig: the audit log tells its requests apart), without leader election, its
#    metrics and health probe on DRAINER_CLUSTER_KARPENTER_METRICS_PORT and
#    DRAINER_CLUSTER_KARPENTER_HEALTH_PORT (Karpenter binds both on every address: its
#    options have no host);
#  - its CRDs (build-karpenter's crd/: karpenter.sh's NodePool, NodeClaim, NodeOverlay,
#    the CapacityBuffer its controllers watch, and Karpenter's KWOKNodeClass, the
#    NodeClass kind the provider names);
#  - KWOKNodeClass "default" (Ready: the CRD's default status; no controller of the
#    NodeClass runs, none is needed), and NodePool
#    drainer-test over it, whose disruption budget allows no node (consolidateAfter
#    Never, expireAfter Never): Karpenter disrupts nothing by itself; only a deleted
#    NodeClaim terminates a node;
#  - per real node a NodeClaim node-N (labels karpenter.sh/nodepool and
#    kubernetes.io/hostname: the provider binds it to that Node: providerID
#    drainer-test://node-N, the ID the kubelet registered with, nodes.sh); up waits until
#    each one is Launched, Registered and Initialized (Karpenter's lifecycle controller:
#    it then owns the Node: the finalizer karpenter.sh/termination, the label
#    karpenter.sh/registered).

karpenter_pool=drainer-test
karpenter_nodeclass=default

# karpenter_prepare: the controller's token (kubeconfig: up's write_kubeconfig).
karpenter_prepare() {
	grep -q ',karpenter,karpenter,' "$pki/tokens.csv" ||
		echo "$(openssl rand -hex 24),karpenter,karpenter,system:masters" >>"$pki/tokens.csv"
}

# karpenter_crds: the CRDs build-karpenter copied beside the binary.
karpenter_crds() {
	kubectl apply --server-side -f "$karpenter_dir/crd" >/dev/null || return 1
	kubectl wait --for condition=established --timeout=60s crd --all >/dev/null
}

karpenter_start() {
	# shellcheck disable=SC2086
	start_as karpenter env KUBECONFIG="$pki/karpenter.kubeconfig" DISABLE_LEADER_ELECTION=true \
		"$bin/karpenter" \
		--metrics-port "$DRAINER_CLUSTER_KARPENTER_METRICS_PORT" \
		--health-probe-port "$DRAINER_CLUSTER_KARPENTER_HEALTH_PORT" \
		--log-level "${DRAINER_KARPENTER_LOG_LEVEL:-debug}" ${DRAINER_KARPENTER_ARGS:-}
}

karpenter_healthy() { [ "$(curl -s --max-time 2 "http://127.0.0.1:$DRAINER_CLUSTER_KARPENTER_HEALTH_PORT/readyz")" = ok ]; }

# karpenter_nodeclaim_yaml I [TGP]: node-i's NodeClaim; TGP its
# spec.terminationGracePeriod (a duration such as 20s; none: Karpenter waits for the
# drain however long it takes). A NodeClaim's spec is immutable: a test that wants
# another TGP deletes the NodeClaim and writes it again.
karpenter_nodeclaim_yaml() {
	cat <<EOF
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: node-$1
  labels:
    karpenter.sh/nodepool: $karpenter_pool
    karpenter.kwok.sh/kwoknodeclass: $karpenter_nodeclass
    kubernetes.io/hostname: node-$1
spec:
  nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: $karpenter_nodeclass}
  requirements: []
  expireAfter: Never
${2:+  terminationGracePeriod: $2
}---
EOF
}

# karpenter_objects: the NodeClass, the NodePool, a NodeClaim per node.
karpenter_objects() {
	local i
	{
		cat <<EOF
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: $karpenter_nodeclass}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: $karpenter_pool}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: $karpenter_nodeclass}
      requirements: []
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
    budgets: [{nodes: "0"}]
---
EOF
		for i in $(seq 1 "$node_count"); do
			karpenter_nodeclaim_yaml "$i"
		done
	} | kubectl apply -f - >"$cluster_dir/karpenter-apply.log" 2>&1
}

# karpenter_nodeclaims_ready [NAME...]: these NodeClaims (default: one per node)
# Launched, Registered and Initialized, each bound to the Node of its name.
karpenter_nodeclaims_ready() {
	local out want
	want=("$@")
	[ "${#want[@]}" -gt 0 ] || mapfile -t want < <(seq 1 "$node_count" | sed 's/^/node-/')
	out=$(kubectl get nodeclaims -o go-template='{{range .items}}{{.metadata.name}} {{.status.nodeName}}{{range .status.conditions}}{{if or (eq .type "Launched") (eq .type "Registered") (eq .type "Initialized")}} {{.type}}={{.status}}{{end}}{{end}}{{"\n"}}{{end}}')
	local n line
	for n in "${want[@]}"; do
		line=$(grep "^$n " <<<"$out") || return 1
		[ "$(cut -d' ' -f2 <<<"$line")" = "$n" ] || return 1
		for c in Launched Registered Initialized; do
			grep -q " $c=True" <<<"$line" || return 1
		done
	done
}
