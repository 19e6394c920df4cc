#!/usr/bin/env bash
# Honest errors without a cluster: an API server that cannot be reached (a closed
# port, a listener that never answers, a host name that does not resolve) and an
# unparsable kubeconfig each end with their own exit code (7: API server
# unreachable, 9: kubeconfig invalid, never 3 "a pod is slow") and a message naming
# the cause; -o json always prints one parsable document whose "error" says which,
# and which claims nothing about a node it never read (no nodeReady).
# (no cluster: lib.sh's cluster settings only need a value)
: "${DRAINER_CLUSTER_API_PORT:=6443}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer

# Nothing here talks to the test cluster: no audit log to count.
audit_lines() { echo 0; }

kc() { # NAME SERVER: a kubeconfig for SERVER
	cat >"$e2e_tmp/kc-$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: $2
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: e2e-token
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
EOF
}

closed=$(free_port)
silent=$(free_port)
kc closed "https://127.0.0.1:$closed"
kc silent "https://127.0.0.1:$silent"
kc nohost "https://nohost.invalid:6443"
printf 'apiVersion: v1\nclusters: [ {name: c\n' >"$e2e_tmp/kc-bad"

# A listener that accepts and never answers (its backlog holds the connections).
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64); time.sleep(3600)' "$silent" &
silent_pid=$!
track_pid "$silent_pid"
e2e_cleanup_hooks+=("reap_pid $silent_pid")
wait_until 30 python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$silent" ||
	fail "the silent listener on port $silent did not start"

# json_doc TAG: stdout is exactly one parsable JSON document
json_doc() { jq -e 'type == "object"' "$e2e_tmp/$1.out" >/dev/null 2>&1 && [ "$(jq -s length "$e2e_tmp/$1.out")" = 1 ]; }

jq_true() { jq -e "$@" >/dev/null 2>&1; }

# unreachable TAG KUBECONFIG PATTERN: drain exits 7, names the cause, -o json says so
unreachable() {
	local tag=$1 cfg=$2 pattern=$3
	drainer_run "$tag" --kubeconfig "$e2e_tmp/kc-$cfg" -o json drain node-1 --timeout 6s
	check_rc "$tag: drain exits 7 (API server unreachable), not 3" 7 "$tag"
	check "$tag: the message names the cause ($pattern)" grep -Eq "$pattern" "$e2e_tmp/$tag.err"
	check "$tag: no 'timed out in phase' (that is for pods)" bash -c "! grep -q 'timed out in phase' '$e2e_tmp/$tag.err'"
	check "$tag: -o json printed one document" json_doc "$tag"
	check_eq "$tag: .error" api-unreachable "$(jq -r .error "$e2e_tmp/$tag.out" 2>/dev/null)"
	check_eq "$tag: .exitCode" 7 "$(jq -r .exitCode "$e2e_tmp/$tag.out" 2>/dev/null)"
	check "$tag: .message names the cause" jq_true --arg p "$pattern" '.message | test($p)' "$e2e_tmp/$tag.out"
	check_eq "$tag: no nodeReady claim for a node never read" null "$(jq -c .nodeReady "$e2e_tmp/$tag.out" 2>/dev/null)"
	check_eq "$tag: changed false" false "$(jq -c .changed "$e2e_tmp/$tag.out" 2>/dev/null)"
}

unreachable refused closed 'connection refused'
unreachable silent silent 'timed out waiting for the API server'
unreachable dns nohost 'DNS name not found'
check "dns: not reported as No route to host" bash -c "! grep -qi 'no route to host' '$e2e_tmp/dns.err'"

# Without --timeout: a drain that cannot read its node at all gives up after
# --request-timeout (30 s by default) with exit 7, as the read-only verbs do, rather
# than retry for ever. Run under `timeout 120` so that a hang is a failure, not a stall.
never_read() { # TAG KUBECONFIG [FLAGS...]
	local tag=$1 cfg=$2
	shift 2
	DRAINER_RUN_TIMEOUT=120 drainer_run "$tag" --kubeconfig "$e2e_tmp/kc-$cfg" "$@" -o json drain node-1
	check_rc "$tag: drain without --timeout ends by itself with exit 7" 7 "$tag"
	check "$tag: it says the API server never answered and nothing changed" \
		grep -q "it never answered; the node was not read, nothing was changed" "$e2e_tmp/$tag.err"
	check_eq "$tag: -o json .error" api-unreachable "$(jq -r .error "$e2e_tmp/$tag.out" 2>/dev/null)"
}
never_read unread-silent silent --request-timeout 4s
never_read unread-refused closed

# An unparsable kubeconfig: exit 9, the file named, a document with "error".
for verb in drain uncordon plan; do
	t=(--timeout 6s)
	[ "$verb" = plan ] && t=()
	drainer_run bad-$verb --kubeconfig "$e2e_tmp/kc-bad" -o json $verb node-1 "${t[@]}"
	check_rc "$verb with an unparsable kubeconfig exits 9" 9 bad-$verb
	check "$verb: the message names the kubeconfig" grep -q "kc-bad" "$e2e_tmp/bad-$verb.err"
	check "$verb: -o json printed one document" json_doc bad-$verb
	check_eq "$verb: .error" kubeconfig-invalid "$(jq -r .error "$e2e_tmp/bad-$verb.out" 2>/dev/null)"
	check_eq "$verb: .exitCode" 9 "$(jq -r .exitCode "$e2e_tmp/bad-$verb.out" 2>/dev/null)"
	check_eq "$verb: no nodeReady claim" false "$(jq 'has("nodeReady")' "$e2e_tmp/bad-$verb.out" 2>/dev/null)"
done

# A bad flag after -o json: exit 2 and still a document.
drainer_run badflag -o json drain node-1 --no-such-flag
check_rc "an unknown flag exits 2" 2 badflag
check "badflag: -o json printed one document" json_doc badflag
check_eq "badflag: .error" usage "$(jq -r .error "$e2e_tmp/badflag.out" 2>/dev/null)"

finish
