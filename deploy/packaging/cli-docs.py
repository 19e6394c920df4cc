#!/usr/bin/env python3
"""drainer's man page and shell completions, made from the built binary's --help.

The verbs table of drainer/cmd/main.c is the one source: `drainer --help` and
`drainer VERB --help` are read here and turned into the man page's VERBS, GLOBAL
FLAGS and EXIT STATUS sections (the rest of the page is deploy/packaging/man/drainer.1.in), the bash
and zsh completions and kubectl's plugin completion helper. So what a user reads in
`man drainer`, what --help prints and what TAB offers cannot drift apart;
tests/install/test-install.sh checks the other half (every flag shown is one the
verb accepts, every flag in the sources is shown).

    cli-docs.py man DRAINER TEMPLATE OUTPUT [KEY=VALUE...]   (@KEY@ in TEMPLATE)
    cli-docs.py bash|zsh|kubectl-complete DRAINER OUTPUT
    cli-docs.py model DRAINER                                (the parsed model, JSON)

The man page's date is SOURCE_DATE_EPOCH, else the commit time (deploy/packaging/version-info),
so two builds of one commit make the same page.
"""
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# An option line: "  -o, --output FORMAT       text...", "      --force  evict..." or, for
# an optional value in the same word, "      --dry-run[=MODE]  client...".
OPT_RE = re.compile(
    r"^ {2,6}(?:(-[A-Za-z]), )?(--[a-z0-9][a-z0-9-]*)(?:\[=([A-Z][A-Z_]*)\])?(?:[ =](\S.*?))?(?: {2,}(\S.*))?$")


def run_help(drainer, *args):
    out = subprocess.run([drainer, *args, "--help"], check=True, capture_output=True, text=True,
                         env={**os.environ, "LC_ALL": "C"})
    return out.stdout


def parse_options(lines, i):
    """Option entries from lines[i] on; returns (options, next index)."""
    opts = []
    while i < len(lines):
        line = lines[i]
        m = OPT_RE.match(line)
        if m:
            short, name, optarg, meta, desc = m.groups()
            opts.append({"short": short, "name": name, "arg": meta, "optarg": optarg, "desc": desc or ""})
        elif opts and line.startswith(" " * 8) and line.strip():
            opts[-1]["desc"] = (opts[-1]["desc"] + " " + line.strip()).strip()
        else:
            break
        i += 1
    return opts, i


def parse_top(text):
    lines = text.splitlines()
    model = {"verbs": [], "global": [], "exit": [], "usage": "", "title": lines[0]}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("Usage: "):
            model["usage"] = line[len("Usage: "):]
        elif line == "Verbs:":
            i += 1
            while i < len(lines) and lines[i].startswith("  "):
                name, summary = lines[i].split(None, 1)
                model["verbs"].append({"name": name, "summary": summary})
                i += 1
            continue
        elif line.startswith("Global flags"):
            model["global_title"] = line.rstrip(":")
            model["global"], i = parse_options(lines, i + 1)
            continue
        elif line == "Exit codes:":
            i += 1
            # "  N  what", its continuation lines indented deeper
            while i < len(lines) and (re.match(r"^  \d", lines[i]) or
                                      (model["exit"] and re.match(r"^ {4,}\S", lines[i]))):
                if re.match(r"^  \d", lines[i]):
                    code, what = lines[i].split(None, 1)
                    model["exit"].append({"code": int(code), "what": what})
                else:
                    model["exit"][-1]["what"] += " " + lines[i].strip()
                i += 1
            continue
        i += 1
    if not model["verbs"] or not model["global"] or not model["exit"]:
        sys.exit("cli-docs: drainer --help has no Verbs, Global flags or Exit codes section")
    return model


def parse_verb(text, name):
    """Usage, description paragraphs, flag groups and trailing notes of one verb."""
    lines = text.splitlines()
    # The global flags and exit codes follow every verb's own part: stop there.
    end = next((k for k, l in enumerate(lines) if l.startswith("Global flags")), len(lines))
    lines = lines[:end]
    if not lines or not lines[0].startswith("Usage: "):
        sys.exit(f"cli-docs: 'drainer {name} --help' does not start with Usage:")
    verb = {"name": name, "usage": lines[0][len("Usage: "):], "blocks": [], "options": []}
    i = 1
    para = []

    def flush():
        if para:
            verb["blocks"].append({"text": list(para)})
            para.clear()

    while i < len(lines):
        line = lines[i]
        if re.match(r"^[A-Z][^:]*:$", line) and i + 1 < len(lines) and OPT_RE.match(lines[i + 1]):
            flush()
            opts, i = parse_options(lines, i + 1)
            verb["blocks"].append({"title": line.rstrip(":"), "options": opts})
            verb["options"].extend(opts)
            continue
        if not line.strip():
            flush()
        else:
            para.append(line)
        i += 1
    flush()
    # "and the drain flags of 'drainer drain'": serve takes another verb's flags too.
    # "... except --a and --b": those are not inherited (the verb refuses them).
    m = re.search(r"the drain flags of 'drainer (\w+)'((?:\s+except\s+--[\w-]+(?:(?:,|\s+and)\s+--[\w-]+)*)?)", text)
    verb["inherits"] = m.group(1) if m else None
    verb["inherit_except"] = re.findall(r"--([\w-]+)", m.group(2)) if m else []
    return verb


def model_of(drainer):
    model = parse_top(run_help(drainer))
    for v in model["verbs"]:
        v.update(parse_verb(run_help(drainer, v["name"]), v["name"]))
    by_name = {v["name"]: v for v in model["verbs"]}
    for v in model["verbs"]:
        names = [o["name"] for o in v["options"]]
        flags = list(v["options"])
        if v["inherits"] in by_name:
            flags += [o for o in by_name[v["inherits"]]["options"]
                      if o["name"] not in names and o["name"].lstrip("-") not in v["inherit_except"]]
        v["flags"] = flags
        # NODE as a positional argument (status NODE, maintain NODE -- CMD)
        v["takes_node"] = bool(re.match(r"drainer \w+ (\[[^]]*\] )*\(?NODE\b", v["usage"]))
        v["takes_command"] = "-- CMD" in v["usage"]
    return model


# ---- man page --------------------------------------------------------------------------

def roff(text):
    """Escapes prose for roff: backslashes, a leading dot or quote, minus signs of flags."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"(?<![\w/.])-(?=[-\w])", r"\\-", text)
    text = re.sub(r"(?<=\\-)-", r"\\-", text)
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def man_options(opts):
    out = []
    for o in opts:
        head = (f"\\fB{roff(o['short'])}\\fR, " if o["short"] else "") + f"\\fB{roff(o['name'])}\\fR"
        if o["arg"]:
            head += f" \\fI{roff(o['arg'])}\\fR"
        elif o.get("optarg"):
            head += f"[=\\fI{roff(o['optarg'])}\\fR]"
        out += [".TP", head, roff(o["desc"]) if o["desc"] else ""]
    return out


def man_blocks(blocks):
    out = []
    for b in blocks:
        if "options" in b:
            out += [".PP", f"\\fI{roff(b['title'])}:\\fR", ".RS 4"] + man_options(b["options"]) + [".RE"]
            continue
        lines = b["text"]
        if any(l.startswith(" ") for l in lines):
            # indented lines (a command, a list) keep their layout
            prose = [l for l in lines if not l.startswith(" ")]
            first_indented = next(k for k, l in enumerate(lines) if l.startswith(" "))
            if prose and first_indented > 0:
                out += [".PP", roff(" ".join(lines[:first_indented]))]
                lines = lines[first_indented:]
            out += [".PP", ".RS 2", ".nf"] + [roff(l[2:] if l.startswith("  ") else l) for l in lines] + [".fi", ".RE"]
        else:
            out += [".PP", roff(" ".join(l.strip() for l in lines))]
    return out


def man_page(model, template, values):
    verbs = []
    for v in model["verbs"]:
        verbs += [f'.SS "{roff(v["usage"])}"', roff(v["summary"][0].upper() + v["summary"][1:]) + "."]
        verbs += man_blocks(v["blocks"])
    synopsis = [f".B {roff(model['usage'])}", ".br"]
    for v in model["verbs"]:
        synopsis += [f".B {roff(v['usage'])}", ".br"]
    exit_codes = []
    for e in model["exit"]:
        exit_codes += [".TP", f"\\fB{e['code']}\\fR", roff(e["what"][0].upper() + e["what"][1:]) + "."]
    subst = {
        "SYNOPSIS": "\n".join(synopsis[:-1]),
        "VERBS": "\n".join(verbs),
        "GLOBAL_FLAGS": "\n".join([".PP", roff(model["global_title"]) + "."] + man_options(model["global"])),
        "EXIT_CODES": "\n".join(exit_codes),
    }
    subst.update(values)
    page = template
    for k, v in subst.items():
        page = page.replace(f"@{k}@", v)
    left = re.findall(r"@[A-Z_]+@", page)
    if left:
        sys.exit(f"cli-docs: unknown placeholders in the man template: {' '.join(sorted(set(left)))}")
    return page


def man_date():
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch:
        epoch = subprocess.run([os.path.join(HERE, "version-info"), "--epoch", os.path.dirname(os.path.dirname(HERE))],
                               capture_output=True, text=True).stdout.strip() or "0"
    return datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).strftime("%Y-%m-%d")


# ---- completions ----------------------------------------------------------------------

# What a flag's value is, by its name or metavariable: drives all three completions.
def value_kind(o):
    if o["name"] in ("--kubeconfig", "--config"):
        return "file"
    if o["name"] == "--context":
        return "context"
    if o["name"] == "--output":
        return "words:text json"
    if o["name"] == "--driver-stop":
        return "words:taint none label: systemd:"
    if o["name"] == "--node":
        return "node"
    return "none"


def bash(model):
    g = model["global"]
    takes_arg = sorted({o["name"] for o in g if o["arg"]} | {o["short"] for o in g if o["arg"] and o["short"]}
                       | {o["name"] for v in model["verbs"] for o in v["flags"] if o["arg"]})
    kinds = {}
    for o in g + [o for v in model["verbs"] for o in v["flags"]]:
        if o["arg"]:
            kinds[o["name"]] = value_kind(o)
            if o["short"]:
                kinds[o["short"]] = value_kind(o)
    gflags = " ".join(x for o in g for x in ([o["short"]] if o["short"] else []) + [o["name"]])
    L = [
        "# bash completion for drainer (and kubectl-drainer).",
        "# Generated from `drainer --help` by deploy/packaging/cli-docs.py; do not edit.",
        "",
        "# Node names from the API server, through kubectl with the --kubeconfig and",
        "# --context given on the line (5 s at most; nothing when kubectl is missing).",
        "_drainer_kubectl() {",
        "\tlocal args=() i w",
        "\tfor ((i = 1; i < COMP_CWORD; i++)); do",
        "\t\tw=${COMP_WORDS[i]}",
        "\t\tcase $w in",
        "\t\t--kubeconfig | --context) args+=(\"$w\" \"${COMP_WORDS[i + 1]}\") ;;",
        "\t\t--kubeconfig=* | --context=*) args+=(\"$w\") ;;",
        "\t\tesac",
        "\tdone",
        "\tcommand -v kubectl >/dev/null 2>&1 || return 0",
        "\tkubectl \"${args[@]}\" --request-timeout=5s \"$@\" 2>/dev/null",
        "}",
        "_drainer_nodes() { _drainer_kubectl get nodes -o 'jsonpath={.items[*].metadata.name}'; }",
        "_drainer_contexts() { _drainer_kubectl config get-contexts -o name; }",
        "",
        "_drainer() {",
        "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}",
        "\tlocal verb='' i w positional=0 dashdash=0",
        f"\tlocal takes_arg=' {' '.join(takes_arg)} '",
        "\tCOMPREPLY=()",
        "\tfor ((i = 1; i < COMP_CWORD; i++)); do",
        "\t\tw=${COMP_WORDS[i]}",
        "\t\tif [ \"$dashdash\" = 1 ]; then positional=$((positional + 1)); continue; fi",
        "\t\tcase $w in",
        "\t\t--) dashdash=1 ;;",
        "\t\t--*=*) ;;",
        "\t\t-*) [[ $takes_arg == *\" $w \"* ]] && i=$((i + 1)) ;;",
        "\t\t*) if [ -z \"$verb\" ]; then verb=$w; else positional=$((positional + 1)); fi ;;",
        "\t\tesac",
        "\tdone",
        "\tif [ \"$dashdash\" = 1 ]; then",
        "\t\t[ \"$verb\" = maintain ] && COMPREPLY=($(compgen -c -- \"$cur\"))",
        "\t\treturn 0",
        "\tfi",
        "\t# the value of a flag",
        "\tlocal flag=$prev",
        "\tif [[ $cur == --*=* ]]; then flag=${cur%%=*}; cur=${cur#*=}; elif [[ $takes_arg != *\" $prev \"* ]]; then flag=''; fi",
        "\tcase $flag in",
    ]
    by_kind = {}
    for name, kind in sorted(kinds.items()):
        by_kind.setdefault(kind, []).append(name)
    for kind, names in sorted(by_kind.items()):
        pat = " | ".join(names)
        if kind == "file":
            L.append(f"\t{pat}) COMPREPLY=($(compgen -f -- \"$cur\")); compopt -o filenames 2>/dev/null; return 0 ;;")
        elif kind == "context":
            L.append(f"\t{pat}) COMPREPLY=($(compgen -W \"$(_drainer_contexts)\" -- \"$cur\")); return 0 ;;")
        elif kind == "node":
            L.append(f"\t{pat}) COMPREPLY=($(compgen -W \"$(_drainer_nodes)\" -- \"$cur\")); return 0 ;;")
        elif kind.startswith("words:"):
            L.append(f"\t{pat}) COMPREPLY=($(compgen -W '{kind[6:]}' -- \"$cur\")); compopt -o nospace 2>/dev/null; "
                     "[[ ${COMPREPLY[*]} == *: ]] || compopt +o nospace 2>/dev/null; return 0 ;;")
        else:
            L.append(f"\t{pat}) return 0 ;;")
    L += [
        "\tesac",
        "\tif [ -z \"$verb\" ]; then",
        "\t\tif [[ $cur == -* ]]; then",
        f"\t\t\tCOMPREPLY=($(compgen -W '{gflags} --version' -- \"$cur\"))",
        "\t\telse",
        f"\t\t\tCOMPREPLY=($(compgen -W '{' '.join(v['name'] for v in model['verbs'])}' -- \"$cur\"))",
        "\t\tfi",
        "\t\treturn 0",
        "\tfi",
        "\tcase $verb in",
    ]
    for v in model["verbs"]:
        flags = " ".join(o["name"] for o in v["flags"])
        L.append(f"\t{v['name']})")
        L.append(f"\t\tif [[ $cur == -* ]]; then COMPREPLY=($(compgen -W '{flags} {gflags}' -- \"$cur\"))")
        if v["takes_node"]:
            L.append("\t\telif [ \"$positional\" = 0 ]; then COMPREPLY=($(compgen -W \"$(_drainer_nodes)\" -- \"$cur\"))")
            if v["takes_command"]:
                L.append("\t\telif [ \"$positional\" = 1 ]; then COMPREPLY=($(compgen -W '--' -- \"$cur\"))")
        L.append("\t\tfi ;;")
    L += [
        "\tesac",
        "\treturn 0",
        "}",
        "complete -F _drainer drainer kubectl-drainer",
        "",
    ]
    return "\n".join(L)


def zsh_escape(s):
    return s.replace("\\", "\\\\").replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


def zsh_spec(o):
    desc = zsh_escape(o["desc"])
    names = [o["name"]] + ([o["short"]] if o["short"] else [])
    kind = value_kind(o)
    action = {"file": "_files", "context": "_drainer_contexts", "node": "_drainer_nodes"}.get(kind, "")
    if kind.startswith("words:"):
        action = "(" + kind[6:] + ")"
    specs = []
    excl = "(" + " ".join(names) + ")" if len(names) > 1 else ""
    for n in names:
        if o["arg"]:
            meta = zsh_escape(o["arg"].split()[0])
            opt = n + "=" if n.startswith("--") else n
            specs.append(f"'{excl}{opt}[{desc}]:{meta}:{action}'")
        else:
            rep = "*" if n in ("--verbose", "-v") else ""
            specs.append(f"'{excl if not rep else ''}{rep}{n}[{desc}]'")
    return specs


def zsh(model):
    L = [
        "#compdef drainer kubectl-drainer",
        "# zsh completion for drainer. Generated from `drainer --help` by deploy/packaging/cli-docs.py; do not edit.",
        "",
        "# kubectl with the --kubeconfig and --context given on the line (5 s at most).",
        "(( $+functions[_drainer_kubectl] )) ||",
        "_drainer_kubectl() {",
        "  local -a args",
        "  local i",
        "  for (( i = 1; i < CURRENT; i++ )); do",
        "    case $words[i] in",
        "      --kubeconfig|--context) args+=($words[i] $words[i+1]) ;;",
        "      --kubeconfig=*|--context=*) args+=($words[i]) ;;",
        "    esac",
        "  done",
        "  (( $+commands[kubectl] )) || return 0",
        "  kubectl $args --request-timeout=5s \"$@\" 2>/dev/null",
        "}",
        "(( $+functions[_drainer_nodes] )) ||",
        "_drainer_nodes() {",
        "  local -a nodes",
        "  nodes=(${(f)\"$(_drainer_kubectl get nodes -o 'jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}')\"})",
        "  _wanted nodes expl node compadd -a nodes",
        "}",
        "(( $+functions[_drainer_contexts] )) ||",
        "_drainer_contexts() {",
        "  local -a ctx",
        "  ctx=(${(f)\"$(_drainer_kubectl config get-contexts -o name)\"})",
        "  _wanted contexts expl context compadd -a ctx",
        "}",
        "",
        "_drainer() {",
        "  local curcontext=$curcontext state line ret=1",
        "  typeset -A opt_args",
        "  local -a global",
        "  global=(",
    ]
    for o in model["global"]:
        L += ["    " + s for s in zsh_spec(o)]
    L += [
        "  )",
        "  _arguments -C -s $global '--version[print the version]' '1:verb:->verb' '*::arg:->args' && ret=0",
        "  case $state in",
        "    verb)",
        "      local -a verbs",
        "      verbs=(",
    ]
    for v in model["verbs"]:
        L.append(f"        '{v['name']}:{zsh_escape(v['summary'])}'")
    L += [
        "      )",
        "      _describe -t verbs verb verbs && ret=0",
        "      ;;",
        "    args)",
        "      curcontext=${curcontext%:*:*}:drainer-$words[1]:",
        "      case $words[1] in",
    ]
    for v in model["verbs"]:
        specs = [s for o in v["flags"] for s in zsh_spec(o)]
        if v["takes_node"]:
            specs.append("'1:node:_drainer_nodes'")
        if v["takes_command"]:
            specs.append("'2:separator:(--)'")
            specs.append("'*::command:_normal'")
        L.append(f"        {v['name']})")
        L.append("          _arguments -s $global \\")
        for s in specs:
            L.append(f"            {s} \\")
        L.append("            && ret=0 ;;")
    L += [
        "      esac",
        "      ;;",
        "  esac",
        "  return ret",
        "}",
        "",
        "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then",
        "  _drainer \"$@\"",
        "else",
        "  compdef _drainer drainer kubectl-drainer",
        "fi",
        "",
    ]
    return "\n".join(L)


def kubectl_complete(model):
    """kubectl_complete-drainer: kubectl (1.26+) runs it to complete `kubectl drainer ...`:
    the words after `drainer`, the last one being completed; it prints one candidate a
    line, then cobra's directive (:4 no file completion, :0 default, :2 no space)."""
    g = model["global"]
    kinds = {}
    takes = set()
    for o in g + [o for v in model["verbs"] for o in v["flags"]]:
        if o["arg"]:
            for n in [o["name"]] + ([o["short"]] if o["short"] else []):
                kinds[n] = value_kind(o)
                takes.add(n)
    gflags = " ".join(x for o in g for x in ([o["short"]] if o["short"] else []) + [o["name"]])
    L = [
        "#!/bin/sh",
        "# kubectl's completion of the plugin `kubectl drainer` (kubectl 1.26 and later run",
        "# kubectl_complete-drainer WORDS..., the last word being completed).",
        "# Generated from `drainer --help` by deploy/packaging/cli-docs.py; do not edit.",
        "nodes() { kubectl $kargs --request-timeout=5s get nodes -o 'jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}' 2>/dev/null; }",
        "words() { cur=$1; shift; for w in \"$@\"; do case $w in \"$cur\"*) echo \"$w\" ;; esac; done; }",
        "verb='' positional=0 dashdash=0 prev='' kargs=''",
        f"takes=' {' '.join(sorted(takes))} '",
        "while [ $# -gt 1 ]; do",
        "\tw=$1; shift",
        "\tif [ \"$dashdash\" = 1 ]; then positional=$((positional + 1)); prev=$w; continue; fi",
        "\tcase $prev in --kubeconfig | --context) kargs=\"$kargs $prev $w\" ;; esac",
        "\tcase $w in",
        "\t--) dashdash=1 ;;",
        "\t--kubeconfig=* | --context=*) kargs=\"$kargs $w\" ;;",
        "\t-*) ;;",
        "\t*) case $takes in *\" $prev \"*) ;; *) if [ -z \"$verb\" ]; then verb=$w; else positional=$((positional + 1)); fi ;; esac ;;",
        "\tesac",
        "\tprev=$w",
        "done",
        "cur=${1:-}",
        "if [ \"$dashdash\" = 1 ]; then echo ':0'; exit 0; fi",
        "case $takes in *\" $prev \"*)",
        "\tcase $prev in",
    ]
    by_kind = {}
    for name, kind in sorted(kinds.items()):
        by_kind.setdefault(kind, []).append(name)
    for kind, names in sorted(by_kind.items()):
        pat = " | ".join(names)
        if kind == "file":
            L.append(f"\t{pat}) echo ':0' ;;")
        elif kind == "context":
            L.append(f"\t{pat}) kubectl config get-contexts -o name 2>/dev/null; echo ':4' ;;")
        elif kind == "node":
            L.append(f"\t{pat}) nodes; echo ':4' ;;")
        elif kind.startswith("words:"):
            L.append(f"\t{pat}) words \"$cur\" {kind[6:]}; echo ':6' ;;")
        else:
            L.append(f"\t{pat}) echo ':4' ;;")
    L += [
        "\tesac",
        "\texit 0 ;;",
        "esac",
        "if [ -z \"$verb\" ]; then",
        f"\tcase $cur in -*) words \"$cur\" {gflags} ;; *) words \"$cur\" {' '.join(v['name'] for v in model['verbs'])} ;; esac",
        "\techo ':4'; exit 0",
        "fi",
        "case $cur in -*)",
        "\tcase $verb in",
    ]
    for v in model["verbs"]:
        L.append(f"\t{v['name']}) words \"$cur\" {' '.join(o['name'] for o in v['flags'])} {gflags} ;;")
    L += [
        "\tesac",
        "\techo ':4'; exit 0 ;;",
        "esac",
        "case $verb in",
    ]
    node_verbs = [v["name"] for v in model["verbs"] if v["takes_node"]]
    if node_verbs:
        L.append(f"{' | '.join(node_verbs)}) [ \"$positional\" = 0 ] && nodes ;;")
    L += [
        "esac",
        "echo ':4'",
        "",
    ]
    return "\n".join(L)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    what, drainer = argv[1], argv[2]
    model = model_of(drainer)
    if what == "model":
        json.dump(model, sys.stdout, indent=1)
        return
    out = argv[3]
    if what == "man":
        template = open(argv[3]).read()
        out = argv[4]
        values = dict(kv.split("=", 1) for kv in argv[5:])
        values.setdefault("DATE", man_date())
        text = man_page(model, template, values)
    elif what == "bash":
        text = bash(model)
    elif what == "zsh":
        text = zsh(model)
    elif what == "kubectl-complete":
        text = kubectl_complete(model)
    else:
        sys.exit(__doc__)
    with open(out + ".tmp", "w") as f:
        f.write(text)
    if what == "kubectl-complete":
        os.chmod(out + ".tmp", 0o755)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main(sys.argv)
