# Cluster API in tests/cluster (DRAINER_CLUSTER_PEERS=capi; sourced by up, after lib.sh,
# real nodes only): Cluster API's core manager v1.14.2 (build-capi, cached) against this
# API server, with the smallest infrastructure provider that lets its Machine controller
# manage the real kubelets. See README.md, "Cluster API (DRAINER_CLUSTER_PEERS=capi)".
#
#  - the manager runs as the user capi-manager (system:masters, its own token and
#    kubeconfig: the audit log tells its requests apart), without leader election, its
#    diagnostics endpoint off (--diagnostics-address=0) and the CRD migrator's phases
#    skipped (a fresh etcd: nothing stored in an older version);
#  - its webhooks: the manager has no flag that turns its webhook server off, so it serves
#    them on DRAINER_CLUSTER_CAPI_WEBHOOK_PORT with a certificate openssl makes here (our
#    CA's); they are NOT registered with the API server (no Validating/Mutating
#    WebhookConfiguration, the CRDs' conversion is None as the bases ship them): the
#    objects below are written complete, as the defaulting webhook would leave them;
#  - the infrastructure provider is a CRD, TestMachine of infrastructure.drainer.test
#    v1alpha1, labelled cluster.x-k8s.io/v1beta2=v1alpha1 (the contract label Cluster API
#    reads: contract v1beta2, served by our v1alpha1); its objects are static and written
#    provisioned (status.initialization.provisioned, spec.providerID
#    drainer-test://node-N, the ID each kubelet registers with: nodes.sh) without a
#    finalizer, so the Machine controller's delete of one is final at once;
#  - Cluster capi-test/drainer-test without controlPlaneRef or infrastructureRef (v1beta2
#    marks the infrastructure provisioned then; the control plane counts as initialized
#    once a control-plane Machine has a Node), its Secret drainer-test-kubeconfig (this
#    API server, the manager's user), and per node a TestMachine and a Machine
#    node-N carrying drainer's pre-drain hook (node-1's labelled control plane, so the
#    cluster's control plane is initialized); up waits until each Machine is Running with
#    status.nodeRef set by the Machine controller.

capi_ns=capi-test
capi_cluster=drainer-test
capi_hook=pre-drain.delete.hook.machine.cluster.x-k8s.io/drainer

# capi_prepare: the manager's token, kubeconfig (write_kubeconfig) and serving certificate.
capi_prepare() {
	grep -q ',capi-manager,capi-manager,' "$pki/tokens.csv" ||
		echo "$(openssl rand -hex 24),capi-manager,capi-manager,system:masters" >>"$pki/tokens.csv"
	local wd=$pki/capi-webhook
	if [ ! -s "$wd/tls.crt" ]; then
		mkdir -p "$wd"
		(
			cd "$wd"
			umask 077
			openssl ecparam -name prime256v1 -genkey -noout -out tls.key 2>/dev/null
			openssl req -new -key tls.key -subj "/CN=capi-webhook" -out w.csr 2>/dev/null
			printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
				"extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >w.ext
			openssl x509 -req -in w.csr -CA ../ca.crt -CAkey ../ca.key -CAcreateserial -days 3650 -sha256 \
				-extfile w.ext -out tls.crt 2>/dev/null
			rm -f w.csr w.ext ../ca.srl
		)
	fi
}

# capi_crds: Cluster API's CRDs (build-capi copied them beside the binary) and the
# infrastructure CRD.
capi_crds() {
	kubectl apply --server-side -f "$capi_dir/crd" >/dev/null || return 1
	kubectl apply --server-side -f - >/dev/null <<'EOF' || return 1
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: testmachines.infrastructure.drainer.test
  labels:
    cluster.x-k8s.io/v1beta2: v1alpha1
spec:
  group: infrastructure.drainer.test
  names: {kind: TestMachine, listKind: TestMachineList, plural: testmachines, singular: testmachine}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
EOF
	kubectl wait --for condition=established --timeout=60s crd --all >/dev/null
}

capi_start() {
	# shellcheck disable=SC2086
	start_as capi-manager "$bin/capi-manager" \
		--kubeconfig "$pki/capi-manager.kubeconfig" \
		--leader-elect=false --diagnostics-address=0 \
		--health-addr "127.0.0.1:$DRAINER_CLUSTER_CAPI_HEALTH_PORT" \
		--webhook-port "$DRAINER_CLUSTER_CAPI_WEBHOOK_PORT" --webhook-cert-dir "$pki/capi-webhook" \
		--skip-crd-migration-phases StorageVersionMigration,CleanupManagedFields \
		--sync-period 1m ${DRAINER_CAPI_ARGS:-}
}

capi_healthy() { [ "$(curl -s --max-time 2 "http://127.0.0.1:$DRAINER_CLUSTER_CAPI_HEALTH_PORT/readyz")" = ok ]; }

# capi_machine_yaml I: node-i's TestMachine and Machine.
capi_machine_yaml() {
	local cp=
	[ "$1" = 1 ] && cp='    cluster.x-k8s.io/control-plane: ""'
	cat <<EOF
apiVersion: infrastructure.drainer.test/v1alpha1
kind: TestMachine
metadata:
  name: node-$1
  namespace: $capi_ns
  labels: {cluster.x-k8s.io/cluster-name: $capi_cluster}
spec: {providerID: "drainer-test://node-$1"}
status: {initialization: {provisioned: true}, ready: true}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  name: node-$1
  namespace: $capi_ns
  labels:
    cluster.x-k8s.io/cluster-name: $capi_cluster
$cp
  annotations:
    $capi_hook: ""
spec:
  clusterName: $capi_cluster
  bootstrap: {dataSecretName: node-$1-bootstrap}
  infrastructureRef: {apiGroup: infrastructure.drainer.test, kind: TestMachine, name: node-$1}
---
EOF
}

# capi_objects: the Namespace, the Cluster, its kubeconfig Secret, a Machine per node.
capi_objects() {
	local i
	{
		cat <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $capi_ns}
---
apiVersion: v1
kind: Secret
metadata:
  name: $capi_cluster-kubeconfig
  namespace: $capi_ns
  labels: {cluster.x-k8s.io/cluster-name: $capi_cluster}
type: cluster.x-k8s.io/secret
data:
  value: $(base64 -w0 <"$pki/capi-manager.kubeconfig")
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: $capi_cluster
  namespace: $capi_ns
spec:
  controlPlaneEndpoint: {host: 127.0.0.1, port: $DRAINER_CLUSTER_API_PORT}
---
EOF
		for i in $(seq 1 "$node_count"); do
			capi_machine_yaml "$i"
		done
	} | kubectl apply -f - >"$cluster_dir/capi-apply.log" 2>&1
}

# capi_machines_running: every Machine Running with the Node of its name as nodeRef.
capi_machines_running() {
	local out
	out=$(kubectl -n "$capi_ns" get machines -o go-template='{{range .items}}{{.metadata.name}} {{.status.phase}} {{with .status.nodeRef}}{{.name}}{{end}}{{"\n"}}{{end}}')
	[ "$(echo "$out" | grep -c .)" -ge "$node_count" ] || return 1
	! echo "$out" | awk '!($2 == "Running" && $3 == $1) { bad = 1 } END { exit !bad }'
}
