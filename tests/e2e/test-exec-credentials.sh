#!/usr/bin/env bash
# Exec credential plugins against the real API server.
#  A. Rotating client certificates: the plugin signs a fresh client certificate with
#     the cluster's CA on every run (CN drainer-e2e-exec-N, group system:masters),
#     valid for 8 s, and says it expires after 3 s. `drainer serve` runs for more than
#     two certificate lifetimes and drains and restores node-2 on request after the
#     first certificate has expired. The audit log shows drainer's requests made as at
#     least three of those identities, none refused with 401, and the drain and its
#     undo done (before the fix the first certificate stayed in the transport: every
#     request failed with 401 once it expired).
#  B. A hung plugin does not stop the loop: the plugin's second run starts a helper and
#     hangs. /healthz answers a 10 s client while it hangs (latency printed), the Node
#     watch and Lease-free serve keep working, the plugin and its helper are killed at
#     the 10 s timeout (process group), the plugin never sees NOTIFY_SOCKET, WATCHDOG_*,
#     LISTEN_* or CREDENTIALS_DIRECTORY (serve gets them, as under systemd), and serve
#     goes on with its last token. Plugin run times are printed.
# Needs openssl.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
pki=$DRAINER_CLUSTER_DIR/pki
server=$(sed -n 's/^ *server: *//p' "$KUBECONFIG" | head -n 1)
admin_token=$(awk -F, '$2=="admin"{print $1; exit}' "$pki/tokens.csv" 2>/dev/null)
if [ -z "$server" ] || [ -z "$admin_token" ] || ! command -v openssl >/dev/null || [ ! -f "$pki/ca.key" ]; then
	fail "need the cluster's server URL, its CA key (pki/ca.key), the admin token and openssl"
	finish
	exit 1
fi
t=$e2e_tmp
node=node-2
exec_kubeconfig() { # FILE PLUGIN
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: "$2"
      interactiveMode: Never
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
EOF
}

# ---- A. rotating client certificates -------------------------------------------------
echo "-- A. an exec plugin issuing 8 s client certificates"
mkdir -p "$t/ca/certs"
: >"$t/ca/index.txt"
echo 1000 >"$t/ca/serial"
cat >"$t/ca/ca.cnf" <<EOF
[ca]
default_ca = d
[d]
dir = $t/ca
database = $t/ca/index.txt
new_certs_dir = $t/ca/certs
serial = $t/ca/serial
default_md = sha256
policy = p
unique_subject = no
email_in_dn = no
[p]
organizationName = optional
commonName = supplied
EOF
cat >"$t/rotating-plugin" <<EOF
#!/bin/sh
# One run: a new key, a certificate from the cluster's CA valid 8 s, said to expire in 3 s.
set -e
t0=\$(date +%s.%N)
n=\$((\$(cat "$t/runs" 2>/dev/null || echo 0) + 1))
echo \$n >"$t/runs"
d=\$(mktemp -d "$t/run.XXXXXX")
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "\$d/k" -out "\$d/csr" \\
	-subj "/O=system:masters/CN=drainer-e2e-exec-\$n" 2>/dev/null
openssl ca -batch -config "$t/ca/ca.cnf" -cert "$pki/ca.crt" -keyfile "$pki/ca.key" -in "\$d/csr" -out "\$d/crt" \\
	-notext -startdate "\$(date -u -d '-60 sec' +%Y%m%d%H%M%SZ)" -enddate "\$(date -u -d '+8 sec' +%Y%m%d%H%M%SZ)" 2>/dev/null
exp=\$(date -u -d '+3 sec' +%Y-%m-%dT%H:%M:%SZ)
jq -n --rawfile c "\$d/crt" --rawfile k "\$d/k" --arg e "\$exp" \\
	'{apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: {clientCertificateData: \$c, clientKeyData: \$k, expirationTimestamp: \$e}}'
rm -rf "\$d"
echo "run \$n \$(awk -v a="\$t0" -v b="\$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')" >>"$t/rotating-runs.log"
EOF
chmod +x "$t/rotating-plugin"
exec_kubeconfig "$t/rotating.kubeconfig" "$t/rotating-plugin"

port=$(free_port)
audit_from=$(audit_lines)
t_start=$SECONDS
serve_start rot --kubeconfig "$t/rotating.kubeconfig" serve --node "$node" --max-parallel 0 --metrics-addr "127.0.0.1:$port"
ready() { [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ]; }
check "serve with the exec plugin's certificate is ready" wait_until 30 ready
# Past the first certificate's 8 s: then a drain and its undo.
while [ $((SECONDS - t_start)) -lt 14 ]; do sleep 1; done
kubectl annotate node "$node" drainer.io/request=drain --overwrite >/dev/null
check "node-2 drained through serve, after its first certificate expired ($((SECONDS - t_start)) s in)" \
	wait_until 90 state_is "$node" drained
kubectl annotate --overwrite node "$node" drainer.io/request=uncordon >/dev/null
check "node-2 restored and uncordoned" wait_until 90 node_restored "$node"
check "serve still runs" serve_alive rot
serve_stop rot
kubectl annotate node "$node" drainer.io/request- >/dev/null 2>&1
sleep 1
audit_window "$audit_from" "$t/rot.audit"
dr='.[] | select(.userAgent | startswith("drainer/"))'
jq -r "$dr"' | "\(.user.username // "-") \(.responseStatus.code)"' "$t/rot.audit" | sort | uniq -c | sed 's/^ */    /'
idents=$(jq -r "$dr"' | .user.username // ""' "$t/rot.audit" | grep '^drainer-e2e-exec-' | sort -u | wc -l)
check "drainer's requests came with at least 2 of the plugin's certificates ($idents)" [ "$idents" -ge 2 ]
check_eq "none of drainer's requests was refused with 401" 0 \
	"$(jq -r "$dr"' | select(.responseStatus.code == 401) | 1' "$t/rot.audit" | wc -l)"
check_eq "every write of the drain and its undo came with a certificate issued after the first expired" "" \
	"$(jq -r "$dr"' | select(.verb == "patch" or .verb == "create") | .user.username // "-"' "$t/rot.audit" |
		grep -v '^drainer-e2e-exec-\([2-9]\|[1-9][0-9]\)$' | sort -u)"
check "the plugin ran again once its answer expired ($(cat "$t/runs") runs)" [ "$(cat "$t/runs")" -ge 2 ]
echo "    plugin runs (seconds each, openssl key + certificate): $(awk '{ printf "%s ", $3 }' "$t/rotating-runs.log")"

# ---- B. a hung plugin -----------------------------------------------------------------
echo "-- B. an exec plugin that hangs on its second run"
cat >"$t/hang-plugin" <<EOF
#!/bin/sh
n=\$((\$(cat "$t/hang-runs" 2>/dev/null || echo 0) + 1))
echo \$n >"$t/hang-runs"
env >"$t/hang-env.\$n"
echo "\$(date +%s.%N) start \$n" >>"$t/plugin-hang.log"
if [ \$n = 2 ]; then
	sleep 300 &
	echo \$! >"$t/hang-child.pid"
	exec sleep 300
fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}\n' \\
	"$admin_token" "\$(date -u -d '+3 sec' +%Y-%m-%dT%H:%M:%SZ)"
echo "\$(date +%s.%N) end \$n" >>"$t/plugin-hang.log"
EOF
chmod +x "$t/hang-plugin"
exec_kubeconfig "$t/hang.kubeconfig" "$t/hang-plugin"
port=$(free_port)
# What systemd hands serve: the plugin must see none of it.
serve_env=(NOTIFY_SOCKET="$t/no-such-notify-socket" WATCHDOG_USEC=30000000 WATCHDOG_PID=self LISTEN_FDS=0
	LISTEN_PID=1 LISTEN_FDNAMES=x CREDENTIALS_DIRECTORY="$t/creds")
serve_start hang --kubeconfig "$t/hang.kubeconfig" serve --node "$node" --max-parallel 0 --metrics-addr "127.0.0.1:$port"
serve_env=()
check "serve with the hanging plugin is ready" wait_until 30 ready
# After 3 s the token expires; the drain's first request runs the plugin again, which hangs.
sleep 4
kubectl annotate node "$node" drainer.io/request=drain --overwrite >/dev/null
hung() { [ "$(cat "$t/hang-runs" 2>/dev/null)" -ge 2 ] 2>/dev/null && [ -s "$t/hang-child.pid" ]; }
check "a drain request makes serve run the plugin again, which hangs" wait_until 30 hung
hang_t0=$SECONDS
lat=$(curl -s --max-time 10 -o "$t/h.body" -w '%{http_code} %{time_total}' "http://127.0.0.1:$port/healthz")
echo "    /healthz while the plugin hangs: HTTP ${lat% *} in ${lat#* } s"
check "/healthz answers a 10 s client while the plugin hangs" [ "${lat% *}" = 200 ]
lat2=$(curl -s --max-time 10 -o /dev/null -w '%{http_code} %{time_total}' "http://127.0.0.1:$port/metrics")
echo "    /metrics while the plugin hangs: HTTP ${lat2% *} in ${lat2#* } s"
check "/metrics answers too" [ "${lat2% *}" = 200 ]
child=$(cat "$t/hang-child.pid")
gone() { ! [ -d "/proc/$child" ] || grep -q ') Z ' "/proc/$child/stat" 2>/dev/null; }
check "the plugin's helper is killed with its process group at the timeout" wait_until 20 gone
echo "    killed $((SECONDS - hang_t0)) s after the hang was seen (timeout 10 s)"
check "serve still runs" serve_alive hang
# With its last token serve goes on: the drain completes and is undone.
check "serve still drains node-2 after the hung run" wait_until 90 state_is "$node" drained
kubectl annotate --overwrite node "$node" drainer.io/request=uncordon >/dev/null
check "node-2 restored" wait_until 90 node_restored "$node"
serve_stop hang
kubectl annotate node "$node" drainer.io/request- >/dev/null 2>&1
leaked=$(cat "$t"/hang-env.* | grep -cE '^(NOTIFY_SOCKET|WATCHDOG_[A-Z]*|LISTEN_[A-Z]*|CREDENTIALS_DIRECTORY)=' || true)
check_eq "the plugin saw none of NOTIFY_SOCKET, WATCHDOG_*, LISTEN_*, CREDENTIALS_DIRECTORY" 0 "$leaked"
check "the plugin saw KUBERNETES_EXEC_INFO" grep -q '^KUBERNETES_EXEC_INFO={' "$t/hang-env.1"
echo "    plugin runs: $(sed 's/^[0-9.]* //' "$t/plugin-hang.log" | tr '\n' ' ')"
[ "$e2e_failed" = 0 ] || { serve_log rot 20; serve_log hang 20; }
finish
