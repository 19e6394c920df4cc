#!/usr/bin/env bash
# drainer's command line as kubectl users type it, with no cluster: every run points
# at a kubeconfig whose server is a closed port, so a run that got past its flags ends
# on its own (exit 7: the API server cannot be reached; 9 for a kubeconfig that does
# not exist) and a bad one exits 2 before any request. Asserts on exit codes, stderr and stdout only.
#  - kubectl drain's spellings: --force=true, --delete-emptydir-data=true,
#    --disable-eviction=false, --delete-local-data (kubectl's deprecation warning),
#    --chunk-size=500; -v=6 / -v6 / -v 6 / --v=6 after the verb; a bad switch value;
#  - an unknown flag names exactly the wrong word (-x, --frce, an abbreviation);
#    `drainer -V` says so in two lines, not the whole help;
#  - -o yaml is the -o json document, -o name prints node/NAME;
#  - --config: --flag=false turns a file's `true` off; a typo, a bare `timeout:` and
#    a bad value name the file, the line and the key (exit 2);
#  - every verb that talks to the API server lists the exit codes 7-10 in its --help.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
need_drainer

cat >"$e2e_tmp/kubeconfig" <<'YAML'
apiVersion: v1
kind: Config
clusters:
- name: closed
  cluster:
    server: https://127.0.0.1:9
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: not-a-secret
contexts:
- name: closed
  context: {cluster: closed, user: u}
current-context: closed
YAML
export KUBECONFIG=$e2e_tmp/kubeconfig

# run TAG ARGS...: drainer ARGS (ended after 20 s at most); rc in $rc, output in
# $e2e_tmp/TAG.{out,err}.
run() {
	local tag=$1
	shift
	timeout -s INT 20 "$DRAINER" "$@" >"$e2e_tmp/$tag.out" 2>"$e2e_tmp/$tag.err"
	rc=$?
}
err_has() { grep -qF -- "$2" "$e2e_tmp/$1.err"; }
err_lacks() { ! grep -qF -- "$2" "$e2e_tmp/$1.err"; }
# accepted TAG ARGS...: the flags parsed (no exit 2, no "unknown flag")
accepted() {
	local tag=$1
	shift
	run "$tag" "$@" --timeout 1s
	check "$* accepted (exit $rc, not 2)" [ "$rc" != 2 ]
	check "$*: no \"unknown flag\"" err_lacks "$tag" "unknown flag"
}
# refused TAG TEXT ARGS...: exit 2 and TEXT on stderr
refused() {
	local tag=$1 text=$2
	shift 2
	run "$tag" "$@"
	check "$*: exit 2 (got $rc)" [ "$rc" = 2 ]
	check "$*: says $text" err_has "$tag" "$text"
	err_has "$tag" "$text" || sed 's/^/    /' "$e2e_tmp/$tag.err"
}

echo "== kubectl drain's flags"
accepted force drain n1 --force=true
accepted emptydir drain n1 --delete-emptydir-data=true
accepted evict drain n1 --disable-eviction=false
accepted local drain n1 --delete-local-data
check "--delete-local-data: kubectl's deprecation warning" \
	err_has local "Flag --delete-local-data has been deprecated, This option is deprecated and will be deleted. Use --delete-emptydir-data."
accepted chunk drain n1 --chunk-size=500
accepted ignoreds drain n1 --ignore-daemonsets --force --delete-emptydir-data=false
refused badbool '--force: invalid value "maybe" (true or false)' drain n1 --force=maybe
refused badchunk '--chunk-size: invalid value "x"' drain n1 --chunk-size=x

echo "== -v as kubectl's"
for v in -v=6 -v6 --v=6; do
	run "v$v" drain n1 "$v" --kubeconfig "$e2e_tmp/none"
	check "drain n1 $v --kubeconfig MISSING: exit 9, the kubeconfig (got $rc)" [ "$rc" = 9 ]
	check "drain n1 $v: blames the kubeconfig, not a flag" err_has "v$v" "$e2e_tmp/none: cannot read kubeconfig"
done
run vspace drain n1 -v 6 --kubeconfig "$e2e_tmp/none"
check "drain n1 -v 6: exit 9 (got $rc), 6 not a node" [ "$rc" = 9 ]
run vbefore -v 6 drain n1 --kubeconfig "$e2e_tmp/none"
check "-v 6 before the verb: exit 9 (got $rc)" [ "$rc" = 9 ]
refused vbad '-v: invalid level "x"' drain n1 -v=x

echo "== unknown flags name the word"
refused short 'unknown flag "-x"' drain n1 -x
refused typo 'unknown flag "--frce" (did you mean --force?)' drain n1 --frce
refused abbrev 'unknown flag "--forc"' drain n1 --forc
refused bigv 'unknown flag "-V"' -V
check "drainer -V: two lines, not the help" [ "$(wc -l <"$e2e_tmp/bigv.err")" -le 2 ]
check "drainer -V: a hint" err_has bigv "See 'drainer --help'"
check "drainer -V: not the help" err_lacks bigv "Verbs:"

echo "== -o yaml, -o name"
run json drain n1 --timeout 1s -o json
json_rc=$rc
run yaml drain n1 --timeout 1s -o yaml
check "-o yaml: exit 7 (the API server cannot be reached) as -o json (got $rc and $json_rc)" test "$rc" = 7 -a "$json_rc" = 7
strip='del(.seconds, .apiRequests, .watchEvents)'
check_eq "-o yaml is -o json's document" "$(jq -S "$strip" "$e2e_tmp/json.out")" \
	"$(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))' <"$e2e_tmp/yaml.out" | jq -S "$strip")"
run name drain n1 --timeout 1s -o name
check_eq "-o name: node/NAME" "node/n1" "$(cat "$e2e_tmp/name.out")"
run vyaml version -o yaml
check_eq "version -o yaml is version -o json" "$("$DRAINER" version -o json | jq -S .)" \
	"$(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))' <"$e2e_tmp/vyaml.out" | jq -S .)"
refused badout '-o: unknown output format "xml" (text, json, yaml, name)' drain n1 -o xml
refused badcolor '--color: invalid value "sometimes"' drain n1 --color=sometimes

echo "== --config"
cfg=$e2e_tmp/drainer.yaml
printf 'node-conditions: true\nforce: true\n' >"$cfg"
refused cfgon "--node-conditions does not apply with --driver" drain n1 --config "$cfg" --driver gpu.example.com
accepted cfgoff drain n1 --config "$cfg" --driver gpu.example.com --node-conditions=false --force=false
check "--node-conditions=false turns the file's true off" err_lacks cfgoff "node-conditions"
printf 'force: true\ngrace-perid: 30\n' >"$cfg"
refused cfgtypo "$cfg:2: unknown key \"grace-perid\" (did you mean \"grace-period\"?)" drain n1 --config "$cfg"
printf '# timeouts\nforce: true\ntimeout:\n' >"$cfg"
refused cfgbare "$cfg:3: timeout: a duration is needed (e.g. 30s)" drain n1 --config "$cfg"
refused cfgbareserve "$cfg:3: timeout: a duration is needed (e.g. 30s)" serve --node n1 --config "$cfg"
printf 'timeout: 5x\n' >"$cfg"
refused cfgbad "$cfg:1: --timeout: invalid duration \"5x\"" drain n1 --config "$cfg"
printf 'force: maybe\n' >"$cfg"
refused cfgbool "$cfg:1: --force: invalid value \"maybe\" (true or false)" drain n1 --config "$cfg"
printf 'grace: 30\n' >"$cfg"
refused cfgabbrev "$cfg:1: unknown key \"grace\"" drain n1 --config "$cfg"

echo "== each verb's help lists the exit codes 7-10"
# (every verb that talks to the API server may end on one of them: drainer --help's table)
api_codes() { # FILE: the text from "Exit codes:" on names 7, 8, 9 and 10 with their meaning
	local t
	t=$(sed -n '/Exit codes:/,$p' "$1" | tr '\n' ' ' | tr -s ' ')
	grep -qF "7 the API server cannot be reached" <<<"$t" && grep -qF "8 the node does not exist" <<<"$t" &&
		grep -qF "9 the kubeconfig (or the credentials it names) is invalid" <<<"$t" && grep -qF "10 forbidden (401, 403)" <<<"$t"
}
for verb in status plan drain uncordon maintain serve guard doctor rollout; do
	"$DRAINER" "$verb" --help >"$e2e_tmp/help-$verb.out" 2>&1
	check "drainer $verb --help: exit codes 7 unreachable, 8 no such node, 9 kubeconfig invalid, 10 forbidden" api_codes "$e2e_tmp/help-$verb.out"
done
"$DRAINER" --help >"$e2e_tmp/help.out" 2>&1
check "drainer --help: the table names 7-10 too" bash -c "grep -q '^  7  the API server cannot be reached' '$e2e_tmp/help.out' && grep -q '^  10 forbidden' '$e2e_tmp/help.out'"

finish
