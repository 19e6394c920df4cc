#!/usr/bin/env bash
# drainer behind a fault-injecting proxy (tests/cluster/faultproxy)
# that answers 429 with Retry-After, 500 and 503, resets streams and
# connections (before the request reaches the API server, and after, losing the
# answer), stalls requests, sends bodies slowly and cuts watch streams in the
# middle of an event. For each fault kind, and for all of them mixed, a full
# `drain node-1` of the demo workload then `uncordon node-1` through the proxy;
# then `maintain node-1 -- true` with the mix. Per run: both exit 0; the safety
# rules (check_order, check_grace, check_node_invariants); the node drained, then
# schedulable with no drainer.io annotation; every rule of the run really fired
# (stall-forever included: each named fault kind happened); no retry of an
# injected 429 before its Retry-After; and the rate rule (--kube-api-qps Q
# --kube-api-burst B) over every window of each drainer process's requests both in
# the audit log (what reached the API server) and in the proxy's request log (every
# attempt, faulted ones included, drainer's own resends after a reset too: only
# libcurl's transparent resend, which repeats the attempt's Audit-ID, is exempt; the
# reset run must show such resends of drainer's). The checkers are first fed
# synthetic sequences that must fail (a burst of resends among them), and empty
# ones, so they cannot pass vacuously.
# FAULTS_RUNS="429 reset ..." picks runs; FAULTPROXY_PORT (default API port + 57,
# admin port + 1) moves the proxy.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1
Q=${FAULTS_QPS:-10}
B=${FAULTS_BURST:-5}
# A stream reset after the proxy forwarded an eviction cancels the request's context
# in kube-apiserver: if that lands between the PodDisruptionBudget's decrement and
# the pod's deletion (pkg/registry/core/pod/storage/eviction.go), the budget stays
# spent on a pod that was never deleted until the disruption controller drops the
# entry after its DeletionTimeout, 2 minutes (pkg/controller/disruption). drainer
# rightly waits; the drains here must be allowed to outlast that (seen under load:
# the web pods held for exactly 2 min, the old 120 s timeout hit).
drain_timeout=200s
export DRAINER_RUN_TIMEOUT=240
kc=$e2e_tmp/kubeconfig.proxy

cleanup_faults() {
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_faults)

# ---------------------------------------------------------------------------
# Checkers over the proxy's request log (JSON lines: t, method, uri, ua, fault,
# status, retry_after, body).

# proxy_slice FROM_LINE FILE: drainer's requests in the proxy log after line
# FROM_LINE, one JSON array sorted by receive time.
proxy_slice() {
	tail -n +"$(($1 + 1))" "$fp_log" | jq -c 'select(.method != null and (.ua | startswith("drainer/")))' |
		jq -s 'sort_by(.t)' >"$2"
}
# labelled PREFIX COMMAND...: runs a check command in a subshell and records
# its ok/FAIL lines here, each with PREFIX in front.
labelled() {
	local prefix=$1 out line n=0
	shift
	out=$("$@")
	while IFS= read -r line; do
		case $line in
		"  ok: "*) pass "$prefix${line#  ok: }" && n=$((n + 1)) ;;
		"  FAIL: "*) fail "$prefix${line#  FAIL: }" && n=$((n + 1)) ;;
		*) [ -z "$line" ] || echo "$line" ;;
		esac
	done <<<"$out"
	[ "$n" -gt 0 ] || fail "${prefix}no verdict from $1 (nothing checked)"
}
# check_proxy_rate FILE QPS BURST [START]: check_rate over the proxy's log (each line is
# one attempt as drainer sent it, whatever the proxy then did with it). One kind of
# attempt is not drainer's: libcurl itself sends a request again on a fresh
# connection when the reused connection it went out on died before any byte of the
# answer (lib/transfer.c Curl_retry_request, up to 5 times, no option turns it off;
# Go's HTTP transport does the same under client-go's rate limiter). It repeats the
# request as it was, headers included, while each attempt of drainer's own (a retry,
# or a resend of a request a reset left unanswered) carries a new Audit-ID header
# (drainer/kube/client.c). So an attempt counts once per Audit-ID: a repeat of an ID
# is libcurl's resend (at most 5; more is not libcurl's and counts), and everything
# drainer resends itself goes through the rule, as through its token bucket. An
# attempt without an Audit-ID fails the check (nothing would tell the two apart).
# The audit log's check groups by audit ID the same way (the API server takes the
# header as the audit ID).
check_proxy_rate() {
	python3 - "$1" >"$1.as-audit" 2>"$1.resends" <<'PY'
import json, sys
ev = sorted(json.load(open(sys.argv[1])), key=lambda e: e["t"])
out, seen, noid, extra, repeats = [], {}, 0, 0, 0
for i, e in enumerate(ev):
    aid = e.get("audit_id") or ""
    n = seen.get(aid, 0) if aid else 0
    if aid:
        seen[aid] = n + 1
    else:
        noid += 1
    if n == 0 or n > 5:
        extra += n > 5
        out.append({"userAgent": e["ua"], "auditID": "p%d" % i, "requestReceivedTimestamp": e["t"]})
    else:
        repeats += 1
print(json.dumps(out))
print(noid, extra, repeats, file=sys.stderr)
PY
	local noid extra repeats
	read -r noid extra repeats <"$1.resends"
	if [ "${noid:-1}" != 0 ]; then
		fail "proxy log: ${noid:-?} attempts without an Audit-ID header: libcurl's resends cannot be told from drainer's"
	elif [ "${extra:-1}" != 0 ]; then
		fail "proxy log: $extra attempts repeat an Audit-ID more than the 5 times libcurl resends a request"
	fi
	labelled "proxy log (${repeats:-?} libcurl resends counted with the attempt they repeat): " check_rate "$1.as-audit" "$2" "$3" drainer/ '[]' "${4:-}"
}
# own_resends FILE: how many attempts of drainer follow an unanswered attempt (the
# proxy reset it, or could not deliver its answer) of the same method and URI, with
# a new Audit-ID: drainer's own resends, which the rate rule counts.
own_resends() {
	jq '[foreach .[] as $e ({lost: {}, n: 0};
		"\($e.method) \($e.uri)" as $k
		| (if (.lost[$k] // null) != null and ($e.audit_id // "") != .lost[$k] then .n += 1 | .lost[$k] = null else . end)
		| if ($e.status == 0 or $e.delivered == false) then .lost[$k] = ($e.audit_id // "") else . end;
		.n)] | last // 0' "$1"
}
# check_retry_after FILE: no request answered with an injected 429 + Retry-After
# S (that the proxy could deliver: not lost with a connection another rule
# reset) was sent again (same method, URI up to resourceVersion/timeoutSeconds, same
# body) less than S seconds later.
check_retry_after() {
	jq_checks '
	def secs: (.[0:19] + "Z" | fromdateiso8601) + ("0" + (.[19:] | rtrimstr("Z")) | tonumber);
	def key: "\(.method) \(.uri | gsub("resourceVersion=[0-9]*"; "resourceVersion=N") | gsub("timeoutSeconds=[0-9]*"; "timeoutSeconds=N")) \(.body // "")";
	. as $all
	| [range(0; length) as $i | $all[$i] | select(.fault == "429" and (.retry_after // 0) > 0 and .delivered != false) | . + {i: $i}] as $t
	| [$t[] | . as $x | key as $k
	   | ([$all[($x.i + 1):][] | select(key == $k)] | .[0]) as $next
	   | select($next != null)
	   | {uri: "\($x.method) \($x.uri)", ra: $x.retry_after, gap: (($next.t | secs) - ($x.t | secs))}] as $r
	| if ($t | length) == 0 then "FAIL Retry-After: no injected 429 to check"
	  else ([$r[] | select(.gap < .ra - 0.005)]) as $early
	  | if ($early | length) == 0
	    then "ok Retry-After: \($t | length) injected 429s, \($r | length) retried, none before its Retry-After (shortest gap \([$r[].gap] | min // "-" | if type == "number" then (. * 1000 | round / 1000) else . end) s)"
	    else "FAIL Retry-After not honoured: \($early | map("\(.uri) after \(.gap * 1000 | round / 1000) s < \(.ra) s") | .[0:4] | join("; "))" end
	  end' "$1"
}

# Self-test: the checkers fail on sequences that break the rules.
selftest() {
	local f=$e2e_tmp/selftest.json out
	# 8 requests 10 ms apart at qps 10 burst 5: 8 > 5 + 0.07 + 1.
	jq -n '[range(0; 8) | {ua: "drainer/x", method: "GET", uri: "/api/v1/nodes/n", fault: "pass", audit_id: "id-\(.)",
		t: "2026-01-01T00:00:01.\(1000 * (. + 1) | tostring | ("000000" + .)[-6:])Z"}]' >"$f"
	out=$(check_proxy_rate "$f" 10 5)
	if grep -q 'FAIL: proxy log.*rate:' <<<"$out"; then pass "self-test: the proxy-log rate checker fails 8 requests in 70 ms at qps 10 burst 5"; else fail "self-test: rate checker passed a too-fast sequence: $out"; fi
	# 6 requests 250 ms apart: 2 + 0.25*... fits easily.
	jq -n '[range(0; 6) | {ua: "drainer/x", method: "GET", uri: "/x", fault: "pass", audit_id: "id-\(.)",
		t: "2026-01-01T00:00:0\(1 + (. / 4 | floor)).\((. % 4) * 250000 | tostring | ("000000" + .)[-6:])Z"}]' >"$f"
	out=$(check_proxy_rate "$f" 10 5)
	if grep -q '^  ok' <<<"$out" && ! grep -q FAIL <<<"$out"; then pass "self-test: the rate checker passes 6 requests 250 ms apart"; else fail "self-test: rate checker refused a slow sequence: $out"; fi
	# A connection reset loses 5 requests (burst 5, sent 1 ms apart); 10 ms later they
	# go again on a new connection. Drainer's own resends (new Audit-IDs) would be 10
	# requests in 15 ms: over the bucket, whatever the connection or timing. libcurl's
	# resends of the same 5 (same Audit-IDs) are the same requests: within it.
	jq -n '[range(0; 5) | {ua: "drainer/x", method: "GET", uri: "/api/v1/pods/p\(.)", fault: (if . == 0 then "reset-conn" else "pass" end),
			status: 0, remote: "127.0.0.1:1000", audit_id: "lost-\(.)", t: "2026-01-01T00:00:01.00\(.)000Z"}]
		+ [range(0; 5) | {ua: "drainer/x", method: "GET", uri: "/api/v1/pods/p\(.)", fault: "pass", status: 200, remote: "127.0.0.1:1001",
			audit_id: "again-\(.)", t: "2026-01-01T00:00:01.01\(.)000Z"}]' >"$f"
	out=$(check_proxy_rate "$f" 10 5)
	if grep -q 'FAIL: proxy log.*rate:' <<<"$out"; then pass "self-test: the rate checker fails a burst of drainer's own resends after a connection reset (new Audit-IDs: counted)"; else fail "self-test: a burst of 5 resends on top of 5 lost requests passed: $out"; fi
	check_eq "self-test: own_resends counts them (5)" 5 "$(own_resends "$f")"
	jq 'map(.audit_id |= sub("again-"; "lost-"))' "$f" >"$f.2"
	out=$(check_proxy_rate "$f.2" 10 5)
	if grep -q '^  ok.*5 libcurl resends' <<<"$out" && ! grep -q FAIL <<<"$out"; then pass "self-test: ... and passes the same burst as libcurl's resends (the Audit-IDs repeated)"; else fail "self-test: libcurl's resends of the same requests were counted: $out"; fi
	check_eq "self-test: own_resends counts none of libcurl's" 0 "$(own_resends "$f.2")"
	jq 'map(del(.audit_id))' "$f" >"$f.3"
	out=$(check_proxy_rate "$f.3" 10 5)
	if grep -q 'FAIL: .*without an Audit-ID' <<<"$out"; then pass "self-test: the rate checker fails attempts without an Audit-ID"; else fail "self-test: attempts without an Audit-ID passed: $out"; fi
	jq -n '[range(0; 7) | {ua: "drainer/x", method: "GET", uri: "/x", fault: "pass", audit_id: "same",
		t: "2026-01-01T00:00:0\(1 + .).000000Z"}]' >"$f.4"
	out=$(check_proxy_rate "$f.4" 10 5)
	if grep -q 'FAIL: .*more than the 5 times' <<<"$out"; then pass "self-test: the rate checker fails an Audit-ID sent 7 times (libcurl resends at most 5)"; else fail "self-test: an Audit-ID repeated 7 times passed: $out"; fi
	# A 429 with Retry-After 2 retried after 0.5 s.
	jq -n '[{ua: "drainer/x", method: "POST", uri: "/e", body: "ab", fault: "429", retry_after: 2, t: "2026-01-01T00:00:01.000000Z"},
		{ua: "drainer/x", method: "POST", uri: "/e", body: "cd", fault: "pass", t: "2026-01-01T00:00:01.100000Z"},
		{ua: "drainer/x", method: "POST", uri: "/e", body: "ab", fault: "pass", t: "2026-01-01T00:00:01.500000Z"}]' >"$f"
	out=$(check_retry_after "$f")
	if grep -q 'FAIL: Retry-After not honoured' <<<"$out"; then pass "self-test: the Retry-After checker fails a retry 0.5 s after Retry-After: 2"; else fail "self-test: Retry-After checker passed an early retry: $out"; fi
	jq '.[2].t = "2026-01-01T00:00:03.000000Z"' "$f" >"$f.2"
	out=$(check_retry_after "$f.2")
	if grep -q '^  ok' <<<"$out"; then pass "self-test: the Retry-After checker passes a retry 2 s later (another body in between is not a retry)"; else fail "self-test: Retry-After checker: $out"; fi
	# Empty inputs: nothing to check is a failure.
	echo '[]' >"$f"
	out=$(check_proxy_rate "$f" 10 5)
	if grep -q FAIL <<<"$out" && ! grep -q '  ok' <<<"$out"; then pass "self-test: the proxy-log rate checker fails an empty log"; else fail "self-test: the rate checker passed an empty log: $out"; fi
	out=$(check_retry_after "$f")
	if grep -q FAIL <<<"$out" && ! grep -q '  ok' <<<"$out"; then pass "self-test: the Retry-After checker fails an empty log"; else fail "self-test: the Retry-After checker passed an empty log: $out"; fi
	out=$(fired_checks 429 "$f")
	if grep -q FAIL <<<"$out" && ! grep -q '  ok' <<<"$out"; then pass "self-test: the fault-fired checker fails when no rule fired"; else fail "self-test: fault-fired checker: $out"; fi
	jq -n '[{rule: "429-2s", fault: "429"}, {rule: "429-2s", fault: "429"}]' >"$f"
	out=$(fired_checks 429 "$f")
	if grep -q 'FAIL: 429: rule 429-1s never fired' <<<"$out" && grep -q 'ok: 429: rule 429-2s fired 2' <<<"$out"; then pass "self-test: the fault-fired checker names the rule that never fired"; else fail "self-test: fault-fired checker: $out"; fi
}

# ---------------------------------------------------------------------------
# One run: VERB-ARGS are "drain" (then uncordon) or "maintain".

declare -A fault_rules=(
	# 429 with Retry-After (1 or 2 s) on a quarter of the requests, watches included.
	[429]='[{"name":"429-2s","action":"429","retry_after":2,"every":9},
		{"name":"429-1s","action":"429","retry_after":1,"prob":0.25}]'
	[500]='[{"name":"500","action":"500","prob":0.25}]'
	[503]='[{"name":"503","action":"503","prob":0.25}]'
	# Stream resets before the request is forwarded (GETs are resent by the transport,
	# writes are retried by the engine), a few after it (the answer is lost, the
	# write happened), and whole connections closed.
	[reset]='[{"name":"reset-conn","action":"reset-conn","every":11},
		{"name":"reset-after","action":"reset","after":true,"prob":0.08},
		{"name":"reset","action":"reset","prob":0.2}]'
	# Hold some requests 2 s, one until drainer gives up on it (its request timeout,
	# --request-timeout 10s in this run rather than the default 30 s: a GET, so it is
	# retried).
	[stall]='[{"name":"stall-forever","action":"stall","method":"GET","watch":false,"path":"^/api/v1/pods","first":1},
		{"name":"stall-2s","action":"stall","delay":"2s","prob":0.25}]'
	[slow-body]='[{"name":"slow-body","action":"slow-body","chunk":200,"delay":"15ms","prob":0.4}]'
	# Cut watches half-way through an event line, after 0 to 2 complete events; by count,
	# not chance, so that each rule fires in every run (fired_checks): cut-1 takes every
	# 2nd watch that cut-0 lets by, cut-2-conn every 2nd that cut-1 lets by, so three
	# watches are enough (a drain and its undo open more; by chance, cut-2-conn fired in
	# 3 of 16 watches and missed a whole run now and then).
	[cut-watch]='[{"name":"cut-0","action":"cut-watch","events":0,"every":4},
		{"name":"cut-1","action":"cut-watch","events":1,"every":2},
		{"name":"cut-2-conn","action":"cut-watch","events":2,"conn":true,"every":2}]'
	# Every kind, each now and then: "every N" (of the requests that reach the rule), so
	# that each kind fires in every run (a drain and its undo send about 70 requests
	# through the proxy), which the run checks (fired_checks).
	[mixed]='[{"name":"cut-watch","action":"cut-watch","events":1,"every":3},
		{"name":"429","action":"429","retry_after":1,"every":12},
		{"name":"500","action":"500","every":19},
		{"name":"503","action":"503","every":21},
		{"name":"reset","action":"reset","every":17},
		{"name":"reset-after","action":"reset","after":true,"every":29},
		{"name":"reset-conn","action":"reset-conn","every":31},
		{"name":"stall","action":"stall","delay":"1s","every":23},
		{"name":"slow-body","action":"slow-body","chunk":300,"delay":"10ms","every":20}]'
)

# fired_checks KIND FILE: each rule of the run KIND fired at least once in the proxy
# slice FILE (a run whose faults did not happen proves nothing about them).
fired_checks() {
	jq_checks --arg k "$1" --argjson rules "${fault_rules[$1]}" '
		. as $all | $rules[] | .name as $n
		| ([$all[] | select(.rule == $n and .fault != "pass")] | length) as $c
		| if $c > 0 then "ok \($k): rule \($n) fired \($c) times" else "FAIL \($k): rule \($n) never fired" end' "$2"
}
# injected FILE: "name=count ..." of the faults injected in a proxy slice.
injected() {
	jq -r '[.[] | select(.fault != "pass") | .rule] | group_by(.) | map("\(.[0])=\(length)") | join(" ")' "$1"
}

fault_run() { # KIND VERB
	local k=$1 verb=$2 first plog nfault rt=()
	[ "$k" != stall ] || rt=(--request-timeout 10s)
	echo "  --- $k ($verb)"
	demo || { fail "$k: demo workload"; return; }
	pods_on_node "$node" "$e2e_tmp/$k.pods.json"
	classify_pods "$e2e_tmp/$k.pods.json" >"$e2e_tmp/$k.classes.json"
	claims_on_node "$node" >"$e2e_tmp/$k.claims.json"
	node_watch_start "$node" "$e2e_tmp/$k.watch"
	fp_rules "${fault_rules[$k]}" || { fail "$k: setting the proxy's rules"; return; }
	first=$(audit_lines)
	plog=$(wc -l <"$fp_log")
	segs=()
	if [ "$verb" = drain ]; then
		t0=$(now_rfc3339)
		drainer_run "$k.drain" --kubeconfig "$kc" --kube-api-qps "$Q" --kube-api-burst "$B" "${rt[@]}" \
			drain "$node" --timeout "$drain_timeout"
		check_rc "$k: drain through the proxy completes" 0 "$k.drain"
		check_eq "$k: drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
		check_eq "$k: no ResourceClaim on $node" "[]" "$(claims_on_node "$node")"
		check "$k: no driver pod on $node" no_driver_pod "$node"
		t1=$(now_rfc3339)
		segs+=("drain $t0 $t1")
		drainer_run "$k.uncordon" --kubeconfig "$kc" --kube-api-qps "$Q" --kube-api-burst "$B" "${rt[@]}" \
			uncordon "$node" --timeout "$drain_timeout"
		check_rc "$k: uncordon through the proxy completes" 0 "$k.uncordon"
		segs+=("uncordon $t1 $(now_rfc3339)")
	else
		t0=$(now_rfc3339)
		# maintain runs the command while drained: it records that the node was
		# drained and that no claim was left on it.
		drainer_run "$k.maintain" --kubeconfig "$kc" --kube-api-qps "$Q" --kube-api-burst "$B" "${rt[@]}" \
			maintain "$node" --timeout "$drain_timeout" -- sh -c "$KUBECTL get node $node -o jsonpath='{.metadata.annotations.drainer\.io/state}' >'$e2e_tmp/$k.state-in-cmd'"
		check_rc "$k: maintain (drain, command, restore) through the proxy completes" 0 "$k.maintain"
		segs+=("maintain $t0 $(now_rfc3339)")
		check_eq "$k: the command ran while the node was drained" drained "$(cat "$e2e_tmp/$k.state-in-cmd" 2>/dev/null)"
	fi
	fp_rules '[]'
	sleep 0.3
	node_watch_stop
	echo "  phases seen: $(phases_seen "$e2e_tmp/$k.watch")"
	check "$k: restored: schedulable, no drain taint, no drainer.io annotation, driver running, slice published" \
		wait_until 30 node_restored "$node"
	audit_window "$first" "$e2e_tmp/$k.audit"
	check_order "$e2e_tmp/$k.audit" "$e2e_tmp/$k.classes.json" "$e2e_tmp/$k.claims.json" "$node"
	# An eviction whose stream the proxy cut while the API server was still reading
	# it (a connection reset under it) is logged without its body, answered 5xx: it
	# never reached the handler, so there is no grace period to check in it.
	jq '[.[] | select((.objectRef.subresource == "eviction" and .requestObject == null and (.responseStatus.code // 0) >= 500) | not)]' \
		"$e2e_tmp/$k.audit" >"$e2e_tmp/$k.audit-grace"
	[ "$(jq length "$e2e_tmp/$k.audit")" = "$(jq length "$e2e_tmp/$k.audit-grace")" ] ||
		echo "  ($(($(jq length "$e2e_tmp/$k.audit") - $(jq length "$e2e_tmp/$k.audit-grace"))) eviction(s) cut before the API server read the body left out of the grace check)"
	check_grace "$e2e_tmp/$k.audit-grace" "$e2e_tmp/$k.classes.json"
	check_node_invariants "$e2e_tmp/$k.watch" false
	proxy_slice "$plog" "$e2e_tmp/$k.proxy.json"
	nfault=$(jq '[.[] | select(.fault != "pass")] | length' "$e2e_tmp/$k.proxy.json")
	if [ "$nfault" -gt 0 ]; then
		pass "$k: the proxy injected $nfault faults into $(jq length "$e2e_tmp/$k.proxy.json") requests ($(injected "$e2e_tmp/$k.proxy.json"))"
	else
		fail "$k: the proxy injected no fault ($(jq length "$e2e_tmp/$k.proxy.json") requests): the run proves nothing"
	fi
	fired_checks "$k" "$e2e_tmp/$k.proxy.json"
	# Drainer's own resends of what a reset left unanswered (new Audit-IDs) are what the
	# proxy-log rate rule holds to the token bucket: the reset run must have some.
	local own
	own=$(own_resends "$e2e_tmp/$k.proxy.json")
	echo "  drainer's own resends of unanswered requests: $own"
	[ "$k" != reset ] || check "$k: drainer resent requests a reset left unanswered itself ($own, each with a new Audit-ID, counted by the rate rule)" [ "$own" -gt 0 ]
	# A 409 on the Node patch means the cache is behind: drainer waits for the
	# watch to catch up instead of patching from the stale version again.
	check "$k: at most 10 Node patches refused with 409 ($(jq '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "patch" and .responseStatus.code == 409)] | length' "$e2e_tmp/$k.audit"))" \
		jq -e '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "patch" and .responseStatus.code == 409)] | length <= 10' "$e2e_tmp/$k.audit"
	audit_since "$first" "$e2e_tmp/$k.audit-all"
	# Requests the proxy held (stall) reached the API server later than drainer sent
	# them, bunched with later ones: the audit log's times say nothing of drainer's
	# rate for those. Leave them out there (each matched by URI, received within its
	# stall + 1 s); the proxy log's check covers them.
	jq --slurpfile p "$e2e_tmp/$k.proxy.json" '
		def secs: (.[0:19] + "Z" | fromdateiso8601) + ("0" + (.[19:] | rtrimstr("Z")) | tonumber);
		[$p[0][] | select(.fault == "stall") | {uri, t: (.t | secs), until: ((.t | secs) + .secs + 1)}] as $held
		| map(. as $a | ($a.requestReceivedTimestamp | secs) as $ta
			| select([$held[] | select(.uri == $a.requestURI and $ta >= .t and $ta <= .until)] | length == 0))' \
		"$e2e_tmp/$k.audit-all" >"$e2e_tmp/$k.audit-unheld"
	# The rate rule holds per process (each drainer run has its own token bucket; what
	# its first connection held, placed back from its launch: check_rate's START).
	local seg tag from to held
	for seg in "${segs[@]}"; do
		read -r tag from to <<<"$seg"
		jq --arg f "$from" --arg t "$to" 'map(select(.requestReceivedTimestamp >= $f and .requestReceivedTimestamp <= $t))' \
			"$e2e_tmp/$k.audit-unheld" >"$e2e_tmp/$k.$tag.audit-rate"
		held=$(jq --arg f "$from" --arg t "$to" '[.[] | select(.requestReceivedTimestamp >= $f and .requestReceivedTimestamp <= $t)
			| select(.userAgent | startswith("drainer/")) | .auditID] | unique | length' "$e2e_tmp/$k.audit-all")
		held=$((held - $(jq '[.[] | select(.userAgent | startswith("drainer/")) | .auditID] | unique | length' "$e2e_tmp/$k.$tag.audit-rate")))
		labelled "$k $tag: audit log ($held held by the proxy left out): " check_rate "$e2e_tmp/$k.$tag.audit-rate" "$Q" "$B" drainer/ '[]' "$from"
		jq --arg f "$from" --arg t "$to" 'map(select(.t >= $f and .t <= $t))' "$e2e_tmp/$k.proxy.json" >"$e2e_tmp/$k.$tag.proxy-rate"
		labelled "$k $tag: " check_proxy_rate "$e2e_tmp/$k.$tag.proxy-rate" "$Q" "$B" "$from"
		# Retry-After, per process too (the next process may well ask the same at once).
		case $k in
		429 | mixed | maintain-mixed)
			if [ "$(jq '[.[] | select(.fault == "429")] | length' "$e2e_tmp/$k.$tag.proxy-rate")" -gt 0 ]; then
				labelled "$k $tag: " check_retry_after "$e2e_tmp/$k.$tag.proxy-rate"
			fi
			;;
		esac
	done
	case $k in
	429 | mixed) check "$k: the proxy injected 429s with Retry-After" \
		jq -e '[.[] | select(.fault == "429" and .retry_after > 0)] | length > 0' "$e2e_tmp/$k.proxy.json" ;;
	esac
}

selftest
fp_start "$kc"
reset_node "$node"
for k in ${FAULTS_RUNS:-429 500 503 reset stall slow-body cut-watch mixed}; do
	fault_run "$k" drain
done
[ -n "${FAULTS_SKIP_MAINTAIN:-}" ] || { fault_rules[maintain-mixed]=${fault_rules[mixed]}; fault_run maintain-mixed maintain; }
finish
