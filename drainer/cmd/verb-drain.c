/* `drainer plan|drain|uncordon|maintain`: option parsing shared by the four,
 * the one-shot plan, and the engine runs with their progress display (a live
 * block on a terminal, timestamped lines otherwise, a JSON summary with -o
 * json). Owns nothing beyond one command's lifetime. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/announcer.h"
#include "drainer/client.h"
#include "drainer/engine.h"
#include "drainer/health.h"
#include "drainer/json.h"
#include "drainer/kstatus.h"
#include "drainer/log.h"
#include "drainer/metrics.h"
#include "drainer/nodeset.h"
#include "drainer/nodeview.h"
#include "drainer/plan.h"
#include "drainer/selector.h"
#include "drainer/sysbus.h"
#include "drainer/taintrule.h"
#include "drainer/timesrc.h"
#include "driverkey.h"
#include "seamless.h"
#include "snapshot.h"
#include "verbs.h"

/* ---- plan ---- */

struct plan_probe {
        bool done;
        int error;
        enum health_status status;
};

static void on_plan_probe(int error, enum health_status status, const char *message, void *userdata) {
        struct plan_probe *pp = userdata;

        pp->error = error;
        pp->status = status;
        pp->done = true;
}

/* ---- --dry-run=server ---- */

/* One request of a server dry run and its answer. */
struct dry_call {
        bool done;
        int error;
        long status;
        bool ns_terminating;
        char *message;
};

static void on_dry_answer(const struct kube_result *res, void *userdata) {
        struct dry_call *c = userdata;

        c->done = true;
        c->error = res->error;
        c->status = res->status;
        c->ns_terminating =
                res->error == -EACCES && kube_status_has_cause(res->status_body, "NamespaceTerminating");
        c->message = res->message ? strdup(res->message) : NULL;
}

static const char *dry_outcome(const struct dry_call *c) {
        return c->error == 0 || c->error == -ENOENT ? "evicted"
               : c->ns_terminating                  ? "namespace-terminating"
               : c->error == -EAGAIN                ? "held"
                                                    : "failed";
}

/* --out-of-service and --out-of-service-after: drain, maintain and plan only (serve
 * does not take them: see on_oos_opt). */
enum {
        OPT_OUT_OF_SERVICE = 0x210, /* (0x200.. are the fleet's, below) */
        OPT_OUT_OF_SERVICE_AFTER,
};

#define OUT_OF_SERVICE_AFTER_DEFAULT (5 * 60 * USEC_PER_SEC)

struct oos_args {
        bool on;
        bool after_given;
        uint64_t after_usec;
};

static int on_oos_opt(int opt, const char *arg, void *userdata) {
        struct oos_args *o = userdata;

        switch (opt) {
        case OPT_OUT_OF_SERVICE:
                o->on = true;
                return 0;
        case OPT_OUT_OF_SERVICE_AFTER:
                if (parse_duration(arg, &o->after_usec) < 0 || o->after_usec < USEC_PER_SEC)
                        return log_error_errno(EINVAL,
                                               "--out-of-service-after: invalid duration \"%s\" (at "
                                               "least 1s, e.g. 5m, 90s)",
                                               arg);
                o->after_given = true;
                return 0;
        }
        return -EINVAL;
}

/* Whether argv (the command line as typed, before --config) names the flag. */
static bool out_of_service_tainted_node(const struct node_rec *n) {
        return node_rec_find_taint(n, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_EFFECT) != NULL;
}

static bool argv_has_flag(int argc, char **argv, const char *flag) {
        size_t l = strlen(flag);

        for (int i = 1; i < argc && !streq(argv[i], "--"); i++)
                if (strncmp(argv[i], flag, l) == 0 && (argv[i][l] == 0 || argv[i][l] == '='))
                        return true;
        return false;
}

/* kubectl drain --dry-run=server: the cordon patch the drain would send and an
 * eviction of every pod the plan evicts (its groups in order, the driver pods too
 * when the strategy evicts them), each with dryRun=All: the API server runs its
 * admission, budgets and validation, and persists nothing. Printed as kubectl
 * prints it ("evicting pod NS/NAME (server dry run)"). A 429 (a budget says not
 * now) or a namespace being deleted is reported, not retried (no state moves in a
 * dry run); any other error is exit 1. */
static int run_server_dry_run(struct app *app, const struct node_rec *node, const struct plan *p,
                              const struct drain_args *a, enum output_format fmt, cJSON *list) {
        _cleanup_free_ char *ename = kube_query_escape(node->name), *path = NULL, *body = NULL;
        _cleanup_free_ struct dry_call *calls = NULL;
        struct dry_call cordon = {};
        size_t failed = 0;
        int r;

        if (!ename || asprintf(&path, "/api/v1/nodes/%s?dryRun=All", ename) < 0)
                return log_oom();
        r = drain_patch_cordon(node, timesrc_realtime(app->ts), &body);
        if (r < 0)
                return log_error_errno(r, "cannot build the cordon patch of node %s: %m", node->name);
        r = kube_patch(app->client, path, KUBE_PATCH_MERGE, body, on_dry_answer, &cordon, NULL);
        if (r < 0)
                return log_error_errno(r, "cannot send the cordon patch of node %s: %m", node->name);
        app_run_until(app, &cordon.done);
        if (cordon.error < 0) {
                r = log_error_errno(cordon.error, "cordoning node %s (server dry run) failed: %s",
                                    node->name, cordon.message ? cordon.message : strerror(-cordon.error));
                free(cordon.message);
                return r;
        }
        free(cordon.message);
        if (fmt != OUTPUT_JSON)
                printf("node/%s cordoned (server dry run)\n", node->name);

        calls = calloc(MAX(p->n_pods, 1u), sizeof(*calls));
        if (!calls)
                return log_oom();
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];
                int64_t grace = a->profile.grace;

                if (pp->group == EVICT_GROUP_NONE || pp->pod->deleting) {
                        calls[i].done = true;
                        continue;
                }
                if (grace == 0 && pp->cls == POD_CLASS_CLAIM_HOLDER)
                        grace = 1; /* never 0 for a claim holder, as the drain sends */
                if (grace == 0 && pp->cls == POD_CLASS_DRIVER)
                        grace = -1; /* nor for a DRA driver pod: its own, as the drain sends */
                if (fmt != OUTPUT_JSON)
                        printf("evicting pod %s/%s (server dry run)\n", pp->pod->ns, pp->pod->name);
                r = kube_evict(app->client, pp->pod->ns, pp->pod->name, grace, true, on_dry_answer,
                               &calls[i], NULL);
                if (r < 0) {
                        calls[i] = (struct dry_call){ .done = true, .error = r };
                        continue;
                }
        }
        /* the loop runs every request; each wait ends at once for those already answered */
        for (size_t i = 0; i < p->n_pods; i++)
                app_run_until(app, &calls[i].done);

        {
                _cleanup_(cJSON_Deletep) cJSON *j = fmt == OUTPUT_JSON ? cJSON_CreateObject() : NULL;
                cJSON *pods = NULL;

                if (j) {
                        cJSON_AddStringToObject(j, "node", node->name);
                        cJSON_AddStringToObject(j, "dryRun", "server");
                        cJSON_AddBoolToObject(j, "cordoned", true);
                        pods = cJSON_AddArrayToObject(j, "evictions");
                }
                for (size_t i = 0; i < p->n_pods; i++) {
                        const struct plan_pod *pp = &p->pods[i];
                        const struct dry_call *c = &calls[i];
                        const char *outcome;

                        if (pp->group == EVICT_GROUP_NONE || pp->pod->deleting)
                                continue;
                        outcome = dry_outcome(c);
                        failed += streq(outcome, "failed");
                        if (j) {
                                cJSON *o = cJSON_CreateObject();

                                cJSON_AddStringToObject(o, "namespace", pp->pod->ns);
                                cJSON_AddStringToObject(o, "name", pp->pod->name);
                                cJSON_AddStringToObject(o, "group", evict_group_to_string(pp->group));
                                cJSON_AddStringToObject(o, "result", outcome);
                                if (c->error < 0 && c->error != -ENOENT)
                                        cJSON_AddStringToObject(
                                                o, "message", c->message ? c->message : strerror(-c->error));
                                cJSON_AddItemToArray(pods, o);
                        } else if (streq(outcome, "evicted"))
                                printf("pod/%s evicted (server dry run)\n", pp->pod->name);
                        else
                                printf("pod/%s %s (server dry run): %s\n", pp->pod->name,
                                       streq(outcome, "held") ? "eviction held by a budget"
                                       : streq(outcome, "namespace-terminating")
                                               ? "in a namespace being deleted"
                                               : "eviction failed",
                                       c->message ? c->message : strerror(-c->error));
                }
                if (j) {
                        cJSON *stays = cJSON_AddArrayToObject(j, "stays");
                        _cleanup_free_ char *out = NULL;

                        for (size_t i = 0; i < p->n_pods; i++)
                                if (p->pods[i].group == EVICT_GROUP_NONE) {
                                        cJSON *o = cJSON_CreateObject();

                                        cJSON_AddStringToObject(o, "namespace", p->pods[i].pod->ns);
                                        cJSON_AddStringToObject(o, "name", p->pods[i].pod->name);
                                        cJSON_AddStringToObject(o, "reason", strna(p->pods[i].skip_reason));
                                        cJSON_AddItemToArray(stays, o);
                                }
                        cJSON_AddBoolToObject(j, "ok", failed == 0);
                        if (list)
                                cJSON_AddItemToArray(list, TAKE_PTR(j));
                        else {
                                out = cJSON_Print(j);
                                if (!out)
                                        return log_oom();
                                puts(out);
                        }
                } else
                        printf("node/%s drained (server dry run)%s\n", node->name,
                               failed ? ", with failed evictions" : "");
        }
        for (size_t i = 0; i < p->n_pods; i++)
                free(calls[i].message);
        return failed ? -EIO : 0;
}

/* What the plan says of the node's readiness and of --out-of-service. */
static void plan_print_readiness(const struct node_rec *n, const struct oos_args *oos, FILE *f) {
        char since[64] = "?", due[64] = "?";

        if (n->not_ready_since_usec > 0) {
                (void)timesrc_format_rfc3339(n->not_ready_since_usec, since, sizeof(since));
                (void)timesrc_format_rfc3339(n->not_ready_since_usec + (int64_t)oos->after_usec, due,
                                             sizeof(due));
        }
        if (!n->ready)
                fprintf(f,
                        "\nNode %s is not Ready (since %s): its kubelet is down or not reporting, so it "
                        "can neither\nterminate the evicted pods nor unprepare their ResourceClaims: "
                        "they are not released until it is back.\n",
                        n->name, since);
        if (!oos->on)
                return;
        fprintf(f,
                "\nOut of service (--out-of-service, for a machine that is off): once the node has been "
                "not Ready\nfor %.0f s (--out-of-service-after, from its Ready condition's "
                "lastTransitionTime), drainer applies\nthe taint " OUT_OF_SERVICE_TAINT_KEY
                "=" OUT_OF_SERVICE_TAINT_VALUE ":" OUT_OF_SERVICE_TAINT_EFFECT ": the control plane "
                "then deletes\nthe node's pods and releases their ResourceClaims WITHOUT the kubelet's "
                "unprepare. 'drainer uncordon'\nremoves the taint once the node is Ready again. Now: ",
                (double)oos->after_usec / USEC_PER_SEC);
        if (out_of_service_tainted_node(n))
                fprintf(f, "the node already has that taint.\n");
        else if (n->ready)
                fprintf(f, "the node is Ready: the taint is not applied while it is.\n");
        else if (n->not_ready_since_usec > 0)
                fprintf(f, "not Ready since %s: the taint would go on at %s.\n", since, due);
        else
                fprintf(f, "not Ready since an unknown time: the taint is not applied until the Ready "
                           "condition says since when.\n");
}

static void plan_json_readiness(cJSON *j, const struct node_rec *n, const struct oos_args *oos) {
        char buf[64];
        cJSON *o;

        cJSON_AddBoolToObject(j, "nodeReady", n->ready);
        if (!n->ready && n->not_ready_since_usec > 0 &&
            timesrc_format_rfc3339(n->not_ready_since_usec, buf, sizeof(buf)) >= 0)
                cJSON_AddStringToObject(j, "nodeNotReadySince", buf);
        if (!oos->on)
                return;
        o = cJSON_AddObjectToObject(j, "outOfService");
        if (!o)
                return;
        cJSON_AddStringToObject(o, "taint",
                                OUT_OF_SERVICE_TAINT_KEY "=" OUT_OF_SERVICE_TAINT_VALUE
                                                         ":" OUT_OF_SERVICE_TAINT_EFFECT);
        cJSON_AddNumberToObject(o, "afterSeconds", (double)oos->after_usec / USEC_PER_SEC);
        cJSON_AddBoolToObject(o, "tainted", out_of_service_tainted_node(n));
        if (!n->ready && n->not_ready_since_usec > 0 &&
            timesrc_format_rfc3339(n->not_ready_since_usec + (int64_t)oos->after_usec, buf, sizeof(buf)) >=
                    0)
                cJSON_AddStringToObject(o, "dueAt", buf);
}

struct plan_discovery {
        bool done;
        int error;
        struct taint_rule_api api;
};

static void on_plan_discovered(int error, const struct taint_rule_api *api, void *userdata) {
        struct plan_discovery *d = userdata;

        d->error = error;
        if (api)
                d->api = *api;
        d->done = true;
}

/* --driver: where the API server serves DeviceTaintRules, into po (the engine asks the
 * same at its start). */
static int plan_discover_rules(struct app *app, struct plan_options *po, struct plan_discovery *d) {
        int r = taint_rule_discover(app->client, on_plan_discovered, d, NULL);

        if (r < 0)
                return log_error_errno(r, "Cannot start the API requests: %m");
        app_run_until(app, &d->done);
        if (d->error < 0)
                return log_error_errno(d->error,
                                       "cannot ask the API server whether it serves DeviceTaintRules: %s",
                                       strerror(-d->error));
        po->isolation = d->api.served ? PLAN_ISOLATE_TAINT_RULE : PLAN_ISOLATE_CORDON_FALLBACK;
        po->taint_rule_api = d->api.served ? d->api.api_version : NULL;
        return 0;
}

/* One node's plan (or server dry run) for a node drain or one driver's. With list (-l,
 * -o json), its JSON goes there instead of stdout. */
static int run_plan_one(struct app *app, const char *node, struct drain_args *a, const struct oos_args *oos,
                        enum output_format fmt, cJSON *list) {
        struct snapshot s = { .app = app, .node_name = node, .with_pdbs = true };
        _cleanup_(drain_scope_view_done) struct drain_scope_view sv = {};
        _cleanup_free_ char *key = NULL, *key_from = NULL, *key_why = NULL;
        struct plan_discovery disc = {};
        struct seamless_answer seam = {};
        bool seam_known = false;
        const struct node_rec *pn;
        const char *conflict;
        struct plan_options po;
        struct plan p;
        int r;

        drain_profile_plan_options(&a->profile, &po);
        if (a->profile.n_drivers > 0 && (r = plan_discover_rules(app, &po, &disc)) < 0)
                return r;
        r = snapshot_read(&s);
        if (r < 0) {
                snapshot_done(&s);
                return r;
        }
        /* The Node as the drain's scope sees it (--driver: only that driver's keys). */
        if (drain_scope_view_init(&sv, s.node, a->profile.n_drivers > 0 ? a->profile.drivers[0] : NULL) <
            0) {
                snapshot_done(&s);
                return log_oom();
        }
        pn = &sv.node;
        conflict = drain_scope_conflict(s.node, a->profile.n_drivers > 0 ? a->profile.drivers[0] : NULL);
        if (a->stop_from_daemonset) {
                /* --driver without --driver-stop: label, KEY from the driver's DaemonSet */
                r = driver_key_resolve(app, &s, a, &key, &key_from, &key_why);
                if (r < 0 && r != -EPERM) {
                        r = r == -ENOMEM ? log_oom() : log_error_errno(r, "%s", strna(key_why));
                        snapshot_done(&s);
                        return r;
                }
                po.driver_stop_arg = key;
                po.driver_stop_arg_from = key_from;
        }
        {
                /* The same refusal as drain's: a plan over nonsense state would mislead. */
                _cleanup_(drain_state_done) struct drain_state st = {};
                _cleanup_free_ char *err = NULL;

                r = drain_state_parse(pn, &st, &err);
                if (r < 0) {
                        log_error("%s", err ? err : "malformed drainer annotations");
                        snapshot_done(&s);
                        return r;
                }
        }
        if (s.in.dra_off)
                po.n_driver_selectors = 0; /* no DRA API: no drivers (as the drain's, engine.c) */
        r = plan_build(pn, s.in.pods, s.in.n_pods, s.in.claims, s.in.n_claims, s.in.slices, s.in.n_slices,
                       s.in.pdbs, s.in.n_pdbs, &po, &p);
        if (r < 0) {
                snapshot_done(&s);
                return log_oom();
        }
        /* A node drain and a driver drain of the same node exclude each other (engine.c). */
        if (conflict) {
                char m[512];

                if (*conflict)
                        snprintf(m, sizeof(m),
                                 "DRA driver %s of node %s is out of service (a driver drain): a node drain "
                                 "waits until it is back (drainer uncordon %s --driver %s)",
                                 conflict, node, node, conflict);
                else
                        snprintf(m, sizeof(m),
                                 "node %s is being drained: a drain of DRA driver %s waits until that drain "
                                 "is "
                                 "undone (drainer uncordon %s)",
                                 node, a->profile.drivers[0], node);
                plan_add_blocker(&p, BLOCKER_DRAIN_EXCLUSIVE, NULL, m);
        }
        if (key_why)
                plan_add_blocker(&p, BLOCKER_DRIVER_STOP_KEY, NULL, key_why);
        /* The same health check as the drain's preflight, when an endpoint is configured. */
        if (a->profile.has_health && !a->profile.ignore_health)
                for (size_t i = 0; i < p.n_pods; i++) {
                        const struct pod_rec *pod = p.pods[i].pod;
                        struct plan_probe pr = {};
                        struct health_probe *hp;
                        char m[512];

                        if (p.pods[i].cls != POD_CLASS_DRIVER || pod->deleting)
                                continue;
                        if (health_probe_start(app->transport, &a->profile.health_target, pod->pod_ip,
                                               5 * USEC_PER_SEC, on_plan_probe, &pr, &hp) < 0)
                                pr = (struct plan_probe){ .done = true, .error = -EIO };
                        else
                                app_run_until(app, &pr.done);
                        if (pr.error == 0 && pr.status == HEALTH_SERVING)
                                continue;
                        snprintf(m, sizeof(m),
                                 "DRA driver pod %s/%s does not answer SERVING on its health endpoint: %s "
                                 "(use --ignore-driver-health to override)",
                                 pod->ns, pod->name,
                                 pr.error < 0 ? strerror(-pr.error) : health_status_to_string(pr.status));
                        plan_add_blocker(&p, BLOCKER_DRIVER_UNHEALTHY, pod, m);
                }
        /* --driver: whether the driver upgrades seamlessly */
        if (a->profile.n_drivers > 0 && !s.in.dra_off) {
                const struct pod_rec **dp = calloc(p.n_pods ? p.n_pods : 1, sizeof(*dp));
                size_t n_dp = 0;

                if (!dp) {
                        plan_done(&p);
                        snapshot_done(&s);
                        return log_oom();
                }
                for (size_t i = 0; i < p.n_pods; i++)
                        if (p.pods[i].cls == POD_CLASS_DRIVER)
                                dp[n_dp++] = p.pods[i].pod;
                r = seamless_check(app, a->profile.drivers[0], dp, n_dp, &seam);
                free(dp);
                if (r < 0) {
                        plan_done(&p);
                        snapshot_done(&s);
                        return r;
                }
                seam_known = true;
        }
        if (a->dry_run_server && p.n_blockers == 0) {
                r = run_server_dry_run(app, pn, &p, a, fmt, list);
                plan_done(&p);
                snapshot_done(&s);
                return r;
        }
        if (a->dry_run_server)
                log_error("refused (nothing sent to the server): the drain would be refused by the "
                          "blockers below");
        if (fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *j = plan_to_json(&p, &po);
                _cleanup_free_ char *out = NULL;

                if (j && s.in.dra_api)
                        cJSON_AddStringToObject(j, "draApi", s.in.dra_api);
                else if (j)
                        cJSON_AddNullToObject(j, "draApi");
                if (j) {
                        cJSON_AddBoolToObject(j, "draServed", !s.in.dra_off);
                        plan_json_readiness(j, s.node, oos);
                }
                if (j && seam_known) {
                        cJSON *o = cJSON_AddObjectToObject(j, "seamlessUpgrade");

                        if (o) {
                                cJSON_AddBoolToObject(o, "seamless", seam.seamless);
                                if (seam.daemonset[0])
                                        cJSON_AddStringToObject(o, "daemonset", seam.daemonset);
                                cJSON_AddStringToObject(o, "reason", seam.why);
                        }
                }
                if (j && list)
                        cJSON_AddItemToArray(list, TAKE_PTR(j));
                else if (!(out = j ? cJSON_Print(j) : NULL))
                        r = log_oom();
                else
                        puts(out);
        } else {
                if (s.in.dra_off)
                        printf("DRA: not served by this cluster (no resource.k8s.io v1, v1beta2 or "
                               "v1beta1): "
                               "drained as kubectl drain would, without claim logic\n");
                else if (s.in.dra_api)
                        printf("DRA API: %s\n", s.in.dra_api);
                r = plan_print_text(&p, &po, stdout);
                plan_print_readiness(s.node, oos, stdout);
                if (seam_known && seam.seamless)
                        printf("Seamless upgrade of %s: yes, %s: to update it, no drain is needed "
                               "('maintain --driver' runs its command without evicting anything; "
                               "--force-drain drains first)\n",
                               a->profile.drivers[0], seam.why);
                else if (seam_known)
                        printf("Seamless upgrade of %s: no, %s; to update it across the cluster: drainer "
                               "rollout %s --driver %s\n",
                               a->profile.drivers[0], seam.why,
                               seam.daemonset[0] ? seam.daemonset : "NAMESPACE/DAEMONSET",
                               a->profile.drivers[0]);
        }
        r = r < 0 ? r : (p.n_blockers > 0 ? -EPERM : 0);
        plan_done(&p);
        snapshot_done(&s);
        return r;
}

/* maintain --driver: whether the driver of NODE upgrades seamlessly (a snapshot of
 * the node for its driver pods, then seamless_check). 0 with *ret, or an error
 * (logged). */
static int node_seamless(struct app *app, const char *node, struct drain_args *a,
                         struct seamless_answer *ret) {
        struct snapshot s = { .app = app, .node_name = node };
        const struct pod_rec **dp = NULL;
        struct plan_options po;
        size_t n_dp = 0;
        int r;

        drain_profile_plan_options(&a->profile, &po);
        r = snapshot_read(&s);
        if (r < 0) {
                snapshot_done(&s);
                return r;
        }
        dp = calloc(s.in.n_pods ? s.in.n_pods : 1, sizeof(*dp));
        if (!dp) {
                snapshot_done(&s);
                return log_oom();
        }
        for (size_t i = 0; i < s.in.n_pods; i++)
                if (pod_is_driver(s.in.pods[i], &(const struct driver_filter){
                                                        .selectors = po.driver_selectors,
                                                        .n_selectors = po.n_driver_selectors,
                                                        .namespaces = po.driver_namespaces,
                                                        .n_namespaces = po.n_driver_namespaces,
                                                }))
                        dp[n_dp++] = s.in.pods[i];
        r = seamless_check(app, a->profile.drivers[0], dp, n_dp, ret);
        free(dp);
        snapshot_done(&s);
        return r;
}

/* The plan of a node drain, or of each driver of --driver (one plan each: each has its
 * own state, stop and blockers); the worst result. */
static int run_plan(struct app *app, const char *node, struct drain_args *a, const struct oos_args *oos,
                    enum output_format fmt, cJSON *list) {
        int worst = 0;

        if (a->profile.n_drivers <= 1)
                return run_plan_one(app, node, a, oos, fmt, list);
        for (size_t i = 0; i < a->profile.n_drivers; i++) {
                struct drain_args one;
                int r;

                drain_args_for_driver(a, i, &one);
                if (i > 0 && fmt != OUTPUT_JSON)
                        putchar('\n');
                r = run_plan_one(app, node, &one, oos, fmt, list);
                if (r < 0 && (worst == 0 || worst == -EPERM))
                        worst = r;
        }
        return worst;
}

/* ---- drain / uncordon / maintain ---- */

struct fleet;

struct runner {
        struct fleet *fl;
        struct app *app;
        struct drain_args *a;
        const struct oos_args *oos;
        bool summary_valid; /* summary is from a finished run */
        bool progress_seen, progress_not_ready, progress_oos;
        char *progress_message;      /* the last progress message */
        struct announcer *announcer; /* owned: this node's Events (this host's name their instance) */
        enum output_format fmt;
        const char *node;
        bool tty;
        bool finished;
        int result;
        char *message;
        struct engine_summary summary; /* copied at finish (pointers valid until the engine is freed) */
        struct engine_summary acc;     /* accumulated over the runs of one command */
        uint64_t cmd_t0;
        int cmd_status; /* maintain: CMD's exit status, -1 if not run */
        struct engine *engine;
        uint64_t t0, last_draw;
        bool has_last_phase;
        enum drain_phase last_phase;
        char *last_line;
        bool started, reported; /* -l: this node's run began / its end was reported */
        int code;               /* its exit code, once reported */
        cJSON *json;            /* its -o json summary, once reported */
        char *block;            /* its part of the live block (terminal) */
        int block_lines;
        struct sysbus *bus;    /* systemd:UNIT drivers; NULL without a system bus */
        char *needs_flag;      /* the last run was refused: the flag that allows what is recorded */
        char *rerun;           /* ... and the command to run with it */
        cJSON *ns_terminating; /* "ns/name" of pods met in a namespace being deleted, all runs */
        int argc;              /* the command line as given (before --config) */
        char **argv;
        char *stop_key; /* --driver without --driver-stop: the label KEY (a->profile.profile.stop_arg) */
};

/* The nodes of one command: one (NODE), or those -l/--selector matched, run
 * --max-parallel at a time, each with its own engine and its state on its Node. */
struct fleet {
        struct app *app;
        struct runner *rn;
        size_t n;
        unsigned max_parallel;
        bool tty;     /* stderr is a terminal: one live block for every running node */
        bool trail;   /* stdout is not a terminal (text output): a line per eviction and claim */
        bool metrics; /* --metrics-in-output */
        bool any_finished, interrupted;
        int drawn_lines;
        uint64_t last_draw;
        uv_signal_t sigint, sigterm;
        /* -l: the informers every node's engine borrows (the Nodes, every ResourceClaim
         * and budget: one watch each for the whole command, kept warm between nodes) */
        struct cluster_view *cluster;
};

/* How long the shared claims and budgets stay watched after a node's engine let go:
 * the next node of -l starts at once and borrows a warm cache. */
#define FLEET_LINGER_USEC (10 * USEC_PER_SEC)

static const char *group_label(enum evict_group g) {
        switch (g) {
        case EVICT_GROUP_CLAIM_HOLDERS:
                return "claim holders";
        case EVICT_GROUP_CLAIM_HOLDERS_CRITICAL:
                return "critical claim holders";
        case EVICT_GROUP_REST:
                return "other pods";
        case EVICT_GROUP_REST_CRITICAL:
                return "critical other pods";
        case EVICT_GROUP_DRIVERS:
                return "driver pods";
        default:
                return "staying";
        }
}

/* The live block: the part of every node running now, in the order of the nodes. */
static void fleet_draw(struct fleet *fl) {
        if (fl->drawn_lines > 0)
                fprintf(stderr, "\033[%dA\033[J", fl->drawn_lines);
        fl->drawn_lines = 0;
        for (size_t i = 0; i < fl->n; i++) {
                const struct runner *rn = &fl->rn[i];

                if (rn->started && !rn->reported && rn->block) {
                        fputs(rn->block, stderr);
                        fl->drawn_lines += rn->block_lines;
                }
        }
}

/* The block so far stays on the screen (above what is logged next). */
static void fleet_commit_block(struct fleet *fl) {
        if (fl->tty && fl->drawn_lines > 0)
                fputc('\n', stderr);
        fl->drawn_lines = 0;
}

static void draw(struct runner *rn, const struct engine_progress *p, bool force) {
        uint64_t now = timesrc_now(rn->app->ts);
        char when[32];

        if (rn->fmt == OUTPUT_JSON)
                return;
        if (!rn->tty) {
                /* Plain lines: one per phase change or new message. */
                _cleanup_free_ char *line = NULL;

                if (asprintf(&line, "%s: %s", p->has_phase ? drain_phase_to_string(p->phase) : "preflight",
                             strna(p->message)) < 0)
                        return;
                if (streq_ptr(line, rn->last_line))
                        return;
                if (timesrc_format_rfc3339(timesrc_realtime(rn->app->ts), when, sizeof(when)) < 0)
                        strcpy(when, "?");
                fprintf(stderr, "%s %s %s\n", when, rn->node, line);
                for (size_t i = 0; i < p->n_held; i++)
                        fprintf(stderr, "%s %s   held: %s/%s: %s\n", when, rn->node, p->held[i].ns,
                                p->held[i].name, p->held[i].reason);
                free(rn->last_line);
                rn->last_line = TAKE_PTR(line);
                return;
        }
        /* This node's part of the one live block, redrawn in place. */
        {
                char *buf = NULL;
                size_t size = 0;
                int lines = 0;
                FILE *f = open_memstream(&buf, &size);

                if (!f)
                        return;
                fprintf(f, "\033[1m%s\033[0m  %s%-20s\033[0m  %5.1f s\n", rn->node, "\033[36m",
                        p->has_phase ? drain_phase_to_string(p->phase) : "preflight",
                        (double)(now - rn->t0) / (double)USEC_PER_SEC);
                lines++;
                fprintf(f, "  pods left:");
                for (int g = 0; g < EVICT_GROUP_NONE; g++)
                        if (p->pods_left[g] > 0 || g == EVICT_GROUP_CLAIM_HOLDERS || g == EVICT_GROUP_REST)
                                fprintf(f, "  %s %zu", group_label(g), p->pods_left[g]);
                fprintf(f, "\n  claims on the node: %zu   driver pods: %zu   evictions accepted: %zu\n",
                        p->claims_left, p->drivers_left, p->evictions_accepted);
                lines += 2;
                for (size_t i = 0; i < p->n_held && i < 5; i++) {
                        fprintf(f, "  \033[33mheld\033[0m %s/%s: %.100s\n", p->held[i].ns, p->held[i].name,
                                p->held[i].reason);
                        lines++;
                }
                if (p->n_held > 5) {
                        fprintf(f, "  ... and %zu more held\n", p->n_held - 5);
                        lines++;
                }
                if (p->node_not_ready) {
                        fprintf(f, "  \033[33mnode not Ready\033[0m: %s\n",
                                p->out_of_service
                                        ? "out-of-service taint on: the control plane deletes its pods"
                                        : "its kubelet cannot finish pods nor unprepare claims");
                        lines++;
                }
                fprintf(f, "  %s\n", strna(p->message));
                lines++;
                if (fclose(f) != 0) {
                        free(buf);
                        return;
                }
                free(rn->block);
                rn->block = buf;
                rn->block_lines = lines;
        }
        if (!force && now - rn->fl->last_draw < 100 * USEC_PER_MSEC)
                return;
        rn->fl->last_draw = now;
        fleet_draw(rn->fl);
}

static void on_engine_progress(struct engine *e, const struct engine_progress *p, void *userdata) {
        struct runner *rn = userdata;
        bool phase_changed = p->has_phase != rn->has_last_phase || p->phase != rn->last_phase;

        rn->has_last_phase = p->has_phase;
        rn->last_phase = p->phase;
        rn->progress_seen = true;
        rn->progress_not_ready = p->node_not_ready;
        rn->progress_oos = p->out_of_service;
        if (p->message && !streq_ptr(p->message, rn->progress_message)) {
                free(rn->progress_message);
                rn->progress_message = strdup(p->message);
        }
        draw(rn, p, phase_changed);
}

static void on_engine_finished(struct engine *e, const struct engine_summary *s, void *userdata) {
        struct runner *rn = userdata;

        rn->finished = true;
        rn->result = s->result;
        /* maintain runs the engine twice: the summary covers both runs. */
        for (int p = 0; p < _DRAIN_PHASE_MAX; p++) {
                rn->acc.phase_usec[p] += s->phase_usec[p];
                rn->acc.phase_seen[p] |= s->phase_seen[p];
        }
        rn->acc.pods_evicted += s->pods_evicted;
        rn->acc.claims_waited += s->claims_waited;
        rn->acc.changed |= s->changed;
        for (size_t i = 0; i < s->n_ns_terminating; i++) {
                _cleanup_free_ char *k = NULL;
                const cJSON *it;
                bool dup = false;

                if (!rn->ns_terminating)
                        rn->ns_terminating = cJSON_CreateArray();
                if (!rn->ns_terminating ||
                    asprintf(&k, "%s/%s", s->ns_terminating[i].ns, s->ns_terminating[i].name) < 0)
                        break;
                cJSON_ArrayForEach(it, rn->ns_terminating) dup = dup || streq(it->valuestring, k);
                if (!dup)
                        cJSON_AddItemToArray(rn->ns_terminating, cJSON_CreateString(k));
        }
        free(rn->needs_flag);
        rn->needs_flag = s->needs_flag ? strdup(s->needs_flag) : NULL;
        rn->summary = *s;
        rn->summary_valid = true;
        free(rn->message);
        rn->message = s->message ? strdup(s->message) : NULL;
        rn->summary.message = rn->message;
        rn->fl->any_finished = true;
}

/* The audit trail on stdout when it is not a terminal: kubectl drain's lines for
 * each pod ("evicting pod NS/NAME" once the eviction is accepted, "pod/NAME
 * evicted" once it is gone; "deleting", "deleted" with --disable-eviction), and
 * one for each ResourceClaim released from the node. */
static void on_engine_notice(struct engine *e, const struct engine_notice *n, void *userdata) {
        struct runner *rn = userdata;

        announcer_notice(rn->announcer, n);
}

static void on_engine_trail(struct engine *e, const struct engine_trail *t, void *userdata) {
        struct runner *rn = userdata;

        if (!rn->fl->trail)
                return;
        switch (t->kind) {
        case ENGINE_TRAIL_EVICTING:
                printf("%s pod %s/%s\n", t->deleted ? "deleting" : "evicting", t->ns, t->name);
                break;
        case ENGINE_TRAIL_POD_GONE:
                printf("pod/%s %s\n", t->name, t->deleted ? "deleted" : "evicted");
                break;
        case ENGINE_TRAIL_CLAIM_RELEASED:
                printf("resourceclaim %s/%s released from node/%s\n", t->ns, t->name, rn->node);
                break;
        default:
                return;
        }
        fflush(stdout);
}

/* SIGINT, SIGTERM: every node's run ends where it is (its state is on its Node, the
 * same command resumes it); no node not started yet is started. */
static void on_fleet_signal(uv_signal_t *h, int signum) {
        struct fleet *fl = h->data;

        fl->interrupted = true;
        fl->any_finished = true;
        for (size_t i = 0; i < fl->n; i++)
                if (fl->rn[i].started && !fl->rn[i].finished) {
                        fl->rn[i].finished = true;
                        fl->rn[i].result = -EINTR;
                }
}

/* Starts the engine of rn for one goal; rn->finished once it finished, timed out,
 * failed to start or was interrupted. */
static int runner_start(struct runner *rn, enum engine_goal goal, uint64_t timeout_usec) {
        struct engine_options eo;
        static const struct engine_callbacks cb = {
                .on_progress = on_engine_progress,
                .on_notice = on_engine_notice,
                .on_trail = on_engine_trail,
                .on_finished = on_engine_finished,
        };
        int r;

        if (!rn->announcer) {
                char host[256] = "";

                gethostname(host, sizeof(host) - 1);
                r = announcer_new(rn->app->client, rn->app->ts, host, &rn->announcer);
                if (r < 0) {
                        rn->finished = rn->fl->any_finished = true;
                        return rn->result = log_error_errno(r, "Cannot set up the node's Events: %m");
                }
        }
        drain_profile_engine_options(&rn->a->profile, rn->node, goal, &eo);
        eo.timeout_usec = timeout_usec;
        eo.units = sysbus_units(rn->bus);
        eo.shared = rn->fl->cluster;
        eo.out_of_service = rn->oos && rn->oos->on;
        eo.out_of_service_after_usec = rn->oos ? rn->oos->after_usec : 0;
        rn->finished = false;
        rn->started = true;
        rn->result = 0;
        rn->summary = (struct engine_summary){};
        rn->summary_valid = false;
        rn->t0 = timesrc_now(rn->app->ts);
        engine_free(rn->engine); /* maintain's first run */
        rn->engine = NULL;
        r = engine_new(rn->app->client, rn->app->transport, rn->app->ts, &eo, &cb, rn, &rn->engine);
        if (r < 0) {
                rn->finished = rn->fl->any_finished = true;
                return rn->result = log_error_errno(r, "Cannot set up the drain engine: %m");
        }
        r = engine_start(rn->engine);
        if (r < 0) {
                rn->finished = rn->fl->any_finished = true;
                rn->result = log_error_errno(r, "Cannot start watching node %s: %m", rn->node);
        }
        return 0;
}

/* Stops rn's engine once it finished and waits until it is idle and its Events are
 * posted. */
static int runner_stop(struct runner *rn) {
        if (rn->engine)
                engine_stop(rn->engine);
        while ((rn->engine && !engine_idle(rn->engine)) || !announcer_idle(rn->announcer))
                if (uv_run(&rn->app->loop, UV_RUN_ONCE) == 0)
                        break;
        /* interrupted: the phase the Node shows, even one written after the last progress */
        if (rn->result == -EINTR && rn->engine && engine_node_phase(rn->engine, &rn->last_phase))
                rn->has_last_phase = true;
        return rn->result;
}

/* Runs the engine for one goal until it finishes, times out or is interrupted. */
static int run_engine(struct runner *rn, enum engine_goal goal, uint64_t timeout_usec) {
        runner_start(rn, goal, timeout_usec);
        app_run_until(rn->app, &rn->finished);
        return runner_stop(rn);
}

/* The blockers a refusal names: all of them in preflight; later, those that hold at
 * every eviction (a driver being stopped is unhealthy by design). */
static bool blocker_listed(const struct runner *rn, const struct plan_blocker *b) {
        return !rn->summary.changed || blocker_kind_holds_at_every_eviction(b->kind);
}

/* The -o json summary's schema: 1 since the metrics left it (--metrics-in-output). */
#define SUMMARY_SCHEMA_VERSION 1

static void add_client_figures(cJSON *j, struct app *app, bool metrics) {
        struct kube_client_stats cs;

        kube_client_get_stats(app->client, &cs);
        cJSON_AddNumberToObject(j, "apiRequests", (double)cs.requests);
        cJSON_AddNumberToObject(j, "watchEvents", (double)cs.watch_events);
        /* The figures `serve` exposes on /metrics, from the same registry. */
        if (metrics) {
                cJSON *m = metrics_default() ? metrics_to_json(metrics_default()) : NULL;

                if (m)
                        cJSON_AddItemToObject(j, "metrics", m);
        }
}

/* One node's summary; per_node: one of several (-l), without the figures of the
 * process (the API client is shared: they are the list's). */
static cJSON *summary_json(struct runner *rn, const char *verb, int result, bool per_node) {
        cJSON *j = cJSON_CreateObject(), *phases;

        if (!per_node)
                cJSON_AddNumberToObject(j, "schemaVersion", SUMMARY_SCHEMA_VERSION);
        cJSON_AddStringToObject(j, "node", rn->node);
        cJSON_AddStringToObject(j, "verb", verb);
        cJSON_AddStringToObject(j, "result",
                                result == 0            ? "done"
                                : result == -ETIMEDOUT ? "timeout"
                                : result == -EPERM     ? "refused"
                                : result == -EINTR     ? "interrupted"
                                                       : "error");
        if (rn->message)
                cJSON_AddStringToObject(j, "message", rn->message);
        else if (result == -EINTR && !rn->acc.changed && !rn->has_last_phase)
                cJSON_AddStringToObject(j, "message", "interrupted before it changed anything on the node");
        else if (result == -EINTR) {
                /* the engine never finished: what its progress last said */
                _cleanup_free_ char *m = NULL;

                if (asprintf(&m,
                             "interrupted in phase %s%s%s%s: the state is on node %s; run the same command "
                             "again to resume",
                             rn->has_last_phase ? drain_phase_to_string(rn->last_phase) : "preflight",
                             rn->progress_message ? " (" : "", strempty(rn->progress_message),
                             rn->progress_message ? ")" : "", rn->node) >= 0)
                        cJSON_AddStringToObject(j, "message", m);
        }
        /* false only for a refusal in preflight (or nothing to do): the node is as it was. */
        cJSON_AddBoolToObject(j, "changed", rn->acc.changed);
        if (rn->rerun)
                cJSON_AddStringToObject(j, "rerun", rn->rerun);
        if (rn->summary.has_phase)
                cJSON_AddStringToObject(j, "phase", drain_phase_to_string(rn->summary.last_phase));
        else if (result == -EINTR && rn->has_last_phase) /* interrupted: its last progress */
                cJSON_AddStringToObject(j, "phase", drain_phase_to_string(rn->last_phase));
        if (rn->a->profile.n_drivers > 0) {
                /* --driver: the drivers, and how new claims were kept off their devices */
                cJSON *sc = cJSON_AddObjectToObject(j, "scope"),
                      *d = sc ? cJSON_AddArrayToObject(sc, "drivers") : NULL;

                for (size_t i = 0; d && i < rn->a->profile.n_drivers; i++)
                        cJSON_AddItemToArray(d, cJSON_CreateString(rn->a->profile.drivers[i]));
                if (sc && rn->summary_valid && rn->summary.isolation < _PLAN_ISOLATION_MAX)
                        cJSON_AddStringToObject(sc, "isolation",
                                                rn->summary.isolation == PLAN_ISOLATE_TAINT_RULE
                                                        ? "deviceTaintRule"
                                                        : "cordon");
        }
        phases = cJSON_AddArrayToObject(j, "phases");
        for (int p = 0; p < _DRAIN_PHASE_MAX; p++)
                if (rn->acc.phase_seen[p]) {
                        cJSON *o = cJSON_CreateObject();

                        cJSON_AddStringToObject(o, "name", drain_phase_to_string(p));
                        cJSON_AddNumberToObject(o, "seconds", (double)rn->acc.phase_usec[p] / 1e6);
                        cJSON_AddItemToArray(phases, o);
                }
        /* The Node as last seen: not Ready means its kubelet can neither finish the evicted
         * pods nor unprepare their claims; the out-of-service taint, and who applied it. */
        if (rn->summary_valid) {
                cJSON_AddBoolToObject(j, "nodeReady", !rn->summary.node_not_ready);
                if (rn->summary.out_of_service)
                        cJSON_AddStringToObject(j, "outOfServiceTaint",
                                                rn->summary.out_of_service_by_drainer
                                                        ? "applied by drainer"
                                                        : "applied by someone else");
        } else if (rn->progress_seen) {
                /* interrupted: the last progress */
                cJSON_AddBoolToObject(j, "nodeReady", !rn->progress_not_ready);
                if (rn->progress_oos)
                        cJSON_AddStringToObject(j, "outOfServiceTaint", "on the node");
        }
        cJSON_AddNumberToObject(j, "podsEvicted", (double)rn->acc.pods_evicted);
        cJSON_AddNumberToObject(j, "claimsWaitedFor", (double)rn->acc.claims_waited);
        /* Evictions answered NamespaceTerminating: retried until the namespace controller
         * marked the pod deleted, then waited for (kubectl drain's rule). */
        if (rn->ns_terminating)
                cJSON_AddItemReferenceToObject(j, "waitedForNamespaceDeletion", rn->ns_terminating);
        if (rn->cmd_status >= 0)
                cJSON_AddNumberToObject(j, "commandExitStatus", rn->cmd_status);
        if (result == -EPERM && rn->summary.plan && rn->summary.plan->n_blockers > 0) {
                cJSON *b = cJSON_AddArrayToObject(j, "blockers");

                for (size_t i = 0; i < rn->summary.plan->n_blockers; i++)
                        if (blocker_listed(rn, &rn->summary.plan->blockers[i]))
                                cJSON_AddItemToArray(
                                        b, cJSON_CreateString(rn->summary.plan->blockers[i].message));
        }
        cJSON_AddNumberToObject(j, "seconds", (double)(timesrc_now(rn->app->ts) - rn->cmd_t0) / 1e6);
        if (!per_node)
                add_client_figures(j, rn->app, rn->fl->metrics);
        return j;
}

static int exit_code_for(int r) {
        switch (r) {
        case 0:
                return EXIT_DONE;
        case -ETIMEDOUT:
                return EXIT_TIMEOUT;
        case -EPERM:
                return EXIT_REFUSED;
        default:
                return EXIT_ERROR;
        }
}

/* A word of a command line as the shell reads it back. */
static void put_shell_word(FILE *f, const char *w) {
        if (*w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789@%+=:,./_-") ==
                          strlen(w)) {
                fputs(w, f);
                return;
        }
        fputc('\'', f);
        for (; *w; w++)
                if (*w == '\'')
                        fputs("'\\''", f);
                else
                        fputc(*w, f);
        fputc('\'', f);
}

/* The command line as given, for verb, with rn->needs_flag ("--driver-stop V") in
 * place of any --driver-stop; for "uncordon" out of maintain, without the flags that
 * are not uncordon's (--restore-on-failure, the drain's) and -- CMD. */
static char *rerun_command(const struct runner *rn, const char *verb) {
        _cleanup_free_ char *flag = strdup(rn->needs_flag);
        bool from_maintain = !streq(verb, rn->argv[0]);
        char *buf = NULL, *value;
        size_t size = 0;
        FILE *f;

        if (!flag || !(value = strchr(flag, ' ')))
                return NULL;
        *value++ = 0;
        f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        fprintf(f, "drainer %s", verb);
        for (int i = 1; i < rn->argc; i++) {
                const char *w = rn->argv[i];

                if (streq(w, "--")) {
                        if (from_maintain)
                                break;
                        fprintf(f, " ");
                        put_shell_word(f, flag);
                        fputc(' ', f);
                        put_shell_word(f, value);
                        flag[0] = 0;
                }
                if (streq(w, "--driver-stop")) {
                        i++;
                        continue;
                }
                if (strncmp(w, "--driver-stop=", 14) == 0)
                        continue;
                if (from_maintain &&
                    (streq(w, "--out-of-service") || strncmp(w, "--out-of-service-after", 22) == 0)) {
                        /* maintain's --out-of-service is the drain's; uncordon takes none */
                        i += streq(w, "--out-of-service-after");
                        continue;
                }
                if (from_maintain) {
                        bool takes_value = false;

                        /* maintain's drain flags (--force, --grace-period 5, ...) are
                         * not uncordon's: it would refuse them */
                        if (drain_flag_applies(verb, w, &takes_value) == 0) {
                                i += takes_value;
                                continue;
                        }
                }
                fputc(' ', f);
                put_shell_word(f, w);
        }
        if (flag[0]) {
                fputc(' ', f);
                put_shell_word(f, flag);
                fputc(' ', f);
                put_shell_word(f, value);
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* Logs how a run ended, and maps a refusal by configuration to exit 1 (-EEXIST). */
static int report_result(struct runner *rn, const char *what, int r) {
        const struct plan *p = rn->summary.plan;

        fleet_commit_block(rn->fl);
        if (r == 0)
                log_info("%s", rn->message ? rn->message : what);
        else if (r == -EINTR && !rn->acc.changed && !rn->has_last_phase)
                log_error("%s interrupted before it changed anything on node %s", what, rn->node);
        else if (r == -EINTR)
                log_error("%s interrupted: the state is on node %s; run the same command again to resume",
                          what, rn->node);
        else if (r == -EPERM && rn->needs_flag) {
                free(rn->rerun);
                rn->rerun = rerun_command(rn, what);
                log_error("%s: %s", what, strna(rn->message));
                if (rn->rerun)
                        log_error("if that is what the drain did, run: %s", rn->rerun);
                return -EEXIST;
        } else if (r == -EPERM && streq(what, "drain") && p && p->n_blockers > 0) {
                /* (an uncordon refuses for other reasons: its message says which) */
                if (rn->summary.changed)
                        log_error(
                                "%s: refused by a blocker in phase %s; nothing more was evicted and node %s "
                                "stays in that phase (fix it or add the flag named, then run again to "
                                "resume; or 'drainer uncordon %s'):",
                                what,
                                rn->summary.has_phase ? drain_phase_to_string(rn->summary.last_phase) : "?",
                                rn->node, rn->node);
                else
                        log_error("%s: refused by preflight; nothing was changed:", what);
                for (size_t i = 0; i < p->n_blockers; i++)
                        if (blocker_listed(rn, &p->blockers[i]))
                                log_error("  %s", p->blockers[i].message);
        } else
                log_error("%s: %s", what, rn->message ? rn->message : strerror(-r));
        return r;
}

static int on_cmd_exit_status;
static bool cmd_exited;

static void on_cmd_exit(uv_process_t *p, int64_t status, int signum) {
        on_cmd_exit_status = signum ? 128 + signum : (int)status;
        cmd_exited = true;
        uv_close((uv_handle_t *)p, NULL);
}

static int run_command(struct app *app, char **cmd) {
        uv_process_t proc;
        uv_stdio_container_t stdio[3] = {
                { .flags = UV_INHERIT_FD, .data.fd = 0 },
                { .flags = UV_INHERIT_FD, .data.fd = 1 },
                { .flags = UV_INHERIT_FD, .data.fd = 2 },
        };
        uv_process_options_t o = {
                .exit_cb = on_cmd_exit,
                .file = cmd[0],
                .args = cmd,
                .stdio_count = 3,
                .stdio = stdio,
        };
        int r;

        cmd_exited = false;
        r = uv_spawn(&app->loop, &proc, &o);
        if (r < 0) {
                log_error("cannot run \"%s\": %s", cmd[0], uv_strerror(r));
                return 127;
        }
        app_run_until(app, &cmd_exited);
        return on_cmd_exit_status;
}

static void on_bus_closed(void *userdata) {
        *(bool *)userdata = true;
}

/* The flags of plan, drain, uncordon and maintain beyond the shared ones (kept
 * here: serve has a --max-parallel of its own, across the cluster). */
enum {
        OPT_NODE_SELECTOR = 'l', /* a lower-case letter: -l too */
        OPT_FLEET_MAX_PARALLEL = 0x200,
        OPT_METRICS_IN_OUTPUT,
};

struct drainlike_opts {
        const char *selector;
        unsigned max_parallel; /* 0: not given */
        bool metrics;
        struct oos_args oos; /* --out-of-service (not uncordon's) */
};

static int on_drainlike_opt(int opt, const char *arg, void *userdata) {
        struct drainlike_opts *o = userdata;

        switch (opt) {
        case OPT_NODE_SELECTOR:
                o->selector = arg;
                return 0;
        case OPT_FLEET_MAX_PARALLEL:
                if (nodeset_parse_max_parallel(arg, &o->max_parallel) < 0)
                        return log_error_errno(EINVAL,
                                               "--max-parallel: invalid value \"%s\" (1-%d nodes at once)",
                                               arg, NODESET_MAX_PARALLEL);
                return 0;
        case OPT_METRICS_IN_OUTPUT:
                o->metrics = true;
                return 0;
        }
        return on_oos_opt(opt, arg, &o->oos);
}

struct node_list {
        bool done;
        int error;
        char *message;
        char **names;
        size_t n;
};

static int on_node_page(const cJSON *items, void *userdata) {
        struct node_list *l = userdata;

        return nodeset_add_page(items, &l->names, &l->n);
}

static void on_node_list(const struct kube_result *res, void *userdata) {
        struct node_list *l = userdata;

        l->done = true;
        l->error = res->error;
        l->message = res->message ? strdup(res->message) : NULL;
}

/* The names of the Nodes matching -l SELECTOR, sorted. */
static int list_nodes(struct app *app, const char *selector, struct node_list *l) {
        _cleanup_free_ char *path = NULL, *err = NULL;
        int r;

        r = nodeset_list_path(selector, &path, &err);
        if (r < 0)
                return r == -ENOMEM ? log_oom() : log_error_errno(r, "-l/--selector: %s", strna(err));
        r = kube_list(app->client, path, 500, NULL, on_node_page, on_node_list, l, NULL);
        if (r < 0)
                return log_error_errno(r, "cannot list the nodes matching \"%s\": %m", selector);
        app_run_until(app, &l->done);
        if (l->error < 0)
                return log_error_errno(l->error, "cannot list the nodes matching \"%s\": %s", selector,
                                       l->message ? l->message : strerror(-l->error));
        nodeset_sort(l->names, &l->n);
        return 0;
}

static cJSON *list_json(struct fleet *fl, const char *verb, const char *selector, int code) {
        cJSON *j = cJSON_CreateObject();

        cJSON_AddNumberToObject(j, "schemaVersion", SUMMARY_SCHEMA_VERSION);
        cJSON_AddStringToObject(j, "kind", "List");
        cJSON_AddStringToObject(j, "verb", verb);
        cJSON_AddStringToObject(j, "selector", selector);
        if (fl)
                cJSON_AddNumberToObject(j, "maxParallel", fl->max_parallel);
        cJSON_AddArrayToObject(j, "items");
        cJSON_AddNumberToObject(j, "exitCode", code);
        return j;
}

static void print_json(cJSON *j) {
        _cleanup_free_ char *out = j ? cJSON_Print(j) : NULL;

        if (out)
                puts(out);
        else
                log_oom();
}

/* drain / uncordon of every node of the fleet, max_parallel at once. A node that
 * fails does not stop the others (as kubectl drain goes on with the next node);
 * after SIGINT/SIGTERM no node is started. Each node's end is reported as it comes;
 * returns the worst exit code. */
static int run_fleet(struct fleet *fl, const char *verb, enum engine_goal goal, bool per_node) {
        size_t next = 0, running = 0;
        int worst = EXIT_DONE;

        while (next < fl->n || running > 0) {
                while (!fl->interrupted && running < fl->max_parallel && next < fl->n) {
                        struct runner *rn = &fl->rn[next++];

                        rn->cmd_t0 = timesrc_now(fl->app->ts);
                        if (fl->n > 1 && rn->a->profile.n_drivers == 1)
                                log_info("%s of node %s, DRA driver %s: starting (%zu of %zu)", verb,
                                         rn->node, rn->a->profile.drivers[0], next, fl->n);
                        else if (fl->n > 1)
                                log_info("%s of node %s: starting (%zu of %zu)", verb, rn->node, next,
                                         fl->n);
                        runner_start(rn, goal, rn->a->profile.timeout_usec);
                        running++;
                }
                if (running == 0)
                        break;
                {
                        bool any = false;

                        for (size_t i = 0; i < fl->n; i++)
                                any = any ||
                                      (fl->rn[i].started && !fl->rn[i].reported && fl->rn[i].finished);
                        fl->any_finished = any;
                }
                app_run_until(fl->app, &fl->any_finished);
                for (size_t i = 0; i < fl->n; i++) {
                        struct runner *rn = &fl->rn[i];
                        int r;

                        if (!rn->started || rn->reported || !rn->finished)
                                continue;
                        r = report_result(rn, verb, runner_stop(rn));
                        if (goal == ENGINE_GOAL_UNCORDON && r == -EPERM)
                                r = -EEXIST; /* not a refusal by a blocker: exit 1 */
                        rn->reported = true;
                        rn->code = exit_code_for(r);
                        if (rn->fmt == OUTPUT_JSON) {
                                /* A refusal reads "refused" whatever its exit code (4 for a blocker, 1 else). */
                                rn->json = summary_json(rn, verb,
                                                        r == -EEXIST && rn->result == -EPERM ? -EPERM : r,
                                                        per_node);
                                cJSON_AddNumberToObject(rn->json, "exitCode", rn->code);
                        }
                        worst = nodeset_worst_exit(worst, rn->code);
                        engine_free(rn->engine); /* its node view: the next node's memory */
                        rn->engine = NULL;
                        rn->summary.plan = NULL;
                        running--;
                        if (fl->tty)
                                fleet_draw(fl);
                }
        }
        /* Interrupted before their turn: not started, nothing changed on them. */
        for (size_t i = 0; i < fl->n; i++) {
                struct runner *rn = &fl->rn[i];

                if (rn->started)
                        continue;
                log_error("%s of node %s: not started (interrupted)", verb, rn->node);
                rn->code = EXIT_ERROR;
                worst = nodeset_worst_exit(worst, rn->code);
                if (rn->fmt == OUTPUT_JSON) {
                        rn->json = cJSON_CreateObject();
                        cJSON_AddStringToObject(rn->json, "node", rn->node);
                        cJSON_AddStringToObject(rn->json, "verb", verb);
                        cJSON_AddStringToObject(rn->json, "result", "not-started");
                        cJSON_AddBoolToObject(rn->json, "changed", false);
                        cJSON_AddNumberToObject(rn->json, "exitCode", rn->code);
                }
        }
        return worst;
}

static void runner_done(struct runner *rn) {
        engine_free(rn->engine);
        announcer_free(rn->announcer);
        free(rn->message);
        free(rn->last_line);
        free(rn->progress_message);
        free(rn->needs_flag);
        cJSON_Delete(rn->ns_terminating);
        cJSON_Delete(rn->json);
        free(rn->block);
        free(rn->rerun);
        free(rn->stop_key);
}

/* --driver without --driver-stop: each run's label KEY from its driver's DaemonSet
 * (driverkey.h), before anything is changed; a run with no single key refuses the
 * whole command (exit 4), saying why. EXIT_DONE or the exit code. */
static int resolve_stop_keys(struct fleet *fl, enum output_format fmt) {
        struct snapshot s = {};
        int worst = EXIT_DONE;

        for (size_t i = 0; i < fl->n; i++) {
                struct runner *rn = &fl->rn[i];
                _cleanup_free_ char *from = NULL, *why = NULL;
                int r, code;

                if (!s.node_name || !streq(s.node_name, rn->node)) {
                        snapshot_done(&s);
                        s = (struct snapshot){ .app = fl->app, .node_name = rn->node };
                        r = snapshot_start(&s);
                        if (r >= 0)
                                app_run_until(fl->app, &s.done);
                        else
                                s.error = r;
                        if (s.error < 0) {
                                if (s.error == -ENOENT && !s.node)
                                        log_error("node \"%s\" not found", rn->node);
                                else
                                        log_error_errno(s.error, "%s", strna(s.error_what));
                                snapshot_done(&s);
                                return EXIT_ERROR;
                        }
                }
                r = driver_key_resolve(fl->app, &s, rn->a, &rn->stop_key, &from, &why);
                if (r >= 0) {
                        rn->a->profile.stop_arg = rn->stop_key;
                        log_info("DRA driver %s of node %s: stopped by label %s (the nodeSelector of %s)",
                                 rn->a->profile.drivers[0], rn->node, rn->stop_key, from);
                        continue;
                }
                code = r == -EPERM ? EXIT_REFUSED : EXIT_ERROR;
                if (r == -ENOMEM)
                        log_oom();
                else
                        log_error("%s: refused, nothing was changed: %s", rn->a->verb, strna(why));
                if (fmt == OUTPUT_JSON && worst == EXIT_DONE) {
                        _cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();

                        cJSON_AddNumberToObject(j, "schemaVersion", SUMMARY_SCHEMA_VERSION);
                        cJSON_AddStringToObject(j, "node", rn->node);
                        cJSON_AddStringToObject(j, "verb", rn->a->verb);
                        cJSON_AddStringToObject(j, "driver", rn->a->profile.drivers[0]);
                        cJSON_AddStringToObject(j, "result", "refused");
                        cJSON_AddBoolToObject(j, "changed", false);
                        cJSON_AddStringToObject(j, "message", strna(why));
                        cJSON_AddNumberToObject(j, "exitCode", code);
                        print_json(j);
                }
                worst = nodeset_worst_exit(worst, code);
        }
        snapshot_done(&s);
        return worst;
}

/* maintain NODE --driver A --driver B -- CMD: every driver's drain at once, CMD once
 * all are out of service, then every restore; a driver whose drain failed leaves the
 * others drained and CMD not run (as one node's). */
static int run_maintain_fleet(struct fleet *fl, char **cmd, bool restore_on_failure,
                              enum output_format fmt) {
        int code, status;

        code = run_fleet(fl, "drain", ENGINE_GOAL_DRAIN, true);
        if (code == EXIT_DONE) {
                log_info("running: %s", cmd[0]);
                status = run_command(fl->app, cmd);
                for (size_t i = 0; i < fl->n; i++)
                        fl->rn[i].cmd_status = status;
                if (status != 0)
                        log_error("command \"%s\" exited with status %d%s", cmd[0], status,
                                  restore_on_failure ? "; restoring the drivers (--restore-on-failure)"
                                                     : "; the drivers stay out of service (use "
                                                       "--restore-on-failure to restore them anyway)");
                else
                        log_info("command \"%s\" succeeded", cmd[0]);
                if (status == 0 || restore_on_failure) {
                        for (size_t i = 0; i < fl->n; i++) {
                                cJSON_Delete(fl->rn[i].json);
                                fl->rn[i].json = NULL;
                                fl->rn[i].started = fl->rn[i].reported = false;
                        }
                        code = run_fleet(fl, "uncordon", ENGINE_GOAL_UNCORDON, true);
                }
                if (code == EXIT_DONE && status != 0)
                        code = EXIT_ERROR;
        }
        if (fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *j = list_json(fl, "maintain", NULL, code);
                cJSON *items = cJSON_GetObjectItem(j, "items");

                for (size_t i = 0; i < fl->n; i++)
                        if (fl->rn[i].json)
                                cJSON_AddItemToArray(items, TAKE_PTR(fl->rn[i].json));
                add_client_figures(j, fl->app, fl->metrics);
                print_json(j);
        }
        return code;
}

static int verb_drainlike(int argc, char **argv, struct global_flags *g) {
        /* uncordon takes neither --out-of-service flag (the options end before them) */
        static const struct option drainlike_options[] = {
                { "selector", required_argument, NULL, OPT_NODE_SELECTOR },
                { "max-parallel", required_argument, NULL, OPT_FLEET_MAX_PARALLEL },
                { "metrics-in-output", no_argument, NULL, OPT_METRICS_IN_OUTPUT },
                {},
        };
        static const struct option drainlike_oos_options[] = {
                { "selector", required_argument, NULL, OPT_NODE_SELECTOR },
                { "max-parallel", required_argument, NULL, OPT_FLEET_MAX_PARALLEL },
                { "metrics-in-output", no_argument, NULL, OPT_METRICS_IN_OUTPUT },
                { "out-of-service", no_argument, NULL, OPT_OUT_OF_SERVICE },
                { "out-of-service-after", required_argument, NULL, OPT_OUT_OF_SERVICE_AFTER },
                {},
        };
        struct drainlike_opts o = { .oos = { .after_usec = OUT_OF_SERVICE_AFTER_DEFAULT } };
        bool takes_oos = !streq(argv[0], "uncordon");
        struct drain_args a = {};
        struct config_argv c;
        struct app app;
        struct fleet fl = {};
        struct node_list nl = {};
        const char *verb = argv[0], *node = NULL;
        const char *skip[64];
        bool is_plan = streq(verb, "plan"), is_maintain = streq(verb, "maintain");
        struct drain_args *runs = NULL; /* each runner's: a, or a copy scoped to one driver */
        size_t n_runs;
        char **cmd = NULL;
        int r, code;

        /* --config FILE: the file serve reads (its own keys and the flags of other verbs
         * skipped), flags win. */
        drain_config_skip(verb, skip, ELEMENTSOF(skip));
        if (config_argv_build(argc, argv, skip, &c) < 0)
                return EXIT_USAGE;
        r = parse_drain_args(c.argc, c.argv, g, &a, takes_oos ? drainlike_oos_options : drainlike_options,
                             on_drainlike_opt, &o);
        if (r > 0 && o.oos.after_given && !o.oos.on) {
                log_error("--out-of-service-after: only with --out-of-service (never implied)");
                r = -EINVAL;
        } else if (r > 0 && o.oos.on && !argv_has_flag(argc, argv, "--out-of-service")) {
                /* The one path where claims are released without the kubelet: asked for on
                 * the command line of each run, never by a --config file. */
                log_error("--out-of-service must be given on the command line, not in --config");
                r = -EINVAL;
        }
        if (r <= 0) {
                drain_args_done(&a);
                config_argv_done(&c);
                return r < 0 ? EXIT_USAGE : EXIT_DONE;
        }
        /* What each verb takes, as its help says (decided as kubectl's verbs do: drain,
         * uncordon take -l; maintain runs one command for one node). */
        r = 0;
        if (o.selector && is_maintain)
                r = log_error_errno(EINVAL, "drainer maintain: runs CMD for one NODE; -l/--selector is for "
                                            "drain, uncordon and plan");
        else if (o.max_parallel && (is_plan || is_maintain || a.dry_run))
                r = log_error_errno(EINVAL, "drainer %s: --max-parallel is for drain and uncordon with -l",
                                    verb);
        else if (a.profile.force_drain && a.profile.n_drivers == 0)
                r = log_error_errno(EINVAL, "drainer maintain: --force-drain is for --driver (a node drain "
                                            "always drains)");
        else if (o.max_parallel && !o.selector)
                r = log_error_errno(EINVAL,
                                    "drainer %s: --max-parallel needs -l/--selector (the nodes to run "
                                    "at once)",
                                    verb);
        else if (o.metrics && (is_plan || a.dry_run))
                r = log_error_errno(EINVAL,
                                    "drainer %s: --metrics-in-output is for the summaries of drain, "
                                    "uncordon and maintain",
                                    verb);
        else if (is_maintain) {
                /* maintain NODE -- CMD [ARGS...]: getopt stops at "--", leaving NODE first. */
                if (c.argc - optind < 2)
                        r = log_error_errno(EINVAL, "drainer maintain: expected NODE -- CMD [ARGS...]; see "
                                                    "'drainer maintain --help'");
                else {
                        node = c.argv[optind];
                        cmd = &c.argv[optind + 1];
                }
        } else if (o.selector && c.argc - optind > 0)
                r = log_error_errno(EINVAL, "drainer %s: give NODE or -l/--selector, not both", verb);
        else if (!o.selector && c.argc - optind != 1)
                r = log_error_errno(EINVAL,
                                    "drainer %s: expected exactly one NODE argument (or -l SELECTOR); "
                                    "see 'drainer %s --help'",
                                    verb, verb);
        else if (!o.selector)
                node = c.argv[optind];
        if (r == 0 && o.selector) {
                /* validated before any request: bad usage is exit 2 with nothing sent */
                _cleanup_free_ char *path = NULL, *err = NULL;

                r = nodeset_list_path(o.selector, &path, &err);
                if (r == -ENOMEM)
                        r = log_oom();
                else if (r < 0)
                        log_error("-l/--selector: %s", strna(err));
        }
        if (r < 0) {
                drain_args_done(&a);
                config_argv_done(&c);
                return r == -ENOMEM ? EXIT_ERROR : EXIT_USAGE;
        }

        if (app_init(&app, g) < 0) {
                app_done(&app);
                drain_args_done(&a);
                config_argv_done(&c);
                return EXIT_ERROR;
        }
        if (o.selector) {
                r = list_nodes(&app, o.selector, &nl);
                if (r < 0) {
                        code = EXIT_ERROR;
                        goto out;
                }
                if (nl.n == 0) {
                        /* kubectl says "No resources found"; a drain of nothing is an error here:
                         * the selector is most likely not the one meant */
                        log_error("No resources found: no node matches the label selector \"%s\" (nothing "
                                  "was changed)",
                                  o.selector);
                        code = EXIT_ERROR;
                        if (g->output == OUTPUT_JSON) {
                                _cleanup_(cJSON_Deletep) cJSON *j = list_json(NULL, verb, o.selector, code);

                                cJSON_AddStringToObject(j, "message", "no node matches the label selector");
                                print_json(j);
                        }
                        goto out;
                }
                {
                        char names[512] = "";
                        size_t len = 0;

                        for (size_t i = 0; i < nl.n && len < sizeof(names) - 1; i++)
                                len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
                                                        i ? " " : "", nl.names[i]);
                        log_info("%s: %zu node%s match%s \"%s\": %s%s", verb, nl.n, nl.n == 1 ? "" : "s",
                                 nl.n == 1 ? "es" : "", o.selector, names,
                                 len >= sizeof(names) - 1 ? " ..." : "");
                }
        }
        if (is_plan || a.dry_run) {
                /* a list: the nodes of -l, or (NODE) the plans of several --driver */
                _cleanup_(cJSON_Deletep) cJSON *j =
                        (o.selector || a.profile.n_drivers > 1) && g->output == OUTPUT_JSON
                                ? list_json(NULL, verb, o.selector, 0)
                                : NULL;
                cJSON *items = j ? cJSON_GetObjectItem(j, "items") : NULL;

                if (!o.selector) {
                        code = exit_code_for(run_plan(&app, node, &a, &o.oos, g->output, items));
                        if (j) {
                                cJSON_SetNumberValue(cJSON_GetObjectItem(j, "exitCode"), code);
                                print_json(j);
                        }
                        goto out;
                }
                code = EXIT_DONE;
                for (size_t i = 0; i < nl.n; i++) {
                        int n0 = items ? cJSON_GetArraySize(items) : 0, c1;

                        if (g->output != OUTPUT_JSON && i > 0)
                                putchar('\n');
                        c1 = exit_code_for(run_plan(&app, nl.names[i], &a, &o.oos, g->output, items));
                        code = nodeset_worst_exit(code, c1);
                        if (items && cJSON_GetArraySize(items) == n0) {
                                cJSON *e = cJSON_CreateObject();

                                cJSON_AddStringToObject(e, "node", nl.names[i]);
                                cJSON_AddStringToObject(e, "result", "error");
                                cJSON_AddItemToArray(items, e);
                        }
                        if (items)
                                cJSON_AddNumberToObject(
                                        cJSON_GetArrayItem(items, cJSON_GetArraySize(items) - 1), "exitCode",
                                        c1);
                }
                if (j) {
                        cJSON_SetNumberValue(cJSON_GetObjectItem(j, "exitCode"), code);
                        print_json(j);
                }
                goto out;
        }

        /* --driver: a run per node and driver, each its own state keys and stop; the
         * drivers of one node run together */
        n_runs = a.profile.n_drivers > 1 ? a.profile.n_drivers : 1;
        runs = calloc((o.selector ? nl.n : 1) * n_runs, sizeof(*runs));
        if (!runs) {
                code = EXIT_ERROR;
                log_oom();
                goto out;
        }
        fl = (struct fleet){ .app = &app,
                             .n = (o.selector ? nl.n : 1) * n_runs,
                             .max_parallel = (o.max_parallel ? o.max_parallel : 1) * (unsigned)n_runs,
                             .tty = isatty(STDERR_FILENO),
                             .trail = g->output != OUTPUT_JSON && !isatty(STDOUT_FILENO),
                             .metrics = o.metrics };
        fl.rn = calloc(fl.n, sizeof(*fl.rn));
        if (!fl.rn) {
                log_oom();
                code = EXIT_ERROR;
                goto out;
        }
        for (size_t i = 0; i < fl.n; i++) {
                if (a.profile.n_drivers > 1)
                        drain_args_for_driver(&a, i % n_runs, &runs[i]);
                else
                        runs[i] = a;
                fl.rn[i] = (struct runner){ .fl = &fl,
                                            .app = &app,
                                            .a = &runs[i],
                                            .oos = &o.oos,
                                            .fmt = g->output,
                                            .node = o.selector ? nl.names[i / n_runs] : node,
                                            .tty = fl.tty,
                                            .cmd_t0 = timesrc_now(app.ts),
                                            .cmd_status = -1,
                                            .argc = argc,
                                            .argv = argv };
        }
        if (a.stop_from_daemonset && (r = resolve_stop_keys(&fl, g->output)) != EXIT_DONE) {
                code = r;
                goto out_runs;
        }
        uv_signal_init(&app.loop, &fl.sigint);
        uv_signal_init(&app.loop, &fl.sigterm);
        fl.sigint.data = fl.sigterm.data = &fl;
        uv_signal_start(&fl.sigint, on_fleet_signal, SIGINT);
        uv_signal_start(&fl.sigterm, on_fleet_signal, SIGTERM);
        if (!fl.tty)
                log_set_timestamps(true);
        /* The system bus: needed for --driver-stop systemd:UNIT; elsewhere (no bus, e.g. in
         * a container) simply absent. One for every node. */
        r = sysbus_open(&app.loop, &fl.rn[0].bus);
        if (r < 0) {
                if (a.profile.stop->needs_units) {
                        log_error_errno(r, "--driver-stop systemd: cannot connect to the system bus: %m");
                        code = EXIT_ERROR;
                        goto out_signals;
                }
                fl.rn[0].bus = NULL;
        }
        for (size_t i = 1; i < fl.n; i++)
                fl.rn[i].bus = fl.rn[0].bus;
        if (o.selector && !is_maintain) {
                r = cluster_view_new(
                        app.client, app.ts,
                        &(const struct cluster_view_options){ .linger_usec = FLEET_LINGER_USEC },
                        &fl.cluster);
                if (r >= 0)
                        r = cluster_view_start(fl.cluster);
                if (r < 0) {
                        log_error_errno(r, "Cannot start watching the nodes: %m");
                        code = EXIT_ERROR;
                        goto out_signals;
                }
        }

        if (!is_maintain) {
                code = run_fleet(&fl, verb, streq(verb, "drain") ? ENGINE_GOAL_DRAIN : ENGINE_GOAL_UNCORDON,
                                 o.selector || fl.n > 1);
                /* one summary, or a List: the nodes of -l, or the drivers of several --driver */
                if (g->output == OUTPUT_JSON && fl.n == 1 && !o.selector)
                        print_json(fl.rn[0].json);
                else if (g->output == OUTPUT_JSON) {
                        _cleanup_(cJSON_Deletep) cJSON *j = list_json(&fl, verb, o.selector, code);
                        cJSON *items = cJSON_GetObjectItem(j, "items");

                        for (size_t i = 0; i < fl.n; i++)
                                if (fl.rn[i].json)
                                        cJSON_AddItemToArray(items, TAKE_PTR(fl.rn[i].json));
                        add_client_figures(j, &app, fl.metrics);
                        print_json(j);
                }
        } else if (fl.n > 1) {
                code = run_maintain_fleet(&fl, cmd, a.profile.restore_on_failure, g->output);
        } else {
                struct runner *rn = &fl.rn[0];
                struct seamless_answer seam = {};
                int status;

                /* A driver that upgrades seamlessly needs no drain */
                if (a.profile.n_drivers > 0 && !a.profile.force_drain) {
                        r = node_seamless(&app, node, &a, &seam);
                        if (r < 0) {
                                code = EXIT_ERROR;
                                goto out_signals;
                        }
                }
                if (seam.seamless) {
                        log_info("DRA driver %s upgrades seamlessly (%s): running %s without draining "
                                 "anything (--force-drain drains first)",
                                 a.profile.drivers[0], seam.why, cmd[0]);
                        status = rn->cmd_status = run_command(&app, cmd);
                        if (status != 0)
                                log_error("command \"%s\" exited with status %d", cmd[0], status);
                        else
                                log_info("command \"%s\" succeeded", cmd[0]);
                        code = status == 0 ? EXIT_DONE : EXIT_ERROR;
                        if (g->output == OUTPUT_JSON) {
                                _cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
                                cJSON *sj = j ? cJSON_AddObjectToObject(j, "seamlessUpgrade") : NULL;

                                if (sj) {
                                        cJSON_AddNumberToObject(j, "schemaVersion", SUMMARY_SCHEMA_VERSION);
                                        cJSON_AddStringToObject(j, "node", node);
                                        cJSON_AddStringToObject(j, "verb", verb);
                                        cJSON_AddStringToObject(j, "result", status == 0 ? "done" : "error");
                                        cJSON_AddBoolToObject(j, "changed", false);
                                        cJSON_AddNumberToObject(j, "podsEvicted", 0);
                                        cJSON_AddNumberToObject(j, "commandExitStatus", status);
                                        cJSON_AddBoolToObject(sj, "seamless", true);
                                        cJSON_AddStringToObject(sj, "daemonset", seam.daemonset);
                                        cJSON_AddStringToObject(sj, "reason", seam.why);
                                        cJSON_AddNumberToObject(j, "exitCode", code);
                                }
                                print_json(j);
                        }
                        goto out_signals;
                }
                if (a.profile.n_drivers > 0 && !a.profile.force_drain)
                        log_info("DRA driver %s: no seamless upgrade (%s): draining its claims first",
                                 a.profile.drivers[0], seam.why);
                r = run_engine(rn, ENGINE_GOAL_DRAIN, a.profile.timeout_usec);
                r = report_result(rn, "drain", r);
                if (r == 0) {
                        engine_free(rn->engine);
                        rn->engine = NULL;
                        log_info("running: %s", cmd[0]);
                        status = rn->cmd_status = run_command(&app, cmd);
                        if (status != 0)
                                log_error("command \"%s\" exited with status %d%s", cmd[0], status,
                                          a.profile.restore_on_failure
                                                  ? "; restoring the node (--restore-on-failure)"
                                                  : "; the node stays drained (use "
                                                    "--restore-on-failure to restore it anyway)");
                        else
                                log_info("command \"%s\" succeeded", cmd[0]);
                        if (status == 0 || a.profile.restore_on_failure) {
                                r = run_engine(rn, ENGINE_GOAL_UNCORDON, a.profile.timeout_usec);
                                r = report_result(rn, "uncordon", r);
                                if (r == -EPERM)
                                        r = -EEXIST;
                        }
                        if (r == 0 && status != 0)
                                r = -ECHILD;
                }
                code = exit_code_for(r);
                if (g->output == OUTPUT_JSON) {
                        /* A refusal reads "refused" whatever its exit code (4 for a blocker, 1 else). */
                        _cleanup_(cJSON_Deletep) cJSON *j = summary_json(
                                rn, verb, r == -EEXIST && rn->result == -EPERM ? -EPERM : r, false);

                        cJSON_AddNumberToObject(j, "exitCode", code);
                        print_json(j);
                }
        }
out_signals:
        uv_close((uv_handle_t *)&fl.sigint, NULL);
        uv_close((uv_handle_t *)&fl.sigterm, NULL);
        for (size_t i = 0; i < fl.n; i++)
                engine_free(TAKE_PTR(fl.rn[i].engine));
        if (fl.cluster) {
                bool closed = false;

                /* the engines' node views are closed (runner_stop): the shared informers go */
                cluster_view_close(fl.cluster, on_bus_closed, &closed);
                while (!closed && uv_run(&app.loop, UV_RUN_ONCE) != 0)
                        ;
        }
        if (fl.rn[0].bus) {
                bool closed = false;

                sysbus_close(fl.rn[0].bus, on_bus_closed, &closed);
                while (!closed && uv_run(&app.loop, UV_RUN_ONCE) != 0)
                        ;
        }
out_runs:
        for (size_t i = 0; i < fl.n; i++)
                runner_done(&fl.rn[i]);
        free(fl.rn);
out:
        free(runs);
        nodeset_free(nl.names, nl.n);
        free(nl.message);
        app_done(&app);
        drain_args_done(&a);
        config_argv_done(&c);
        return code;
}

int verb_plan(int argc, char **argv, struct global_flags *g) {
        return verb_drainlike(argc, argv, g);
}

int verb_drain(int argc, char **argv, struct global_flags *g) {
        return verb_drainlike(argc, argv, g);
}

int verb_uncordon(int argc, char **argv, struct global_flags *g) {
        return verb_drainlike(argc, argv, g);
}

int verb_maintain(int argc, char **argv, struct global_flags *g) {
        return verb_drainlike(argc, argv, g);
}
