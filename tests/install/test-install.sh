#!/usr/bin/env bash
# The full install: `meson install` of build/ into a staged root (DESTDIR).
#  - exactly the expected files, the units' paths those of the configured prefix and
#    no @placeholder@ left in anything installed;
#  - the units verified with systemd-analyze verify (and security, and the polkit
#    rule) at their installed paths: systemd/verify --stage;
#  - drainer(1): renders without a groff warning, has a section per verb of
#    `drainer --help`, and every flag of every `drainer VERB --help` is in it;
#  - --help against the parser: every flag a verb's --help shows is one the verb
#    accepts, and every long option in the sources' option tables is shown by some
#    --help (a flag added without help, or help for a flag that does not exist, fails);
#  - the bash completion (run in bash with COMP_WORDS as readline sets them) offers
#    the verbs, each verb's flags, flag values, and the test cluster's node names
#    through kubectl; the zsh completion offers the same (driven through a zsh
#    pseudo-terminal, zpty) when zsh is installed;
#  - kubectl-drainer: `kubectl drainer plan node-1` works as a kubectl plugin
#    (same answer as drainer plan), and kubectl completes `kubectl drainer` through
#    kubectl_complete-drainer.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$install_root" || exit 1
export LC_ALL=C
: "${DRAINER_CLUSTER_DIR:=/tmp/drainer-cluster}"
build=${BUILD:-build}
drainer=$build/drainer

t0=$SECONDS
S=$t_tmp/stage
if out=$(DESTDIR=$S meson install -C "$build" --quiet 2>&1); then
	pass "meson install --destdir ($((SECONDS - t0)) s)"
else
	fail "meson install --destdir"
	echo "$out" | sed 's/^/    /'
	finish
	exit 1
fi
prefix=$(meson introspect "$build" --buildoptions | jq -r '.[] | select(.name == "prefix") | .value')
# what a prefix other than /usr gets (/usr is checked by tests/install/test-deb.sh)
P=${prefix#/}
expected="$P/bin/drainer
$P/bin/kubectl-drainer
$P/bin/kubectl_complete-drainer
$P/etc/default/drainer
$P/etc/drainer/drainer.yaml
$P/etc/polkit-1/rules.d/50-drainer.rules
$P/lib/systemd/system/drainer-maintain@.service
$P/lib/systemd/system/drainer.path
$P/lib/systemd/system/drainer.service
$P/lib/sysusers.d/drainer.conf
$P/share/bash-completion/completions/drainer
$P/share/bash-completion/completions/kubectl-drainer
$P/share/doc/drainer/examples/drainer-root.conf
$P/share/doc/drainer/examples/logind-drainer.conf
$P/share/man/man1/drainer.1
$P/share/man/man1/kubectl-drainer.1
$P/share/man/man1/kubectl_complete-drainer.1
$P/share/zsh/site-functions/_drainer"
if [ "$prefix" = /usr ]; then
	pass "prefix /usr: the file list is checked for other prefixes"
else
	check_eq "installed files (prefix $prefix)" "$expected" "$(cd "$S" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort)"
fi
check_eq "kubectl-drainer is a link to drainer" drainer "$(readlink "$S/$P/bin/kubectl-drainer")"
unit=$(find "$S" -name drainer.service)
check_eq "drainer.service runs $prefix/bin/drainer" "ExecStart=$prefix/bin/drainer serve" "$(grep -o "^ExecStart=[^ ]* serve" "$unit")"
sysconf=$(meson introspect "$build" --buildoptions | jq -r '.[] | select(.name == "sysconfdir") | .value')
case $sysconf in /*) ;; *) sysconf=$prefix/$sysconf ;; esac
check "drainer.service reads $sysconf/drainer/kubeconfig and $sysconf/default/drainer" \
	grep -q "^LoadCredential=kubeconfig:$sysconf/drainer/kubeconfig$" "$unit"
grep -q "^EnvironmentFile=-$sysconf/default/drainer$" "$unit" || fail "EnvironmentFile of drainer.service"
placeholder='@(bindir|sysconfdir|unitdir|sysusersdir|polkitrulesdir|prefix|DATE|VERSION|[A-Z_]+)@'
# Text files whole; of a binary only its strings (.rodata): its DWARF bytes may spell
# "@O@" by chance (seen in a debug build's .debug_info).
left=$({
	grep -rlIE "$placeholder" "$S" 2>/dev/null
	find "$S" -type f -exec sh -c 'head -c 4 "$1" | grep -q "ELF" && readelf -p .rodata "$1" 2>/dev/null | grep -qE "$2" && echo "$1"' _ {} "$placeholder" \;
} | sed "s|^$S/||")
check_eq "no @placeholder@ left in the installed files" "" "$left"

out=$(systemd/verify --stage "$S" 2>&1)
rc=$?
check_eq "systemd/verify --stage: the units at their installed paths ($(tail -n 1 <<<"$out"))" 0 "$rc"
[ "$rc" = 0 ] || echo "$out" | sed 's/^/    /'

# --- the man page against --help --------------------------------------------------------
man=$S/$P/share/man/man1/drainer.1
warn=$(MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 "$man" 2>&1 >/dev/null)
check_eq "man -l drainer.1: no groff warning" "" "$warn"
text=$(MANWIDTH=200 man -E UTF-8 -l "$man" 2>/dev/null | col -b)
verbs=$("$drainer" --help | sed -n '/^Verbs:/,/^$/p' | awk 'NF > 1 && /^  / { print $1 }')
check "drainer --help lists verbs" test -n "$verbs"
missing=()
for v in $verbs; do
	grep -qE "^   drainer $v( |$)" <<<"$text" || missing+=("section:$v")
	for f in $("$drainer" "$v" --help | sed '/^Global flags/,$d' | grep -oE '^ {2,6}(-[a-z], )?--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+'); do
		grep -qF -- "$f" <<<"$(sed -n "/^   drainer $v /,/^   drainer [a-z]/p" <<<"$text")" || missing+=("$v:$f")
	done
done
for f in $("$drainer" --help | sed -n '/^Global flags/,/^$/p' | grep -oE -- '--[a-z0-9-]+'); do
	grep -qF -- "$f" <<<"$(sed -n '/^GLOBAL FLAGS/,/^EXIT STATUS/p' <<<"$text")" || missing+=("global:$f")
done
check_eq "drainer(1): a section per verb and every flag of every --help ($(wc -w <<<"$verbs") verbs)" "" "${missing[*]}"

# --- --help against the parser --------------------------------------------------------
bad=()
for v in $verbs; do
	while read -r f arg; do
		[ -n "$f" ] || continue
		args=("$f")
		[ -n "$arg" ] && args=("$f" x)
		err=$("$drainer" "$v" "${args[@]}" --help 2>&1 >/dev/null)
		grep -q 'unknown flag' <<<"$err" && bad+=("$v $f")
	done < <("$drainer" "$v" --help | grep -E '^ {2,6}(-[a-z], )?--[a-z0-9-]+' | sed -E 's/^ +(-[a-z], )?(--[a-z0-9-]+)( ([A-Z][^ ]*))?.*/\2 \4/')
done
check_eq "every flag a verb's --help shows is accepted by that verb" "" "${bad[*]}"
all_help=$( ("$drainer" --help; for v in $verbs; do "$drainer" "$v" --help; done) | grep -oE -- '--[a-z0-9-]+' | sort -u)
src_opts=$(grep -hoE '\{ *"[a-z][a-z0-9-]*", *(no|required|optional)_argument' drainer/cmd/*.c | sed -E 's/\{ *"([^"]*)".*/--\1/' | sort -u)
check_eq "every long option of the sources' option tables is shown by a --help ($(wc -l <<<"$src_opts") options)" "" "$(comm -23 <(echo "$src_opts") <(echo "$all_help") | tr '\n' ' ')"

# --- completions ---------------------------------------------------------------------
have_cluster=0
if [ -f "$DRAINER_CLUSTER_DIR/kubeconfig" ] && "$DRAINER_CLUSTER_DIR/bin/kubectl" --kubeconfig "$DRAINER_CLUSTER_DIR/kubeconfig" get node node-1 >/dev/null 2>&1; then
	have_cluster=1
	export KUBECONFIG=$DRAINER_CLUSTER_DIR/kubeconfig
	PATH=$DRAINER_CLUSTER_DIR/bin:$PATH
	nodes=$(kubectl get nodes -o name | sed 's|node/||' | sort | tr '\n' ' ' | sed 's/ $//')
else
	fail "no test cluster at $DRAINER_CLUSTER_DIR: node name completion and the kubectl plugin not checked"
fi
bc=$S/$P/share/bash-completion/completions/drainer
check_eq "bash: the completion of kubectl-drainer is drainer's (bash-completion loads it by command name)" drainer "$(readlink "$S/$P/share/bash-completion/completions/kubectl-drainer")"
comp() { # words... (the last is the one completed)
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _drainer; printf "%s\n" "${COMPREPLY[@]}"' \
		sh "$bc" "$@" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
check_eq "bash: drainer <TAB> offers the verbs" "$(sort <<<"$verbs" | tr '\n' ' ' | sed 's/ $//')" "$(comp drainer '')"
drain_flags=$("$drainer" drain --help | grep -oE '^ {2,6}(-[a-z], )?--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+' | sort -u | tr '\n' ' ' | sed 's/ $//')
check_eq "bash: drainer drain --<TAB> offers drain's flags and the global ones" "$drain_flags" "$(comp drainer drain node-1 -- | sed 's/ /\n/g' | grep -vE -- '^-[a-z]$' | sort -u | tr '\n' ' ' | sed 's/ $//')"
check_eq "bash: drainer -o <TAB>" "json text" "$(comp drainer -o '')"
# each verb offers only the flags it takes (the others are bad usage there)
check_eq "bash: drainer plan n --ti<TAB>: none (plan does not wait)" "" "$(comp drainer plan n --ti)"
check_eq "bash: drainer uncordon n --fo<TAB>: --force-uncordon only" "--force-uncordon" "$(comp drainer uncordon n --fo)"
check_eq "bash: drainer serve --dr<TAB>: the driver flags, not --dry-run" "--driver-health --driver-namespace --driver-selector --driver-stop" "$(comp drainer serve --dr)"
check_eq "bash: drainer drain n --driver-stop <TAB>" "label: none systemd: taint" "$(comp drainer drain n --driver-stop '')"
check_eq "bash: drainer maintain n -- ech<TAB> completes a command" "echo" "$(comp drainer maintain n -- ech)"
if [ "$have_cluster" = 1 ]; then
	check_eq "bash: drainer plan <TAB> offers the cluster's nodes (kubectl)" "$nodes" "$(comp drainer plan '')"
	check_eq "bash: drainer --kubeconfig FILE status node-<TAB> uses that kubeconfig" "$nodes" "$(comp drainer --kubeconfig "$KUBECONFIG" status node-)"
	check_eq "bash: drainer --context nonexistent plan <TAB>: no nodes, no error" "" "$(comp drainer --context nonexistent plan '')"
	check_eq "bash: drainer serve --node <TAB> offers nodes" "$nodes" "$(comp drainer serve --node '')"
	check_eq "bash: drainer plan node-1 <TAB>: one NODE only" "" "$(comp drainer plan node-1 '')"
fi
zc=$(dirname "$(find "$S" -name _drainer)")
if command -v zsh >/dev/null; then
	# zsh's completion system in a pseudo-terminal: type the words, press TAB, read
	# the listing (one candidate a line, no menu).
	cat >"$t_tmp/zcomp.zsh" <<-'ZSH'
		zmodload zsh/zpty
		zpty -b z zsh -f -i
		zpty -w z "PS1=; unsetopt zle_bracketed_paste; fpath=($ZC \$fpath); autoload -Uz compinit; compinit -u -D"
		zpty -w z "zstyle ':completion:*' menu no; LISTMAX=0; print __ready__"
		zpty -r -m z out "*__ready__*"
		zpty -w -n z "$LINE"$'\t\t'
		# read until the listing shows WANT (a pattern), at most 15 s (a loaded machine)
		all=
		for i in {1..150}; do
			while zpty -r -t z chunk; do all+=$chunk; done
			[[ $all == ${~WANT} ]] && break
			sleep 0.1
		done
		while zpty -r -t z chunk; do all+=$chunk; done
		print -r -- "$all"
		zpty -d z
	ZSH
	zcomp() { ZC=$zc LINE=$1 WANT=${2:-'*'} timeout 30 zsh -f "$t_tmp/zcomp.zsh" 2>/dev/null | tr -d '\r' | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g'; }
	out=$(zcomp 'drainer ' '*version*')
	z_missing=()
	for v in $verbs; do grep -qw -- "$v" <<<"$out" || z_missing+=("$v"); done
	check_eq "zsh: drainer <TAB> offers every verb" "" "${z_missing[*]}"
	out=$(zcomp 'drainer drain --dr' '*--dry-run*')
	check "zsh: drainer drain --dr<TAB> offers --driver-selector, --driver-stop, --dry-run" bash -c 'grep -q -- --driver-selector <<<"$1" && grep -q -- --driver-stop <<<"$1" && grep -q -- --dry-run <<<"$1"' sh "$out"
	if [ "$have_cluster" = 1 ]; then
		out=$(PATH=$PATH KUBECONFIG=$KUBECONFIG zcomp 'drainer status node-' '*node-[0-9]*')
		z_nodes=$(grep -oE 'node-[0-9]+' <<<"$out" | sort -u | tr '\n' ' ' | sed 's/ $//')
		check_eq "zsh: drainer status node-<TAB> offers the cluster's nodes" "$nodes" "$z_nodes"
	fi
else
	fail "zsh is not installed (apt-get install zsh): the zsh completion was not run"
fi

# --- the kubectl plugin --------------------------------------------------------------
if [ "$have_cluster" = 1 ]; then
	export PATH=$S/$P/bin:$PATH
	check "kubectl plugin list finds kubectl-drainer" bash -c 'kubectl plugin list 2>/dev/null | grep -q "/kubectl-drainer$"'
	want=$("$drainer" plan node-1 -o json 2>/dev/null)
	want_rc=$?
	got=$(kubectl drainer plan node-1 -o json 2>/dev/null)
	got_rc=$?
	check_eq "kubectl drainer plan node-1: the exit code of drainer plan node-1 ($want_rc)" "$want_rc" "$got_rc"
	check_eq "kubectl drainer plan node-1 -o json: the same plan" "$(jq -Sc 'del(.seconds?)' <<<"$want")" "$(jq -Sc 'del(.seconds?)' <<<"$got")"
	check_eq "kubectl __complete drainer pl (kubectl_complete-drainer)" "plan :4" "$(kubectl __complete drainer pl 2>/dev/null | grep -v '^Completion' | tr '\n' ' ' | sed 's/ $//')"
	check_eq "kubectl __complete drainer drain <TAB>: the nodes" "$nodes :4" "$(kubectl __complete drainer drain '' 2>/dev/null | grep -v '^Completion' | grep -v '^:' | sort | tr '\n' ' ')$(kubectl __complete drainer drain '' 2>/dev/null | grep '^:')"
fi
finish
