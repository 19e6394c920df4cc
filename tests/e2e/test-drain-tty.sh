#!/usr/bin/env bash
# The audit trail on a terminal: `drain` with stdout and stderr on a pseudo-terminal
# (script(1)) draws its live block and prints every trail line above it, so that what
# the terminal received keeps kubectl drain's lines: `node/node-1 cordoned`, one
# `evicting pod NS/NAME` per eviction the audit log shows accepted, `node/node-1
# drained`. A pod held back by a PodDisruptionBudget (429 answered several times,
# the progress drawn many times meanwhile) gets one `held:` line with the reason and
# one `no longer held:` line once the budget allows it, never more.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_tty() {
	kubectl -n demo delete pdb e2e-budget --wait=false >/dev/null 2>&1
	kubectl -n demo delete deployment e2e-hold --wait=false >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_tty)

demo || { fail "demo workload"; finish; exit 1; }
pdb_budget_start e2e-budget
hold_pod=$budget_pod

# script -e: the exit code is drainer's; -f: the output as it comes.
start=$(audit_lines)
echo "  \$ script -qfec 'drainer drain $node --timeout 120s' /dev/null"
timeout -k 5 150 script -qfec "$(printf '%q ' "$DRAINER" drain "$node" --timeout 120s)" /dev/null \
	</dev/null >"$e2e_tmp/tty.raw" 2>&1 &
tty_pid=$!
track_pid "$tty_pid"
held_429s() {
	audit_window "$start" "$e2e_tmp/held.json"
	[ "$(jq --arg pod "$hold_pod" '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .objectRef.name == $pod and .responseStatus.code == 429)] | length' "$e2e_tmp/held.json")" -ge 3 ]
}
check "the eviction of $hold_pod is answered 429 three times (held by the budget)" wait_until 60 held_429s
kubectl -n demo patch pdb e2e-budget --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
wait "$tty_pid"
rc=$?
untrack_pid "$tty_pid"
check_eq "drain on a terminal: exit 0 once the budget allows the eviction" 0 "$rc"

# What the terminal shows, its escapes (cursor up, erase) and carriage returns taken out.
sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's/\r//g' "$e2e_tmp/tty.raw" >"$e2e_tmp/tty.txt"
check "the live block was drawn (a terminal: cursor-up escapes, \"pods left:\")" \
	bash -c "grep -q \$'\x1b\\\\[[0-9]*A' '$e2e_tmp/tty.raw' && grep -q 'pods left:' '$e2e_tmp/tty.txt'"
check_eq "\"node/$node cordoned\": once" 1 "$(grep -c "^node/$node cordoned$" "$e2e_tmp/tty.txt")"
check_eq "\"node/$node drained\": once, after the last eviction" 1 "$(grep -c "^node/$node drained$" "$e2e_tmp/tty.txt")"
check "\"node/$node drained\" comes after every \"evicting pod\"" \
	bash -c "[ \"\$(grep -n '^node/$node drained$' '$e2e_tmp/tty.txt' | cut -d: -f1)\" -gt \"\$(grep -n '^evicting pod ' '$e2e_tmp/tty.txt' | tail -n 1 | cut -d: -f1)\" ]"
audit_window "$start" "$e2e_tmp/audit.json"
check_eq "one \"evicting pod NS/NAME\" line per eviction the audit log shows accepted (201)" \
	"$(jq -r '.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .responseStatus.code == 201) | "\(.objectRef.namespace)/\(.objectRef.name)"' "$e2e_tmp/audit.json" | sort -u)" \
	"$(sed -n 's|^evicting pod \([^ ]*\)$|\1|p' "$e2e_tmp/tty.txt" | sort)"
check "... $hold_pod among them" grep -q "^evicting pod demo/$hold_pod$" "$e2e_tmp/tty.txt"
check_eq "the held pod: one \"held:\" line, naming the budget's refusal" 1 \
	"$(grep -ic "  held: demo/$hold_pod: .*budget" "$e2e_tmp/tty.txt")"
check_eq "... and one \"no longer held:\" line" 1 "$(grep -c "  no longer held: demo/$hold_pod$" "$e2e_tmp/tty.txt")"
check "... after its \"held:\" line" \
	bash -c "[ \"\$(grep -n 'no longer held: demo/$hold_pod' '$e2e_tmp/tty.txt' | cut -d: -f1)\" -gt \"\$(grep -n '   held: demo/$hold_pod:' '$e2e_tmp/tty.txt' | cut -d: -f1)\" ]"
check_eq "drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
if [ "$e2e_failed" -gt 0 ]; then
	grep -v '^  \|^node-1  ' "$e2e_tmp/tty.txt" | sed 's/^/    tty: /' | tail -n 60
fi

drainer_run uncordon uncordon "$node"
check_rc "uncordon" 0 uncordon
finish
