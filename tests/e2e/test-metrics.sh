#!/usr/bin/env bash
# `drainer serve --metrics-addr` against the real control plane.
#  - deploy/monitoring: the PrometheusRule passes `promtool check rules` and the
#    `promtool test rules` cases of every alert; every dashboard query parses.
#  - /healthz 200; /readyz 200 once the node watch synced; 404 and 405 otherwise.
#  - A drain requested by annotation, scraped during and after: the phase, claims,
#    pods-pending and driver-health gauges move as the drain does; the eviction
#    counters equal the evictions in the audit log (by drainer's User-Agent: every
#    attempt, accepted = 201, pdb_blocked = 429, gone = 404), and the API request
#    counters per verb equal the audit log's (watches excepted); `promtool check
#    metrics` accepts every scrape. The undo (request=uncordon) forgets the node's
#    series.
#  - kube-controller-manager and kube-scheduler scraped before and after the drain:
#    the resource_claim workqueue and scheduler metrics the dashboard and rules use
#    exist and moved; a real Prometheus (same Debian package) scraping drainer and
#    both components evaluates the dashboard's queries, and those of the
#    control-plane rows return data.
#  - `drain -o json` carries the same figures in "metrics", matching the audit log.
# Needs promtool and prometheus (Debian: prometheus), curl, jq.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

for tool in promtool prometheus curl; do
	if ! command -v "$tool" >/dev/null; then
		fail "$tool is not installed (Debian package: $([ "$tool" = curl ] && echo curl || echo prometheus))"
		finish
		exit 1
	fi
done

# ---- helpers ----

http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
healthz_ok() { [ "$(curl -fsS --max-time 2 "http://127.0.0.1:$port/healthz")" = ok ]; }
readyz_ok() { [ "$(http_code "http://127.0.0.1:$port/readyz")" = 200 ]; }
scrape() { curl -fsS --max-time 5 "http://127.0.0.1:$port/metrics"; }
# mval FILE SERIES: the value of one sample line ("name{labels}" exactly), empty if absent.
mval() { awk -v k="$2" '$1 == k { print $2; exit }' "$1"; }
# msum FILE PREFIX: the sum of the samples whose "name{labels}" starts with PREFIX.
msum() { awk -v p="$2" 'index($1, p) == 1 { s += $2 } END { printf "%.0f\n", s }' "$1"; }
promtool_ok() { promtool check metrics <"$1" >"$e2e_tmp/promtool.out" 2>&1 || { sed 's/^/    promtool: /' "$e2e_tmp/promtool.out"; return 1; }; }
# comp_scrape PORT FILE: a control-plane component's /metrics with the admin token.
token=$(awk -F, '$2=="admin"{print $1; exit}' "$DRAINER_CLUSTER_DIR/pki/tokens.csv")
comp_scrape() { curl -fsS -k --max-time 10 -H "Authorization: Bearer $token" "https://127.0.0.1:$1/metrics" >"$2"; }
# eval_dashboard ROW_PREFIX [EXCEPT_TITLE]: evaluates, through the Prometheus started
# below ($__rate_interval: 1m, $__range: 10m, $node: all), every query of the
# dashboard's panels in the rows whose title starts with ROW_PREFIX; prints each
# panel's first result; fails if a query returns nothing (panels titled
# EXCEPT_TITLE may be empty). Sets n_cp to the number of queries.
eval_dashboard() {
	local row= kind title text expr out n empty=0
	n_cp=0
	while IFS=$'\t' read -r kind title text; do
		if [ "$kind" = ROW ]; then
			row=$title
			continue
		fi
		[[ $row == "$1"* ]] || continue
		expr=${text//\$__rate_interval/1m}
		expr=${expr//\$__range/10m}
		expr=${expr//\$node/.*}
		out=$(promtool query instant "http://127.0.0.1:$prom_port" "$expr" 2>&1)
		n=$(echo "$out" | grep -c '=>')
		n_cp=$((n_cp + 1))
		echo "    $title: $n series; $(echo "$out" | head -n 1 | cut -c1-110)"
		if [ "$n" = 0 ] && [ "$title" != "${2:-}" ]; then
			empty=$((empty + 1))
			echo "      EMPTY: $expr"
		fi
	done < <(jq -r '.panels[] | if .type == "row" then "ROW\t\(.title)\t" else (.title as $t | .targets[]? | "Q\t\($t)\t\(.expr)") end' \
		"$e2e_root/deploy/monitoring/grafana-dashboard.json")
	[ "$n_cp" -gt 0 ] && [ "$empty" = 0 ]
}
json_ok() { jq -e "$1" "$2" >/dev/null; }
cm_port=${DRAINER_CLUSTER_CM_PORT:-16257}
sched_port=${DRAINER_CLUSTER_SCHEDULER_PORT:-16259}

cleanup_metrics() {
	[ -z "${serve_pid:-}" ] || { kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null; }
	[ -z "${prom_pid:-}" ] || { kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; }
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_metrics)

# ---- 1. the rules and the dashboard, statically ----
if "$e2e_root/deploy/monitoring/tests/check" >"$e2e_tmp/rules.out" 2>&1; then
	pass "deploy/monitoring: promtool check rules, promtool test rules for every alert, dashboard queries parse"
	sed 's/^/    /' "$e2e_tmp/rules.out" | grep -E 'SUCCESS|alerts|queries'
else
	fail "deploy/monitoring/tests/check"
	sed 's/^/    /' "$e2e_tmp/rules.out" | tail -n 30
fi

# ---- 2. serve with --metrics-addr ----
demo || { fail "demo workload"; finish; exit 1; }
port=$(free_port) || { fail "no free port"; finish; exit 1; }
"$DRAINER" serve --node "$node" --max-parallel 0 --metrics-addr "127.0.0.1:$port" >"$e2e_tmp/serve.log" 2>&1 &
serve_pid=$!
echo "  drainer serve --node $node --metrics-addr 127.0.0.1:$port (pid $serve_pid)"
check "/healthz answers 200 \"ok\"" wait_until 20 healthz_ok
check "/readyz answers 200 once the node watch synced" wait_until 20 readyz_ok
check_eq "GET /nope is 404" 404 "$(http_code "http://127.0.0.1:$port/nope")"
check_eq "POST /metrics is 405" 405 "$(http_code -X POST -d x "http://127.0.0.1:$port/metrics")"
check_eq "/metrics content type" "text/plain; version=0.0.4; charset=utf-8" \
	"$(curl -s -o /dev/null -w '%{content_type}' "http://127.0.0.1:$port/metrics")"
scrape >"$e2e_tmp/m0.txt"
check "promtool check metrics accepts the scrape before the drain" promtool_ok "$e2e_tmp/m0.txt"
check_eq "no evictions yet" 0 "$(msum "$e2e_tmp/m0.txt" 'drainer_evictions_total{')"
check "drainer_build_info and the process metrics are there" bash -c "grep -q '^drainer_build_info{version=' '$e2e_tmp/m0.txt' &&
	grep -q '^process_resident_memory_bytes ' '$e2e_tmp/m0.txt' && grep -q '^process_cpu_seconds_total ' '$e2e_tmp/m0.txt' &&
	grep -q '^process_start_time_seconds ' '$e2e_tmp/m0.txt'"
want_families="drainer_drains_total drainer_drain_duration_seconds drainer_phase_duration_seconds drainer_drain_phase
drainer_drain_phase_start_time_seconds drainer_evictions_total drainer_evictions_blocked_by_pdb drainer_claims_on_node
drainer_pods_pending drainer_driver_healthy drainer_api_requests_total drainer_api_request_duration_seconds
drainer_api_rate_limiter_wait_seconds drainer_watch_events_total drainer_watch_restarts_total"
missing=""
for f in $want_families; do
	grep -q "^# TYPE $f " "$e2e_tmp/m0.txt" && grep -q "^# HELP $f " "$e2e_tmp/m0.txt" || missing="$missing $f"
done
check_eq "HELP and TYPE of every drainer metric" "" "$missing"

# A real Prometheus scraping drainer and both control-plane components every second.
prom_port=$(free_port)
mkdir -p "$e2e_tmp/prom"
printf '%s' "$token" >"$e2e_tmp/prom/token"
cat >"$e2e_tmp/prom/prometheus.yml" <<EOF
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: drainer
  static_configs: [{targets: ["127.0.0.1:$port"]}]
- job_name: kube-controller-manager
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: $e2e_tmp/prom/token}
  static_configs: [{targets: ["127.0.0.1:$cm_port"]}]
- job_name: kube-scheduler
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: $e2e_tmp/prom/token}
  static_configs: [{targets: ["127.0.0.1:$sched_port"]}]
EOF
prometheus --config.file="$e2e_tmp/prom/prometheus.yml" --storage.tsdb.path="$e2e_tmp/prom/data" \
	--web.listen-address="127.0.0.1:$prom_port" >"$e2e_tmp/prom/log" 2>&1 &
prom_pid=$!
prom_up() { [ "$(http_code "http://127.0.0.1:$prom_port/-/ready")" = 200 ]; }
check "Prometheus $(prometheus --version 2>&1 | awk 'NR==1 {print $3}') runs on 127.0.0.1:$prom_port" wait_until 30 prom_up
prom_scraping() { promtool query instant "http://127.0.0.1:$prom_port" 'count(up == 1) == 3' 2>/dev/null | grep -q '=> 3'; }
check "Prometheus scrapes drainer, kube-controller-manager and kube-scheduler (up == 1)" wait_until 30 prom_scraping

comp_scrape "$cm_port" "$e2e_tmp/kcm0.txt" && comp_scrape "$sched_port" "$e2e_tmp/sched0.txt"
check_eq "kube-controller-manager and kube-scheduler scraped with the admin token" 0 $?

# ---- 3. a drain requested by annotation, scraped while it runs ----
sleep 2 # let Prometheus take a few samples before
start_line=$(audit_lines)
kubectl annotate node "$node" drainer.io/request=drain --overwrite >/dev/null
# (scraped every 0.05 s, the phase read from the scrape itself: a claim holder on a real
# kubelet is gone within a second of its eviction, and its claim with it)
i=0
while [ $i -lt 1200 ]; do
	i=$((i + 1))
	scrape >"$e2e_tmp/during.$i.txt" 2>/dev/null || rm -f "$e2e_tmp/during.$i.txt"
	grep -qx 'drainer_drain_phase{node="node-1",driver="",phase="drained"} 1' "$e2e_tmp/during.$i.txt" 2>/dev/null && break
	sleep 0.05
done
state=$(node_ann "$node" drainer.io/state)
check_eq "the drain reached drainer.io/state=drained" drained "$state"
echo "  $i scrapes while the drain ran"
during=$(ls "$e2e_tmp"/during.*.txt 2>/dev/null | sort -t. -k2 -n)
# shellcheck disable=SC2086
cat $during >"$e2e_tmp/during.all"
phases_scraped=$(sed -n 's/^drainer_drain_phase{node="node-1",driver="",phase="\([^"]*\)"} 1$/\1/p' "$e2e_tmp/during.all" | awk '!seen[$0]++' | tr '\n' ' ')
echo "  phases seen on /metrics: $phases_scraped"
check "scrapes during the drain saw it in a drain phase before drained ($phases_scraped)" \
	bash -c "echo '$phases_scraped' | grep -qE 'evict-claim-holders|evict-rest|wait-released|stop-drivers'"
max_claims=$(awk '$1 == "drainer_claims_on_node{node=\"node-1\"}" && $2 > m { m = $2 } END { print m + 0 }' "$e2e_tmp/during.all")
check "drainer_claims_on_node went above 0 during the drain (max $max_claims)" [ "$max_claims" -gt 0 ]
max_pending=$(awk 'index($1, "drainer_pods_pending{node=\"node-1\"") == 1 && $2 > m { m = $2 } END { print m + 0 }' "$e2e_tmp/during.all")
check "drainer_pods_pending went above 0 during the drain (max $max_pending)" [ "$max_pending" -gt 0 ]
check "the driver was reported healthy during the drain" \
	grep -q '^drainer_driver_healthy{node="node-1",driver="dra-system/dra-driver"} 1$' "$e2e_tmp/during.all"
bad=0
for f in $during; do promtool check metrics <"$f" >/dev/null 2>&1 || bad=$((bad + 1)); done
check_eq "promtool check metrics accepts every scrape taken during the drain ($(echo "$during" | wc -w))" 0 "$bad"

sleep 2 # the last Events and patches
scrape >"$e2e_tmp/m1.txt"
comp_scrape "$cm_port" "$e2e_tmp/kcm1.txt"
comp_scrape "$sched_port" "$e2e_tmp/sched1.txt"
check "promtool check metrics accepts the scrape after the drain" promtool_ok "$e2e_tmp/m1.txt"
check_eq "drainer_drain_phase: drained" 1 "$(mval "$e2e_tmp/m1.txt" 'drainer_drain_phase{node="node-1",driver="",phase="drained"}')"
check_eq "one phase series for the node" 1 "$(grep -c '^drainer_drain_phase{node="node-1"' "$e2e_tmp/m1.txt")"
check "drainer_drain_phase_start_time_seconds is drainer.io/state-since" bash -c "
	since=\$(date -d \"\$('$KUBECTL' get node $node -o jsonpath='{.metadata.annotations.drainer\\.io/state-since}')\" +%s)
	[ \"\$(awk '\$1 == \"drainer_drain_phase_start_time_seconds{node=\\\"node-1\\\",driver=\\\"\\\",phase=\\\"drained\\\"}\" { printf \"%d\", \$2 }' '$e2e_tmp/m1.txt')\" = \"\$since\" ]"
check_eq "drainer_drains_total{goal=drain,result=done}" 1 "$(mval "$e2e_tmp/m1.txt" 'drainer_drains_total{goal="drain",result="done"}')"
check_eq "drainer_drain_duration_seconds_count{goal=drain,result=done}" 1 \
	"$(mval "$e2e_tmp/m1.txt" 'drainer_drain_duration_seconds_count{goal="drain",result="done"}')"
check_eq "no claims left" 0 "$(mval "$e2e_tmp/m1.txt" 'drainer_claims_on_node{node="node-1"}')"
check_eq "no pods left in any group" 0 "$(msum "$e2e_tmp/m1.txt" 'drainer_pods_pending{node="node-1"')"
check_eq "the stopped driver reads unhealthy" 0 "$(mval "$e2e_tmp/m1.txt" 'drainer_driver_healthy{node="node-1",driver="dra-system/dra-driver"}')"
for ph in evict-claim-holders evict-rest wait-released stop-drivers; do # (a node's cordon goes with evict-claim-holders)
	check_eq "drainer_phase_duration_seconds observed phase $ph once" 1 \
		"$(mval "$e2e_tmp/m1.txt" "drainer_phase_duration_seconds_count{phase=\"$ph\"}")"
done

# The eviction counters against the audit log.
sleep 1
audit_window "$start_line" "$e2e_tmp/audit.json"
ev() { jq --arg c "${1:-}" '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "create"
	and .objectRef.resource == "pods" and .objectRef.subresource == "eviction")
	| select($c == "" or (.responseStatus.code | tostring) == $c)] | length' "$e2e_tmp/audit.json"; }
n_all=$(ev) n_201=$(ev 201) n_429=$(ev 429) n_404=$(ev 404)
echo "  audit log: $n_all evictions by drainer ($n_201 accepted, $n_429 429, $n_404 404)"
check "the drain evicted pods ($n_all eviction requests)" [ "$n_all" -gt 0 ]
check_eq "sum of drainer_evictions_total = eviction requests in the audit log" "$n_all" "$(msum "$e2e_tmp/m1.txt" 'drainer_evictions_total{')"
check_eq "drainer_evictions_total{result=accepted} = 201 answers" "$n_201" "$(mval "$e2e_tmp/m1.txt" 'drainer_evictions_total{result="accepted"}')"
check_eq "drainer_evictions_total{result=pdb_blocked} = 429 answers" "$n_429" "$(mval "$e2e_tmp/m1.txt" 'drainer_evictions_total{result="pdb_blocked"}')"
check_eq "drainer_evictions_total{result=gone} = 404 answers" "$n_404" "$(mval "$e2e_tmp/m1.txt" 'drainer_evictions_total{result="gone"}')"
check_eq "drainer_evictions_total{result=error} = other answers" "$((n_all - n_201 - n_429 - n_404))" \
	"$(mval "$e2e_tmp/m1.txt" 'drainer_evictions_total{result="error"}')"
# API requests per verb (every one is in the audit log; watches are counted when they end).
for verb in get list create patch update delete; do
	got=$(($(msum "$e2e_tmp/m1.txt" "drainer_api_requests_total{verb=\"$verb\",") - $(msum "$e2e_tmp/m0.txt" "drainer_api_requests_total{verb=\"$verb\",")))
	want=$(jq --arg v "$verb" '[.[] | select((.userAgent | startswith("drainer/")) and .verb == $v)] | length' "$e2e_tmp/audit.json")
	check_eq "drainer_api_requests_total{verb=$verb} moved by the audit log's count" "$want" "$got"
done
check "request latency and rate-limiter wait histograms have observations" bash -c "
	[ \"\$(awk '\$1 == \"drainer_api_request_duration_seconds_count{verb=\\\"patch\\\"}\" { print \$2 }' '$e2e_tmp/m1.txt')\" -gt 0 ] &&
	[ \"\$(awk 'index(\$1, \"drainer_api_rate_limiter_wait_seconds_count{\") == 1 { s += \$2 } END { print s + 0 }' '$e2e_tmp/m1.txt')\" -gt 0 ]"
check "watch events were counted for pods and resourceclaims" bash -c "
	grep -qE '^drainer_watch_events_total\\{resource=\"pods\",type=\"(ADDED|MODIFIED|DELETED)\"\\} [1-9]' '$e2e_tmp/m1.txt' &&
	grep -qE '^drainer_watch_events_total\\{resource=\"resourceclaims\",type=\"(ADDED|MODIFIED|DELETED)\"\\} [1-9]' '$e2e_tmp/m1.txt'"

# The dashboard's drainer panels, evaluated by Prometheus while the node is drained
# (a watch restart may not have happened yet: that panel may be empty).
sleep 2
check "the dashboard's drainer queries return data in Prometheus" eval_dashboard 'drainer:' 'Watch restarts by resource and reason'

# ---- 4. the undo forgets the node ----
kubectl annotate node "$node" drainer.io/request=uncordon --overwrite >/dev/null
undone() { [ -z "$(node_ann "$node" drainer.io/state)" ] && [ "$(node_unschedulable "$node")" = false ]; }
check "request=uncordon: the node is back in service" wait_until 120 undone
sleep 1
scrape >"$e2e_tmp/m2.txt"
check "promtool check metrics accepts the scrape after the undo" promtool_ok "$e2e_tmp/m2.txt"
check_eq "no series about node-1 left" 0 "$(grep -c 'node="node-1"' "$e2e_tmp/m2.txt")"
check_eq "drainer_drains_total{goal=uncordon,result=done}" 1 "$(mval "$e2e_tmp/m2.txt" 'drainer_drains_total{goal="uncordon",result="done"}')"
for ph in drained restore-drivers; do # (a node's uncordon goes with the restore's end)
	check_eq "drainer_phase_duration_seconds observed phase $ph once" 1 \
		"$(mval "$e2e_tmp/m2.txt" "drainer_phase_duration_seconds_count{phase=\"$ph\"}")"
done
check_eq "/healthz still 200" 200 "$(http_code "http://127.0.0.1:$port/healthz")"
check_eq "/readyz still 200" 200 "$(http_code "http://127.0.0.1:$port/readyz")"

# ---- 5. the DRA control-plane metrics of the dashboard and rules ----
kcm_adds() { awk '$1 == "workqueue_adds_total{name=\"resource_claim\"}" { print $2 }' "$1"; }
a0=$(kcm_adds "$e2e_tmp/kcm0.txt") a1=$(kcm_adds "$e2e_tmp/kcm1.txt")
check "kube-controller-manager: workqueue_adds_total{name=resource_claim} grew during the drain ($a0 -> $a1)" \
	awk -v a="$a0" -v b="$a1" 'BEGIN { exit !(b > a) }'
for m in 'workqueue_depth{name="resource_claim"}' 'workqueue_work_duration_seconds_bucket{name="resource_claim",le="+Inf"}' \
	'workqueue_work_duration_seconds_count{name="resource_claim"}'; do
	check "kube-controller-manager exposes $m" grep -qF "$m " "$e2e_tmp/kcm1.txt"
done
sli() { awk 'index($1, "scheduler_pod_scheduling_sli_duration_seconds_count") == 1 { s += $2 } END { print s + 0 }' "$1"; }
alg() { awk '$1 == "scheduler_scheduling_algorithm_duration_seconds_count" { print $2 }' "$1"; }
comp_scrape "$sched_port" "$e2e_tmp/sched2.txt"
check "kube-scheduler: scheduler_pod_scheduling_sli_duration_seconds observed the replacement pods ($(sli "$e2e_tmp/sched0.txt") -> $(sli "$e2e_tmp/sched2.txt"))" \
	[ "$(sli "$e2e_tmp/sched2.txt")" -gt "$(sli "$e2e_tmp/sched0.txt")" ]
check "kube-scheduler: scheduler_scheduling_algorithm_duration_seconds observed attempts ($(alg "$e2e_tmp/sched0.txt") -> $(alg "$e2e_tmp/sched2.txt"))" \
	[ "$(alg "$e2e_tmp/sched2.txt")" -gt "$(alg "$e2e_tmp/sched0.txt")" ]

# The control-plane rows (the kubelet row cannot return data here: tests/cluster
# simulates the kubelet, which serves no /metrics).
sleep 3
check "the dashboard's queries of the control-plane rows return data in Prometheus" eval_dashboard 'DRA control plane'

# ---- 6. stop ----
kill -TERM "$serve_pid"
stopped() { ! kill -0 "$serve_pid" 2>/dev/null; }
check "serve stops on SIGTERM" wait_until 15 stopped
wait "$serve_pid"
check_eq "serve exits 0" 0 $?
serve_pid=
check "the metrics port is closed" bash -c "! (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null"
kill "$prom_pid" 2>/dev/null
wait "$prom_pid" 2>/dev/null
prom_pid=

# ---- 7. one-shot: drain -o json --metrics-in-output carries the figures ----
demo || fail "demo workload again"
drainer_run oneshot drain "$node" --timeout 90s -o json --metrics-in-output
check_rc "drain -o json --metrics-in-output" 0 oneshot
sleep 1
audit_window "$run_start" "$e2e_tmp/audit2.json"
n2=$(jq '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "create" and .objectRef.subresource == "eviction")] | length' "$e2e_tmp/audit2.json")
check_eq "-o json: sum of metrics.drainer_evictions_total = the audit log's evictions ($n2)" "$n2" \
	"$(jq '[.metrics.drainer_evictions_total.series[].value] | add' "$e2e_tmp/oneshot.out")"
check_eq "-o json: metrics.drainer_drains_total{goal=drain,result=done}" 1 \
	"$(jq '.metrics.drainer_drains_total.series[] | select(.labels.goal == "drain" and .labels.result == "done") | .value' "$e2e_tmp/oneshot.out")"
check_eq "-o json: podsEvicted = accepted evictions" "$(jq .podsEvicted "$e2e_tmp/oneshot.out")" \
	"$(jq '.metrics.drainer_evictions_total.series[] | select(.labels.result == "accepted") | .value' "$e2e_tmp/oneshot.out")"
check "-o json: API requests, phase durations and process metrics are in it" json_ok '(.metrics.drainer_api_requests_total.series | length > 0)
	and (.metrics.drainer_phase_duration_seconds.series | length >= 4)
	and (.metrics.process_resident_memory_bytes.series[0].value > 0)' "$e2e_tmp/oneshot.out"
drainer_run oneshot-undo uncordon "$node" -o json
check_rc "uncordon" 0 oneshot-undo
check "-o json without --metrics-in-output: a concise summary (schemaVersion 1, no metrics)" json_ok \
	'.schemaVersion == 1 and .result == "done" and (has("metrics") | not) and (.apiRequests > 0)' "$e2e_tmp/oneshot-undo.out"
finish
