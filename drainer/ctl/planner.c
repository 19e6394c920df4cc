/* The planner (planner.h): one node's plan read step by step from the loop (snapshot,
 * DeviceTaintRule discovery, label key, health probes, seamless check), and kubectl's
 * server dry run of it. Owns its snapshot, its reads and the dry run's answers; writes
 * nothing that persists, prints nothing. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/driverkey.h"
#include "drainer/ctl/planner.h"
#include "drainer/dra/health.h"
#include "drainer/dra/snapshot.h"
#include "drainer/dra/taintrule.h"
#include "drainer/drain/state.h"
#include "drainer/kube/client.h"
#include "drainer/kube/collect.h"
#include "drainer/kube/kstatus.h"

struct eviction_call {
        struct planner *p;
        struct kube_call *call;
        struct planner_answer *a;
};

struct planner {
        struct kube_client *client;  /* borrowed */
        struct transport *transport; /* borrowed */
        struct timesrc *ts;          /* borrowed */
        struct planner_options o;    /* borrowed strings and profile */
        const struct planner_callbacks *cb;
        void *userdata;

        struct planner_result res;
        struct node_snapshot *snap; /* owned, until closed */
        bool snap_reading;
        struct drain_scope_view sv;
        bool sv_ready, plan_ready;
        const char *conflict;
        char *dev_conflict; /* --device: drain_devices_conflict's answer, owned */
        char *driver_devs;  /* --driver: the device drains of that driver on the node, owned */
        struct taint_rule_discovery *disc;
        struct taint_rule_api rule_api;
        /* --device's preview: one None rule at a time (prev_at), created, read until the
         * controller answers (prev_polls), deleted */
        size_t prev_at;
        unsigned prev_polls;
        char *prev_name, *prev_uid, *prev_note;
        struct kube_call *prev_call;
        struct dtimer prev_timer;
        bool prev_timer_ready;
        struct driver_key_read *key_read;
        char *key, *key_from, *key_why;
        size_t group_at;          /* the next claim of the plan whose PodGroup's pods to read */
        struct kube_collect list; /* the PodGroups' pods, then the NodeClaims */
        size_t probe_at;          /* the next pod of the plan to probe */
        struct health_probe *probe;
        struct seamless_check *seam_check;
        struct kube_call *cordon_call;
        struct eviction_call *calls; /* one per pod of the plan */
        size_t calls_left;

        unsigned pending; /* callbacks still to come (reads, cancels, the snapshot's close) */
        bool closing;
        void (*closed)(void *userdata);
        void *closed_userdata;
};

static void step_key(struct planner *p);
static void step_build(struct planner *p);
static void step_groups(struct planner *p);
static void step_peer(struct planner *p);
static void step_probe(struct planner *p);
static void step_seamless(struct planner *p);
static void step_preview(struct planner *p);

static void planner_free(struct planner *p) {
        if (p->sv_ready)
                drain_scope_view_done(&p->sv);
        /* (before plan_done(), which forgets how many pods there were) */
        for (size_t i = 0; p->res.evicts && i < p->res.plan.n_pods; i++)
                free(p->res.evicts[i].message);
        if (p->plan_ready)
                plan_done(&p->res.plan);
        free(p->res.evicts);
        free(p->calls);
        free(p->res.cordon.message);
        free(p->key);
        free(p->key_from);
        free(p->key_why);
        free(p->dev_conflict);
        free(p->driver_devs);
        free(p->prev_name);
        free(p->prev_uid);
        free(p->prev_note);
        if (p->prev_timer_ready)
                dtimer_done(&p->prev_timer);
        free(p);
}

static void maybe_closed(struct planner *p) {
        if (p->closing && p->pending == 0) {
                if (p->closed)
                        p->closed(p->closed_userdata);
                planner_free(p);
        }
}

/* A callback came: false if the planner is closing (the callback then does nothing more). */
static bool op_ended(struct planner *p) {
        p->pending--;
        if (!p->closing)
                return true;
        maybe_closed(p);
        return false;
}

static void ready(struct planner *p, int error, const char *fmt, ...) _printf_(3, 4);
static void ready(struct planner *p, int error, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;

        if (fmt) {
                va_start(ap, fmt);
                if (vasprintf(&m, fmt, ap) < 0)
                        m = NULL;
                va_end(ap);
        }
        p->cb->on_ready(p, error, m, p->userdata);
}

static void on_discovered(int error, const struct taint_rule_api *api, void *userdata) {
        struct planner *p = userdata;

        p->disc = NULL;
        if (!op_ended(p))
                return;
        if (error < 0)
                return ready(p, error, "cannot ask the API server whether it serves DeviceTaintRules: %s",
                             strerror(-error));
        if (!api->served && p->o.profile->n_devices > 0)
                return ready(
                        p, -EOPNOTSUPP,
                        "the API server serves no DeviceTaintRule (resource.k8s.io v1, or v1beta2 with "
                        "the DRADeviceTaintRules gate on): a device drain (--device) cannot run on this "
                        "cluster; there is no fallback to a cordon");
        p->res.po.isolation = api->served ? PLAN_ISOLATE_TAINT_RULE : PLAN_ISOLATE_CORDON_FALLBACK;
        p->rule_api = *api;
        p->res.po.taint_rule_api = api->served ? p->rule_api.api_version : NULL;
        step_key(p);
}

static void on_snapshot(struct node_snapshot *s, int error, const char *what, void *userdata) {
        struct planner *p = userdata;
        const struct drain_profile *pr = p->o.profile;
        const char *drv = pr->n_drivers > 0 ? pr->drivers[0] : pr->n_devices > 0 ? pr->device_scope : NULL;
        int r;

        p->snap_reading = false;
        if (!op_ended(p))
                return;
        if (error < 0)
                return ready(p, error, "%s", strna(what));
        p->res.in = node_snapshot_input(s);
        /* The Node as the drain's scope sees it (--driver: only that driver's keys). */
        if (drain_scope_view_init(&p->sv, p->res.in->node, drv) < 0)
                return ready(p, -ENOMEM, NULL);
        p->sv_ready = true;
        p->res.node = &p->sv.node;
        p->conflict = pr->n_devices > 0 ? NULL : drain_scope_conflict(p->res.in->node, drv);
        if (pr->n_devices > 0)
                p->dev_conflict = drain_devices_conflict(p->res.in->node, drv, pr->devices, pr->n_devices);
        /* a driver drain holds all of the driver's devices: a device drain of one of them
         * refuses it (engine-drain.c), which the plan names before the drain is asked */
        if (pr->n_drivers > 0 && !p->conflict)
                p->driver_devs = drain_devices_of_driver(p->res.in->node, pr->drivers[0]);
        if (pr->n_drivers == 0 && pr->n_devices == 0)
                return step_key(p);
        /* --driver: where the API server serves DeviceTaintRules (the engine asks the same
         * at its start) */
        r = taint_rule_discover(p->client, on_discovered, p, &p->disc);
        if (r < 0)
                return ready(p, r, "Cannot start the API requests: %s", strerror(-r));
        p->pending++;
}

static void on_key(int error, const char *key, const char *from, const char *why, void *userdata) {
        struct planner *p = userdata;

        p->key_read = NULL;
        if (!op_ended(p))
                return;
        if (error < 0 && error != -EPERM)
                return error == -ENOMEM ? ready(p, error, NULL) : ready(p, error, "%s", strna(why));
        if ((key && !(p->key = strdup(key))) || (from && !(p->key_from = strdup(from))) ||
            (why && !(p->key_why = strdup(why))))
                return ready(p, -ENOMEM, NULL);
        p->res.po.driver_stop_arg = p->key;
        p->res.po.driver_stop_arg_from = p->key_from;
        step_build(p);
}

/* --driver without --driver-stop: label, KEY from the driver's DaemonSet. */
static void step_key(struct planner *p) {
        int r;

        if (!p->o.key_from_daemonset)
                return step_build(p);
        r = driver_key_read_start(p->client, p->ts, p->res.in, p->o.profile, on_key, p, &p->key_read);
        if (r == -ENOMEM)
                return ready(p, r, NULL);
        if (r < 0)
                return ready(p, r, "Cannot start the API requests: %s", strerror(-r));
        p->pending++;
}

static void step_build(struct planner *p) {
        const struct node_input *in = p->res.in;
        const char *node = p->o.node;
        int r;

        {
                /* The same refusal as drain's: a plan over nonsense state would mislead. */
                _cleanup_(drain_state_done) struct drain_state st = {};
                _cleanup_free_ char *err = NULL;

                r = drain_state_parse(&p->sv.node, &st, &err);
                if (r < 0)
                        return ready(p, r, "%s", err ? err : "malformed drainer annotations");
        }
        if (in->dra_off)
                p->res.po.n_driver_selectors = 0; /* no DRA API: no drivers (as the drain's, engine.c) */
        r = plan_build(&p->sv.node, in->pods, in->n_pods, in->claims, in->n_claims, in->slices, in->n_slices,
                       in->pdbs, in->n_pdbs, &p->res.po, &p->res.plan);
        if (r < 0)
                return ready(p, -ENOMEM, NULL);
        p->plan_ready = true;
        /* A node drain and a driver drain of the same node exclude each other (engine.c). */
        if (p->conflict) {
                char m[512];

                if (drain_scope_is_device(p->conflict))
                        snprintf(
                                m, sizeof(m),
                                "a device of node %s is out of service (a device drain, %s" DRAINER_ANN_STATE
                                ".%s): a node or driver drain waits until it is back (drainer uncordon %s "
                                "--device ...)",
                                node, "", p->conflict, node);
                else if (*p->conflict)
                        snprintf(m, sizeof(m),
                                 "DRA driver %s of node %s is out of service (a driver drain): a node drain "
                                 "waits until it is back (drainer uncordon %s --driver %s)",
                                 p->conflict, node, node, p->conflict);
                else
                        snprintf(m, sizeof(m),
                                 "node %s is being drained: a drain of DRA driver %s waits until that drain "
                                 "is "
                                 "undone (drainer uncordon %s)",
                                 node, p->o.profile->drivers[0], node);
                plan_add_blocker(&p->res.plan, BLOCKER_DRAIN_EXCLUSIVE, NULL, m);
        }
        if (p->driver_devs) {
                _cleanup_free_ char *m = NULL;

                if (asprintf(&m,
                             "device %s of node %s is out of service (a device drain): a drain of DRA "
                             "driver %s waits until it is back (drainer uncordon %s --device ...)",
                             p->driver_devs, node, p->o.profile->drivers[0], node) < 0)
                        return ready(p, -ENOMEM, NULL);
                plan_add_blocker(&p->res.plan, BLOCKER_DRAIN_EXCLUSIVE, NULL, m);
        }
        if (p->o.profile->n_devices > 0) {
                /* the engine's refusals of a device drain (engine-drain.c) */
                const struct drain_profile *pr = p->o.profile;
                char m[768];

                if (p->dev_conflict) {
                        snprintf(m, sizeof(m),
                                 "%s of node %s is out of service (%s): a drain of these devices waits "
                                 "until it is back",
                                 streq(p->dev_conflict, "node") ? "the whole node" : p->dev_conflict, node,
                                 strchr(p->dev_conflict, '/') ? "another device drain"
                                                              : "a node or driver drain");
                        plan_add_blocker(&p->res.plan, BLOCKER_DRAIN_EXCLUSIVE, NULL, m);
                }
                if (drain_devices_on_node(pr->devices, pr->n_devices, in->slices, in->n_slices, node, m,
                                          sizeof(m)) < 0)
                        plan_add_blocker(&p->res.plan, BLOCKER_DEVICE_UNKNOWN, NULL, m);
        }
        if (p->key_why)
                plan_add_blocker(&p->res.plan, BLOCKER_DRIVER_STOP_KEY, NULL, p->key_why);
        step_groups(p);
}

/* ---- a PodGroup's claim: which pods use it, on which nodes ----
 * The node's own pods tell only this node's share; the claim's namespace is listed
 * (from the watch cache) once, for every PodGroup claim of that namespace. A failed
 * read is a note, never the plan's failure. */

static int group_pods_record(struct plan_claim *pc, const cJSON *items) {
        const cJSON *item;
        int r;

        pc->group_pods_read = true;
        cJSON_ArrayForEach(item, items) {
                _cleanup_(pod_rec_freep) struct pod_rec *pod = NULL;

                if (pod_rec_from_json(item, &pod) < 0 || !pod_uses_claim(pod, pc->claim))
                        continue;
                r = plan_claim_add_group_pod(pc, pod->name, pod->node_name,
                                             pod->phase == POD_SUCCEEDED || pod->phase == POD_FAILED);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void on_group_pods(struct kube_collect *c, void *userdata) {
        struct planner *p = userdata;
        struct plan *pl = &p->res.plan;
        const char *ns = pl->claims[p->group_at].claim->ns;
        int r = 0;

        if (!op_ended(p)) {
                kube_collect_done(c);
                return;
        }
        /* this claim's namespace answers for every PodGroup claim of it still to read */
        for (size_t i = p->group_at; r >= 0 && i < pl->n_claims; i++) {
                struct plan_claim *pc = &pl->claims[i];

                if (!pc->podgroup || !streq(pc->claim->ns, ns))
                        continue;
                if (c->error < 0)
                        r = plan_claim_group_pods_failed(pc, c->message ? c->message : strerror(-c->error));
                else
                        r = group_pods_record(pc, c->items);
        }
        kube_collect_done(c);
        if (r < 0)
                return ready(p, r, NULL);
        p->group_at++;
        step_groups(p);
}

static void step_groups(struct planner *p) {
        struct plan *pl = &p->res.plan;
        int r;

        for (; p->group_at < pl->n_claims; p->group_at++) {
                struct plan_claim *pc = &pl->claims[p->group_at];
                _cleanup_free_ char *path = NULL;

                if (!pc->podgroup || pc->group_pods_read || pc->group_pods_error)
                        continue; /* none, or read with an earlier claim of its namespace */
                if (asprintf(&path, "/api/v1/namespaces/%s/pods", pc->claim->ns) < 0)
                        return ready(p, -ENOMEM, NULL);
                r = kube_collect_list(p->client, path, 500, "0", on_group_pods, p, &p->list);
                if (r == -ENOMEM)
                        return ready(p, r, NULL);
                if (r < 0) {
                        if (plan_claim_group_pods_failed(pc, strerror(-r)) < 0)
                                return ready(p, -ENOMEM, NULL);
                        continue;
                }
                p->pending++;
                return;
        }
        step_peer(p);
}

/* ---- Karpenter: the node's NodeClaim and its terminationGracePeriod ----
 * When it runs out, Karpenter deletes what is left on the node without the Eviction
 * API, grace periods cut to what remains: one shorter than the drain needs (its claim
 * holders' grace, then the driver's) is named. A failed read is a warning too: the
 * node says it is Karpenter's. */

#define KARPENTER_NODEPOOL_LABEL "karpenter.sh/nodepool"
#define KARPENTER_NODECLAIMS     "/apis/karpenter.sh/v1/nodeclaims"

static int nodeclaim_check(struct planner *p, const cJSON *nc) {
        const char *name = json_str(nc, "metadata.name"), *tgp = json_str(nc, "spec.terminationGracePeriod");
        int64_t holders, drivers, need = plan_grace_needed(&p->res.plan, &holders, &drivers);
        _cleanup_free_ char *m = NULL;
        uint64_t usec;

        if (!tgp)
                return 0; /* none: Karpenter waits for the drain as long as it takes */
        if (timesrc_parse_duration(tgp, &usec) < 0) {
                if (asprintf(&m, "Karpenter NodeClaim %s: terminationGracePeriod \"%s\" is not a duration",
                             strna(name), tgp) < 0)
                        return -ENOMEM;
        } else if (usec < (uint64_t)need * USEC_PER_SEC) {
                if (asprintf(&m,
                             "Karpenter NodeClaim %s: terminationGracePeriod %s is shorter than this node's "
                             "drain needs (%" PRIi64 " s: its claim holders' grace up to %" PRIi64
                             " s, then the DRA driver's %" PRIi64 " s); when it runs out Karpenter deletes "
                             "what is left without the Eviction API, grace periods cut short, so a claim "
                             "holder may be killed and the driver stopped while a claim is on the node",
                             strna(name), tgp, need, holders, drivers) < 0)
                        return -ENOMEM;
        }
        return m ? plan_add_warning(&p->res.plan, m) : 0;
}

static void on_nodeclaims(struct kube_collect *c, void *userdata) {
        struct planner *p = userdata;
        const cJSON *item;
        int r = 0;

        if (!op_ended(p)) {
                kube_collect_done(c);
                return;
        }
        if (c->error < 0) {
                _cleanup_free_ char *m = NULL;

                if (asprintf(&m,
                             "node %s is Karpenter's (label " KARPENTER_NODEPOOL_LABEL
                             "), but its NodeClaims "
                             "could not be read (%s): their terminationGracePeriod is not checked",
                             p->o.node, c->message ? c->message : strerror(-c->error)) < 0)
                        r = -ENOMEM;
                else
                        r = plan_add_warning(&p->res.plan, m);
        } else
                cJSON_ArrayForEach(item, c->items) {
                        if (r >= 0 && streq_ptr(json_str(item, "status.nodeName"), p->o.node))
                                r = nodeclaim_check(p, item);
                }
        kube_collect_done(c);
        if (r < 0)
                return ready(p, r, NULL);
        step_probe(p);
}

static void step_peer(struct planner *p) {
        const struct node_rec *n = p->res.in->node;
        int r;

        if (!n || !kv_get(n->labels, n->n_labels, KARPENTER_NODEPOOL_LABEL))
                return step_probe(p);
        r = kube_collect_list(p->client, KARPENTER_NODECLAIMS, 500, "0", on_nodeclaims, p, &p->list);
        if (r == -ENOMEM)
                return ready(p, r, NULL);
        if (r < 0)
                return step_probe(p);
        p->pending++;
}

static void probe_result(struct planner *p, const struct pod_rec *pod, int error,
                         enum health_status status) {
        char m[512];

        if (error == 0 && status == HEALTH_SERVING)
                return;
        snprintf(m, sizeof(m),
                 "DRA driver pod %s/%s does not answer SERVING on its health endpoint: %s "
                 "(use --ignore-driver-health to override)",
                 pod->ns, pod->name, error < 0 ? strerror(-error) : health_status_to_string(status));
        plan_add_blocker(&p->res.plan, BLOCKER_DRIVER_UNHEALTHY, pod, m);
}

static void on_probe(int error, enum health_status status, const char *message, void *userdata) {
        struct planner *p = userdata;

        p->probe = NULL;
        if (!op_ended(p))
                return;
        probe_result(p, p->res.plan.pods[p->probe_at].pod, error, status);
        p->probe_at++;
        step_probe(p);
}

/* The same health check as the drain's preflight, when an endpoint is configured: one
 * driver pod at a time. */
static void step_probe(struct planner *p) {
        const struct drain_profile *pr = p->o.profile;
        const struct plan *pl = &p->res.plan;

        for (; pr->has_health && !pr->ignore_health && p->probe_at < pl->n_pods; p->probe_at++) {
                const struct pod_rec *pod = pl->pods[p->probe_at].pod;

                if (pl->pods[p->probe_at].cls != POD_CLASS_DRIVER || pod->deleting)
                        continue;
                if (health_probe_start(p->transport, &pr->health_target, pod->pod_ip, 5 * USEC_PER_SEC,
                                       on_probe, p, &p->probe) < 0) {
                        probe_result(p, pod, -EIO, HEALTH_UNKNOWN);
                        continue;
                }
                p->pending++;
                return;
        }
        step_seamless(p);
}

static void on_seamless(int error, const char *what, const struct seamless_answer *ans, void *userdata) {
        struct planner *p = userdata;

        p->seam_check = NULL;
        if (!op_ended(p))
                return;
        if (error < 0)
                return ready(p, error, "%s", strna(what));
        p->res.seam = *ans;
        p->res.seam_known = true;
        ready(p, 0, NULL);
}

/* ---- plan --device: the None-effect preview ----
 * For each device, one after the other: create drainer's preview rule (effect None:
 * taints nothing), read it back until the device taint eviction controller wrote its
 * NoEffect condition for the rule's generation (it writes it once), delete it (uid as
 * precondition: drainer deletes only what it made, checked on the object). A failure
 * is a note beside the claims-based list, never the plan's failure. A rule left by a
 * plan that was killed is found by its name (409), judged as the object says, and
 * then read and deleted as if made now. */

#define PREVIEW_POLL_USEC (1 * USEC_PER_SEC)
#define PREVIEW_POLLS     20

static void preview_next(struct planner *p);
static void preview_read(struct planner *p);

static void preview_note(struct planner *p, const char *fmt, ...) _printf_(2, 3);
static void preview_note(struct planner *p, const char *fmt, ...) {
        va_list ap;
        char *m;

        if (p->prev_note)
                return; /* the first one says it */
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) >= 0) {
                /* it may quote the API server's message: printed, so escaped */
                p->prev_note = text_escape_controls(m, strlen(m));
                free(m);
        }
        va_end(ap);
        p->res.preview.note = p->prev_note;
}

static const struct drain_device *preview_device(struct planner *p) {
        return &p->o.profile->devices[p->prev_at];
}

static void on_preview_deleted(const struct kube_result *res, void *userdata) {
        struct planner *p = userdata;

        p->prev_call = NULL;
        if (!op_ended(p))
                return;
        if (res->error < 0 && res->error != -ENOENT)
                preview_note(p,
                             "deleting DeviceTaintRule %s failed: %s (delete it: kubectl delete "
                             "devicetaintrule %s)",
                             p->prev_name, strna(res->message), p->prev_name);
        p->prev_at++;
        preview_next(p);
}

static void preview_delete(struct planner *p) {
        _cleanup_free_ char *path = NULL, *opts = NULL;
        int r;

        if (asprintf(&path, "%s/devicetaintrules/%s", p->rule_api.prefix, p->prev_name) < 0 ||
            asprintf(&opts,
                     "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"preconditions\":{\"uid\":\"%s\"}}",
                     p->prev_uid) < 0) {
                path = opts = NULL;
                return ready(p, -ENOMEM, NULL);
        }
        r = kube_delete(p->client, path, opts, on_preview_deleted, p, &p->prev_call);
        if (r < 0) {
                preview_note(p, "cannot delete DeviceTaintRule %s: %s", p->prev_name, strerror(-r));
                return ready(p, 0, NULL);
        }
        p->pending++;
}

static void on_preview_read(const struct kube_result *res, void *userdata) {
        struct planner *p = userdata;
        const struct drain_device *d = preview_device(p);
        char why[256];
        const char *uid;
        int r;

        p->prev_call = NULL;
        if (!op_ended(p))
                return;
        if (res->error == -ENOENT) { /* deleted by someone else: no answer, nothing to delete */
                preview_note(p, "DeviceTaintRule %s was deleted by someone else", p->prev_name);
                p->prev_at++;
                return preview_next(p);
        }
        if (res->error < 0) {
                preview_note(p,
                             "reading DeviceTaintRule %s failed: %s (delete it: kubectl delete "
                             "devicetaintrule %s)",
                             p->prev_name, strna(res->message), p->prev_name);
                return ready(p, 0, NULL);
        }
        if (taint_rule_preview_check(res->json, p->prev_name, p->o.node, d->driver, d->pool, d->device, why,
                                     sizeof(why)) < 0) {
                preview_note(p, "DeviceTaintRule %s is not drainer's preview (%s): left alone", p->prev_name,
                             why);
                p->prev_at++;
                return preview_next(p);
        }
        uid = json_str(res->json, "metadata.uid");
        if (!uid || !*uid) { /* no precondition to delete it under: not touched */
                preview_note(p, "DeviceTaintRule %s has no uid: left alone", p->prev_name);
                p->prev_at++;
                return preview_next(p);
        }
        if (p->prev_uid && !streq_ptr(uid, p->prev_uid)) {
                preview_note(p, "DeviceTaintRule %s was made again by someone else: left alone",
                             p->prev_name);
                p->prev_at++;
                return preview_next(p);
        }
        if (!p->prev_uid && !(p->prev_uid = strdup(uid)))
                return ready(p, -ENOMEM, NULL);
        r = taint_rule_preview_parse(res->json, &p->res.preview.pv[p->prev_at]);
        if (r == -EAGAIN && ++p->prev_polls < PREVIEW_POLLS) {
                dtimer_start(&p->prev_timer, PREVIEW_POLL_USEC);
                return;
        }
        if (r == -EAGAIN)
                preview_note(p,
                             "the device taint eviction controller wrote no answer into DeviceTaintRule "
                             "%s within %u s (is kube-controller-manager's device-taint-eviction-controller "
                             "running?)",
                             p->prev_name, PREVIEW_POLLS);
        else if (r < 0)
                preview_note(p, "the controller's answer in DeviceTaintRule %s could not be read",
                             p->prev_name);
        else
                p->res.preview.known[p->prev_at] = true;
        preview_delete(p);
}

static void preview_read(struct planner *p) {
        _cleanup_free_ char *path = NULL;
        int r;

        if (asprintf(&path, "%s/devicetaintrules/%s", p->rule_api.prefix, p->prev_name) < 0) {
                path = NULL;
                return ready(p, -ENOMEM, NULL);
        }
        r = kube_get(p->client, path, on_preview_read, p, &p->prev_call);
        if (r < 0) {
                preview_note(p, "cannot read DeviceTaintRule %s: %s", p->prev_name, strerror(-r));
                return ready(p, 0, NULL);
        }
        p->pending++;
}

static void on_preview_timer(struct dtimer *t) {
        struct planner *p = container_of(t, struct planner, prev_timer);

        if (!p->closing)
                preview_read(p);
}

static void on_preview_created(const struct kube_result *res, void *userdata) {
        struct planner *p = userdata;

        p->prev_call = NULL;
        if (!op_ended(p))
                return;
        if (res->error == -EEXIST || res->status == 409) {
                p->res.preview.asked = true;
                return preview_read(p); /* a killed plan's: judged by what it says */
        }
        if (res->error < 0) {
                /* 422: the server takes no None effect; 403: RBAC or the admission policy */
                preview_note(p, "creating DeviceTaintRule %s (effect None) was refused: %s", p->prev_name,
                             strna(res->message));
                return ready(p, 0, NULL);
        }
        p->res.preview.asked = true;
        if (!(p->prev_uid = strdup(strempty(json_str(res->json, "metadata.uid")))))
                return ready(p, -ENOMEM, NULL);
        dtimer_start(&p->prev_timer, PREVIEW_POLL_USEC);
}

static void preview_next(struct planner *p) {
        const struct drain_device *d;
        _cleanup_free_ char *path = NULL, *body = NULL;
        int r;

        if (p->prev_at >= p->o.profile->n_devices || p->prev_at >= DRAIN_MAX_DEVICES)
                return ready(p, 0, NULL);
        d = preview_device(p);
        p->prev_name = mfree(p->prev_name);
        p->prev_uid = mfree(p->prev_uid);
        p->prev_polls = 0;
        r = taint_rule_preview_name(p->o.node, d->driver, d->pool, d->device, &p->prev_name);
        if (r == -ENOMEM)
                return ready(p, r, NULL);
        if (r < 0) {
                preview_note(p, "the names of node %s and driver %s are too long for a DeviceTaintRule",
                             p->o.node, d->driver);
                p->prev_at++;
                return preview_next(p);
        }
        if (taint_rule_preview_body(&p->rule_api, p->prev_name, p->o.node, d->driver, d->pool, d->device,
                                    &body) < 0 ||
            asprintf(&path, "%s/devicetaintrules", p->rule_api.prefix) < 0) {
                path = NULL;
                return ready(p, -ENOMEM, NULL);
        }
        r = kube_create(p->client, path, body, on_preview_created, p, &p->prev_call);
        if (r < 0) {
                preview_note(p, "cannot create DeviceTaintRule %s: %s", p->prev_name, strerror(-r));
                return ready(p, 0, NULL);
        }
        p->pending++;
}

static void step_preview(struct planner *p) {
        int r;

        if (!p->rule_api.served) /* (a device drain is refused before this) */
                return ready(p, 0, NULL);
        if (p->res.plan.n_blockers > 0) {
                preview_note(p, "not asked: the drain would be refused");
                return ready(p, 0, NULL);
        }
        r = dtimer_init(&p->prev_timer, p->ts, on_preview_timer);
        if (r < 0)
                return ready(p, r, NULL);
        p->prev_timer_ready = true;
        preview_next(p);
}

/* --driver: whether the driver upgrades seamlessly */
static void step_seamless(struct planner *p) {
        const struct plan *pl = &p->res.plan;
        const struct pod_rec **dp;
        size_t n_dp = 0;
        int r;

        if (p->o.profile->n_devices > 0)
                return step_preview(p);
        if (p->o.profile->n_drivers == 0 || p->res.in->dra_off)
                return ready(p, 0, NULL);
        dp = calloc(pl->n_pods ? pl->n_pods : 1, sizeof(*dp));
        if (!dp)
                return ready(p, -ENOMEM, NULL);
        for (size_t i = 0; i < pl->n_pods; i++)
                if (pl->pods[i].cls == POD_CLASS_DRIVER)
                        dp[n_dp++] = pl->pods[i].pod;
        r = seamless_check_start(p->client, p->ts, p->o.profile->drivers[0], dp, n_dp, on_seamless, p,
                                 &p->seam_check);
        free(dp);
        if (r == -ENOMEM)
                return ready(p, r, NULL);
        if (r < 0)
                return ready(p, r, "Cannot start the API requests: %s", strerror(-r));
        p->pending++;
}

int planner_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
                const struct planner_options *o, const struct planner_callbacks *cb, void *userdata,
                struct planner **ret) {
        struct planner *p = calloc(1, sizeof(*p));
        int r;

        if (!p)
                return -ENOMEM;
        *p = (struct planner){
                .client = client,
                .transport = transport,
                .ts = ts,
                .o = *o,
                .cb = cb,
                .userdata = userdata,
        };
        drain_profile_plan_options(o->profile, &p->res.po);
        r = node_snapshot_start(client, ts, o->node, true, on_snapshot, p, &p->snap);
        if (r < 0) {
                free(p);
                return r;
        }
        p->snap_reading = true;
        p->pending++;
        *ret = p;
        return 0;
}

struct planner_result *planner_result(struct planner *p) {
        return &p->res;
}

/* ---- the server dry run ---- */

static void answer_set(struct planner_answer *a, const struct kube_result *res) {
        a->done = true;
        a->error = res->error;
        a->status = res->status;
        a->ns_terminating =
                res->error == -EACCES && kube_status_has_cause(res->status_body, "NamespaceTerminating");
        a->message = res->message ? strdup(res->message) : NULL;
}

static void on_eviction_answer(const struct kube_result *res, void *userdata) {
        struct eviction_call *c = userdata;
        struct planner *p = c->p;

        c->call = NULL;
        answer_set(c->a, res);
        if (!op_ended(p))
                return;
        if (--p->calls_left == 0)
                p->cb->on_dry_run_done(p, 0, p->userdata);
}

static void on_cordon_answer(const struct kube_result *res, void *userdata) {
        struct planner *p = userdata;
        const struct plan *pl = &p->res.plan;

        p->cordon_call = NULL;
        answer_set(&p->res.cordon, res);
        if (!op_ended(p))
                return;
        p->cb->on_cordoned(p, p->res.cordon.error, p->userdata);
        if (p->res.cordon.error < 0 || p->closing)
                return;
        /* an eviction of every pod the plan evicts, all at once */
        p->res.evicts = calloc(MAX(pl->n_pods, 1u), sizeof(*p->res.evicts));
        p->calls = calloc(MAX(pl->n_pods, 1u), sizeof(*p->calls));
        if (!p->res.evicts || !p->calls)
                return p->cb->on_dry_run_done(p, -ENOMEM, p->userdata);
        p->calls_left = 1; /* until every eviction is sent */
        for (size_t i = 0; i < pl->n_pods && !p->closing; i++) {
                const struct plan_pod *pp = &pl->pods[i];
                int64_t grace = p->o.profile->grace;
                int r;

                p->calls[i] = (struct eviction_call){ .p = p, .a = &p->res.evicts[i] };
                if (pp->group == EVICT_GROUP_NONE || pp->pod->deleting) {
                        p->res.evicts[i].done = true;
                        continue;
                }
                if (grace == 0 && pp->cls == POD_CLASS_CLAIM_HOLDER)
                        grace = 1; /* never 0 for a claim holder, as the drain sends */
                if (grace == 0 && pp->cls == POD_CLASS_DRIVER)
                        grace = -1; /* nor for a DRA driver pod: its own, as the drain sends */
                if (p->cb->on_evicting)
                        p->cb->on_evicting(p, pp->pod, p->userdata);
                r = kube_evict(p->client, pp->pod->ns, pp->pod->name, grace, true, on_eviction_answer,
                               &p->calls[i], &p->calls[i].call);
                if (r < 0) {
                        p->res.evicts[i].done = true;
                        p->res.evicts[i].error = r;
                        continue;
                }
                p->pending++;
                p->calls_left++;
        }
        if (--p->calls_left == 0 && !p->closing)
                p->cb->on_dry_run_done(p, 0, p->userdata);
}

/* kubectl drain --dry-run=server: the cordon patch the drain would send, then (once it
 * is answered) an eviction of every pod the plan evicts (its groups in order, the
 * driver pods too when the strategy evicts them), each with dryRun=All: the API server
 * runs its admission, budgets and validation, and persists nothing. A 429 or a
 * namespace being deleted is an answer, not retried (no state moves in a dry run). */
int planner_dry_run(struct planner *p, char **ret_message) {
        const struct node_rec *node = p->res.node;
        _cleanup_free_ char *ename = kube_query_escape(node->name), *path = NULL, *body = NULL;
        int r;

        *ret_message = NULL;
        if (!ename || asprintf(&path, "/api/v1/nodes/%s?dryRun=All", ename) < 0)
                return -ENOMEM;
        r = drain_patch_cordon(node, timesrc_realtime(p->ts), &body);
        if (r < 0) {
                if (asprintf(ret_message, "cannot build the cordon patch of node %s: %s", node->name,
                             strerror(-r)) < 0)
                        *ret_message = NULL;
                return r;
        }
        r = kube_patch(p->client, path, KUBE_PATCH_MERGE, body, on_cordon_answer, p, &p->cordon_call);
        if (r < 0) {
                if (asprintf(ret_message, "cannot send the cordon patch of node %s: %s", node->name,
                             strerror(-r)) < 0)
                        *ret_message = NULL;
                return r;
        }
        p->pending++;
        return 0;
}

static void on_snapshot_closed(void *userdata) {
        struct planner *p = userdata;

        p->pending--;
        maybe_closed(p);
}

void planner_close(struct planner *p, void (*closed)(void *userdata), void *userdata) {
        if (!p)
                return;
        p->closing = true;
        p->closed = closed;
        p->closed_userdata = userdata;
        if (p->disc)
                taint_rule_discovery_cancel(p->disc);
        if (p->key_read)
                driver_key_read_cancel(p->key_read);
        if (p->list.running)
                kube_collect_cancel(&p->list);
        if (p->probe)
                health_probe_cancel(p->probe);
        if (p->seam_check)
                seamless_check_cancel(p->seam_check);
        if (p->prev_call)
                kube_call_cancel(p->prev_call);
        if (p->prev_timer_ready)
                dtimer_stop(&p->prev_timer);
        if (p->cordon_call)
                kube_call_cancel(p->cordon_call);
        for (size_t i = 0; p->calls && i < p->res.plan.n_pods; i++)
                if (p->calls[i].call)
                        kube_call_cancel(p->calls[i].call);
        if (p->snap_reading) {
                /* still reading: closing it ends the read (its done never runs) */
                p->snap_reading = false;
                p->pending--;
        }
        if (p->snap) {
                p->pending++;
                node_snapshot_close(TAKE_PTR(p->snap), on_snapshot_closed, p);
        }
        maybe_closed(p);
}

/* ---- the server dry run's report ---- */

static const char *dry_outcome(const struct planner_answer *c) {
        return c->error == 0 || c->error == -ENOENT ? "evicted"
               : c->ns_terminating                  ? "namespace-terminating"
               : c->error == -EAGAIN                ? "held"
                                                    : "failed";
}

size_t planner_dry_run_report(const struct planner_result *res, FILE *f, cJSON *j) {
        const struct plan *p = &res->plan;
        const struct node_rec *node = res->node;
        cJSON *pods = NULL;
        size_t failed = 0;

        if (j) {
                cJSON_AddStringToObject(j, "node", node->name);
                cJSON_AddStringToObject(j, "dryRun", "server");
                cJSON_AddBoolToObject(j, "cordoned", true);
                pods = cJSON_AddArrayToObject(j, "evictions");
        }
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];
                const struct planner_answer *c = &res->evicts[i];
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
                                cJSON_AddStringToObject(o, "message",
                                                        c->message ? c->message : strerror(-c->error));
                        cJSON_AddItemToArray(pods, o);
                } else if (streq(outcome, "evicted"))
                        fprintf(f, "pod/%s evicted (server dry run)\n", pp->pod->name);
                else
                        fprintf(f, "pod/%s %s (server dry run): %s\n", pp->pod->name,
                                streq(outcome, "held")                    ? "eviction held by a budget"
                                : streq(outcome, "namespace-terminating") ? "in a namespace being deleted"
                                                                          : "eviction failed",
                                c->message ? c->message : strerror(-c->error));
        }
        if (j) {
                cJSON *stays = cJSON_AddArrayToObject(j, "stays");

                for (size_t i = 0; i < p->n_pods; i++)
                        if (p->pods[i].group == EVICT_GROUP_NONE) {
                                cJSON *o = cJSON_CreateObject();

                                cJSON_AddStringToObject(o, "namespace", p->pods[i].pod->ns);
                                cJSON_AddStringToObject(o, "name", p->pods[i].pod->name);
                                cJSON_AddStringToObject(o, "reason", strna(p->pods[i].skip_reason));
                                cJSON_AddItemToArray(stays, o);
                        }
                cJSON_AddBoolToObject(j, "ok", failed == 0);
        } else
                fprintf(f, "node/%s drained (server dry run)%s\n", node->name,
                        failed ? ", with failed evictions" : "");
        return failed;
}
