#!/usr/bin/env bash
# The container image and the manifests that use it:
#  - deploy/image/build makes build/drainer-image.oci.tar (it runs `drainer version`
#    inside the image itself); the archive is an OCI layout of one image, VERSION, an
#    image index of two manifests, linux/amd64 and linux/arm64 (variant v8), each config saying its
#    architecture; the arm64 drainer is an aarch64 ELF file and runs under qemu-user
#    (qemu-aarch64-static -L ROOTFS: the layer's own loader and libraries); each config has user
#    65532, the entrypoint /usr/bin/drainer and the org.opencontainers.image labels
#    (version = the meson project version, revision = HEAD); its one layer holds no
#    shell and no package manager, every ELF file in it is the binary or a library
#    of its loader closure, under 30 MB uncompressed;
#  - umoci unpacks it into a runtime bundle whose rootfs runs the entrypoint
#    (chroot as 65532): the way a runtime without podman runs it;
#  - podman runs it against the test cluster with host networking: `status node-1`
#    answers, and the API server's audit log shows the image's drainer (user agent
#    drainer/VERSION) reading node-1;
#  - deploy/, deploy/cluster-mode and deploy/driver-guard name the image as
#    localhost/drainer:VERSION only, and a kustomize `images:` override in an overlay
#    (a temp folder) retargets every container and init container;
#  - deploy/monitoring: its Service selects the pods of the DaemonSet and of cluster
#    mode on their "metrics" port, its ServiceMonitor selects the Service, and all of
#    it passes `kubectl apply --dry-run=server` (with stand-in CRDs for the
#    prometheus-operator kinds, removed afterwards).
# Nothing of podman's lands outside build/image/podman (checked on the host paths).
# Needs the test cluster (DRAINER_CLUSTER_DIR) for the status and dry-run checks.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$install_root" || exit 1
. deploy/image/lib.sh
export LC_ALL=C
: "${DRAINER_CLUSTER_DIR:=/tmp/drainer-cluster}"
KUBECTL=$DRAINER_CLUSTER_DIR/bin/kubectl
# Without a cluster, the kubectl of tests/cluster's build (never whatever kubectl the
# host has: its version and behaviour are not ours).
[ -x "$KUBECTL" ] || KUBECTL=$(tests/cluster/build --control-plane-only)/kubectl
kubectl() { "$KUBECTL" "$@"; }
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build | head -n 1)
before_host=$(host_paths_before)

# --- the image -------------------------------------------------------------------------
t0=$SECONDS
if deploy/image/build ${IMAGE_BUILD_ARGS:-} >"$t_tmp/build.log" 2>&1; then
	pass "deploy/image/build ($((SECONDS - t0)) s)"
else
	fail "deploy/image/build ($((SECONDS - t0)) s)"
	tail -n 30 "$t_tmp/build.log" | sed 's/^/    /'
	finish
	exit 1
fi
sed -n '/^release build/,$p' "$t_tmp/build.log" | sed 's/^/    /'
grep -q '^WARNING' "$t_tmp/build.log" && grep '^WARNING' "$t_tmp/build.log" | sed 's/^/    /'
archive=build/drainer-image.oci.tar
# the linux/amd64 manifest of ARCHIVE's image index
amd64_manifest() {
	local i
	i=$(tar -xOf "$1" ./index.json 2>/dev/null | jq -r '.manifests[0].digest') &&
		tar -xOf "$1" "./blobs/sha256/${i#sha256:}" 2>/dev/null | jq -r '.manifests[]? | select(.platform.architecture == "amd64") | .digest'
}
m0=$(amd64_manifest "$archive")

# A pin the mirror no longer serves (as after a security update): --locked fails and
# says what to do; without it the build warns and builds from a refreshed lock, which
# here pins what packages.lock pins, so the image is the same (its amd64 half: these
# builds are --arch amd64, to save the time).
sed 's/^libuv1=.*/libuv1=1.44.2-0+withdrawn1/' deploy/image/packages.lock >"$t_tmp/stale.lock"
out=$(DRAINER_IMAGE_LOCK=$t_tmp/stale.lock deploy/image/build --arch amd64 --locked --out "$t_tmp/stale.tar" 2>&1)
rc=$?
check "deploy/image/build --locked with a withdrawn pin fails, naming it" \
	bash -c '[ "$1" != 0 ] && grep -q "no longer served.*libuv1=1.44.2-0+withdrawn1" <<<"$2" && grep -q "lock --refresh" <<<"$2"' sh "$rc" "$out"
t2=$SECONDS
out=$(DRAINER_IMAGE_LOCK=$t_tmp/stale.lock deploy/image/build --arch amd64 --out "$t_tmp/stale.tar" 2>&1)
rc=$?
check "without --locked: warns and builds from a refreshed lock ($((SECONDS - t2)) s)" \
	bash -c '[ "$1" = 0 ] && grep -q "^WARNING: .*no longer served" <<<"$2" && grep -q "^WARNING: building from a lock refreshed" <<<"$2"' sh "$rc" "$out"
if grep -q '^WARNING: .*no longer served' "$t_tmp/build.log"; then
	pass "SKIP: packages.lock itself is stale (see the warning above), so the refreshed lock differs from it"
else
	check_eq "the refreshed lock pins what packages.lock pins" "$(grep -v '^#' deploy/image/packages.lock)" "$(grep -v '^#' build/image/packages.lock.refreshed 2>/dev/null)"
	check_eq "and the image is the same (its linux/amd64 manifest)" "$m0" "$(amd64_manifest "$t_tmp/stale.tar")"
fi
[ "$rc" = 0 ] || echo "$out" | tail -n 10 | sed 's/^/    /'

L=$t_tmp/layout
mkdir -p "$L" && tar -C "$L" -xf "$archive"
# --- the image index: linux/amd64 and linux/arm64 ----------------------------------------
check_eq "index.json: one image, $version, an image index" "1 $version application/vnd.oci.image.index.v1+json" \
	"$(jq -r '"\(.manifests | length) \(.manifests[0].annotations["org.opencontainers.image.ref.name"]) \(.manifests[0].mediaType)"' "$L/index.json")"
idx=$L/blobs/sha256/$(jq -r '.manifests[0].digest' "$L/index.json" | cut -d: -f2)
# (the OCI image-index spec: arm64 carries "variant": "v8"; amd64 has no variant)
check_eq "the index: two platforms, linux/amd64 and linux/arm64 variant v8" "linux/amd64 linux/arm64/v8" \
	"$(jq -r '[.manifests[].platform | "\(.os)/\(.architecture)\(if has("variant") then "/\(.variant)" else "" end)"] | join(" ")' "$idx" 2>/dev/null)"
declare -A manifest_of config_of layer_of
for a in amd64 arm64; do
	manifest_of[$a]=$(jq -r --arg a "$a" '.manifests[] | select(.platform.architecture == $a) | .digest' "$idx" 2>/dev/null | cut -d: -f2)
	config_of[$a]=$(jq -r '.config.digest' "$L/blobs/sha256/${manifest_of[$a]}" 2>/dev/null | cut -d: -f2)
	layer_of[$a]=$(jq -r '.layers[0].digest' "$L/blobs/sha256/${manifest_of[$a]}" 2>/dev/null | cut -d: -f2)
	check_eq "linux/$a: its manifest's config says linux/$a" "linux/$a" "$(jq -r '"\(.os)/\(.architecture)"' "$L/blobs/sha256/${config_of[$a]}" 2>/dev/null)"
done
check "the two platforms' layers differ" test "${layer_of[amd64]}" != "${layer_of[arm64]}"
R64=$t_tmp/rootfs-arm64
mkdir -p "$R64" && tar -C "$R64" -xzf "$L/blobs/sha256/${layer_of[arm64]}" 2>/dev/null
check "linux/arm64: /usr/bin/drainer is an aarch64 ELF file: $(file -b "$R64/usr/bin/drainer" | cut -d, -f1-2)" \
	bash -c 'file -b "$1" | grep -q "ELF 64-bit LSB .*ARM aarch64"' sh "$R64/usr/bin/drainer"
out=$(qemu-aarch64-static -L "$R64" "$R64/usr/bin/drainer" version -o json 2>&1)
check_eq "linux/arm64: qemu-aarch64-static -L ROOTFS drainer version -o json reports HEAD" "$(git rev-parse HEAD)" "$(jq -r .revision <<<"$out" 2>/dev/null)"
elfs64=$(cd "$R64" && find . -type f -exec sh -c 'head -c 4 "$1" | grep -q "ELF" && echo "${1#./}"' sh {} \; | sort)
closure64=$(qemu-aarch64-static "$R64/lib/ld-linux-aarch64.so.1" --inhibit-cache --library-path "$R64/lib/aarch64-linux-gnu:$R64/usr/lib/aarch64-linux-gnu" --list "$R64/usr/bin/drainer" |
	awk '/=>/ && !/ld-linux/ { print $3 }' | grep "^$R64/" | xargs -n1 realpath | sed "s|^$R64/||" | sort -u)
expected64=$( (echo usr/bin/drainer; realpath "$R64/lib/ld-linux-aarch64.so.1" | sed "s|^$R64/||"; echo "$closure64") | sort -u)
check_eq "linux/arm64: every ELF file is drainer or a library of its loader closure ($(wc -l <<<"$expected64") files)" "$expected64" "$elfs64"
layer_files() { [ -f "$L/blobs/sha256/$1" ] && tar -tzf "$L/blobs/sha256/$1" | grep -v -e x86_64 -e aarch64 -e ld-linux -e '^\./lib64/$' | sort | tr '\n' ' '; }
if [ -n "${layer_of[amd64]}" ] && [ -n "${layer_of[arm64]}" ]; then
	check_eq "linux/arm64: the same files as linux/amd64 but for the libraries' folder and loader" \
		"$(layer_files "${layer_of[amd64]}")" "$(layer_files "${layer_of[arm64]}")"
else
	fail "linux/arm64: no amd64 or arm64 layer to compare"
fi

# --- the linux/amd64 image --------------------------------------------------------------
manifest=${manifest_of[amd64]}
config=$(jq -r '.config.digest' "$L/blobs/sha256/$manifest" | cut -d: -f2)
layer=$(jq -r '.layers[0].digest' "$L/blobs/sha256/$manifest" | cut -d: -f2)
check_eq "one layer" 1 "$(jq '.layers | length' "$L/blobs/sha256/$manifest")"
cfg=$L/blobs/sha256/$config
check_eq "image config: user, entrypoint, no cmd" '"65532:65532" ["/usr/bin/drainer"] null' \
	"$(jq -c '.config.User, .config.Entrypoint, .config.Cmd' "$cfg" | tr '\n' ' ' | sed 's/ $//')"
check_eq "label org.opencontainers.image.version = the meson version" "$version" "$(jq -r '.config.Labels["org.opencontainers.image.version"]' "$cfg")"
head_rev=$(git rev-parse HEAD)
check_eq "label org.opencontainers.image.revision = HEAD" "$head_rev" "$(jq -r '.config.Labels["org.opencontainers.image.revision"]' "$cfg")"
check_eq "created = the commit time" "$(date -u -d "@$(git log -1 --format=%ct)" +%Y-%m-%dT%H:%M:%SZ)" "$(jq -r .created "$cfg")"
# the layer's contents
mkdir -p "$t_tmp/rootfs" && tar -C "$t_tmp/rootfs" -xzf "$L/blobs/sha256/$layer"
R=$t_tmp/rootfs
check "no shell, no package manager in the image" bash -c "! ls '$R'/bin/sh '$R'/usr/bin/sh '$R'/bin/bash '$R'/usr/bin/dpkg '$R'/usr/bin/apt* >/dev/null 2>&1"
check_eq "users of the image: root, nobody, nonroot 65532" "root:0 nobody:65534 nonroot:65532" "$(awk -F: '{ print $1 ":" $3 }' "$R/etc/passwd" | paste -sd' ' -)"
check "the CA bundle" test -s "$R/etc/ssl/certs/ca-certificates.crt"
elfs=$(cd "$R" && find . -type f -exec sh -c 'head -c 4 "$1" | grep -q "ELF" && echo "${1#./}"' sh {} \; | sort)
closure=$("$R"/lib64/ld-linux-x86-64.so.2 --inhibit-cache --library-path "$R/lib/x86_64-linux-gnu:$R/usr/lib/x86_64-linux-gnu" --list "$R/usr/bin/drainer" |
	awk '/=>/ && !/ld-linux/ { print $3 }' | grep "^$R/" | xargs -n1 realpath | sed "s|^$R/||" | sort -u)
expected=$( (echo usr/bin/drainer; readlink "$R/lib64/ld-linux-x86-64.so.2" | sed 's|^/||'; echo "$closure") | sort -u)
check_eq "every ELF file is drainer or a library of its loader closure ($(wc -l <<<"$expected") files)" "$expected" "$elfs"
bytes=$(du -sb --apparent-size "$R" | cut -f1)
check "uncompressed size under 30 MB: $bytes bytes" test "$bytes" -lt 30000000
echo "    size: $((bytes / 1024)) KiB uncompressed, layer $(($(stat -c %s "$L/blobs/sha256/$layer") / 1024)) KiB gzip"

# a runtime without podman: umoci unpack -> bundle; run the entrypoint in the rootfs as 65532
# (umoci picks no platform of an index: a layout of the amd64 manifest, as a runtime picks it)
jq -c --arg d "sha256:$manifest" --arg v "$version" '.manifests[] | select(.digest == $d) | del(.platform) | .annotations = {"org.opencontainers.image.ref.name": $v} | {schemaVersion: 2, manifests: [.]}' "$idx" >"$t_tmp/index.amd64.json"
cp "$t_tmp/index.amd64.json" "$L/index.json"
if umoci unpack --image "$L:$version" "$t_tmp/bundle" >"$t_tmp/unpack.log" 2>&1; then
	args=$(jq -r '.process.args | join(" ")' "$t_tmp/bundle/config.json")
	uid=$(jq -r '"\(.process.user.uid):\(.process.user.gid)"' "$t_tmp/bundle/config.json")
	out=$(chroot --userspec="$uid" "$t_tmp/bundle/rootfs" $args version 2>&1 | head -n 1)
	check_eq "umoci unpack: bundle runs as $uid, entrypoint '$args' prints its version" "drainer $version" "$out"
else
	fail "umoci unpack"
	sed 's/^/    /' "$t_tmp/unpack.log"
fi

# --- podman against the test cluster ---------------------------------------------------
have_cluster=0
if [ -f "$DRAINER_CLUSTER_DIR/kubeconfig" ] && kubectl --kubeconfig "$DRAINER_CLUSTER_DIR/kubeconfig" get node node-1 >/dev/null 2>&1; then
	have_cluster=1
	export KUBECONFIG=$DRAINER_CLUSTER_DIR/kubeconfig
	audit=$DRAINER_CLUSTER_DIR/audit.log
	n0=$(wc -l <"$audit")
	t1=$SECONDS
	out=$(deploy/image/run --kubeconfig "$DRAINER_CLUSTER_DIR/kubeconfig" status node-1 2>&1)
	rc=$?
	check_eq "podman: the image's drainer status node-1 against the test cluster exits 0 ($((SECONDS - t1)) s)" 0 "$rc"
	grep -q 'node-1' <<<"$out" || { fail "status output names node-1"; echo "$out" | head -n 20 | sed 's/^/    /'; }
	seen=$(tail -n +"$((n0 + 1))" "$audit" | jq -r --arg ua "drainer/$version" 'select(.stage == "ResponseComplete" and (.userAgent | startswith($ua)) and .objectRef.resource == "nodes") | "\(.verb) \(.objectRef.name // "") \(.responseStatus.code)"' | sort -u | tr '\n' ' ')
	check "audit log: the image's drainer (user agent drainer/$version) read node-1: $seen" grep -q 'node-1 200' <<<"$seen"
	out=$(deploy/image/run version -o json 2>&1)
	check_eq "podman: version -o json in the image reports HEAD" "$head_rev" "$(jq -r .revision <<<"$out" 2>/dev/null)"
else
	fail "no test cluster at $DRAINER_CLUSTER_DIR (tests/cluster/up): the podman status check did not run"
fi

# --- one image name, retargeted by an overlay -----------------------------------------
# kubectl create --dry-run=client (YAML to JSON here) maps kinds through the API
# server's discovery: the test cluster, with stand-in CRDs for the operator's kinds.
if [ "$have_cluster" = 1 ]; then
	# stand-ins for prometheus-operator's CRDs (any spec accepted): the dry run checks the
	# kinds, names and namespaces against the real API server, not the operator's schema
	for k in ServiceMonitor:servicemonitors PrometheusRule:prometheusrules; do
		cat <<-YAML
			apiVersion: apiextensions.k8s.io/v1
			kind: CustomResourceDefinition
			metadata: {name: ${k#*:}.monitoring.coreos.com, labels: {drainer-test: stand-in}}
			spec:
			  group: monitoring.coreos.com
			  scope: Namespaced
			  names: {kind: ${k%%:*}, plural: ${k#*:}, listKind: ${k%%:*}List, singular: $(tr 'A-Z' 'a-z' <<<"${k%%:*}")}
			  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
			---
		YAML
	done >"$t_tmp/crds.yaml"
	had_crd=$(kubectl get crd servicemonitors.monitoring.coreos.com -o name 2>/dev/null)
	if [ -z "$had_crd" ]; then
		kubectl apply -f "$t_tmp/crds.yaml" >/dev/null && kubectl wait --for=condition=Established crd -l drainer-test=stand-in --timeout=30s >/dev/null
		t_cleanup_hooks+=("kubectl delete crd -l drainer-test=stand-in --ignore-not-found >/dev/null 2>&1")
	fi
fi
imgs() { kubectl kustomize "$1" | yq_images; }
yq_images() { # every container and init container image of the rendered YAML
	kubectl create --dry-run=client -o json -f - 2>/dev/null | jq -r '.. | objects | select(has("containers")) | (.containers + (.initContainers // []))[] | .image' | sort -u
}
check_eq "deploy/ uses the image as localhost/drainer:$version" "localhost/drainer:$version" "$(imgs deploy/ | tr '\n' ' ' | sed 's/ $//')"
check_eq "deploy/cluster-mode uses the image as localhost/drainer:$version" "localhost/drainer:$version" "$(imgs deploy/cluster-mode | tr '\n' ' ' | sed 's/ $//')"
o=$t_tmp/overlay
mkdir -p "$o/ds" "$o/cm" "$o/guard"
rel() { realpath --relative-to="$1" "$install_root/$2"; }
cat >"$o/ds/kustomization.yaml" <<-YAML
	resources: [$(rel "$o/ds" deploy)]
	images: [{name: localhost/drainer, newName: registry.example.com/ops/drainer, newTag: "9.9.9"}]
YAML
cat >"$o/cm/kustomization.yaml" <<-YAML
	resources: [$(rel "$o/cm" deploy/cluster-mode)]
	images: [{name: localhost/drainer, newName: registry.example.com/ops/drainer, digest: "sha256:$manifest"}]
YAML
cat >"$o/guard/driver.yaml" <<-YAML
	apiVersion: apps/v1
	kind: DaemonSet
	metadata: {name: my-driver, namespace: dra-system, labels: {app.kubernetes.io/component: kubeletplugin}}
	spec:
	  selector: {matchLabels: {app: my-driver}}
	  template:
	    metadata: {labels: {app: my-driver}}
	    spec:
	      containers: [{name: plugin, image: registry.example.com/my-driver:1.0}]
YAML
cat >"$o/guard/kustomization.yaml" <<-YAML
	resources: [driver.yaml]
	components: [$(rel "$o/guard" deploy/driver-guard)]
	images: [{name: localhost/drainer, newName: registry.example.com/ops/drainer, newTag: "9.9.9"}]
YAML
check_eq "overlay on deploy/: images: retargets the DaemonSet" "registry.example.com/ops/drainer:9.9.9" "$(imgs "$o/ds" | tr '\n' ' ' | sed 's/ $//')"
check_eq "overlay on deploy/cluster-mode: images: (by digest) retargets the Deployment" "registry.example.com/ops/drainer@sha256:$manifest" "$(imgs "$o/cm" | tr '\n' ' ' | sed 's/ $//')"
check_eq "overlay with deploy/driver-guard: the guard sidecar (an init container) is retargeted, the driver's image kept" \
	"registry.example.com/my-driver:1.0 registry.example.com/ops/drainer:9.9.9" "$(imgs "$o/guard" | tr '\n' ' ' | sed 's/ $//')"

# --- monitoring: the Service finds the pods -------------------------------------------
kubectl kustomize deploy/monitoring >"$t_tmp/mon.yaml"
check_eq "kubectl kustomize deploy/monitoring" "ConfigMap/drainer-grafana-dashboard PrometheusRule/drainer Service/drainer-metrics ServiceMonitor/drainer" \
	"$(kubectl create --dry-run=client -o json -f "$t_tmp/mon.yaml" 2>/dev/null | jq -rs '[.[] | .items? // . ] | flatten | .[] | "\(.kind)/\(.metadata.name)"' | sort | tr '\n' ' ' | sed 's/ $//')"
svc=$(yq_json() { kubectl create --dry-run=client -o json -f - 2>/dev/null; }; yq_json <"$t_tmp/mon.yaml" | jq -cs '[.[] | .items? // .] | flatten | map(select(.kind == "Service"))[0]')
sm=$(kubectl create --dry-run=client -o json -f "$t_tmp/mon.yaml" 2>/dev/null | jq -cs '[.[] | .items? // .] | flatten | map(select(.kind == "ServiceMonitor"))[0]')
for d in deploy deploy/cluster-mode; do
	w=$(kubectl kustomize "$d" | kubectl create --dry-run=client -o json -f - 2>/dev/null | jq -cs '[.[] | .items? // .] | flatten | map(select(.kind == "DaemonSet" or .kind == "Deployment"))[0]')
	got=$(jq -rn --argjson s "$svc" --argjson w "$w" '
		($w.spec.template.metadata.labels) as $l
		| ([$s.spec.selector | to_entries[] | $l[.key] == .value] | all) as $selects
		| ([$w.spec.template.spec.containers[].ports[]? | select(.name == $s.spec.ports[0].targetPort) | .containerPort] | first) as $port
		| ([$w.spec.template.spec.containers[].args[]?] | join(" ")) as $args
		| "\($selects) \($port) \($args | test("--metrics-addr \\[::\\]:\($port)"))"')
	check_eq "Service drainer-metrics selects the pods of $d on port 'metrics' = the --metrics-addr port" "true 9464 true" "$got"
done
check_eq "ServiceMonitor selects the Service (labels, namespace) and scrapes its port 'metrics'" "true true metrics" \
	"$(jq -rn --argjson s "$svc" --argjson m "$sm" '"\([$m.spec.selector.matchLabels | to_entries[] | $s.metadata.labels[.key] == .value] | all) \($m.spec.namespaceSelector.matchNames | index($s.metadata.namespace) != null) \($m.spec.endpoints[0].port)"')"
if [ "$have_cluster" = 1 ]; then
	# (a server-side dry run creates no namespace: the objects in drainer-system need
	# it to exist; made here for the dry run and deleted again)
	if ! kubectl get ns drainer-system >/dev/null 2>&1; then
		kubectl create ns drainer-system >/dev/null
		t_cleanup_hooks+=("kubectl delete ns drainer-system --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1")
	fi
	before=$(kubectl get all,cm,servicemonitors,prometheusrules -n drainer-system -o name 2>/dev/null | sort)
	out=$( (kubectl kustomize deploy/; echo ---; cat "$t_tmp/mon.yaml") | kubectl apply --dry-run=server -f - 2>&1)
	rc=$?
	check_eq "kubectl apply --dry-run=server of deploy/ + deploy/monitoring: $(grep -c 'server dry run' <<<"$out") objects" 0 "$rc"
	[ "$rc" = 0 ] || echo "$out" | sed 's/^/    /'
	check_eq "the dry run created nothing" "$before" "$(kubectl get all,cm,servicemonitors,prometheusrules -n drainer-system -o name 2>/dev/null | sort)"
fi

check_eq "no container state on the host outside build/image/podman (${host_paths[*]})" "$before_host" "$(host_paths_before)"
finish
