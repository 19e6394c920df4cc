#!/usr/bin/env bash
# drainer's API access against the real control plane, from the security side:
#  - TLS fails closed: a CA that did not sign the API server's certificate (as a file,
#    as data, or no CA at all, so the system store) ends the run with exit 7 (the API
#    server cannot be reached) and a message about the certificate, -o json prints
#    only the error summary, and no request reaches the API server;
#  - insecure-skip-tls-verify is honoured only when the kubeconfig asks for it, and then
#    drainer warns; no flag turns verification off; together with a CA it is an error
#    (as in client-go: exit 9, the kubeconfig is invalid); a bearer token to a plain http:// server gets a warning naming it;
#  - credentials never show: the bearer token (static, tokenFile, and the one an exec
#    credential plugin hands out), the client key (static and from the plugin) and a
#    rejected token appear in none of the stdout and stderr of status, plan and
#    drain --dry-run (text and JSON, -v and -vv) nor in serve's log.
# Makes its own kubeconfigs in a temporary folder; a throwaway client certificate is
# signed with the cluster's CA key (tests/cluster keeps it in pki/).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_drainer
demo || { fail "demo workload"; finish; exit 1; }

pki=$DRAINER_CLUSTER_DIR/pki
server=$(sed -n 's/^ *server: *//p' "$KUBECONFIG" | head -n 1)
token=$(awk -F, '$2=="admin"{print $1; exit}' "$pki/tokens.csv" 2>/dev/null)
if [ -z "$server" ] || [ -z "$token" ] || ! command -v openssl >/dev/null; then
	fail "need the cluster's server URL, the admin token in $pki/tokens.csv and openssl"
	finish
	exit 1
fi
node=node-1
t=$e2e_tmp
# Every kubeconfig below names exactly one cluster, user and context.
kubeconfig() { # FILE CLUSTER-LINES USER-LINES (each line already indented for its mapping)
	printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n%s\nusers:\n- name: u\n  user:\n%s\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n' \
		"$server" "$2" "$3" >"$1"
}
ca_ok="    certificate-authority: $pki/ca.crt"
user_token="    token: $token"

# ---- TLS fails closed --------------------------------------------------------------

echo "-- a CA that did not sign the API server's certificate"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$t/wrong-ca.key" -out "$t/wrong-ca.crt" -days 1 \
	-subj /CN=drainer-e2e-wrong-ca >/dev/null 2>&1
kubeconfig "$t/wrong-ca-file.yaml" "    certificate-authority: $t/wrong-ca.crt" "$user_token"
kubeconfig "$t/wrong-ca-data.yaml" "    certificate-authority-data: $(base64 -w0 "$t/wrong-ca.crt")" "$user_token"
kubeconfig "$t/wrong-ca-explicit.yaml" "    certificate-authority: $t/wrong-ca.crt
    insecure-skip-tls-verify: false" "$user_token"
kubeconfig "$t/system-cas.yaml" "" "$user_token" # no CA: the system store, which lacks the test CA

fails_closed() { # TAG KUBECONFIG VERB...
	local tag=$1 kc=$2
	shift 2
	local before
	before=$(audit_lines)
	drainer_run "$tag" --kubeconfig "$kc" "$@"
	check_rc "$tag: refused, exit 7 (the API server cannot be reached)" 7 "$tag"
	if grep -qi 'certificate' "$t/$tag.err"; then
		pass "$tag: the message names the certificate: $(grep -i -m1 'certificate' "$t/$tag.err" | cut -c1-160)"
	else
		fail "$tag: the message does not mention the certificate: $(tail -n 1 "$t/$tag.err" | cut -c1-200)"
	fi
	if [[ " $* " == *" -o json "* ]]; then
		# (status prints no summary of its own; the drain verbs print the error summary)
		check "$tag: stdout is empty or only the error summary, claiming no node state" jq -se \
			'length == 0 or (length == 1 and .[0].error == "api-unreachable" and .[0].exitCode == 7 and (.[0].nodeReady // null) == null)' \
			"$t/$tag.out"
	else
		check "$tag: nothing on stdout" [ ! -s "$t/$tag.out" ]
	fi
	check "$tag: the token is not in the message" bash -c "! grep -qF -- '$token' '$t/$tag.err'"
	sleep 0.5
	check_eq "$tag: no request of drainer reached the API server" 0 \
		"$(tail -n +"$((before + 1))" "$AUDIT" | grep -c '"userAgent":"drainer/')"
}
fails_closed wrong-ca-file "$t/wrong-ca-file.yaml" status "$node"
fails_closed wrong-ca-data "$t/wrong-ca-data.yaml" plan "$node" -o json
fails_closed wrong-ca-explicit "$t/wrong-ca-explicit.yaml" drain "$node" --dry-run
fails_closed system-cas "$t/system-cas.yaml" status "$node" -o json

# ---- insecure-skip-tls-verify only on request ---------------------------------------

echo "-- insecure-skip-tls-verify"
kubeconfig "$t/insecure.yaml" "    insecure-skip-tls-verify: true" "$user_token"
drainer_run insecure --kubeconfig "$t/insecure.yaml" status "$node" -o json
check_rc "insecure-skip-tls-verify: true in the kubeconfig: works" 0 insecure
check "... and warns on stderr" grep -qiE 'warning.*insecure-skip-tls-verify' "$t/insecure.err"
check "... and the JSON on stdout stays valid" bash -c "jq -e '.node.name == \"$node\"' '$t/insecure.out' >/dev/null"
check "... the warning is not in the JSON" bash -c "! grep -qi insecure '$t/insecure.out'"
drainer_run insecure-plan --kubeconfig "$t/insecure.yaml" plan "$node"
check_rc "plan with insecure-skip-tls-verify works too" 0 insecure-plan
check "... and warns too" grep -qiE 'warning.*insecure-skip-tls-verify' "$t/insecure-plan.err"
drainer_run verified --kubeconfig "$t/wrong-ca-file.yaml" status "$node"
check_rc "without it the same cluster is refused (exit 7)" 7 verified
drainer_run ok --kubeconfig "$KUBECONFIG" status "$node"
check_rc "with the right CA it works" 0 ok
check "... without a TLS warning" bash -c "! grep -qi 'insecure' '$t/ok.err'"
# client-go refuses a CA together with insecure-skip-tls-verify (transport.TLSConfigFor).
kubeconfig "$t/insecure-ca.yaml" "$ca_ok
    insecure-skip-tls-verify: true" "$user_token"
before=$(audit_lines)
drainer_run insecure-ca --kubeconfig "$t/insecure-ca.yaml" status "$node"
check_rc "insecure-skip-tls-verify together with a CA: refused, exit 9 (the kubeconfig is invalid)" 9 insecure-ca
check "... with client-go's reason" grep -q 'specifying a root certificates file with the insecure flag is not allowed' \
	"$t/insecure-ca.err"
sleep 0.5
check_eq "... and no request of drainer reached the API server" 0 \
	"$(tail -n +"$((before + 1))" "$AUDIT" | grep -c '"userAgent":"drainer/')"
# A bearer token to a plain http:// server: a warning naming the server (a throwaway
# python http.server on loopback answers 404 to everything, so the run ends at once).
http_port=$((20000 + RANDOM % 30000))
python3 -m http.server --bind 127.0.0.1 --directory "$t" "$http_port" >/dev/null 2>&1 &
http_pid=$!
track_pid "$http_pid"
e2e_cleanup_hooks+=("reap_pid $http_pid KILL")
wait_until 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$http_port" 2>/dev/null
printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "http://127.0.0.1:%s"}\nusers:\n- name: u\n  user: {token: %s}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n' \
	"$http_port" "$token" >"$t/http.yaml"
DRAINER_RUN_TIMEOUT=30 drainer_run http --kubeconfig "$t/http.yaml" status "$node"
check "a bearer token over http:// warns, naming the server" \
	grep -qE "warning.*http://127\.0\.0\.1:$http_port.*unencrypted" "$t/http.err"
reap_pid "$http_pid" KILL
check "... and the token is not in the warning" bash -c "! grep -qF -- '$token' '$t/http.err'"
drainer_run https --kubeconfig "$KUBECONFIG" status "$node"
check "no such warning over https://" bash -c "! grep -qi 'unencrypted' '$t/https.err'"
# An API server that does not answer (a closed port): no verb waits without saying
# why. drain, uncordon and status at once, each stopped after 9 s:
# each has said by then that it cannot reach the server, naming it and the error; the
# drain and the uncordon, stopped, say they changed nothing.
closed_port=$((20000 + RANDOM % 30000))
while (exec 3<>"/dev/tcp/127.0.0.1/$closed_port") 2>/dev/null; do closed_port=$((closed_port + 1)); done
kubeconfig "$t/closed.yaml" "$ca_ok" "$user_token"
sed -i "s|server: $server|server: https://127.0.0.1:$closed_port|" "$t/closed.yaml"
for v in drain uncordon status; do
	timeout -s TERM 9 "$DRAINER" --kubeconfig "$t/closed.yaml" "$v" "$node" >"$t/closed-$v.out" 2>"$t/closed-$v.err" &
done
wait
for v in drain uncordon status; do
	check "$v against a closed port says within 9 s that it cannot reach the API server, naming it" \
		grep -qiE "warning: cannot reach the API server https://127\.0\.0\.1:$closed_port .*connection refused; retrying" "$t/closed-$v.err"
done
for v in drain uncordon; do
	check "... $v, stopped, says it changed nothing" grep -q "interrupted before it changed anything on node $node" "$t/closed-$v.err"
done
check "... and no token in what they printed" bash -c "! grep -qF -- '$token' '$t'/closed-*.err '$t'/closed-*.out"
for flag in --insecure-skip-tls-verify --insecure-skip-tls-verify=true --insecure; do
	drainer_run flag --kubeconfig "$t/wrong-ca-file.yaml" "$flag" status "$node"
	check_rc "no flag turns verification off: $flag" 2 flag
done

# ---- no core dump, no ptrace of a process that holds credentials ----------------------

# Run as an unprivileged user, drainer's /proc entries belong to that user until it makes
# itself non-dumpable (prctl PR_SET_DUMPABLE 0, once the kubeconfig is loaded): then to
# root, and no core dump, ptrace or /proc/PID/mem of it by that user is possible.
echo "-- drainer makes itself non-dumpable once it holds credentials"
# LeakSanitizer makes an instrumented process dumpable again (it ptraces it): the plain
# run of this script checks it.
asan_flags=$(ASAN_OPTIONS=help=1 "$DRAINER" version 2>&1)
if grep -q detect_leaks <<<"$asan_flags"; then
	echo "  (skipped: $DRAINER is built with AddressSanitizer)"
elif command -v setpriv >/dev/null; then
	cp "$KUBECONFIG" "$t/nobody.kubeconfig"
	chmod 644 "$t/nobody.kubeconfig"
	chmod 711 "$t"
	setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent "$DRAINER" \
		--kubeconfig "$t/nobody.kubeconfig" status "$node" --watch >/dev/null 2>"$t/nobody.err" &
	nobody_pid=$!
	track_pid "$nobody_pid"
	e2e_cleanup_hooks+=("reap_pid $nobody_pid KILL")
	# What non-dumpable means, tried as that same user: its environment (and memory) can
	# no longer be read (ptrace access mode checks need CAP_SYS_PTRACE then). The owner of
	# /proc/PID itself is no measure: the kernel may keep the directory's owner from its
	# first lookup. A plain process of that user, whose environment it can read, is the
	# control that the check can fail.
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	setpriv --reuid=65534 --regid=65534 --clear-groups sleep 60 &
	control_pid=$!
	track_pid "$control_pid"
	e2e_cleanup_hooks+=("reap_pid $control_pid KILL")
	environ_readable() { as_nobody cat "/proc/$1/environ" >/dev/null 2>&1; }
	# (first after its exec: setpriv itself is not dumpable once it changed its user, and
	# an environ entry looked up then may keep root as its owner)
	sleep_bin=$(readlink -f "$(command -v sleep)")
	execed_sleep() { [ "$(readlink "/proc/$control_pid/exe")" = "$sleep_bin" ]; }
	wait_until 5 execed_sleep
	drainer_sealed() { [ "$(stat -c %u "/proc/$nobody_pid/status" 2>/dev/null)" = 0 ] && ! environ_readable "$nobody_pid"; }
	check "control: a plain process of that user has a readable environment" wait_until 5 environ_readable "$control_pid"
	reap_pid "$control_pid" KILL
	check "drainer running as nobody: that user can no longer read its environment (not dumpable)" wait_until 15 drainer_sealed
	check "... and it still works (status --watch runs)" kill -0 "$nobody_pid"
	reap_pid "$nobody_pid" TERM
	rm -f "$t/nobody.kubeconfig"
	chmod 700 "$t"
else
	fail "setpriv (util-linux) is needed for the dumpable check"
fi

# ---- credentials never show -----------------------------------------------------------

# Throwaway client certificate for system:masters, signed with the cluster's CA.
openssl req -newkey rsa:2048 -nodes -keyout "$t/client.key" -out "$t/client.csr" \
	-subj "/O=system:masters/CN=drainer-e2e-security" >/dev/null 2>&1
openssl x509 -req -in "$t/client.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
	-out "$t/client.crt" -days 1 >/dev/null 2>&1
key_b64=$(base64 -w0 "$t/client.key")
# Distinctive slices: a line of the PEM body, a piece from the middle of the body, and a
# piece of the base64 of the whole PEM (the form client-key-data holds).
key_line=$(sed -n '5p' "$t/client.key")
key_mid=$(grep -v -- '-----' "$t/client.key" | tr -d '\n' | cut -c 700-760)
key_data_mid=$(cut -c 800-860 <<<"$key_b64")

kubeconfig "$t/token.yaml" "$ca_ok" "$user_token"
printf '%s\n' "$token" >"$t/token-file"
kubeconfig "$t/token-file.yaml" "$ca_ok" "    tokenFile: $t/token-file"
kubeconfig "$t/cert-data.yaml" "$ca_ok" "    client-certificate-data: $(base64 -w0 "$t/client.crt")
    client-key-data: $key_b64"
kubeconfig "$t/cert-files.yaml" "$ca_ok" "    client-certificate: $t/client.crt
    client-key: $t/client.key"
# An exec credential plugin: hands out the admin token, or the client certificate and key.
cat >"$t/plugin" <<EOF
#!/bin/sh
case "\$1" in
token) printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' '$token' ;;
cert) jq -n --rawfile c '$t/client.crt' --rawfile k '$t/client.key' \\
	'{apiVersion:"client.authentication.k8s.io/v1",kind:"ExecCredential",status:{clientCertificateData:\$c,clientKeyData:\$k}}' ;;
esac
EOF
chmod +x "$t/plugin"
kubeconfig "$t/exec-token.yaml" "$ca_ok" "    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: $t/plugin
      args: [token]
      interactiveMode: Never"
kubeconfig "$t/exec-cert.yaml" "$ca_ok" "    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: $t/plugin
      args: [cert]
      interactiveMode: Never"

# secret_free TAG KUBECONFIG: every read-only verb, text and JSON, -v and -vv; each must
# work (so the credential was used) and print no credential.
secret_free() {
	local tag=$1 kc=$2 i=0 bad=() f
	local -a runs=(
		"-vv status $node -o json" "-vv status $node" "-v plan $node -o json" "-vv plan $node"
		"-vv drain $node --dry-run -o json" "-v drain $node --dry-run"
	)
	for args in "${runs[@]}"; do
		i=$((i + 1))
		# shellcheck disable=SC2086
		timeout -k 5 120 "$DRAINER" --kubeconfig "$kc" $args >"$t/$tag-$i.out" 2>"$t/$tag-$i.err"
		local rc=$?
		[ $rc = 0 ] || bad+=("'drainer $args' exited $rc: $(tail -n 1 "$t/$tag-$i.err" | cut -c1-120)")
	done
	if [ ${#bad[@]} = 0 ]; then pass "$tag: ${#runs[@]} runs of status, plan and drain --dry-run worked"; else fail "$tag: ${bad[*]}"; fi
	check "$tag: -vv shows the API requests (the check reads real debug output)" \
		grep -q 'HTTP GET /api' "$t/$tag-1.err"
	for f in "$t/$tag"-*.out "$t/$tag"-*.err; do
		for s in "$token" "$key_line" "$key_mid" "$key_data_mid" "PRIVATE KEY"; do
			if grep -qF -- "$s" "$f"; then
				fail "$tag: $(basename "$f") holds a credential (${s:0:12}...)"
				return
			fi
		done
	done
	pass "$tag: no token, key or key data in stdout or stderr of any run"
}
echo "-- credentials stay out of the output"
secret_free token "$t/token.yaml"
secret_free token-file "$t/token-file.yaml"
secret_free cert-data "$t/cert-data.yaml"
secret_free cert-files "$t/cert-files.yaml"
secret_free exec-token "$t/exec-token.yaml"
secret_free exec-cert "$t/exec-cert.yaml"

# A token the API server rejects is not echoed either.
bad_token=drainer-e2e-rejected-$(openssl rand -hex 12)
kubeconfig "$t/bad-token.yaml" "$ca_ok" "    token: $bad_token"
drainer_run bad-token --kubeconfig "$t/bad-token.yaml" -vv status "$node" -o json
check_rc "a rejected token: refused, exit 10 (forbidden: 401)" 10 bad-token
check "... the message says why (401 / Unauthorized)" grep -qiE 'unauthori[sz]ed|401' "$t/bad-token.err"
check "... and does not echo the token" bash -c "! grep -qF -- '$bad_token' '$t/bad-token.err' '$t/bad-token.out'"

# serve's log, -vv, for a few seconds on a node that asks for nothing.
echo "-- serve's log"
serve_args=(--kubeconfig "$t/exec-token.yaml" -vv serve --node node-3 --max-parallel 0)
# (the help read whole: grep -q ends the pipe early, and under pipefail the writer's
# SIGPIPE would fail it)
grep -q -- '--metrics-addr' <<<"$("$DRAINER" serve --help 2>&1)" && serve_args+=(--metrics-addr "")
"$DRAINER" "${serve_args[@]}" >"$t/serve.out" 2>"$t/serve.err" &
serve_pid=$!
track_pid "$serve_pid"
e2e_cleanup_hooks+=("reap_pid $serve_pid")
wait_until 20 grep -q 'HTTP GET' "$t/serve.err"
sleep 2
reap_pid "$serve_pid"
check "serve -vv logged its API requests" grep -q 'HTTP GET' "$t/serve.err"
check "serve's log holds no token or key" bash -c "! grep -qF -e '$token' -e '$key_line' -e 'PRIVATE KEY' '$t/serve.out' '$t/serve.err'"

finish
