/* drainer's entry point: global flags, verb dispatch, help and exit codes.
 * Verbs live in verb-*.c; this file only routes to them. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/base/argval.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/kobserver.h"
#include "drainer/kube/transport.h"
#include "drainer/obs/metrics.h"
#include "output.h"
#include "verbs.h"

#define GLOBAL_HELP                                                                              \
        "Global flags (before or after the verb):\n"                                             \
        "      --kubeconfig FILE     kubeconfig to use (default: $KUBECONFIG, ~/.kube/config,\n" \
        "                            or the in-cluster service account)\n"                       \
        "      --context NAME        kubeconfig context (default: its current-context)\n"        \
        "      --kube-api-qps N|auto client-side request rate limit (default 20; serve\n"        \
        "                            --all-nodes: auto): auto starts at 20 and adapts to what\n" \
        "                            the API server allows (halved on a 429, raised while it\n"  \
        "                            answers fast), between 5 and --kube-api-qps-max\n"          \
        "      --kube-api-qps-max N  the ceiling of --kube-api-qps auto (default 100)\n"         \
        "      --kube-api-burst N    client-side burst (default 100, the kubelet's)\n"           \
        "  -o, --output FORMAT       text, json, yaml (the same document as json) or name\n"     \
        "                            (node/NAME per node) (default text)\n"                      \
        "  -v, --verbose             more output; twice (-vv) for debug logs; -v=N, -vN,\n"      \
        "                            -v N and --v=N as kubectl's levels: 0 quiet, 1-3 as\n"      \
        "                            -v, 4 and more as -vv\n"                                    \
        "      --color WHEN          auto (default: colour and the live redraw on a\n"           \
        "                            terminal, not with TERM=dumb; no colour with\n"             \
        "                            NO_COLOR), always or never\n"                               \
        "      --as USER             impersonate USER (Impersonate-User), as kubectl's --as\n"   \
        "      --as-group GROUP      impersonate GROUP too (repeatable; needs --as)\n"           \
        "      --request-timeout D   per API request, and how long drain, uncordon and\n"        \
        "                            maintain wait to read the node at all (then exit 7,\n"      \
        "                            nothing changed) (default 30s; 0: none), e.g. 10s, 1m\n"    \
        "  -h, --help                help for drainer or for a verb\n"

/* After the global flags in `drainer --help`. */
#define SWITCH_HELP                                                                        \
        "Every switch takes =true or =false, as kubectl's do (--force=false turns off a\n" \
        "--config file's force: true); abbreviations are not flags.\n"

/* The drain flags, in groups; each verb's help lists the groups that apply to it
 * (drainargs.c refuses the others, as flag_verbs() says). */
#define SELECT_FLAGS_HELP                                                                       \
        "      --pod-selector SEL        evict only the pods matching this label selector\n"    \
        "      --delete-emptydir-data    evict pods with emptyDir volumes\n"                    \
        "      --force                   evict pods without a controller\n"                     \
        "      --delete-local-data       kubectl's old name of --delete-emptydir-data (with\n"  \
        "                                kubectl's deprecation warning)\n"                      \
        "      --ignore-daemonsets       accepted for kubectl's sake: DaemonSet pods without\n" \
        "                                claims always stay (DRA drivers are stopped)\n"

#define EVICT_FLAGS_HELP                                                                        \
        "      --grace-period N          seconds each pod gets to terminate (default -1: its\n" \
        "                                own); never 0 for pods holding ResourceClaims or\n"    \
        "                                for DRA driver pods\n"                                 \
        "      --timeout DURATION        give up after this long (exit 3), e.g. 90s, 5m\n"      \
        "                                (default 0: no limit)\n"                               \
        "      --disable-eviction        DELETE pods instead of the Eviction API (no PDBs)\n"   \
        "      --skip-wait-for-delete-timeout N  stop waiting for a pod deleted more than\n"    \
        "                                N s ago (never for claim holders: their claims must\n" \
        "                                be released; 0: wait for every pod, the default)\n"

#define DRY_RUN_FLAG_HELP                                                                      \
        "      --dry-run[=MODE]          client (a bare --dry-run): show the plan only (as\n"  \
        "                                'drainer plan'); server: send the cordon patch and\n" \
        "                                every eviction with dryRun=All (nothing persists);\n" \
        "                                none: no dry run (the default)\n"

#define DRIVER_FLAGS_HELP                                                                        \
        "      --driver-selector SEL     label selector of DRA driver pods (repeatable;\n"       \
        "                                default: the kubeletplugin labels of common\n"          \
        "                                drivers); only pods a DaemonSet controls are drivers\n" \
        "      --driver-namespace NS     DRA driver pods run only in NS (repeatable; default:\n" \
        "                                any namespace)\n"                                       \
        "      --driver-stop STRATEGY    taint (default), label:KEY, systemd:UNIT, none\n"       \
        "      --driver-health PORT[/SERVICE] | unix:PATH[#SERVICE]\n"                           \
        "                                grpc.health.v1 endpoint of the driver pods (service\n"  \
        "                                liveness by default; default: no probe)\n"              \
        "      --ignore-driver-health    go on even if a driver is unhealthy\n"

/* plan, drain, maintain, uncordon */
#define DRIVER_SCOPE_FLAG_HELP                                                                       \
        "      --driver NAME             only DRA driver NAME (as in ResourceSlices; repeatable):\n" \
        "                                the node stays schedulable, a NoSchedule\n"                 \
        "                                DeviceTaintRule keeps new claims off its devices (the\n"    \
        "                                node is cordoned where none is served); only pods\n"        \
        "                                holding claims of its devices are evicted; only it is\n"    \
        "                                stopped (default: label:KEY, KEY from its DaemonSet's\n"    \
        "                                nodeSelector; or --driver-stop label:KEY, systemd:UNIT\n"   \
        "                                or none); state in drainer.io/KEY.NAME, each driver\n"      \
        "                                its own drain; excludes a node drain of the same node\n"    \
        "                                (exit 4)\n"

/* plan, drain, uncordon */
#define DEVICE_FLAG_HELP                                                                                \
        "      --device DRIVER/POOL/DEVICE  (plan, drain, uncordon; repeatable) only this device,\n"    \
        "                                as in a claim's status.allocation.devices.results[]: a\n"      \
        "                                NoSchedule DeviceTaintRule per device, then the Eviction\n"    \
        "                                API for the pods whose claims hold one, then a wait until\n"   \
        "                                no claim holds them; node schedulable, driver and other\n"     \
        "                                pods untouched; state in drainer.io/KEY.device.ID; uncordon\n" \
        "                                --device deletes drainer's rules. Exit 11 where no\n"          \
        "                                DeviceTaintRule is served (no cordon fallback), 4 for a\n"     \
        "                                device the node does not publish or an overlapping drain\n"

#define CONFIG_FLAG_HELP                                                                          \
        "      --config FILE             YAML file with one key per flag, as serve's (keys of\n"  \
        "                                flags this verb does not take are skipped; flags win:\n" \
        "                                --force=false turns off force: true); its errors name\n" \
        "                                the file, the line and the key (exit 2)\n"               \
        "      --chunk-size N            objects per list request, as kubectl's (default 500)\n"

/* drain and maintain (plan says what it would do); command line only. */
#define OUT_OF_SERVICE_FLAGS_HELP                                                                \
        "      --out-of-service          for a machine that is OFF: once the node has been\n"    \
        "                                not Ready for --out-of-service-after during the\n"      \
        "                                drain, apply the taint node.kubernetes.io/out-of-\n"    \
        "                                service=nodeshutdown:NoExecute, so the control plane\n" \
        "                                deletes its pods and releases their claims WITHOUT\n"   \
        "                                the kubelet's unprepare (never while it is Ready;\n"    \
        "                                command line only, not in --config; 'uncordon'\n"       \
        "                                removes it once the node is Ready again)\n"             \
        "      --out-of-service-after D  how long not Ready first, from the Ready condition's\n" \
        "                                lastTransitionTime (default 5m)\n"

/* drain, uncordon, maintain and serve: what writes the Node. */
#define NODE_CONDITIONS_FLAG_HELP                                                              \
        "      --node-conditions         mirror the drain in the Node's conditions\n"          \
        "                                DrainInProgress and Drained (KEP-5683, Kubernetes\n"  \
        "                                1.37; set back to False once restored; needs patch\n" \
        "                                on nodes/status; default: off)\n"

#define DRAIN_FLAGS_HELP                                                                          \
        "Flags (named as kubectl drain names them where they mean the same):\n" SELECT_FLAGS_HELP \
                EVICT_FLAGS_HELP DRY_RUN_FLAG_HELP DRIVER_FLAGS_HELP DRIVER_SCOPE_FLAG_HELP       \
                        CONFIG_FLAG_HELP OUT_OF_SERVICE_FLAGS_HELP NODE_CONDITIONS_FLAG_HELP      \
        "      --skip-driver-stop        end after the claims are released; leave the drivers\n"  \
        "                                running (for callers that delete the node anyway)\n"

/* The full table, in `drainer --help` (man page and README follow it); each verb's
 * help says which of them it returns. */
#define EXIT_CODES_HELP                                                                       \
        "Exit codes:\n"                                                                       \
        "  0  done\n"                                                                         \
        "  1  error (an API error not below, configuration, malformed drainer annotations,\n" \
        "     a recorded action this configuration does not allow: the message names the\n"   \
        "     flag to add, nothing was started or changed; uncordon of a node someone\n"      \
        "     else cordoned; maintain whose command failed)\n"                                \
        "  2  bad usage (unknown verb or flag, a flag of another verb, missing NODE)\n"       \
        "  3  timed out (--timeout; guard: gave up before the pod's grace period ended)\n"    \
        "  4  refused by a blocker: in preflight nothing was changed; in a later phase\n"     \
        "     (the eviction rules hold at every eviction) the node stays in its phase and\n"  \
        "     nothing more was evicted (-o json: \"changed\")\n"                              \
        "  5  doctor: at least one finding is FAIL\n"                                         \
        "  6  doctor: no FAIL, but the cluster serves no DRA API\n"                           \
        "  7  the API server cannot be reached: connection refused, DNS name not found,\n"    \
        "     TLS, or no answer before --timeout (the message names the cause)\n"             \
        "  8  the node does not exist\n"                                                      \
        "  9  the kubeconfig (or the credentials it names) is invalid\n"                      \
        "  10 forbidden: the API server refused the credentials (401, 403)\n"                 \
        "  11 unsupported: --device where the API server serves no DeviceTaintRule\n"         \
        "  130 interrupted by SIGINT (128 + 2); 143 by SIGTERM (128 + 15): the state\n"       \
        "     stays on the Node, the same command resumes it\n"                               \
        "  -o json prints a summary with every code: \"error\" names the kind, \"message\"\n" \
        "  the cause; nothing is claimed that was not read (\"nodeReady\": null)\n"           \
        "  With -l SELECTOR: the worst of the nodes' (1 over 3 over 4 over 0; 7-10 kept\n"    \
        "  when every failed node has it); 1 when the selector matches no node (\"No\n"       \
        "  resources found\", nothing changed)\n"

/* What every verb that talks to the API server may also return (the last four codes of
 * EXIT_CODES_HELP), at the end of its own list. */
#define API_EXIT_CODES_HELP                                                           \
        "Also 7 the API server cannot be reached, 8 the node does not exist, 9 the\n" \
        "kubeconfig (or the credentials it names) is invalid, 10 forbidden (401, 403).\n"

const struct verb verbs[] = {
        {
                "status",
                "show a node's schedulability, drainer state, pods by drain group, and claims on it",
                "Usage: drainer status NODE [flags]\n"
                "       drainer status (--all | -l SELECTOR) [-o json]\n\n"
                "Shows, read-only: whether NODE is schedulable and who cordoned it, drainer's\n"
                "annotations (state of a drain in progress), its pods grouped as a drain treats\n"
                "them (DRA driver pods, claim holders, other workload, DaemonSet, mirror,\n"
                "finished), and the ResourceClaims on the node (reserved for one of its pods, or\n"
                "allocated from a node-local pool) with their devices and reservations.\n\n"
                "Flags:\n"
                "      --driver-selector SEL  label selector of DRA driver pods (repeatable;\n"
                "                             default: the kubeletplugin labels of common drivers);\n"
                "                             only pods a DaemonSet controls are drivers\n"
                "      --driver-namespace NS  DRA driver pods run only in NS (repeatable)\n"
                "      --watch                keep watching and reprint on every change (Ctrl-C stops)\n"
                "      --all                  the fleet at a glance (one list of the Nodes): how many\n"
                "                             nodes in each state (in-service, requested, waiting,\n"
                "                             draining, drained, restoring, failed), and each node not\n"
                "                             in service with why it waits (slot, window, pause,\n"
                "                             error) or why it failed (refusal, bad-state)\n"
                "  -l, --selector SEL         the same for the nodes SEL selects\n\n"
                "Exit codes: 0 shown, 1 error (API, configuration), 2 bad usage.\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_status_ops,
        },
        {
                "plan",
                "show the ordered drain plan and every preflight blocker (read-only)",
                "Usage: drainer plan (NODE | -l SELECTOR) [flags]\n\n"
                "Shows, read-only, what 'drainer drain NODE' would do: the eviction groups in\n"
                "order with their pods, the ResourceClaims on the node with their devices, the\n"
                "DRA driver pods and how each will be stopped, the PodDisruptionBudgets that\n"
                "will hold evictions back, and every preflight blocker. Exits 4 when a blocker\n"
                "would refuse the drain. With -l, the plan of each matching node (-o json: a\n"
                "List).\n\n"
                "Flags (named as kubectl drain names them where they mean the same):\n" SELECT_FLAGS_HELP
                        DRIVER_FLAGS_HELP DRIVER_SCOPE_FLAG_HELP DEVICE_FLAG_HELP CONFIG_FLAG_HELP
                                OUT_OF_SERVICE_FLAGS_HELP
                "  -l, --selector SELECTOR       the Nodes matching this label selector instead of\n"
                "                                NODE (kubectl's -l)\n"
                "\nExit codes: 0 the drain would go ahead, 4 a blocker would refuse it, 11 --device\n"
                "where no DeviceTaintRule is served, 1 error\n"
                "(API, configuration, malformed drainer annotations, -l matching no node), 2\n"
                "bad usage. With -l: the worst of the nodes' (1 over 4 over 0).\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_plan_ops,
        },
        {
                "drain",
                "cordon, evict claim holders first, wait for claims, stop DRA drivers last",
                "Usage: drainer drain (NODE | -l SELECTOR) [flags]\n\n"
                "Drains NODE in the order that is safe for DRA devices: preflight (refuses with\n"
                "exit 4 before changing anything if a blocker exists; the eviction rules hold\n"
                "again at every eviction of every later phase), cordon + taint\n"
                "drainer.io/draining:NoSchedule, evict the pods that hold ResourceClaims, evict\n"
                "the rest, wait until the pods are gone and no ResourceClaim is on the node,\n"
                "then stop the DRA drivers. Exits 0 once the node is drained. Progress is kept\n"
                "in drainer.io/ annotations on the Node: run it again to resume.\n"
                "With -l, each matching node is drained so, with its own state on its Node, one\n"
                "at a time (--max-parallel N: N at once; --timeout counts for each from its\n"
                "start); a node that fails does not stop the others (as kubectl drain goes\n"
                "on); after SIGINT/SIGTERM no other node starts.\n"
                "When stdout is not a terminal it gets one line per pod (kubectl drain's\n"
                "\"evicting pod NS/NAME\" once accepted, \"pod/NAME evicted\" once gone) and one\n"
                "per ResourceClaim released (\"resourceclaim NS/NAME released from node/NODE\");\n"
                "on a terminal, a live block of every running node on stderr.\n\n" DRAIN_FLAGS_HELP
                        DEVICE_FLAG_HELP
                "  -l, --selector SELECTOR       the Nodes matching this label selector instead of\n"
                "                                NODE (kubectl's -l); -o json: a List of the\n"
                "                                per-node summaries\n"
                "      --max-parallel N          with -l: drain N nodes at once (1-100; default 1)\n"
                "      --metrics-in-output       -o json: add the figures of /metrics (\"metrics\")\n"
                "\nExit codes: 0 drained, 3 timed out (a rerun resumes), 4 refused by a blocker,\n"
                "11 --device where no DeviceTaintRule is served (nothing changed),\n"
                "1 error (also -l matching no node), 2 bad usage, 130/143 interrupted by\n"
                "SIGINT/SIGTERM (the state stays on the Node; the same command resumes). With\n"
                "-l: the worst of the nodes' (1 over 3 over 4 over 0).\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_drain_ops,
        },
        {
                "uncordon",
                "restore DRA drivers, wait until healthy, uncordon if drainer cordoned",
                "Usage: drainer uncordon (NODE | -l SELECTOR) [flags]\n\n"
                "Undoes a drain: restores the DRA drivers that the drain stopped, as recorded in\n"
                "drainer.io/driver-stop and as far as this configuration allows, waits until each\n"
                "is healthy (pod Running and Ready, gRPC health SERVING with --driver-health, its\n"
                "ResourceSlices published again), then removes the drain taint and drainer's\n"
                "annotations, and uncordons NODE only if drainer cordoned it. A recorded systemd\n"
                "unit or label key is undone only when --driver-stop (or --config) names the same;\n"
                "otherwise nothing is started or changed, the Node's drainer.io/message and a\n"
                "DrainerBlocked Event say why, and drainer exits 1 printing the command to run\n"
                "with the right --driver-stop. The taint node.kubernetes.io/out-of-service that\n"
                "a drain with --out-of-service applied (drainer.io/out-of-service) is removed\n"
                "with the drain taint, only once the node is Ready again: while it is not,\n"
                "uncordon changes nothing and exits 1 (a taint drainer did not apply is left).\n\n"
                "Flags:\n"
                "      --driver-stop STRATEGY    what this run may undo: taint (default), label:KEY,\n"
                "                                systemd:UNIT, none (taint and none records always)\n"
                "      --force-uncordon          uncordon even if someone else had cordoned the node\n"
                "      --timeout DURATION        give up after this long (exit 3), e.g. 5m\n"
                "                                (default 0: no limit)\n"
                "      --driver-selector SEL     label selector of DRA driver pods (repeatable;\n"
                "                                default: the kubeletplugin labels of common\n"
                "                                drivers); only pods a DaemonSet controls are drivers\n"
                "      --driver-namespace NS     DRA driver pods run only in NS (repeatable; default:\n"
                "                                any namespace)\n"
                "      --driver-health PORT[/SERVICE] | unix:PATH[#SERVICE]\n"
                "                                gRPC health endpoint of the driver pods: wait for\n"
                "                                SERVING (default: no probe)\n"
                "      --ignore-driver-health    do not wait for the drivers' gRPC health\n"
                "      --driver NAME             undo a drain of DRA driver NAME (drain --driver):\n"
                "                                restore it, wait until healthy and its\n"
                "                                ResourceSlices are back, then delete its\n"
                "                                DeviceTaintRules (or uncordon, if it was "
                "cordoned)\n" DEVICE_FLAG_HELP CONFIG_FLAG_HELP NODE_CONDITIONS_FLAG_HELP
                "  -l, --selector SELECTOR       the Nodes matching this label selector instead of\n"
                "                                NODE (kubectl's -l); -o json: a List of the\n"
                "                                per-node summaries\n"
                "      --max-parallel N          with -l: uncordon N nodes at once (1-100; default 1)\n"
                "      --metrics-in-output       -o json: add the figures of /metrics (\"metrics\")\n"
                "\nExit codes: 0 restored and in service, 3 timed out (a rerun resumes), 1 error\n"
                "(also a node someone else cordoned, without --force-uncordon; a recorded action\n"
                "this configuration does not allow; a node not Ready with drainer's out-of-service\n"
                "taint; -l matching no node), 2 bad usage. With -l: the worst of the nodes' (1\n"
                "over 3 over 0).\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_uncordon_ops,
        },
        {
                "maintain",
                "drain, run a command, then uncordon",
                "Usage: drainer maintain NODE [flags] -- CMD [ARGS...]\n\n"
                "Drains NODE as 'drainer drain' does, runs CMD, and when CMD succeeds restores\n"
                "the node as 'drainer uncordon' does. If CMD fails the node stays drained\n"
                "(exit 1, CMD's status reported) unless --restore-on-failure. What the restore\n"
                "may undo comes from --driver-stop or --config, as for 'drainer "
                "uncordon'.\n\n" DRAIN_FLAGS_HELP
                "      --restore-on-failure      restore and uncordon even if CMD fails\n"
                "      --force-uncordon          uncordon even if someone else had cordoned the node\n"
                "      --force-drain             with --driver: drain even if the driver upgrades\n"
                "                                seamlessly (RollingUpdate with maxSurge, every kubelet\n"
                "                                of its nodes 1.33+: CMD then runs without a drain)\n"
                "      --metrics-in-output       -o json: add the figures of /metrics (\"metrics\")\n"
                "\nExit codes: 0 drained, CMD succeeded, restored; 1 CMD failed or error; 3 timed\n"
                "out; 4 refused by a blocker (CMD not run); 2 bad usage.\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_maintain_ops,
        },
        {
                "serve",
                "daemon: act on drainer.io/request annotations, systemd integration",
                "Usage: drainer serve [--node NAME | --all-nodes] [flags]\n\n"
                "Watches its Node (--node, default $NODE_NAME) or every Node (--all-nodes) for\n"
                "the annotation drainer.io/request=drain|uncordon, as set by\n"
                "  kubectl annotate node NODE drainer.io/request=drain\n"
                "and runs the drain (or its undo) for each node that asks, reporting through\n"
                "drainer.io/state, Events and its log. Removing the request during a drain undoes\n"
                "it. An idle daemon holds one watch and sends nothing else. Under systemd\n"
                "(Type=notify): READY=1 after the first sync, STATUS=, WATCHDOG=1.\n\n"
                "Flags:\n"
                "      --node NAME               the node to serve (default: $NODE_NAME)\n"
                "      --all-nodes               serve every node (cluster mode)\n"
                "      --max-parallel N|P%       at most N nodes out of service at once across every\n"
                "                                drainer of the cluster (Leases drainer-slot-*; a\n"
                "                                node holds a slot from cordon until uncordoned);\n"
                "                                default 1, 0: no limit. P% (1-100%): that share of\n"
                "                                the selected nodes, rounded down, at least 1 (as\n"
                "                                Karpenter's budgets): with --all-nodes every Node\n"
                "                                watched, recounted as they come and go; per node,\n"
                "                                every Node of the cluster (a list of 1 item when a\n"
                "                                drain asks, at most once a minute)\n"
                "      --maintenance-window W    new drains start only inside W: \"DAYS HH:MM-HH:MM\n"
                "                                [ZONE]\", e.g. \"mon-fri 22:00-06:00 Europe/Berlin\"\n"
                "                                (kured's reboot days and times); repeat it or join\n"
                "                                windows with ';'. Days: mon..sun, ranges, lists, *;\n"
                "                                an end before the start crosses midnight (the hours\n"
                "                                after it belong to the day it opened); ZONE: a tz\n"
                "                                database name (default UTC) or a POSIX TZ string.\n"
                "                                Outside it requests wait (the Node says when it\n"
                "                                opens next); drains in flight and undo go on\n"
                "      --lease-namespace NS      namespace of the slot Leases (default:\n"
                "                                $POD_NAMESPACE or drainer-system); its annotation\n"
                "                                drainer.io/pause=true pauses the fleet: drains in\n"
                "                                flight finish, no new one starts until it is removed\n"
                "      --on-shutdown             hold a logind delay inhibitor; drain this node when\n"
                "                                the host shuts down, restore it after the reboot\n"
                "      --cluster-api             with --all-nodes: own the Cluster API pre-drain hook\n"
                "                                pre-drain.delete.hook.machine.cluster.x-k8s.io/drainer:\n"
                "                                drain the node of each Machine being deleted and\n"
                "                                remove the hook once it is drained\n"
                "      --on-unhealthy-device A   a device of the node (--all-nodes: every node's)\n"
                "                                that its driver taints NoSchedule or NoExecute in\n"
                "                                its ResourceSlice, or (per node) that a pod's\n"
                "                                allocatedResourcesStatus says Unhealthy: report (a\n"
                "                                Warning Event DrainerDeviceUnhealthy, the metric\n"
                "                                drainer_device_unhealthy), drain-device (and a drain\n"
                "                                of that device alone, as drain --device: one device\n"
                "                                of a node at a time, under --max-parallel; it stays\n"
                "                                drained until uncordon --device), or off (default)\n"
                "      --unhealthy-devices-per-node N  drain-device: at most N device drains of\n"
                "                                one node at once (default 1, at most 16)\n"
                "      --config FILE             YAML file with one key per flag (flags win); plan,\n"
                "                                drain, uncordon and maintain read the same file\n"
                "      --identity ID             this process in Leases and Events (default: hostname)\n"
                "      --metrics-addr HOST:PORT  serve /metrics, /healthz, /readyz here (default\n"
                "                                127.0.0.1:9464; :PORT every address; \"\" none)\n"
                "      --leader-elect            with --all-nodes: of several replicas only the one\n"
                "                                that holds the Lease drainer-leader acts; the others\n"
                "                                wait as standbys and take over from the Nodes\n"
                "      --leader-elect-lease-duration D  how long a standby waits after the\n"
                "                                leader's last renewal (default 15s)\n"
                "      --leader-elect-renew-deadline D  the leader stops writing when it could\n"
                "                                not renew for this long (default 10s; < lease)\n"
                "      --leader-elect-retry-period D    between tries and renewals (default 2s)\n"
                "      --leader-elect-resource-namespace NS  the Lease's namespace (default:\n"
                "                                --lease-namespace)\n"
                "      --leader-elect-resource-name NAME     the Lease (default drainer-leader)\n"
                "      --force-uncordon          uncordon even if someone else had cordoned the node\n"
                "and the drain flags of 'drainer drain' except --dry-run, --ignore-daemonsets and\n"
                "--driver (they apply to every drain it runs; serve drains whole nodes).\n\n"
                "Exit codes: 0 stopped (SIGTERM, SIGINT), 1 error (API, configuration, a\n"
                "--metrics-addr that cannot be bound, the leader Lease lost), 2 bad "
                "usage.\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_serve_ops,
        },
        {
                "guard",
                "preStop hook of a DRA driver: hold it while its node drains, until claims are released",
                "Usage: drainer guard [--node NODE] [--grace-period-seconds N | --deadline D] [flags]\n"
                "       drainer guard --listen HOST:PORT [flags]\n\n"
                "Meant as the preStop hook of a DRA driver's DaemonSet (deploy/driver-guard/): a\n"
                "native sidecar running 'drainer guard --listen' from drainer's image, which the\n"
                "driver container's httpGet preStop asks (GET /guard), or an exec preStop in a\n"
                "driver image that contains drainer.\n"
                "If NODE is being drained (cordoned, or tainted ToBeDeletedByClusterAutoscaler,\n"
                "karpenter.sh/disrupted, karpenter.sh/disruption or drainer.io/draining), waits until\n"
                "no ResourceClaim is on the node (claims of the driver pods excepted) and no other\n"
                "claim-holding pod is left on it, then exits 0; otherwise (a restart, a rolling\n"
                "update) exits 0 at once. Gives up 5 s before the pod's grace period ends, naming\n"
                "what was still held (exit 3). Watches the Node, the node's pods and ResourceSlices\n"
                "and the ResourceClaims; never polls, never writes.\n"
                "With --listen it serves GET /guard (nothing else) and runs the same wait for each\n"
                "request, from the request on: 200 when the driver may stop, 504 when it gave up\n"
                "(the body counts what was still held; its log names them), 503 on an error; it\n"
                "stops on SIGTERM. Requests in flight share one list and watch per resource.\n\n"
                "Flags:\n"
                "      --node NODE                 the node (default: $NODE_NAME)\n"
                "      --grace-period-seconds N    the pod's grace period (default: read from the pod\n"
                "                                  $POD_NAMESPACE/$POD_NAME when set, else 30)\n"
                "      --deadline DURATION         give up after this long instead, e.g. 4m\n"
                "      --driver-selector SEL       label selector of DRA driver pods (repeatable;\n"
                "                                  default: the kubeletplugin labels of common drivers);\n"
                "                                  only pods a DaemonSet controls are drivers\n"
                "      --driver-namespace NS       DRA driver pods run only in NS (repeatable)\n"
                "      --listen HOST:PORT          serve GET /guard here instead of running once\n"
                "                                  (127.0.0.1:PORT loopback; the sidecar uses\n"
                "                                  $(POD_IP):PORT, where the kubelet connects)\n\n"
                "Exit codes: 0 the driver may stop (with --listen: stopped by SIGTERM), 3 gave up\n"
                "before the grace period ended, 1 error (the driver stops),\n"
                "2 bad usage.\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_guard_ops,
        },
        {
                "doctor",
                "audit the cluster against the DRA cluster-admin good practices (read-only)",
                "Usage: drainer doctor [--node NODE] [--prometheus URL] [-o json]\n\n"
                "Checks, read-only, where the cluster stands against every practice of the upstream\n"
                "page \"Good practices for Dynamic Resource Allocation as a Cluster Admin\" and reports\n"
                "each finding as PASS, WARN or FAIL with the guide's section, the objects concerned\n"
                "and what to change:\n"
                "  - who may write DeviceClasses and ResourceSlices (a SubjectAccessReview for every\n"
                "    subject of every (Cluster)RoleBinding; only cluster admins, the control plane\n"
                "    and the ServiceAccounts of DRA driver pods should), and who may create claims;\n"
                "  - per DRA driver named in ResourceSlices: its DaemonSet, liveness probe (gRPC),\n"
                "    seamless upgrade (maxSurge, kubelets >= 1.33), the drainer guard as preStop,\n"
                "    its pods healthy now (Running, Ready, gRPC health SERVING);\n"
                "  - per node: covered by drainer serve or the guard, drainer state of an\n"
                "    unfinished drain, cordoned with ResourceClaims still on it;\n"
                "  - kube-controller-manager and kube-scheduler --kube-api-qps/--kube-api-burst\n"
                "    (static pods in kube-system) against the guide's floor (75/150 at 100 nodes)\n"
                "    scaled to this cluster, and with --prometheus the guide's queries, interpreted.\n\n"
                "Flags:\n"
                "      --node NODE            limit the per-node checks to NODE\n"
                "      --prometheus URL       Prometheus HTTP API base (e.g. http://127.0.0.1:9090)\n"
                "      --driver-selector SEL  label selector of DRA driver pods (repeatable;\n"
                "                             default: the kubeletplugin labels of common drivers)\n\n"
                "Exit codes: 0 no FAIL (WARNs allowed), 5 at least one finding is FAIL, 6 no FAIL\n"
                "but the cluster serves no DRA API (nothing DRA to audit), 1 error (API,\n"
                "configuration), 2 bad usage.\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_doctor_ops,
        },
        {
                "rollout",
                "update a DRA driver without seamless upgrade across the cluster, node by node",
                "Usage: drainer rollout NAMESPACE/DAEMONSET --driver NAME [flags]\n\n"
                "Rolls the DRA driver's DaemonSet out to its update revision (change its pod\n"
                "template first), one node at a time, so that no driver is stopped while a claim\n"
                "of it is on its node. The DaemonSet's updateStrategy must be OnDelete (refused\n"
                "otherwise, exit 4, with the command that sets it). For each node whose driver pod\n"
                "is of an older revision: the drain of 'drainer drain NODE --driver NAME\n"
                "--driver-stop none' (a NoSchedule DeviceTaintRule, or the cordon where none is\n"
                "served; only the driver's claim holders evicted; until no claim of the driver is\n"
                "on the node), then the old plugin pod evicted (its own grace period), the new\n"
                "one awaited (the update revision, Running and Ready), then the restore of\n"
                "'drainer uncordon NODE --driver NAME' (healthy, its ResourceSlices published,\n"
                "the rule deleted). Nodes already on the update revision are skipped. The\n"
                "progress is on each Node (drainer.io/rollout.NAME and the driver's\n"
                "drainer.io/KEY.NAME): a rollout killed anywhere resumes when run again. The\n"
                "first node that fails (its new driver not healthy within --timeout) stops the\n"
                "rollout: that node's driver stays out of service, said here and in a\n"
                "DrainerFailed Event on the Node.\n\n"
                "Flags:\n"
                "      --driver NAME             the driver's name as in its ResourceSlices (required)\n"
                "      --max-parallel N          at most N nodes at once, across every drainer of the\n"
                "                                cluster (the Leases drainer-slot-* of 'serve\n"
                "                                --max-parallel'; 1-100, default 1)\n"
                "      --lease-namespace NS      namespace of the slot Leases (default: $POD_NAMESPACE\n"
                "                                or drainer-system)\n"
                "      --timeout DURATION        per node, from its start (default 10m)\n"
                "      --driver-health PORT[/SERVICE] | unix:PATH[#SERVICE]\n"
                "                                grpc.health.v1 of the driver pods, for the restore\n"
                "      --driver-selector SEL     label selector of DRA driver pods (as for drain)\n"
                "      --identity ID             this process in the Leases (default: hostname)\n"
                "\nExit codes: 0 every node on the update revision, 3 a node's driver not healthy\n"
                "(or its drain not done) within --timeout: it stays out of service, the rollout\n"
                "stopped there; 4 refused (not OnDelete, a node being drained by someone else);\n"
                "1 error; 2 bad usage; 130/143 interrupted by SIGINT/SIGTERM (run it again to\n"
                "resume).\n" API_EXIT_CODES_HELP,
                NULL,
                &verb_rollout_ops,
        },
        {
                "version",
                "print the release, the source revision, the build options and libraries",
                "Usage: drainer version [-o json]\n\n"
                "Prints the release, the git revision drainer was built from (and whether the work\n"
                "tree had uncommitted changes), its commit time, the build options (build type,\n"
                "optimization, asserts, sanitizers, compiler) and each library's version at build\n"
                "time and as loaded now. The first line is \"drainer VERSION\". -o json prints\n"
                "{version, revision, dirty, commitTime, build: {...}, libraries: [{name, built,\n"
                "runtime}]}.\n\n"
                "Exit codes: 0 printed, 2 bad usage.\n",
                verb_version,
                NULL,
        },
        {},
};

const struct verb *verb_find(const char *name) {
        for (const struct verb *v = verbs; v->name; v++)
                if (streq(v->name, name))
                        return v;
        return NULL;
}

const char flag_false[] = "false";

int global_flag(int opt, const char *arg, struct global_flags *g) {
        char *end;

        switch (opt) {
        case 'K':
                g->kubeconfig = arg;
                return 1;
        case 'C':
                g->context = arg;
                return 1;
        case 'Q':
                if (streq(arg, "auto")) {
                        g->qps = 20;
                        g->qps_mode = QPS_AUTO;
                        return 1;
                }
                errno = 0;
                g->qps = strtod(arg, &end);
                if (errno || *end || end == arg || !(g->qps >= 0) || !isfinite(g->qps))
                        return log_error_errno(
                                EINVAL, "--kube-api-qps: invalid value \"%s\" (a number or auto)", arg);
                g->qps_mode = QPS_FIXED;
                return 1;
        case OPT_GLOBAL_QPS_MAX:
                errno = 0;
                g->qps_max = strtod(arg, &end);
                if (errno || *end || end == arg || !(g->qps_max >= 1) || !isfinite(g->qps_max))
                        return log_error_errno(EINVAL,
                                               "--kube-api-qps-max: invalid value \"%s\" (at least 1)", arg);
                return 1;
        case 'B': {
                long long v;

                if (argval_int(arg, 1, 100000, &v) < 0)
                        return log_error_errno(EINVAL, "--kube-api-burst: invalid value \"%s\"", arg);
                g->burst = (int)v;
                return 1;
        }
        case 'o': {
                enum output_doc d = output_doc_from_string(arg);

                if (streq(arg, "text"))
                        g->output = OUTPUT_TEXT;
                else if (d >= 0) {
                        /* the verbs build the JSON document; -o yaml and name print it so */
                        g->output = OUTPUT_JSON;
                        output_set_doc(d);
                } else
                        return log_error_errno(
                                EINVAL, "-o: unknown output format \"%s\" (text, json, yaml, name)", arg);
                return 1;
        }
        case 'v': /* kubectl's levels 0-10: 4 and more are debug logs */
                if (argval_verbosity(arg, &g->verbose) < 0)
                        return log_error_errno(EINVAL, "-v: invalid level \"%s\" (0-10, as kubectl's)",
                                               arg + (*arg == '='));
                return 1;
        case OPT_GLOBAL_VERBOSE:
                g->verbose = flag_on(arg) ? g->verbose + 1 : 0;
                return 1;
        case OPT_GLOBAL_COLOR: {
                enum output_color c = output_color_from_string(arg);

                if (c < 0)
                        return log_error_errno(EINVAL, "--color: invalid value \"%s\" (auto, always, never)",
                                               arg);
                output_set_color(c);
                return 1;
        }
        case OPT_GLOBAL_AS:
                if (!*arg || strpbrk(arg, "\r\n"))
                        return log_error_errno(EINVAL, "--as: invalid user name \"%s\"", arg);
                g->as_user = arg;
                return 1;
        case OPT_GLOBAL_AS_GROUP:
                if (!*arg || strpbrk(arg, "\r\n"))
                        return log_error_errno(EINVAL, "--as-group: invalid group name \"%s\"", arg);
                if (g->n_as_groups >= ELEMENTSOF(g->as_groups))
                        return log_error_errno(EINVAL, "--as-group: at most %zu groups",
                                               ELEMENTSOF(g->as_groups));
                g->as_groups[g->n_as_groups++] = arg;
                return 1;
        case OPT_GLOBAL_REQUEST_TIMEOUT: {
                uint64_t usec;

                if (timesrc_parse_duration(arg, &usec) < 0)
                        return log_error_errno(EINVAL,
                                               "--request-timeout: invalid duration \"%s\" (e.g. 30s, 1m; "
                                               "0: no timeout)",
                                               arg);
                g->request_timeout_usec = usec == 0 ? KUBE_NO_TIMEOUT : usec;
                return 1;
        }
        }
        return 0;
}

static void help(FILE *f) {
        fprintf(f,
                "drainer %s: DRA-aware node drains for Kubernetes.\n\n"
                "Usage: drainer [global flags] VERB [flags] [NODE | -l SELECTOR]\n\n"
                "Verbs:\n",
                DRAINER_VERSION);
        for (const struct verb *v = verbs; v->name; v++)
                fprintf(f, "  %-10s %s\n", v->name, v->summary);
        fprintf(f, "\nRun 'drainer VERB --help' for a verb's flags.\n\n%s\n%s\n%s", GLOBAL_HELP, SWITCH_HELP,
                EXIT_CODES_HELP);
}

void verb_help(const struct verb *v) {
        printf("%s\n%s", v->usage, GLOBAL_HELP);
}

static const struct option global_options[] = {
        { "kubeconfig", required_argument, NULL, 'K' },
        { "context", required_argument, NULL, 'C' },
        { "kube-api-qps", required_argument, NULL, 'Q' },
        { "kube-api-qps-max", required_argument, NULL, OPT_GLOBAL_QPS_MAX },
        { "kube-api-burst", required_argument, NULL, 'B' },
        { "output", required_argument, NULL, 'o' },
        { "verbose", no_argument, NULL, OPT_GLOBAL_VERBOSE },
        { "v", required_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "as", required_argument, NULL, OPT_GLOBAL_AS },
        { "as-group", required_argument, NULL, OPT_GLOBAL_AS_GROUP },
        { "request-timeout", required_argument, NULL, OPT_GLOBAL_REQUEST_TIMEOUT },
        { "color", required_argument, NULL, OPT_GLOBAL_COLOR },
};

/* The unknown word ("-X" for a short flag), logged with the --config file's line when
 * it came from there. */
static void log_unknown_flag(const char *verb, const char *word, const struct option *opts) {
        const struct yamlargs_word *o = config_origin_of(word);
        const char *near;
        char name[128];

        snprintf(name, sizeof(name), "%s", word + strspn(word, "-"));
        name[strcspn(name, "=")] = 0;
        near = argval_closest_option(opts, name);
        if (o)
                log_error("%s:%zu: unknown key \"%s\"%s%s%s", o->file, o->line, o->key,
                          near ? " (did you mean \"" : "", strempty(near), near ? "\"?)" : "");
        else
                log_error("drainer %s: unknown flag \"%s\"%s%s%s; see 'drainer %s --help'", verb, word,
                          near ? " (did you mean --" : "", strempty(near), near ? "?)" : "", verb);
}

int verb_parse(int argc, char **argv, struct global_flags *g, const struct option *extra, verb_opt_fn on_opt,
               void *userdata) {
        struct option opts[64];
        bool is_switch[64] = {};
        char shortopts[32] = ":o:v::h";
        size_t n = 0, k = strlen(shortopts);
        int c, r, li;

        /* Every switch takes =true|false as kubectl's (pflag's) do: getopt sees it as
         * an optional value, the handler gets NULL (on) or flag_false (off). */
        for (size_t i = 0; i < ELEMENTSOF(global_options); i++) {
                is_switch[n] = global_options[i].has_arg == no_argument && global_options[i].val != 'h';
                opts[n] = global_options[i];
                if (is_switch[n])
                        opts[n].has_arg = optional_argument;
                n++;
        }
        for (; extra && extra->name && n < ELEMENTSOF(opts) - 1; extra++) {
                is_switch[n] = extra->has_arg == no_argument;
                opts[n] = *extra;
                if (is_switch[n])
                        opts[n].has_arg = optional_argument;
                n++;
                /* a verb's option whose value is a lower-case letter is that short flag too (-l) */
                if (extra->val >= 'a' && extra->val <= 'z' && !strchr(shortopts, extra->val) &&
                    k + 3 < sizeof(shortopts)) {
                        shortopts[k++] = (char)extra->val;
                        if (extra->has_arg == required_argument)
                                shortopts[k++] = ':';
                        shortopts[k] = 0;
                }
        }
        opts[n] = (struct option){};

        optind = 0; /* reset getopt, and re-enable GNU argument permutation */
        opterr = 0;
        for (;;) {
                const struct yamlargs_word *o;
                const char *arg;
                char where[PATH_MAX + 32];

                li = -1;
                optopt = 0;
                c = getopt_long(argc, argv, shortopts, opts, &li);
                if (c < 0)
                        break;
                if (c == 'h') {
                        verb_help(verb_find(argv[0]));
                        return 0;
                }
                if (c == '?') {
                        char shortw[3] = { '-', (char)optopt, 0 };

                        /* optopt: a short flag; else getopt passed over the long word */
                        log_unknown_flag(argv[0], optopt ? shortw : argv[optind - 1], opts);
                        return -EINVAL;
                }
                if (li >= 0) {
                        /* the long word as typed: its value in the next word, or after '=' */
                        const char *w = optarg && optind >= 2 && optarg == argv[optind - 1]
                                                ? argv[optind - 2]
                                                : argv[optind - 1];
                        size_t len = strcspn(w + 2, "=");

                        /* no abbreviations (getopt's): as kubectl, a flag is its whole name */
                        if (strlen(opts[li].name) != len) {
                                log_unknown_flag(argv[0], w, opts);
                                return -EINVAL;
                        }
                }
                if (c == ':') {
                        if (optopt && optopt < 0x80)
                                log_error("drainer %s: flag \"-%c\" needs a value", argv[0], optopt);
                        else
                                log_error("drainer %s: flag \"%s\" needs a value", argv[0],
                                          argv[optind - 1]);
                        return -EINVAL;
                }
                arg = optarg;
                /* kubectl's "-v 6": the level as the next word */
                if (c == 'v' && li < 0 && !arg && optind < argc && argval_is_level(argv[optind]))
                        arg = argv[optind++];
                /* a --config file's setting: its errors name the file and the line */
                o = config_origin_of(argv[optind - 1]);
                if (o) {
                        snprintf(where, sizeof(where), "%s:%zu: ", o->file, o->line);
                        log_set_message_prefix(where);
                }
                if (li >= 0 && is_switch[li] && arg) {
                        bool on;

                        if (text_parse_bool(arg, &on) < 0) { /* kubectl's ParseBool */
                                log_error("--%s: invalid value \"%s\" (true or false)", opts[li].name, arg);
                                log_set_message_prefix(NULL);
                                return -EINVAL;
                        }
                        arg = on ? NULL : flag_false;
                }
                r = global_flag(c, arg, g);
                if (r == 0)
                        r = on_opt ? on_opt(c, arg, userdata) : -EINVAL;
                log_set_message_prefix(NULL);
                if (r < 0)
                        return r;
        }
        if (g->qps_max > 0 && g->qps_mode == QPS_FIXED) {
                log_error("drainer %s: --kube-api-qps-max is the ceiling of --kube-api-qps auto, not of a "
                          "fixed --kube-api-qps",
                          argv[0]);
                return -EINVAL;
        }
        if (g->n_as_groups > 0 && !g->as_user) {
                log_error("drainer %s: --as-group needs --as (the user to impersonate), as kubectl's does",
                          argv[0]);
                return -EINVAL;
        }
        if (g->verbose >= 2)
                log_set_max_level(LOG_LEVEL_DEBUG);
        return 1;
}

/* -o json: a failure before the verb could print its own summary still prints one. */
static void print_error_summary(const struct global_flags *g, const char *verb, int code) {
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;

        if (g->output != OUTPUT_JSON)
                return;
        j = app_error_summary(verb, NULL, code, log_last_error());
        (void)output_print(j, false); /* -o json, yaml or name */
}

int verb_run_ops(const struct verb *v, int argc, char **argv, struct global_flags *g) {
        const struct verb_ops *ops = v->ops;
        _cleanup_free_ void *state = NULL;
        struct app a;
        int r;

        state = calloc(1, ops->state_size);
        if (!state)
                return log_oom(), EXIT_ERROR;
        r = ops->parse(argc, argv, g, state);
        if (r <= 0) {
                if (ops->free)
                        ops->free(state);
                if (r < 0)
                        print_error_summary(g, v->name, EXIT_USAGE);
                return r < 0 ? EXIT_USAGE : EXIT_DONE;
        }
        r = app_init(&a, g);
        if (r < 0) {
                int code = a.exit_code != EXIT_DONE ? a.exit_code : EXIT_ERROR;

                app_done(&a);
                if (ops->free)
                        ops->free(state);
                print_error_summary(g, v->name, code);
                return code;
        }
        /* The one loop of the process: the verb's work runs on it until app_quit(). */
        r = ops->start(&a, state);
        if (r < 0)
                app_quit(&a, app_exit_code(r));
        else
                app_run(&a);
        ops->stop(&a, state);
        app_run_until_stopped(&a);
        if (ops->free)
                ops->free(state);
        app_done(&a);
        return a.exit_code;
}

/* Whether the word a (before the verb) is a global flag, with *ret_takes_value set
 * when the next word is its value. */
static bool global_word(const char *a, bool *ret_takes_value) {
        if (strncmp(a, "--", 2) == 0)
                return argval_long_option(global_options, ELEMENTSOF(global_options), a, ret_takes_value) !=
                       NULL;
        *ret_takes_value = false;
        if (a[1] == 'o') {
                *ret_takes_value = !a[2];
                return true;
        }
        return a[1] == 'v' || (a[1] == 'h' && !a[2]);
}

static int run(int argc, char **argv) {
        struct global_flags g = {
                .qps = 20,
                /* the kubelet's burst (KubeletConfiguration kubeAPIBurst): one node's
                 * drain, some 80 requests, goes out at once; the rate bounds the rest */
                .burst = 100,
        };
        const struct verb *v = NULL;
        const char *unknown = NULL;
        int i, r;

        /* Find the verb: the first argument that is not a global flag or its value. */
        for (i = 1; i < argc; i++) {
                const char *a = argv[i];

                if (streq(a, "--"))
                        break;
                if (streq(a, "-h") || streq(a, "--help")) {
                        help(stdout);
                        return EXIT_DONE;
                }
                if (streq(a, "--version")) {
                        printf("drainer %s\n", DRAINER_VERSION);
                        return EXIT_DONE;
                }
                if (a[0] == '-') {
                        bool takes_value = false;

                        if (!global_word(a, &takes_value)) {
                                /* a verb's flag before the verb is the verb's to judge */
                                if (!unknown)
                                        unknown = a;
                                continue;
                        }
                        if (takes_value || (streq(a, "-v") && i + 1 < argc && argval_is_level(argv[i + 1])))
                                i++;
                        continue;
                }
                v = verb_find(a);
                if (!v) {
                        log_error("unknown verb \"%s\"; run 'drainer --help' for the list", a);
                        return EXIT_USAGE;
                }
                break;
        }
        if (!v && unknown) {
                /* say what was wrong, not the whole help */
                log_error("unknown flag \"%s\"", unknown);
                fprintf(stderr, "See 'drainer --help' for the verbs and the flags.\n");
                return EXIT_USAGE;
        }
        if (!v) {
                help(stderr);
                return EXIT_USAGE;
        }
        /* Hand the verb an argv with the verb first; global flags stay in place and the
         * verb's getopt loop passes them to global_flag(). */
        {
                int n = argc - 1;
                char **vargv = calloc(n + 1, sizeof(char *));

                if (!vargv)
                        return log_oom(), EXIT_ERROR;
                vargv[0] = argv[i];
                for (int j = 1, k = 1; j < argc; j++)
                        if (j != i)
                                vargv[k++] = argv[j];
                r = v->ops ? verb_run_ops(v, n, vargv, &g) : v->run(n, vargv, &g);
                free(vargv);
        }
        return r;
}

int main(int argc, char **argv) {
        int r;

        if (getenv("DRAINER_LOG_TIMESTAMPS") || !isatty(STDERR_FILENO))
                log_set_timestamps(true);
        r = transport_global_init();
        if (r < 0) {
                log_error_errno(r, "Cannot initialize libcurl: %m");
                return EXIT_ERROR;
        }
        kube_observer_set(&metrics_kube_observer);
        r = run(argc, argv);
        transport_global_cleanup();
        return r;
}
