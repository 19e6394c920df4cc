# kwok nodes of tests/cluster (sourced by up, after lib.sh): DRAINER_CLUSTER_NODE_COUNT
# Node objects node-1 .. node-N that one kwok process (built by build-kwok) keeps Ready
# (a Lease each) and whose pods it runs as fake pods through its stages; each Node with
# a ResourceSlice of 8 devices of gpu.example.com written here (no kubelet plugin runs
# on a kwok node), and the dra-driver DaemonSet's pod (the DaemonSet tolerates kwok's
# taint). See README.md, "kwok nodes". Nothing of it is outside $cluster_dir: kwok runs
# with HOME=$cluster_dir/kwok-home (it would read ~/.kwok/kwok.yaml) and serves no port.

kwok_taint=kwok.x-k8s.io/node
kwok_devices=8

# kwok_node_ip I: node-i's InternalIP, P.(i/250).(i%250+1): below P.128.0.0/17, where
# kwok gives the pods their IPs (--cidr).
kwok_node_ip() { echo "$DRAINER_CLUSTER_IP_PREFIX.$(($1 / 250)).$(($1 % 250 + 1))"; }

# kwok_delay_ms DURATION: 2s, 500ms, 1m as milliseconds.
kwok_delay_ms() {
	case $1 in
	*ms) echo "${1%ms}" ;;
	*s) echo $((${1%s} * 1000)) ;;
	*m) echo $((${1%m} * 60000)) ;;
	esac
}

# kwok_write_stages STAGE_DIR OUT: the stages build-kwok copied from the module, one
# file, with pod-delete's delay set to DRAINER_CLUSTER_KWOK_POD_DELETE_DELAY and
# without its jitter (kwok otherwise draws the delay at random between that and the
# pod's deletionTimestamp, up to its whole grace period): a deleted pod goes away that
# long after kwok sees it deleted, unless its annotation
# pod-delete.stage.kwok.x-k8s.io/delay says otherwise.
kwok_write_stages() {
	local dir=$1 out=$2 ms f sep=
	ms=$(kwok_delay_ms "$DRAINER_CLUSTER_KWOK_POD_DELETE_DELAY")
	: >"$out.tmp"
	for f in node-initialize node-heartbeat-with-lease pod-create pod-init-container-running \
		pod-init-container-completed pod-ready pod-complete pod-delete; do
		[ -f "$dir/$f.yaml" ] || { say "no stage $f.yaml in $dir (build-kwok copies them)"; return 1; }
		printf '%s' "$sep" >>"$out.tmp"
		sep=$'---\n'
		if [ "$f" = pod-delete ]; then
			awk -v ms="$ms" '
				/^  delay:$/ { in_delay = 1; print; next }
				in_delay && /^    durationMilliseconds:/ { print "    durationMilliseconds: " ms; set = 1; next }
				in_delay && /^    jitterDurationFrom:$/ { skip = 1; dropped = 1; next }
				skip && /^      / { next }
				{ skip = 0 }
				in_delay && !/^    / { in_delay = 0 }
				{ print }
				END { if (!set || !dropped) exit 1 }' "$dir/$f.yaml" >>"$out.tmp" ||
				{ say "pod-delete.yaml of kwok has no delay.durationMilliseconds or jitterDurationFrom to rewrite"; return 1; }
		else
			cat "$dir/$f.yaml" >>"$out.tmp"
		fi
	done
	kwok_own_config >>"$out.tmp"
	mv -f "$out.tmp" "$out"
}

# kwok_own_config: what kwok.sh adds to the module's stages.
#  - pod-ready-again: a Running pod whose containers are ready but whose Ready condition
#    is False gets Ready back. The node lifecycle controller sets Ready=False on every
#    pod of a node whose Lease it found stale (on a loaded machine kwok renews late); a
#    kubelet reports its pods Ready again once it is back, the module's stages never do
#    (pod-ready handles Pending pods only), and drainer refuses a node whose driver pod
#    is not Ready.
#  - more workers than kwok's 4 for Leases and stages, so that renewals keep up with a
#    thousand nodes on a loaded machine.
kwok_own_config() {
	cat <<'YAML'
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['False']
    - key: '.status.conditions.[] | select( .type == "ContainersReady" ) | .status'
      operator: 'In'
      values: ['True']
  delay:
    durationMilliseconds: 1000
  next:
    patches:
    - subresource: status
      root: status
      type: strategic
      template: |
        conditions:
        - type: Ready
          status: "True"
          lastTransitionTime: {{ Now | Quote }}
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseParallelism: 16
  nodePlayStageParallelism: 8
  podPlayStageParallelism: 8
YAML
}

# kwok_driver_toleration: the driver manifests on stdin with kwok's taint tolerated by
# the DaemonSet dra-driver (only that key: it must not tolerate drainer's own taint).
kwok_driver_toleration() {
	awk -v key="$kwok_taint" '
		{ print }
		/^      priorityClassName: / && !done {
			print "      tolerations:"
			print "      - {key: " key ", operator: Exists, effect: NoSchedule}"
			done = 1
		}
		END { if (!done) exit 1 }'
}

# kwok_node_json I: Node node-I as JSON. Labels as the simulator's, the annotation kwok
# manages nodes by, its taint (only pods that tolerate it land there), the capacity of
# a machine like the simulator's, the release as the kubelet version.
kwok_node_json() {
	local n=node-$1
	printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","annotations":{"kwok.x-k8s.io/node":"fake","node.alpha.kubernetes.io/ttl":"0"},' "$n"
	printf '"labels":{"kubernetes.io/hostname":"%s","kubernetes.io/os":"linux","kubernetes.io/arch":"amd64","beta.kubernetes.io/os":"linux","beta.kubernetes.io/arch":"amd64","type":"kwok","gpu.example.com/present":"true"}},' "$n"
	printf '"spec":{"taints":[{"key":"%s","value":"fake","effect":"NoSchedule"}]},' "$kwok_taint"
	printf '"status":{"addresses":[{"type":"InternalIP","address":"%s.%d.%d"},{"type":"Hostname","address":"%s"}],' \
		"$DRAINER_CLUSTER_IP_PREFIX" $(($1 / 250)) $(($1 % 250 + 1)) "$n"
	printf '"allocatable":{"cpu":"8","memory":"32Gi","pods":"110"},"capacity":{"cpu":"8","memory":"32Gi","pods":"110"},'
	printf '"nodeInfo":{"kubeletVersion":"v%s","operatingSystem":"linux","architecture":"amd64"}}}\n' "$DRAINER_CLUSTER_KUBE_VERSION"
}

# kwok_slice_json NAME UID: the node's ResourceSlice NAME-gpu.example.com as JSON, owned
# by its Node (the garbage collector removes it with the Node), as internal/gpuslice
# publishes it, with 8 devices.
kwok_slice_json() {
	local d sep=
	printf '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"%s-gpu.example.com",' "$1"
	printf '"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"%s","uid":"%s","controller":true}]},' "$1" "$2"
	printf '"spec":{"driver":"gpu.example.com","nodeName":"%s","pool":{"name":"%s","generation":1,"resourceSliceCount":1},"devices":[' "$1" "$1"
	for ((d = 0; d < kwok_devices; d++)); do
		printf '%s{"name":"gpu-%d","attributes":{"index":{"int":%d},"model":{"string":"SimGPU-80GB"},"uuid":{"string":"GPU-%s-%d"},' "$sep" "$d" "$d" "$1" "$d"
		printf '"driverVersion":{"version":"1.0.0"}},"capacity":{"memory":{"value":"80Gi"}}}'
		sep=,
	done
	printf ']}}\n'
}

# kwok_post DIR PATH: POSTs every DIR/*.json to the API server's PATH as admin, many at
# once (curl --parallel: one process, not a kubectl per object, whose own work is most of
# the time on a loaded machine); fails unless every answer is 201.
kwok_post() {
	local dir=$1 path=$2 f count=0 codes token sep=
	token=$(admin_token)
	# (each transfer its own section: `next` resets the options of the one before)
	(
		umask 077
		for f in "$dir"/*.json; do
			printf '%surl = "https://127.0.0.1:%s%s"\nsilent\nshow-error\ncacert = "%s"\nheader = "Authorization: Bearer %s"\n' \
				"$sep" "$DRAINER_CLUSTER_API_PORT" "$path" "$pki/ca.crt" "$token"
			printf 'header = "Content-Type: application/json"\ndata-binary = "@%s"\noutput = "/dev/null"\nwrite-out = "%%{http_code} %s\\n"\n' "$f" "${f##*/}"
			sep=$'next\n'
		done >"$dir.curl"
	)
	count=$(find "$dir" -name '*.json' | grep -c .)
	codes=$(curl --parallel --parallel-max 16 --no-progress-meter -K "$dir.curl") || true
	rm -f "$dir.curl"
	if [ "$(grep -c '^201 ' <<<"$codes")" != "$count" ]; then
		say "POST $path: $(grep -vc '^201 ' <<<"$codes") of $count not created: $(grep -v '^201 ' <<<"$codes" | head -n 5 | tr '\n' ' ')"
		return 1
	fi
}

# kwok_create_nodes: the Nodes, then (their UIDs known: one list) their ResourceSlices.
kwok_create_nodes() {
	local d=$cluster_dir/kwok-objects i name uid
	rm -rf "$d" && mkdir -p "$d/nodes" "$d/slices"
	for ((i = 1; i <= node_count; i++)); do kwok_node_json "$i" >"$d/nodes/node-$i.json"; done
	kwok_post "$d/nodes" /api/v1/nodes || return 1
	"$bin/kubectl" --kubeconfig "$kc" get nodes -l type=kwok -o go-template='{{range .items}}{{.metadata.name}} {{.metadata.uid}}{{"\n"}}{{end}}' >"$d/uids" || return 1
	[ "$(grep -c . "$d/uids")" = "$node_count" ] || { say "created $node_count Nodes, found $(grep -c . "$d/uids")"; return 1; }
	while read -r name uid; do kwok_slice_json "$name" "$uid" >"$d/slices/$name.json"; done <"$d/uids"
	kwok_post "$d/slices" /apis/resource.k8s.io/v1/resourceslices
}

# kwok_nodes_ready: N Nodes Ready, with no taint but kwok's own (the node lifecycle
# controller removed not-ready); counted from one list.
kwok_nodes_ready() {
	local n
	n=$("$bin/kubectl" --kubeconfig "$kc" get nodes -o go-template='{{range .items}}{{$ok := false}}{{range .status.conditions}}{{if and (eq .type "Ready") (eq .status "True")}}{{$ok = true}}{{end}}{{end}}{{range .spec.taints}}{{if ne .key "'"$kwok_taint"'"}}{{$ok = false}}{{end}}{{end}}{{if $ok}}{{"1\n"}}{{end}}{{end}}' | grep -c .)
	[ "$n" -ge "$node_count" ]
}
