/* The drain engine phase by phase against a small world that reacts only to what
 * the engine sent, over the real client and informers, a fake clock
 * and a scripted fake transport. node-1 holds two claim holders (one with a named
 * ResourceClaim, one with a claim made from a template), two workload pods and the
 * DRA driver. The world: a Node PATCH is merged and goes out on the watch; an
 * accepted eviction sets the pod's deletionTimestamp and deletes it GRACE later; a
 * claim is released once its pod is gone (reservedFor emptied and deallocated; a
 * template's claim deleted); the driver DaemonSet's pod follows the strategy as the
 * DaemonSet controller would (taint: evicted by drainer, not recreated while
 * drainer.io/draining is on the node; label: deleted while the node label does not
 * match its nodeSelector, recreated when it does; systemd: the driver is a unit
 * behind a fake unit control; none: untouched); a running driver publishes its
 * ResourceSlice, a stopped one's is deleted. A killed run's requests that reached
 * the world stay done. At every driver stop (a driver pod's eviction as it is sent,
 * the label set to drainer-paused, StopUnit) the world asserts that no pod and no
 * ResourceClaim is on the node; at every eviction, that a claim holder never gets
 * grace 0.
 * Covered, for each strategy: a drain from nothing (the phase sequence on the Node,
 * claim holders answered before the rest is sent, --grace-period=0 reaching only
 * the pods without claims, never the driver's, the Events); a run killed as the Node enters each drain
 * phase and resumed (ends drained: one cordon, one eviction per pod, one record,
 * one stop, no phase skipped or repeated, no second "drain started"); a drained node
 * drained again (nothing sent); an uncordon killed in restore-drivers and uncordon
 * and resumed, and an uncordon of a drain killed in each phase (the node schedulable,
 * the taint removed once, what was stopped started once, the driver back and its
 * ResourceSlice published again). And: an uncordon of a node someone else cordoned
 * (stays cordoned); a PDB 429 retried at 1, 2, 4 s (jittered); a pod that never
 * terminates and a claim that stays allocated (wait-released holds to --timeout,
 * the driver never stopped, the message names them); a driver pod never Ready on
 * restore (restore-drivers holds, the node stays cordoned). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/announcer.h"
#include "drainer/dra/claims.h"
#include "drainer/dra/driverstop.h"
#include "drainer/drain/engine.h"
#include "drainer/kube/client.h"
#include "drainer/kube/events.h"
#include "drainer/obs/metrics.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC

#define NODES    FAKE_API_NODES
#define PODS     FAKE_API_PODS
#define CLAIMS   FAKE_API_CLAIMS
#define SLICES   FAKE_API_SLICES
#define PDBS     FAKE_API_PDBS
#define EVICTION FAKE_API_EVICTION
#define NODE     FAKE_API_NODE
#define STATUS   FAKE_API_NODE "/status"

#define GRACE        (2 * SEC)  /* an accepted eviction's pod is gone this much later */
#define ANSWER       (100 * MS) /* an eviction's answer */
#define DRIVER_READY (1 * SEC)  /* a recreated driver pod is Ready this much later */
#define UNIT_DELAY   (20 * MS)
#define DRIVER       "gpu.example.com"
#define LABEL_KEY    "gpu.example.com/present"
#define UNIT         "dra-driver.service"
#define PAUSED       "drainer-paused"
#define SEEN         1
#define DONE         2
enum { EV_PHASE, EV_BLOCKED, EV_FAILED, EV_DONE, EV_FOREIGN };
/* drainer's rule for the driver's pool of node-1 ("drainer-" + strlen("node-1") + ...),
 * and the name an older drainer gave it */
#define RULE_NAME   "drainer-6-node-1-" DRIVER "-0"
#define LEGACY_RULE "drainer-node-1-" DRIVER "-0"
#define RULES_PATH  "/apis/resource.k8s.io/v1beta2/devicetaintrules"

enum pod_kind { POD_WORK, POD_HOLDER, POD_DRIVER };

struct wpod {
        const char *name;
        enum pod_kind kind;
        const char *claim;  /* POD_HOLDER: its claim */
        bool from_template; /* the claim is made from a template for this pod */
        bool present, deleting, ready;
        bool stuck; /* never terminates (a finalizer, a kubelet that is gone) */
        uint64_t gone_at, ready_at;
        unsigned gen;      /* a recreated pod has a new uid */
        unsigned accepted; /* evictions accepted */
};

struct wclaim {
        const char *name, *pod;
        bool from_template, present, allocated, reserved;
        bool stuck;    /* stays allocated when its pod is gone */
        bool podgroup; /* reserved for PodGroup "gang": stays reserved and allocated */
};

struct unit_call {
        bool job, start;
        unit_job_fn job_done;
        unit_state_fn state_done;
        void *userdata;
        uint64_t due;
};

struct held_event {
        const char *watch; /* a static string */
        char *ev;
};

struct world {
        struct test_api *api;
        struct announcer *announcer; /* the engine's notices as Events, as the verbs wire it */
        struct fake_clock *clock;
        struct fake_transport *ft;
        const struct driver_stop_ops *strategy;
        struct selector **sels;
        size_t n_sels;
        struct engine *engine;
        uint64_t timeout_usec;
        bool finished;
        int result;
        char *message;

        cJSON *node;
        unsigned rv;
        struct wpod pods[8];
        size_t n_pods;
        struct wclaim claims[4];
        size_t n_claims;
        bool slice;
        bool unit_active;
        bool driver_never_ready; /* its pod never Ready, its unit fails to start */
        struct unit_call calls[16];
        size_t n_calls;

        int accept_idx;         /* the expectation that accepts evictions */
        unsigned char *handled; /* per recorded request */
        size_t n_handled;
        const char *kill_in; /* kill the engine when the Node enters this phase */
        bool kill_now;
        bool dying; /* being killed: what it sends now never leaves */
        struct held_event held[256];
        size_t n_held;
        char phases[32][32]; /* drainer.io/state as the Node went through it */
        size_t n_phases;
        /* What the engine did, counted by the world. */
        unsigned cordons, uncordons, taint_removals, label_pauses, label_restores, records;
        unsigned unit_stops, unit_starts, driver_evictions, repeat_evictions, evictions_sent,
                grace0_evictions;
        unsigned events
                [5]; /* DrainerPhase, DrainerBlocked, DrainerFailed, DrainerDone, DrainerForeignObject */
        int64_t grace_seconds; /* the run's --grace-period (-1: each pod's own) */
        bool node_conditions;  /* the run's --node-conditions */
        unsigned status_patches;
        bool evicted_while_not_in_progress; /* an eviction sent without DrainInProgress=True */
        /* --driver DRIVER: a drain scoped to the driver; whether the API server serves
         * DeviceTaintRules (v1beta2, as 1.36 with the gate), the rule as the world has it */
        bool scoped, rules_served, rule_present;
        bool device;           /* with scoped: --device DRIVER/node-1/gpu-0 instead of --driver */
        char device_rule[128]; /* its rule's name, as created (a hash of the device) */
        unsigned rule_creates, rule_deletes, node_patches;
        bool slice_at_rule_delete;
        /* every DeviceTaintRule the API server holds (rule_present: RULE_NAME among them),
         * as it returns them (uid, resourceVersion, timeAdded) */
        cJSON *rules[8];
        size_t n_rules;
        unsigned rule_reads, rule_uids;
        unsigned rule_deletes_sent, rule_deletes_unconditional, rule_deletes_stale;
        char deleted_rules[512];  /* the names deleted, space-separated */
        const char *swap_on_read; /* once read, the rule of this name is replaced by foreign_rule(swap) */
        uint64_t first_rest_eviction, last_holder_answer, driver_stopped_at;
};

/* ---- JSON of the world's objects ---- */

static char *pod_json(struct world *w, const struct wpod *p) {
        _cleanup_free_ char *uid = test_asprintf("uid-%s-%u", p->name, p->gen);
        _cleanup_free_ char *meta = test_asprintf(
                "\"labels\":%s,%s%s",
                p->kind == POD_DRIVER ? "{\"app.kubernetes.io/component\":\"kubeletplugin\"}"
                                      : "{\"app\":\"app\"}",
                p->kind == POD_DRIVER ? FAKE_OWNED_BY_DS("gpu-driver", "ds-gpu")
                                      : FAKE_OWNED_BY_RS("app-rs", "rs-app"),
                p->deleting
                        ? ",\"deletionTimestamp\":\"2025-06-15T14:00:02Z\",\"deletionGracePeriodSeconds\":2"
                        : "");
        char spec[512] = "", status[256] = "";

        if (p->kind == POD_HOLDER && p->from_template) {
                snprintf(spec, sizeof(spec),
                         "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"gpu-tmpl\"}"
                         "]");
                snprintf(status, sizeof(status),
                         "\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":\"%s\"}]",
                         p->claim);
        } else if (p->kind == POD_HOLDER)
                snprintf(spec, sizeof(spec),
                         "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"%s\"}]", p->claim);
        else if (p->kind == POD_DRIVER && w->strategy == &driver_stop_label)
                snprintf(spec, sizeof(spec), "\"nodeSelector\":{\"" LABEL_KEY "\":\"true\"}");
        return fake_api_pod(&(const struct fake_pod){ .name = p->name,
                                                      .uid = uid,
                                                      .rv = ++w->rv,
                                                      .meta = meta,
                                                      .spec = spec[0] ? spec : NULL,
                                                      .status = status[0] ? status : NULL,
                                                      .ready = p->ready ? "True" : "False" });
}

static struct wpod *pod_named(struct world *w, const char *name) {
        for (size_t i = 0; i < w->n_pods; i++)
                if (streq(w->pods[i].name, name))
                        return &w->pods[i];
        return NULL;
}

static char *claim_json(struct world *w, const struct wclaim *c) {
        const struct wpod *p = pod_named(w, c->pod);
        _cleanup_free_ char *uid = test_asprintf("uid-%s-%u", c->pod, p->gen);

        return fake_api_claim(&(const struct fake_claim){ .name = c->name,
                                                          .rv = ++w->rv,
                                                          .driver = DRIVER,
                                                          .allocated = c->allocated,
                                                          .reserved_name = c->reserved ? c->pod : NULL,
                                                          .reserved_podgroup = c->podgroup ? "gang" : NULL,
                                                          .reserved_uid = uid,
                                                          .owner_name = c->from_template ? c->pod : NULL,
                                                          .owner_uid = uid });
}

static char *slice_json(struct world *w) {
        return fake_api_slice(DRIVER, ++w->rv);
}

/* Sends the events held back on their watches (in order, per watch) once it is open. */
static void flush_events(struct world *w) {
        size_t kept = 0;

        for (size_t i = 0; i < w->n_held; i++) {
                bool after_kept = false;

                for (size_t j = 0; j < kept && !after_kept; j++)
                        after_kept = streq(w->held[j].watch, w->held[i].watch);
                if (!after_kept && fake_transport_push(w->ft, w->held[i].watch, w->held[i].ev) > 0) {
                        free(w->held[i].ev);
                        continue;
                }
                w->held[kept++] = w->held[i];
        }
        w->n_held = kept;
}

/* A watch event. The API server's watch starts at the list's resourceVersion: what
 * happens after the list and before the watch is open still reaches it (held back
 * here until then). Between runs nobody watches: the next run's lists show it. */
static void push(struct world *w, const char *watch, const char *type, char *obj) {
        char *ev = fake_api_watch_event(type, obj);

        free(obj);
        flush_events(w);
        if (!w->engine || w->dying) {
                free(ev);
                return;
        }
        for (size_t j = 0; j < w->n_held; j++)
                if (streq(w->held[j].watch, watch))
                        goto hold;
        if (fake_transport_push(w->ft, watch, ev) > 0) {
                free(ev);
                return;
        }
hold:
        assert_true(w->n_held < ELEMENTSOF(w->held));
        w->held[w->n_held++] = (struct held_event){ .watch = watch, .ev = ev };
}

static void push_pod(struct world *w, struct wpod *p, const char *type) {
        push(w, PODS "&watch=1", type, pod_json(w, p));
}

static void push_claim(struct world *w, struct wclaim *c, const char *type) {
        push(w, CLAIMS "?watch=1", type, claim_json(w, c));
}

/* ---- the world's rules ---- */

static const char *node_label(struct world *w) {
        cJSON *l = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(w->node, "metadata"),
                                                 "labels"),
                LABEL_KEY);

        return cJSON_IsString(l) ? l->valuestring : NULL;
}

static const char *node_ann(struct world *w, const char *key) {
        cJSON *a = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(w->node, "metadata"),
                                                 "annotations"),
                key);

        return cJSON_IsString(a) ? a->valuestring : NULL;
}

static bool node_unschedulable(struct world *w) {
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(w->node, "spec"), "unschedulable"));
}

static bool node_tainted(struct world *w) {
        const cJSON *t;

        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetObjectItemCaseSensitive(w->node, "spec"), "taints")) {
                const cJSON *k = cJSON_GetObjectItemCaseSensitive(t, "key");

                if (cJSON_IsString(k) && streq(k->valuestring, "drainer.io/draining"))
                        return true;
        }
        return false;
}

/* status.conditions[type].status on the world's Node, NULL if absent. */
static const char *node_condition(struct world *w, const char *type, const char **ret_reason) {
        const cJSON *c;

        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetObjectItemCaseSensitive(w->node, "status"), "conditions")) {
                if (!streq_ptr(json_get_str(c, "type"), type))
                        continue;
                if (ret_reason)
                        *ret_reason = json_get_str(c, "reason");
                return json_get_str(c, "status");
        }
        return NULL;
}

static size_t drainer_annotations(struct world *w) {
        const cJSON *a;
        size_t n = 0;

        cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetObjectItemCaseSensitive(w->node, "metadata"), "annotations"))
                n += strncmp(a->string, "drainer.io/", strlen("drainer.io/")) == 0;
        return n;
}

static struct wpod *driver_pod(struct world *w) {
        for (size_t i = 0; i < w->n_pods; i++)
                if (w->pods[i].kind == POD_DRIVER)
                        return &w->pods[i];
        return NULL;
}

/* The safety invariant, checked by the world when a driver is being stopped: no pod
 * but drivers and no ResourceClaim left on the node that the kubelet may still have
 * prepared (a PodGroup's stays reserved and allocated; its pod gone, it is unprepared). */
static void assert_nothing_on_node(struct world *w, const char *stop) {
        for (size_t i = 0; i < w->n_pods; i++)
                if (w->pods[i].kind != POD_DRIVER && w->pods[i].present &&
                    !(w->scoped && w->pods[i].kind == POD_WORK)) /* --driver: they stay */
                        fail_msg("%s while pod %s is on the node%s", stop, w->pods[i].name,
                                 w->pods[i].deleting ? " (terminating)" : "");
        for (size_t i = 0; i < w->n_claims; i++)
                if (w->claims[i].present && (w->claims[i].allocated || w->claims[i].reserved) &&
                    !(w->claims[i].podgroup && !pod_named(w, w->claims[i].pod)->present))
                        fail_msg("%s while ResourceClaim %s is %s on the node", stop, w->claims[i].name,
                                 w->claims[i].reserved ? "reserved" : "allocated");
        if (!w->driver_stopped_at)
                w->driver_stopped_at = fake_clock_now(w->clock);
}

static void start_deleting(struct world *w, struct wpod *p) {
        p->deleting = true;
        p->gone_at = fake_clock_now(w->clock) + GRACE;
        push_pod(w, p, "MODIFIED");
}

static struct wpod *evicted_pod(struct world *w, const struct fake_request *r) {
        const char *s = r->path + strlen(EVICTION), *slash = strchr(s, '/');
        char name[64];
        struct wpod *p;

        assert_non_null(slash);
        assert_true((size_t)(slash - s) < sizeof(name));
        snprintf(name, sizeof(name), "%.*s", (int)(slash - s), s);
        p = pod_named(w, name);
        assert_non_null(p);
        return p;
}

/* An eviction as it is sent: a driver pod's is the driver's stop (nothing may be on
 * the node now); a claim holder's never has grace 0. */
static void on_eviction_sent(struct world *w, const struct fake_request *r) {
        if (w->node_conditions && !streq_ptr(node_condition(w, "DrainInProgress", NULL), "True"))
                w->evicted_while_not_in_progress = true;
        struct wpod *p = evicted_pod(w, r);
        cJSON *body = fake_api_json(r->body), *grace;

        w->evictions_sent++;
        if (!p->present || p->deleting)
                w->repeat_evictions++;
        grace = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(body, "deleteOptions"),
                                                 "gracePeriodSeconds");
        if (cJSON_IsNumber(grace) && grace->valueint == 0) {
                if (p->kind == POD_HOLDER)
                        fail_msg("claim holder %s evicted with grace 0", p->name);
                if (p->kind == POD_DRIVER) /* force-deleted, its plugin would still run */
                        fail_msg("DRA driver pod %s evicted with grace 0", p->name);
                w->grace0_evictions++;
        }
        cJSON_Delete(body);
        if (p->kind == POD_DRIVER)
                assert_nothing_on_node(w, "driver pod evicted");
}

/* An Event the engine posted, counted by its reason. */
static void on_event(struct world *w, const struct fake_request *r) {
        static const char *const reasons[] = { EVENT_REASON_PHASE, EVENT_REASON_BLOCKED, EVENT_REASON_FAILED,
                                               EVENT_REASON_DONE, EVENT_REASON_FOREIGN };
        cJSON *ev = fake_api_json(r->body);
        const cJSON *reason = cJSON_GetObjectItemCaseSensitive(ev, "reason");

        for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
                if (cJSON_IsString(reason) && streq(reason->valuestring, reasons[i]))
                        w->events[i]++;
        cJSON_Delete(ev);
}

/* An eviction that was answered: the pod starts terminating if it was accepted. */
static void on_eviction(struct world *w, const struct fake_request *r) {
        struct wpod *p = evicted_pod(w, r);

        if (r->matched != w->accept_idx)
                return; /* refused (429): nothing happens */
        if (p->kind == POD_DRIVER)
                w->driver_evictions++;
        if (p->kind == POD_HOLDER)
                w->last_holder_answer = fake_clock_now(w->clock);
        if (p->kind == POD_WORK && !w->first_rest_eviction)
                w->first_rest_eviction = r->at_usec;
        if (p->present && !p->deleting) {
                p->accepted++;
                start_deleting(w, p);
        }
}

static void note_phase(struct world *w) {
        const char *ph = node_ann(w, w->scoped ? "drainer.io/state." DRIVER : "drainer.io/state");

        if (!ph || (w->n_phases > 0 && streq(w->phases[w->n_phases - 1], ph)))
                return;
        assert_true(w->n_phases < ELEMENTSOF(w->phases));
        snprintf(w->phases[w->n_phases++], sizeof(w->phases[0]), "%s", ph);
        if (w->kill_in && streq(ph, w->kill_in))
                w->kill_now = true;
}

/* A Node PATCH: merged, answered with the new Node, which goes out on the watch. */
static void on_node_patch(struct world *w, const struct fake_request *r) {
        char *obj = fake_api_patch_node(w->ft, w->node, &w->rv, r->body);
        cJSON *patch = fake_api_json(r->body);
        const cJSON *spec, *u, *l;

        /* Counted per patch, not per change: a patch that does again what is done counts. */
        spec = cJSON_GetObjectItemCaseSensitive(patch, "spec");
        u = cJSON_GetObjectItemCaseSensitive(spec, "unschedulable");
        l = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "metadata"),
                                                 "labels"),
                LABEL_KEY);
        w->records += strstr(r->body, "\"drainer.io/driver-stop\":\"[") != NULL;
        w->cordons += cJSON_IsTrue(u);
        w->uncordons += cJSON_IsFalse(u);
        w->taint_removals += cJSON_HasObjectItem(spec, "taints") && !node_tainted(w);
        if (cJSON_IsString(l) && streq(l->valuestring, PAUSED)) {
                w->label_pauses++;
                assert_nothing_on_node(w, "driver label set to " PAUSED);
        }
        w->label_restores += l && !(cJSON_IsString(l) && streq(l->valuestring, PAUSED));
        cJSON_Delete(patch);
        w->node_patches++;
        note_phase(w);
        push(w, NODES "&watch=1", "MODIFIED", obj);
}

/* A strategic merge patch of nodes/node-1/status (--node-conditions): conditions merge
 * by type, each field of a patched condition replaced, the others kept. */
static void on_status_patch(struct world *w, const struct fake_request *r) {
        cJSON *patch = fake_api_json(r->body), *status, *list, *meta;
        const cJSON *pc;
        char rv[32], *obj;

        /* only conditions, and never a resourceVersion precondition */
        assert_null(cJSON_GetObjectItemCaseSensitive(patch, "metadata"));
        assert_null(cJSON_GetObjectItemCaseSensitive(patch, "spec"));
        status = cJSON_GetObjectItemCaseSensitive(w->node, "status");
        if (!status)
                status = cJSON_AddObjectToObject(w->node, "status");
        list = cJSON_GetObjectItemCaseSensitive(status, "conditions");
        if (!list)
                list = cJSON_AddArrayToObject(status, "conditions");
        cJSON_ArrayForEach(pc, json_get_arr(json_get_obj(patch, "status"), "conditions")) {
                cJSON *have = NULL, *c;
                const cJSON *f;

                cJSON_ArrayForEach(c, list) if (streq_ptr(json_get_str(c, "type"), json_get_str(pc, "type")))
                        have = c;
                if (!have) {
                        have = cJSON_CreateObject();
                        cJSON_AddItemToArray(list, have);
                }
                cJSON_ArrayForEach(f, pc) {
                        cJSON_DeleteItemFromObjectCaseSensitive(have, f->string);
                        cJSON_AddItemToObject(have, f->string, cJSON_Duplicate(f, true));
                }
        }
        cJSON_Delete(patch);
        w->status_patches++;
        meta = cJSON_GetObjectItemCaseSensitive(w->node, "metadata");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
        snprintf(rv, sizeof(rv), "%u", ++w->rv);
        cJSON_AddStringToObject(meta, "resourceVersion", rv);
        obj = cJSON_PrintUnformatted(w->node);
        fake_transport_expect_json(w->ft, "PATCH", STATUS, 200, obj);
        push(w, NODES "&watch=1", "MODIFIED", obj);
}

static const char *json_str_of(const cJSON *j, const char *a, const char *b, const char *c) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, a), b);

        if (c)
                v = cJSON_GetObjectItemCaseSensitive(v, c);
        return cJSON_IsString(v) ? v->valuestring : "";
}

/* The name of drainer's rule in this world: the driver's, or the device's once made. */
static const char *rule_name(const struct world *w) {
        return w->device && w->device_rule[0] ? w->device_rule : RULE_NAME;
}

static size_t rule_at(struct world *w, const char *name) {
        for (size_t i = 0; i < w->n_rules; i++)
                if (streq(json_str_of(w->rules[i], "metadata", "name", NULL), name))
                        return i;
        return SIZE_MAX;
}

/* A rule as the API server holds it: body (taken) with a new uid, a resourceVersion and
 * the taint's timeAdded, replacing any of its name. */
static void rule_store(struct world *w, cJSON *body) {
        const char *name = json_str_of(body, "metadata", "name", NULL);
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(body, "metadata");
        cJSON *taint =
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(body, "spec"), "taint");
        _cleanup_free_ char *uid = test_asprintf("rule-uid-%u", ++w->rule_uids);
        _cleanup_free_ char *rv = test_asprintf("%u", ++w->rv);
        size_t i = rule_at(w, name);

        cJSON_AddStringToObject(meta, "uid", uid);
        cJSON_AddStringToObject(meta, "resourceVersion", rv);
        if (cJSON_IsObject(taint))
                cJSON_AddStringToObject(taint, "timeAdded", "2025-06-15T14:00:00Z");
        if (i != SIZE_MAX) {
                cJSON_Delete(w->rules[i]);
                w->rules[i] = body;
        } else {
                assert_true(w->n_rules < ELEMENTSOF(w->rules));
                w->rules[w->n_rules++] = body;
        }
        w->rule_present = rule_at(w, rule_name(w)) != SIZE_MAX;
}

/* A DeviceTaintRule of name as the admission policy would let anyone with the rights
 * create it: annotation ann, selector driver/pool, effect NoSchedule (NULL: defaults
 * node-1, DRIVER, node-1: exactly drainer's). */
static cJSON *rule_json(const char *name, const char *ann, const char *driver, const char *pool) {
        _cleanup_free_ char *j = test_asprintf(
                "{\"apiVersion\":\"resource.k8s.io/"
                "v1beta2\",\"kind\":\"DeviceTaintRule\",\"metadata\":{\"name\":"
                "\"%s\",\"labels\":{\"app.kubernetes.io/managed-by\":\"drainer\"},\"annotations\":{"
                "\"drainer.io/node\":\"%s\"}},\"spec\":{\"deviceSelector\":{\"driver\":\"%s\",\"pool\":"
                "\"%s\"},\"taint\":{\"key\":\"drainer.io/draining\",\"effect\":\"NoSchedule\"}}}",
                name, ann ? ann : "node-1", driver ? driver : DRIVER, pool ? pool : "node-1");

        return fake_api_json(j);
}

/* A DeviceTaintRule created (201, or 409 when one of its name exists), read (200 or
 * 404) or deleted (200, 404, or 409 when its preconditions do not hold): answered as
 * the API server would. A created rule must select the driver and its pool and say
 * NoSchedule; drainer's is deleted only once the driver's slice is back. */
static void on_rule_request(struct world *w, const struct fake_request *r) {
        const char *name = strncmp(r->path, RULES_PATH "/", strlen(RULES_PATH "/")) == 0
                                   ? r->path + strlen(RULES_PATH "/")
                                   : NULL;
        size_t at = name ? rule_at(w, name) : SIZE_MAX;

        if (streq(r->method, "POST")) {
                cJSON *b = fake_api_json(r->body);
                bool exists;

                assert_string_equal(r->path, RULES_PATH);
                assert_string_equal(cJSON_GetObjectItemCaseSensitive(b, "apiVersion")->valuestring,
                                    "resource.k8s.io/v1beta2");
                assert_string_equal(json_str_of(b, "spec", "deviceSelector", "driver"), DRIVER);
                assert_string_equal(json_str_of(b, "spec", "deviceSelector", "pool"), "node-1");
                assert_string_equal(json_str_of(b, "spec", "taint", "effect"), "NoSchedule");
                if (w->device) {
                        const char *nm = json_str_of(b, "metadata", "name", NULL);

                        assert_true(strncmp(nm, "drainer-6-node-1-" DRIVER "-",
                                            strlen("drainer-6-node-1-" DRIVER "-")) == 0);
                        snprintf(w->device_rule, sizeof(w->device_rule), "%s", nm);
                } else
                        assert_string_equal(json_str_of(b, "metadata", "name", NULL), RULE_NAME);
                exists = rule_at(w, rule_name(w)) != SIZE_MAX;
                if (exists) {
                        cJSON_Delete(b);
                        fake_transport_expect_json(w->ft, "POST", RULES_PATH, 409,
                                                   "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\","
                                                   "\"code\":409}");
                } else {
                        _cleanup_free_ char *obj = NULL;

                        rule_store(w, b);
                        obj = cJSON_PrintUnformatted(w->rules[rule_at(w, rule_name(w))]);
                        fake_transport_expect_json(w->ft, "POST", RULES_PATH, 201, obj);
                }
                w->rule_creates++;
        } else if (streq(r->method, "GET")) {
                _cleanup_free_ char *obj = NULL;

                assert_non_null(name);
                w->rule_reads++;
                if (at == SIZE_MAX) {
                        fake_transport_expect_json(
                                w->ft, "GET", r->path, 404,
                                "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}");
                        return;
                }
                obj = cJSON_PrintUnformatted(w->rules[at]);
                fake_transport_expect_json(w->ft, "GET", r->path, 200, obj);
                if (w->swap_on_read && streq(name, w->swap_on_read)) {
                        /* deleted and made again by someone else right after the read */
                        rule_store(w, rule_json(name, "node-2", NULL, "node-2"));
                        w->swap_on_read = NULL;
                }
        } else {
                cJSON *b = fake_api_json(r->body ? r->body : "{}");
                const char *uid = json_str_of(b, "preconditions", "uid", NULL);
                const char *rv = json_str_of(b, "preconditions", "resourceVersion", NULL);

                assert_string_equal(r->method, "DELETE");
                assert_non_null(name);
                w->rule_deletes_sent++;
                if (!*uid)
                        w->rule_deletes_unconditional++;
                if (at == SIZE_MAX)
                        fake_transport_expect_json(
                                w->ft, "DELETE", r->path, 404,
                                "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}");
                else if ((*uid && !streq(uid, json_str_of(w->rules[at], "metadata", "uid", NULL))) ||
                         (*rv &&
                          !streq(rv, json_str_of(w->rules[at], "metadata", "resourceVersion", NULL)))) {
                        w->rule_deletes_stale++;
                        fake_transport_expect_json(
                                w->ft, "DELETE", r->path, 409,
                                "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"code\":409}");
                } else {
                        fake_transport_expect_json(w->ft, "DELETE", r->path, 200, "{}");
                        if (streq(name, rule_name(w)))
                                w->slice_at_rule_delete = w->slice;
                        cJSON_Delete(w->rules[at]);
                        w->rules[at] = w->rules[--w->n_rules];
                        w->rule_present = rule_at(w, rule_name(w)) != SIZE_MAX;
                        w->rule_deletes++;
                        snprintf(w->deleted_rules + strlen(w->deleted_rules),
                                 sizeof(w->deleted_rules) - strlen(w->deleted_rules), "%s ", name);
                }
                cJSON_Delete(b);
        }
}

/* The requests the engine sent that the world has not acted on yet; evictions once
 * answered, or at once (now: the client is being killed, and the API server goes on
 * with what reached it). */
static void serve_requests(struct world *w, bool now) {
        size_t n = fake_transport_n_requests(w->ft);

        if (n > w->n_handled) {
                w->handled = realloc(w->handled, n);
                assert_non_null(w->handled);
                memset(w->handled + w->n_handled, 0, n - w->n_handled);
                w->n_handled = n;
        }
        for (size_t i = 0; i < n; i++) {
                const struct fake_request *r = fake_transport_request(w->ft, i);

                if (w->handled[i] & DONE)
                        continue;
                if (streq(r->method, "PATCH") && streq(r->path, NODE)) {
                        w->handled[i] = DONE;
                        if (!w->dying) /* else cancelled before it left */
                                on_node_patch(w, r);
                } else if (streq(r->method, "PATCH") && streq(r->path, STATUS)) {
                        w->handled[i] = DONE;
                        if (!w->dying)
                                on_status_patch(w, r);
                } else if (streq(r->method, "POST") && strncmp(r->path, EVICTION, strlen(EVICTION)) == 0) {
                        if (!(w->handled[i] & SEEN)) {
                                w->handled[i] |= SEEN;
                                on_eviction_sent(w, r);
                        }
                        /* acted on when answered: accepted (201) or not */
                        if (r->matched < 0 || (!now && fake_clock_now(w->clock) < r->at_usec + ANSWER))
                                continue;
                        w->handled[i] |= DONE;
                        on_eviction(w, r);
                } else if (strstr(r->path, "/devicetaintrules")) {
                        w->handled[i] = DONE;
                        if (!w->dying)
                                on_rule_request(w, r);
                } else {
                        w->handled[i] = DONE;
                        if (streq(r->method, "POST") && strstr(r->path, "/events") && r->body)
                                on_event(w, r);
                }
        }
}

/* Time goes by: pods terminate, the resourceclaim and DaemonSet controllers act,
 * the driver publishes its slice (or its slice goes with it). */
static void world_tick(struct world *w) {
        uint64_t now = fake_clock_now(w->clock);
        struct wpod *d = driver_pod(w);
        bool driver_up;

        for (size_t i = 0; i < w->n_pods; i++) {
                struct wpod *p = &w->pods[i];

                if (p->present && p->deleting && !p->stuck && now >= p->gone_at) {
                        p->present = false;
                        push_pod(w, p, "DELETED");
                }
        }
        for (size_t i = 0; i < w->n_claims; i++) {
                struct wclaim *c = &w->claims[i];
                struct wpod *p = pod_named(w, c->pod);

                if (!c->present || p->present || !(c->reserved || c->allocated) || c->podgroup)
                        continue;
                if (c->from_template) {
                        c->present = false;
                        push_claim(w, c, "DELETED");
                        continue;
                }
                if (c->reserved && c->stuck) {
                        c->reserved = false;
                        push_claim(w, c, "MODIFIED");
                } else if (!c->stuck) {
                        c->reserved = c->allocated = false;
                        push_claim(w, c, "MODIFIED");
                }
        }
        /* The DaemonSet controller. */
        if (d && w->strategy != &driver_stop_none) {
                bool selected = w->strategy != &driver_stop_label || streq_ptr(node_label(w), "true");

                if (d->present && !d->deleting && !selected)
                        start_deleting(w, d);
                else if (!d->present && selected && !node_tainted(w)) {
                        *d = (struct wpod){ .name = d->name,
                                            .kind = POD_DRIVER,
                                            .present = true,
                                            .gen = d->gen + 1,
                                            .ready_at = now + DRIVER_READY };
                        push_pod(w, d, "ADDED");
                } else if (d->present && !d->ready && !d->deleting && !w->driver_never_ready &&
                           now >= d->ready_at) {
                        d->ready = true;
                        push_pod(w, d, "MODIFIED");
                }
        }
        driver_up = d ? d->present && d->ready : w->unit_active;
        if (driver_up && !w->slice) {
                w->slice = true;
                push(w, SLICES "&watch=1", "ADDED", slice_json(w));
        } else if (!(d ? d->present : w->unit_active) && w->slice) {
                w->slice = false;
                push(w, SLICES "&watch=1", "DELETED", slice_json(w));
        }
        /* systemd completes its jobs */
        for (size_t i = 0; i < w->n_calls;) {
                struct unit_call c = w->calls[i];

                if (c.due > now) {
                        i++;
                        continue;
                }
                memmove(&w->calls[i], &w->calls[i + 1], (w->n_calls - i - 1) * sizeof(c));
                w->n_calls--;
                if (!c.job)
                        c.state_done(0, w->unit_active ? "active" : "inactive", c.userdata);
                else if (c.start && w->driver_never_ready)
                        c.job_done(0, "failed", NULL, c.userdata); /* the unit fails to start */
                else {
                        w->unit_active = c.start;
                        c.job_done(0, "done", NULL, c.userdata);
                }
        }
}

/* ---- unit control: systemd as the world has it ---- */

static int unit_call(struct world *w, bool job, bool start, unit_job_fn jd, unit_state_fn sd,
                     void *userdata) {
        assert_true(w->n_calls < ELEMENTSOF(w->calls));
        w->calls[w->n_calls++] = (struct unit_call){ .job = job,
                                                     .start = start,
                                                     .job_done = jd,
                                                     .state_done = sd,
                                                     .userdata = userdata,
                                                     .due = fake_clock_now(w->clock) + UNIT_DELAY };
        return 0;
}

static int unit_stop(void *ctx, const char *unit, unit_job_fn done, void *userdata) {
        struct world *w = ctx;

        assert_string_equal(unit, UNIT);
        assert_nothing_on_node(w, "unit " UNIT " stopped");
        w->unit_stops++;
        return unit_call(w, true, false, done, NULL, userdata);
}

static int unit_start(void *ctx, const char *unit, unit_job_fn done, void *userdata) {
        struct world *w = ctx;

        assert_string_equal(unit, UNIT);
        w->unit_starts++;
        return unit_call(w, true, true, done, NULL, userdata);
}

static int unit_state(void *ctx, const char *unit, unit_state_fn done, void *userdata) {
        assert_string_equal(unit, UNIT);
        return unit_call(ctx, false, false, NULL, done, userdata);
}

static const struct unit_ops world_unit_ops = { .stop = unit_stop,
                                                .start = unit_start,
                                                .active_state = unit_state };

/* ---- the engine in the world ---- */

static void on_notice(struct engine *en, const struct engine_notice *n, void *userdata) {
        struct world *w = userdata;

        announcer_notice(w->announcer, n);
}

static void on_finished(struct engine *en, const struct engine_summary *s, void *userdata) {
        struct world *w = userdata;

        w->finished = true;
        w->result = s->result;
        free(w->message);
        w->message = s->message ? strdup(s->message) : NULL;
}

/* A run of drainer (drain or uncordon) on the world as it is now. */
static void run_engine(struct world *w, enum engine_goal goal) {
        static const struct engine_callbacks cb = { .on_notice = on_notice, .on_finished = on_finished };
        struct engine_options o = {
                .node = "node-1",
                .goal = goal,
                .grace_seconds = w->grace_seconds,
                .timeout_usec = w->timeout_usec,
                .node_conditions = w->node_conditions,
                .plan = { .driver_selectors = (const struct selector *const *)w->sels,
                          .n_driver_selectors = w->n_sels,
                          .driver_stop = w->strategy,
                          .driver_stop_arg = w->strategy == &driver_stop_label     ? LABEL_KEY
                                             : w->strategy == &driver_stop_systemd ? UNIT
                                                                                   : NULL },
                .units = { .ops = &world_unit_ops, .ctx = w },
        };
        char *items[8];
        size_t n = 0;

        w->finished = false;
        items[0] = cJSON_PrintUnformatted(w->node);
        fake_api_expect_list_and_watch(w->ft, NODES,
                                       NODES "&limit=", fake_api_list("NodeList", w->rv, items, 1));
        for (size_t i = 0; i < w->n_pods; i++)
                if (w->pods[i].present)
                        items[n++] = pod_json(w, &w->pods[i]);
        fake_api_expect_list_and_watch(w->ft, PODS,
                                       PODS "&limit=", fake_api_list("PodList", w->rv, items, n));
        n = 0;
        for (size_t i = 0; i < w->n_claims; i++)
                if (w->claims[i].present)
                        items[n++] = claim_json(w, &w->claims[i]);
        fake_api_expect_list_and_watch(
                w->ft, CLAIMS, CLAIMS "?limit=", fake_api_list("ResourceClaimList", w->rv, items, n));
        n = 0;
        if (w->slice)
                items[n++] = slice_json(w);
        fake_api_expect_list_and_watch(
                w->ft, SLICES, SLICES "&limit=", fake_api_list("ResourceSliceList", w->rv, items, n));
        fake_transport_expect_json(w->ft, "GET", PDBS "?limit=", 200,
                                   "{\"kind\":\"PodDisruptionBudgetList\",\"apiVersion\":\"policy/v1\","
                                   "\"metadata\":{\"resourceVersion\":\"100\"},\"items\":[]}");
        if (w->scoped) {
                static const char *const drivers[] = { DRIVER, NULL };

                static const struct drain_device devices[] = { { DRIVER, "node-1", "gpu-0" } };

                if (w->device) {
                        o.plan.devices = devices;
                        o.plan.n_devices = 1;
                        o.skip_driver_stop = true;
                } else {
                        o.plan.drivers = drivers;
                        o.plan.n_drivers = 1;
                }
                /* API discovery: v1 without devicetaintrules; v1beta2 with them, or not served */
                fake_transport_expect_json(w->ft, "GET", "/apis/resource.k8s.io/v1", 200,
                                           "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                                           "\"resourceclaims\"},{\"name\":\"resourceslices\"}]}");
                if (w->rules_served)
                        fake_transport_expect_json(
                                w->ft, "GET", "/apis/resource.k8s.io/v1beta2", 200,
                                "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":"
                                "\"devicetaintrules\"},{\"name\":\"devicetaintrules/status\"}]}");
                else
                        fake_transport_expect_json(w->ft, "GET", "/apis/resource.k8s.io/v1beta2", 404,
                                                   "{\"kind\":\"Status\",\"reason\":\"NotFound\"}");
        }
        assert_int_equal(
                engine_new(w->api->client, fake_transport_base(w->ft), w->api->ts, &o, &cb, w, &w->engine),
                0);
        assert_int_equal(engine_start(w->engine), 0);
}

/* Kills the run (as a SIGKILL would, for the world: what was sent stays done). */
static void kill_engine(struct world *w) {
        serve_requests(w, true); /* what it sent before it died reached the API server */
        w->dying = true;
        for (size_t i = 0; i < w->n_held; i++)
                free(w->held[i].ev);
        w->n_held = 0;
        engine_stop(w->engine);
        for (int i = 0; i < 50 && !engine_idle(w->engine); i++) {
                fake_transport_deliver(w->ft);
                fake_clock_advance(w->clock, 1 * MS);
        }
        assert_true(engine_idle(w->engine));
        engine_free(w->engine);
        w->engine = NULL;
        for (int i = 0; i < 20 && fake_transport_in_flight(w->ft) > 0; i++) {
                fake_transport_deliver(w->ft);
                fake_clock_advance(w->clock, 0);
        }
        /* systemd carries out the jobs it was given; nobody hears the answers */
        for (size_t i = 0; i < w->n_calls; i++) {
                struct unit_call *c = &w->calls[i];

                if (c->job) {
                        if (!c->start)
                                assert_nothing_on_node(w, "unit " UNIT " stopped");
                        w->unit_active = c->start;
                        c->job_done(-ECANCELED, NULL, NULL, c->userdata);
                } else
                        c->state_done(-ECANCELED, NULL, c->userdata);
        }
        w->n_calls = 0;
        serve_requests(w, false);
        w->dying = false;
}

static void step(struct world *w, uint64_t usec) {
        fake_transport_deliver(w->ft);
        flush_events(w);
        serve_requests(w, false);
        world_tick(w);
        fake_transport_deliver(w->ft);
        fake_clock_advance(w->clock, usec);
}

/* Runs until the engine finishes, usec pass, or the Node enters w->kill_in (then
 * the engine is killed). */
static void run_until(struct world *w, uint64_t usec) {
        for (uint64_t t = 0; t < usec && !w->finished && !w->kill_now; t += 10 * MS)
                step(w, 10 * MS);
        if (w->kill_now) {
                kill_engine(w);
                w->kill_now = false;
                w->kill_in = NULL;
                return;
        }
        step(w, 0);
}

/* ---- setup: node-1 with its pods, claims and driver ---- */

static int setup(void **state) {
        struct world *w = calloc(1, sizeof(*w));

        assert_non_null(w);
        w->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: engine-token\n" });
        w->clock = w->api->clock;
        w->ft = w->api->ft;
        assert_int_equal(announcer_new(w->api->client, w->api->ts, "test", &w->announcer), 0);
        w->rv = 100;
        w->grace_seconds = -1;
        assert_int_equal(selectors_parse_strv(claims_default_driver_selectors, &w->sels, &w->n_sels, NULL),
                         0);
        *state = w;
        return 0;
}

static int teardown(void **state) {
        struct world *w = *state;

        if (w->engine)
                kill_engine(w);
        assert_int_equal(kube_client_calls_in_flight(w->api->client), 0);
        assert_true(announcer_idle(w->announcer));
        announcer_free(w->announcer);
        test_api_free(w->api);
        selectors_free(w->sels, w->n_sels);
        cJSON_Delete(w->node);
        for (size_t i = 0; i < w->n_rules; i++)
                cJSON_Delete(w->rules[i]);
        free(w->handled);
        free(w->message);
        free(w);
        return 0;
}

/* The world before any drain, with the driver stopped by strategy s. The expectations
 * that stay for every run: Events accepted, evictions accepted (after those a test
 * queues before it calls this: 429s). */
static void world_init(struct world *w, const struct driver_stop_ops *s, bool cordoned_by_someone) {
        w->strategy = s;
        w->node = fake_api_json(
                "{\"metadata\":{\"name\":\"node-1\",\"uid\":\"f6666666-7777-4888-8999-000000000000\","
                "\"resourceVersion\":\"90\",\"labels\":{\"kubernetes.io/hostname\":\"node-1\"},"
                "\"annotations\":{}},\"spec\":{},"
                "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
        if (cordoned_by_someone)
                cJSON_AddTrueToObject(cJSON_GetObjectItemCaseSensitive(w->node, "spec"), "unschedulable");
        if (s == &driver_stop_label)
                cJSON_AddStringToObject(
                        cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(w->node, "metadata"), "labels"),
                        LABEL_KEY, "true");
        w->pods[w->n_pods++] = (struct wpod){ .name = "gpu-a", .kind = POD_HOLDER, .claim = "gpu-a-claim" };
        w->pods[w->n_pods++] = (struct wpod){
                .name = "gpu-b", .kind = POD_HOLDER, .claim = "gpu-b-gpu", .from_template = true
        };
        w->pods[w->n_pods++] = (struct wpod){ .name = "web-a", .kind = POD_WORK };
        w->pods[w->n_pods++] = (struct wpod){ .name = "web-b", .kind = POD_WORK };
        if (s != &driver_stop_systemd)
                w->pods[w->n_pods++] = (struct wpod){ .name = "gpu-driver-x", .kind = POD_DRIVER };
        for (size_t i = 0; i < w->n_pods; i++)
                w->pods[i].present = w->pods[i].ready = true;
        w->claims[w->n_claims++] = (struct wclaim){ .name = "gpu-a-claim", .pod = "gpu-a" };
        w->claims[w->n_claims++] =
                (struct wclaim){ .name = "gpu-b-gpu", .pod = "gpu-b", .from_template = true };
        for (size_t i = 0; i < w->n_claims; i++)
                w->claims[i].present = w->claims[i].allocated = w->claims[i].reserved = true;
        w->unit_active = true;
        w->slice = true;
        fake_transport_expect(w->ft, "POST", "/api/v1/namespaces/default/events",
                              &(struct fake_reply){ .status = 201, .body = "{}", .times = FAKE_FOREVER });
        w->accept_idx = fake_transport_expect(
                w->ft, "POST", EVICTION,
                &(struct fake_reply){
                        .status = 201,
                        .body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\"}",
                        .delay_usec = ANSWER,
                        .times = FAKE_FOREVER });
}

static const struct driver_stop_ops *const strategies[] = {
        &driver_stop_taint,
        &driver_stop_label,
        &driver_stop_systemd,
        &driver_stop_none,
};

/* A fresh world for the next strategy of a loop. */
static struct world *renew(void **state) {
        void *st = *state;

        assert_int_equal(teardown(&st), 0);
        assert_int_equal(setup(&st), 0);
        *state = st;
        return st;
}

/* A node drain's phases as the Node records them: its cordon goes in one write with
 * evict-claim-holders (cordon is recorded only with DeviceTaintRules). */
static const char *const drain_phases[] = {
        "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers", "drained",
};

static void assert_phases(struct world *w, const char *const *want, size_t n) {
        for (size_t i = 0; i < w->n_phases; i++)
                print_message("    %s%s", i ? "-> " : "", w->phases[i]);
        print_message("\n");
        assert_int_equal(w->n_phases, n);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(w->phases[i], want[i]);
}

/* The world drained as strategy s leaves it. */
static void assert_drained(struct world *w) {
        struct wpod *d = driver_pod(w);

        assert_true(w->finished);
        if (w->result != 0)
                fail_msg("drain ended %d: %s", w->result, strna(w->message));
        assert_string_equal(node_ann(w, "drainer.io/state"), "drained");
        assert_true(node_unschedulable(w));
        assert_true(node_tainted(w));
        for (size_t i = 0; i < w->n_pods; i++)
                if (w->pods[i].kind != POD_DRIVER) {
                        assert_false(w->pods[i].present);
                        assert_int_equal(w->pods[i].accepted, 1); /* evicted once */
                }
        for (size_t i = 0; i < w->n_claims; i++)
                assert_false(w->claims[i].present && (w->claims[i].allocated || w->claims[i].reserved));
        assert_int_equal(w->repeat_evictions, 0);
        assert_int_equal(w->cordons, 1);
        assert_int_equal(w->records, 1);
        if (w->strategy == &driver_stop_none) {
                assert_true(d->present && !d->deleting);
                assert_true(w->slice);
                assert_int_equal(w->driver_stopped_at, 0);
        } else {
                assert_true(w->driver_stopped_at > 0);
                assert_false(w->slice);
                if (d)
                        assert_false(d->present);
        }
        assert_int_equal(w->driver_evictions, w->strategy == &driver_stop_taint);
        assert_int_equal(w->label_pauses, w->strategy == &driver_stop_label);
        assert_int_equal(w->unit_stops, w->strategy == &driver_stop_systemd);
        assert_true(w->unit_active == (w->strategy != &driver_stop_systemd));
        assert_int_equal(w->unit_starts, 0);
}

/* The world restored: schedulable, nothing of drainer left, the driver back. */
static void assert_restored(struct world *w) {
        struct wpod *d = driver_pod(w);

        assert_true(w->finished);
        if (w->result != 0)
                fail_msg("uncordon ended %d: %s", w->result, strna(w->message));
        assert_false(node_unschedulable(w));
        assert_false(node_tainted(w));
        assert_int_equal(drainer_annotations(w), 0);
        assert_int_equal(w->uncordons, 1);
        assert_int_equal(w->taint_removals, 1);
        assert_true(w->slice);
        if (d && !(d->present && d->ready && !d->deleting))
                fail_msg("the driver pod is %s after the uncordon (%s)",
                         !d->present   ? "gone"
                         : d->deleting ? "terminating"
                                       : "not Ready",
                         strna(w->message));
        assert_true(w->unit_active);
        /* each stop undone once, nothing undone that was not stopped */
        assert_int_equal(w->unit_starts, w->unit_stops);
        assert_int_equal(w->label_restores, w->label_pauses);
        if (w->strategy == &driver_stop_label)
                assert_string_equal(node_label(w), "true");
}

/* ---- tests ---- */

/* A drain from nothing, for each strategy: every phase in order, claim holders evicted
 * (and answered) before the rest is sent, the driver stopped only with nothing on the
 * node (the world checks it at the stop), no grace 0 for a claim holder nor for the
 * driver pod (-1: each pod's own). */
static void test_drain_from_nothing(void **state) {
        struct world *w = *state;

        for (size_t s = 0; s < ELEMENTSOF(strategies); s++) {
                if (s > 0)
                        w = renew(state);
                print_message("  --driver-stop %s:\n", strategies[s]->name);
                world_init(w, strategies[s], false);
                w->grace_seconds = 0;
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 60 * SEC);
                print_message("    events: %u DrainerPhase, %u DrainerBlocked, %u DrainerFailed, %u "
                              "DrainerDone; %u evictions with grace 0\n",
                              w->events[EV_PHASE], w->events[EV_BLOCKED], w->events[EV_FAILED],
                              w->events[EV_DONE], w->grace0_evictions);
                assert_phases(w, drain_phases, ELEMENTSOF(drain_phases));
                assert_drained(w);
                /* one eviction a pod, the driver's with the taint strategy, no more */
                assert_int_equal(w->evictions_sent, 4 + (strategies[s] == &driver_stop_taint));
                assert_true(w->first_rest_eviction > 0);
                assert_true(w->first_rest_eviction >= w->last_holder_answer);
                /* --grace-period=0 reached the others (the world sees it), never a holder
                 * nor the driver */
                assert_int_equal(w->grace0_evictions, 2);
                assert_int_equal(w->events[EV_PHASE], 1);
                assert_int_equal(w->events[EV_DONE], 1);
                assert_int_equal(w->events[EV_BLOCKED] + w->events[EV_FAILED], 0);
        }
}

/* A run killed as the Node enters each drain phase, and a second run: the drain
 * ends drained, each phase entered once in order over both runs (none skipped), the
 * cordon, each eviction, the record and the driver stop done once. */
static void test_drain_resumes_from_every_phase(void **state) {
        struct world *w = *state;
        bool first = true;

        for (size_t s = 0; s < ELEMENTSOF(strategies); s++)
                for (size_t k = 0; k < ELEMENTSOF(drain_phases); k++) {
                        if (!first)
                                w = renew(state);
                        first = false;
                        print_message("  --driver-stop %s, killed in %s:\n", strategies[s]->name,
                                      drain_phases[k]);
                        world_init(w, strategies[s], false);
                        w->kill_in = drain_phases[k];
                        run_engine(w, ENGINE_GOAL_DRAIN);
                        run_until(w, 60 * SEC);
                        /* (the move to drained ends a run: it may have finished) */
                        assert_true(!w->finished || k + 1 == ELEMENTSOF(drain_phases));
                        assert_null(w->engine);
                        run_engine(w, ENGINE_GOAL_DRAIN);
                        run_until(w, 60 * SEC);
                        assert_phases(w, drain_phases, ELEMENTSOF(drain_phases));
                        assert_drained(w);
                        assert_int_equal(w->evictions_sent, 4 + (strategies[s] == &driver_stop_taint));
                        /* the resumed run does not announce the drain again; each run that
                         * reaches drained says so */
                        assert_int_equal(w->events[EV_PHASE], 1);
                        assert_int_equal(w->events[EV_DONE], 1 + (k + 1 == ELEMENTSOF(drain_phases)));
                        assert_int_equal(w->events[EV_BLOCKED] + w->events[EV_FAILED], 0);
                }
}

/* (a node's uncordon goes in one write with the end: uncordon is recorded only while
 * DeviceTaintRules are deleted) */
static const char *const restore_phases[] = { "restore-drivers" };

/* A drain, then an uncordon killed as the Node enters each restore phase (or not at
 * all), and a second uncordon: the node ends schedulable with the driver back and its
 * ResourceSlice published again, the taint removed once, the label set back once, the
 * unit started once, one uncordon. */
static void test_restore_resumes_from_every_phase(void **state) {
        static const char *const all[] = { "evict-claim-holders", "evict-rest", "wait-released",
                                           "stop-drivers",        "drained",    "restore-drivers" };
        struct world *w = *state;
        bool first = true;

        for (size_t s = 0; s < ELEMENTSOF(strategies); s++)
                for (size_t k = 0; k <= ELEMENTSOF(restore_phases); k++) {
                        if (!first)
                                w = renew(state);
                        first = false;
                        print_message("  --driver-stop %s, uncordon killed in %s:\n", strategies[s]->name,
                                      k < ELEMENTSOF(restore_phases) ? restore_phases[k] : "(not killed)");
                        world_init(w, strategies[s], false);
                        run_engine(w, ENGINE_GOAL_DRAIN);
                        run_until(w, 60 * SEC);
                        assert_drained(w);
                        kill_engine(w);
                        w->kill_in = k < ELEMENTSOF(restore_phases) ? restore_phases[k] : NULL;
                        run_engine(w, ENGINE_GOAL_UNCORDON);
                        run_until(w, 60 * SEC);
                        if (k < ELEMENTSOF(restore_phases)) {
                                assert_false(w->finished);
                                run_engine(w, ENGINE_GOAL_UNCORDON);
                                run_until(w, 60 * SEC);
                        }
                        assert_phases(w, all, ELEMENTSOF(all));
                        assert_restored(w);
                        /* drain started, restore started (once, resumed or not); drained, uncordoned */
                        assert_int_equal(w->events[EV_PHASE], 2);
                        assert_int_equal(w->events[EV_DONE], 2);
                        assert_int_equal(w->events[EV_BLOCKED] + w->events[EV_FAILED], 0);
                }
}

/* A drain killed as the Node enters each drain phase, then an uncordon: the node is
 * restored from wherever the drain stopped (what it stopped is started again, once;
 * what it did not stop is left alone), and the restore phases follow the drain's. */
static void test_uncordon_from_every_drain_phase(void **state) {
        struct world *w = *state;
        bool first = true;

        for (size_t s = 0; s < ELEMENTSOF(strategies); s++)
                for (size_t k = 0; k + 1 < ELEMENTSOF(drain_phases); k++) {
                        const char *want[ELEMENTSOF(drain_phases) + 2];
                        size_t n = 0;

                        if (!first)
                                w = renew(state);
                        first = false;
                        print_message("  --driver-stop %s, drain killed in %s, then uncordon:\n",
                                      strategies[s]->name, drain_phases[k]);
                        world_init(w, strategies[s], false);
                        w->kill_in = drain_phases[k];
                        run_engine(w, ENGINE_GOAL_DRAIN);
                        run_until(w, 60 * SEC);
                        assert_false(w->finished);
                        /* (it may have sent the next phase's patch before it died) */
                        assert_in_range(w->n_phases, k + 1, k + 2);
                        for (size_t i = 0; i < w->n_phases; i++)
                                want[n++] = drain_phases[i];
                        run_engine(w, ENGINE_GOAL_UNCORDON);
                        run_until(w, 60 * SEC);
                        want[n++] = "restore-drivers";
                        assert_phases(w, want, n);
                        assert_restored(w);
                        assert_int_equal(w->cordons, 1);
                        assert_int_equal(w->events[EV_PHASE], 2);
                        assert_int_equal(w->events[EV_DONE], 1);
                        assert_int_equal(w->events[EV_BLOCKED] + w->events[EV_FAILED], 0);
                }
}

/* A drained node drained again: nothing is sent (no patch, no eviction, no stop). */
static void test_drained_drain_again_does_nothing(void **state) {
        struct world *w = *state;

        for (size_t s = 0; s < ELEMENTSOF(strategies); s++) {
                size_t patches;

                if (s > 0)
                        w = renew(state);
                world_init(w, strategies[s], false);
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 60 * SEC);
                assert_drained(w);
                kill_engine(w);
                patches = fake_transport_count(w->ft, "PATCH", NODE);
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 10 * SEC);
                assert_drained(w);
                assert_int_equal(fake_transport_count(w->ft, "PATCH", NODE), patches);
        }
}

/* A node cordoned by someone else before the drain stays cordoned after the uncordon:
 * drainer's taint and annotations go, spec.unschedulable stays true. */
static void test_uncordon_keeps_foreign_cordon(void **state) {
        struct world *w = *state;

        world_init(w, &driver_stop_taint, true);
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 60 * SEC);
        assert_true(w->finished);
        assert_int_equal(w->result, 0);
        assert_string_equal(node_ann(w, "drainer.io/was-unschedulable"), "true");
        assert_int_equal(w->cordons, 1); /* one cordon patch (its taint); it was unschedulable already */
        kill_engine(w);
        run_engine(w, ENGINE_GOAL_UNCORDON);
        run_until(w, 60 * SEC);
        assert_true(w->finished);
        assert_int_equal(w->result, 0);
        print_message("  %s\n", w->message);
        assert_true(node_unschedulable(w));
        assert_false(node_tainted(w));
        assert_int_equal(drainer_annotations(w), 0);
        assert_int_equal(w->uncordons, 0);
        assert_true(driver_pod(w)->present && driver_pod(w)->ready);
}

/* A PodDisruptionBudget refuses web-a's eviction three times (429): it is retried
 * with backoff (1, 2, 4 s, jittered), then accepted, and the drain completes. */
static void test_pdb_429_retried_with_backoff(void **state) {
        struct world *w = *state;
        uint64_t at[8];
        size_t n = 0;

        fake_transport_expect(
                w->ft, "POST", EVICTION "web-a/eviction",
                &(struct fake_reply){
                        .status = 429,
                        .body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                "\"message\":"
                                "\"Cannot evict pod as it would violate the pod's disruption budget.\","
                                "\"reason\":\"TooManyRequests\",\"details\":{\"causes\":[{\"reason\":"
                                "\"DisruptionBudget\",\"message\":\"The disruption budget web needs 2 "
                                "healthy pods and has 2 currently\"}]},\"code\":429}",
                        .delay_usec = ANSWER,
                        .times = 3 });
        world_init(w, &driver_stop_taint, false);
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 120 * SEC);
        for (size_t i = 0; i < fake_transport_n_requests(w->ft) && n < ELEMENTSOF(at); i++) {
                const struct fake_request *r = fake_transport_request(w->ft, i);

                if (streq(r->method, "POST") && streq(r->path, EVICTION "web-a/eviction"))
                        at[n++] = r->at_usec;
        }
        for (size_t i = 1; i < n; i++)
                print_message("  web-a eviction %zu: %.2f s after the one before\n", i + 1,
                              (double)(at[i] - at[i - 1]) / SEC);
        assert_int_equal(n, 4);
        /* 1, 2, 4 s, each jittered to between half and all of it, after the 429's answer */
        for (size_t i = 1; i < n; i++) {
                uint64_t b = (UINT64_C(1) << (i - 1)) * SEC;

                assert_in_range(at[i] - at[i - 1], b / 2, b + ANSWER + 100 * MS);
        }
        assert_drained(w);
}

/* A PodDisruptionBudget refuses web-a's eviction for good: the Node's drainer.io/message
 * names the held pod and the budget's answer (a hook owner tells it on its Machine). */
static void test_pdb_held_named_in_message(void **state) {
        struct world *w = *state;
        const char *m;

        fake_transport_expect(
                w->ft, "POST", EVICTION "web-a/eviction",
                &(struct fake_reply){
                        .status = 429,
                        .body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                "\"message\":"
                                "\"Cannot evict pod as it would violate the pod's disruption budget.\","
                                "\"reason\":\"TooManyRequests\",\"code\":429}",
                        .delay_usec = ANSWER,
                        .times = 1000 });
        world_init(w, &driver_stop_taint, false);
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 30 * SEC);
        m = node_ann(w, "drainer.io/message");
        print_message("  %s\n", strna(m));
        assert_false(w->finished);
        assert_non_null(m);
        assert_non_null(strstr(
                m, "held: demo/web-a (Cannot evict pod as it would violate the pod's disruption budget.)"));
        assert_true(driver_pod(w)->present);
}

/* web-b never terminates: the drain waits in wait-released until --timeout, ends
 * -ETIMEDOUT naming the phase and the pod, and the driver was never stopped. */
static void test_pod_that_never_terminates_times_out(void **state) {
        struct world *w = *state;

        world_init(w, &driver_stop_taint, false);
        pod_named(w, "web-b")->stuck = true;
        w->timeout_usec = 30 * SEC;
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 60 * SEC);
        print_message("  %s\n", strna(w->message));
        assert_true(w->finished);
        assert_int_equal(w->result, -ETIMEDOUT);
        assert_int_equal(w->events[EV_FAILED], 1);
        assert_string_equal(node_ann(w, "drainer.io/state"), "wait-released");
        assert_non_null(strstr(w->message, "wait-released"));
        assert_non_null(strstr(w->message, "demo/web-b"));
        assert_int_equal(w->driver_evictions, 0);
        assert_int_equal(w->records, 0);
        assert_true(driver_pod(w)->present);
}

/* gpu-a's claim stays allocated after its pod is gone: wait-released holds, the
 * driver is never stopped (taint: not evicted; label: not paused; systemd: not
 * stopped), and the timeout's message names the claim. */
static void test_allocated_claim_holds_wait_released(void **state) {
        struct world *w = *state;

        for (size_t s = 0; s < ELEMENTSOF(strategies) - 1; s++) {
                if (s > 0)
                        w = renew(state);
                world_init(w, strategies[s], false);
                w->claims[0].stuck = true;
                w->timeout_usec = 40 * SEC;
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 60 * SEC);
                print_message("  --driver-stop %s: %s\n", strategies[s]->name, strna(w->message));
                assert_true(w->finished);
                assert_int_equal(w->result, -ETIMEDOUT);
                assert_string_equal(node_ann(w, "drainer.io/state"), "wait-released");
                assert_non_null(strstr(w->message, "1 ResourceClaim left"));
                assert_non_null(strstr(w->message, "ResourceClaim demo/gpu-a-claim"));
                assert_int_equal(w->records, 0);
                assert_int_equal(w->driver_stopped_at, 0);
                assert_int_equal(w->driver_evictions + w->label_pauses + w->unit_stops, 0);
                assert_true(w->slice);
        }
}

/* A world whose gpu-a-claim is reserved for PodGroup "gang" (it stays reserved and
 * allocated), drained by strategy s (device: --device instead) with --timeout 40s;
 * tweak runs on the world before the engine starts, when given. */
static void podgroup_drain(struct world *w, const struct driver_stop_ops *s, bool device,
                           void (*tweak)(struct world *w)) {
        world_init(w, s, false);
        w->scoped = w->device = w->rules_served = device;
        w->claims[0].podgroup = true;
        w->claims[0].reserved = false;
        w->timeout_usec = 40 * SEC;
        if (tweak)
                tweak(w);
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 60 * SEC);
        print_message("  --driver-stop %s%s: %s\n", s->name, device ? " --device" : "", strna(w->message));
        assert_true(w->finished);
}

static void holder_stuck(struct world *w) {
        pod_named(w, "gpu-a")->stuck = true;
}

/* A claim reserved for a PodGroup stays reserved and allocated on the node until the
 * PodGroup is deleted. Once its pod on the node is gone the kubelet has unprepared it
 * here, so the drain goes on and the driver stops after that pod, not before; while the
 * pod stays (terminating for good) the driver never stops; a device drain of its device
 * waits for the PodGroup's deletion, and says so. */
static void test_podgroup_claim_does_not_hold_driver(void **state) {
        struct world *w = *state;

        for (size_t s = 0; s < ELEMENTSOF(strategies) - 1; s++) {
                if (s > 0)
                        w = renew(state);
                podgroup_drain(w, strategies[s], false, NULL);
                if (w->result != 0)
                        fail_msg("drain ended %d: %s", w->result, strna(w->message));
                assert_string_equal(node_ann(w, "drainer.io/state"), "drained");
                assert_false(pod_named(w, "gpu-a")->present);
                assert_true(w->driver_stopped_at >= pod_named(w, "gpu-a")->gone_at);
                assert_true(w->claims[0].present && w->claims[0].allocated);
                assert_false(w->claims[1].present);
        }

        w = renew(state);
        podgroup_drain(w, &driver_stop_taint, false, holder_stuck);
        assert_int_equal(w->result, -ETIMEDOUT);
        assert_int_equal(w->driver_stopped_at, 0);
        assert_int_equal(w->driver_evictions, 0);
        assert_true(w->slice);

        w = renew(state);
        podgroup_drain(w, &driver_stop_taint, true, NULL);
        assert_int_equal(w->result, -ETIMEDOUT);
        assert_false(pod_named(w, "gpu-a")->present);
        assert_non_null(strstr(w->message, "keeps its device until its PodGroup demo/gang is deleted"));
        assert_int_equal(w->driver_stopped_at, 0);
}

/* On restore the driver pod comes back but is never Ready, or its unit fails to
 * start: the node stays cordoned in restore-drivers, no ResourceSlice, the message
 * says what it waits for, and --timeout ends it. */
static void assert_conditions(struct world *w, const char *in_progress, const char *drained,
                              const char *reason) {
        const char *r1 = NULL, *r2 = NULL;

        assert_string_equal(node_condition(w, "DrainInProgress", &r1), in_progress);
        assert_string_equal(node_condition(w, "Drained", &r2), drained);
        assert_string_equal(r1, reason);
        assert_string_equal(r2, reason);
        assert_string_equal(node_condition(w, "Ready", NULL), "True"); /* the kubelet's stays */
}

/* --node-conditions (KEP-5683): DrainInProgress True before the first eviction, Drained
 * True once drained (one status patch each), both False while restoring and once
 * restored; a run killed in evict-rest resumes without writing them again; without
 * the flag, no status patch at all. */
static void test_node_conditions(void **state) {
        struct world *w = *state;

        world_init(w, &driver_stop_taint, false);
        w->node_conditions = true;
        w->kill_in = "evict-rest";
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 60 * SEC);
        assert_null(w->engine);
        assert_conditions(w, "True", "False", "DrainerDraining");
        assert_int_equal(w->status_patches, 1);
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 60 * SEC);
        assert_drained(w);
        assert_false(w->evicted_while_not_in_progress);
        assert_conditions(w, "False", "True", "DrainerDrained");
        assert_int_equal(w->status_patches, 2);
        kill_engine(w);

        run_engine(w, ENGINE_GOAL_UNCORDON);
        run_until(w, 60 * SEC);
        assert_restored(w);
        assert_conditions(w, "False", "False", "DrainerRestored");
        assert_int_equal(w->status_patches, 4); /* restoring, restored */
        kill_engine(w);

        /* The same world drained again without the flag: the conditions are not touched. */
        w->node_conditions = false;
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 60 * SEC);
        assert_true(w->finished);
        assert_int_equal(w->result, 0);
        assert_string_equal(node_ann(w, "drainer.io/state"), "drained");
        assert_int_equal(w->status_patches, 4);
        assert_conditions(w, "False", "False", "DrainerRestored");
}

static void test_unhealthy_driver_holds_restore(void **state) {
        struct world *w = *state;

        for (size_t s = 0; s < 3; s++) { /* taint, label, systemd: the ones that stop it */
                if (s > 0)
                        w = renew(state);
                world_init(w, strategies[s], false);
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 60 * SEC);
                assert_drained(w);
                kill_engine(w);
                w->driver_never_ready = true;
                w->timeout_usec = 30 * SEC;
                run_engine(w, ENGINE_GOAL_UNCORDON);
                run_until(w, 60 * SEC);
                print_message("  --driver-stop %s: %s\n", strategies[s]->name, strna(w->message));
                assert_true(w->finished);
                assert_int_equal(w->result, -ETIMEDOUT);
                assert_string_equal(node_ann(w, "drainer.io/state"), "restore-drivers");
                assert_true(node_unschedulable(w));
                assert_int_equal(w->uncordons, 0);
                assert_false(w->slice);
                if (strategies[s] == &driver_stop_systemd) {
                        /* retried with backoff (test-engine.c counts it), never active */
                        assert_in_range(w->unit_starts, 2, 8);
                        assert_false(w->unit_active);
                        assert_non_null(strstr(w->message, UNIT));
                } else {
                        assert_true(driver_pod(w)->present);
                        assert_non_null(strstr(w->message, "Ready"));
                }
        }
}

static const char *const scoped_drain_phases[] = {
        "cordon", "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers", "drained",
};

/* The scoped drain's end state: the holders gone, the plain pods running (never
 * evicted, same uid), the driver stopped by its label, the state under the driver's
 * keys only; with rules served the node never cordoned and one rule in place, else
 * the node cordoned (the fallback). */
static void assert_driver_out(struct world *w) {
        assert_true(w->finished);
        if (w->result != 0)
                fail_msg("driver drain ended %d: %s", w->result, strna(w->message));
        assert_string_equal(node_ann(w, "drainer.io/state." DRIVER), "drained");
        assert_null(node_ann(w, "drainer.io/state"));
        for (size_t i = 0; i < w->n_pods; i++) {
                const struct wpod *p = &w->pods[i];

                if (p->kind == POD_HOLDER) {
                        assert_false(p->present);
                        assert_int_equal(p->accepted, 1);
                } else if (p->kind == POD_WORK) {
                        assert_true(p->present && !p->deleting);
                        assert_int_equal(p->accepted, 0);
                        assert_int_equal(p->gen, 0);
                }
        }
        assert_int_equal(w->evictions_sent, 2); /* the two holders, nothing else */
        assert_int_equal(w->label_pauses, 1);
        assert_false(driver_pod(w)->present);
        assert_false(w->slice);
        assert_true(w->driver_stopped_at > 0);
        if (w->rules_served) {
                assert_false(node_unschedulable(w));
                assert_false(node_tainted(w));
                assert_int_equal(w->cordons, 0);
                assert_true(w->rule_present);
                assert_string_equal(node_ann(w, "drainer.io/taint-rules." DRIVER), RULE_NAME);
        } else {
                assert_true(node_unschedulable(w));
                assert_true(node_tainted(w));
                assert_int_equal(w->cordons, 1);
                assert_int_equal(w->rule_creates, 0);
                assert_string_equal(node_ann(w, "drainer.io/was-unschedulable." DRIVER), "false");
        }
}

/* --driver gpu.example.com, with DeviceTaintRules served and without (the cordon
 * fallback): a drain evicts only the claim holders of the driver, stops it by its
 * label with nothing of it left on the node (the world checks at the stop), and
 * keeps its state under drainer.io/KEY.gpu.example.com; a node drain meanwhile is
 * refused (-EPERM, nothing sent to the Node); the uncordon brings the driver back,
 * its slice published, then deletes the rule (or uncordons), and leaves no
 * drainer.io/ key. */
static void test_driver_scoped_drain(void **state) {
        struct world *w = *state;

        for (int served = 1; served >= 0; served--) {
                unsigned patches;

                if (served == 0)
                        w = renew(state);
                print_message("  --driver " DRIVER ", DeviceTaintRules %s:\n",
                              served ? "served" : "not served");
                world_init(w, &driver_stop_label, false);
                w->scoped = true;
                w->rules_served = served;
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 60 * SEC);
                /* the fallback cordons the node: no phase cordon of its own */
                assert_phases(w, scoped_drain_phases + !served, ELEMENTSOF(scoped_drain_phases) - !served);
                assert_driver_out(w);
                assert_int_equal(w->rule_creates, (unsigned)served);
                assert_int_equal(w->events[EV_DONE], 1);
                {
                        /* the phase gauge of the driver's drain, apart from the node's */
                        _cleanup_free_ char *text = NULL;
                        size_t len;

                        assert_non_null(metrics_default());
                        assert_int_equal(metrics_render(metrics_default(), &text, &len), 0);
                        assert_non_null(strstr(text, "drainer_drain_phase{node=\"node-1\",driver=\"" DRIVER
                                                     "\",phase=\"drained\"} 1\n"));
                }
                kill_engine(w);

                /* a node drain now: refused in preflight, nothing written */
                patches = w->node_patches;
                w->scoped = false;
                w->strategy = &driver_stop_taint;
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 10 * SEC);
                print_message("    node drain meanwhile: %s\n", strna(w->message));
                assert_true(w->finished);
                assert_int_equal(w->result, -EPERM);
                assert_non_null(
                        strstr(w->message, "DRA driver " DRIVER " of node node-1 is out of service"));
                assert_int_equal(w->node_patches, patches);
                assert_int_equal(w->evictions_sent, 2);
                kill_engine(w);
                w->strategy = &driver_stop_label;
                w->scoped = true;

                run_engine(w, ENGINE_GOAL_UNCORDON);
                run_until(w, 60 * SEC);
                assert_true(w->finished);
                if (w->result != 0)
                        fail_msg("uncordon --driver ended %d: %s", w->result, strna(w->message));
                assert_int_equal(drainer_annotations(w), 0);
                assert_string_equal(node_label(w), "true");
                assert_int_equal(w->label_restores, 1);
                assert_true(driver_pod(w)->present && driver_pod(w)->ready);
                assert_true(w->slice);
                assert_false(node_unschedulable(w));
                assert_false(node_tainted(w));
                if (served) {
                        assert_int_equal(w->rule_deletes, 1);
                        assert_false(w->rule_present);
                        assert_true(w->slice_at_rule_delete); /* the rule went once the slice was back */
                        assert_int_equal(w->uncordons, 0);
                } else {
                        assert_int_equal(w->rule_deletes, 0);
                        assert_int_equal(w->uncordons, 1);
                }
                for (size_t i = 0; i < w->n_pods; i++)
                        if (w->pods[i].kind == POD_WORK)
                                assert_true(w->pods[i].present && w->pods[i].gen == 0);
        }
}

/* --device where no DeviceTaintRule is served: refused with -EOPNOTSUPP (exit 11)
 * before anything is sent: no Node patch, no eviction, no cordon fallback. */
static void test_device_drain_unsupported(void **state) {
        struct world *w = *state;

        world_init(w, &driver_stop_taint, false);
        w->scoped = true;
        w->device = true;
        w->rules_served = false;
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 30 * SEC);
        print_message("    --device, no DeviceTaintRule served: %s\n", strna(w->message));
        assert_true(w->finished);
        assert_int_equal(w->result, -EOPNOTSUPP);
        assert_non_null(strstr(w->message, "serves no DeviceTaintRule"));
        assert_int_equal(w->node_patches, 0);
        assert_int_equal(w->evictions_sent, 0);
        assert_int_equal(w->rule_creates, 0);
        assert_false(node_unschedulable(w));
        assert_int_equal(drainer_annotations(w), 0);
        kill_engine(w);
}

/* --driver with rules: a run killed as the Node enters each phase of the drain, then
 * a second run: the same end state, each holder evicted once, the rule in place (a
 * second create answered 409 counts as in place). */
static void test_driver_scoped_drain_resumes(void **state) {
        struct world *w = *state;

        for (size_t k = 0; k < ELEMENTSOF(scoped_drain_phases); k++) {
                if (k > 0)
                        w = renew(state);
                print_message("  --driver " DRIVER ", killed in %s:\n", scoped_drain_phases[k]);
                world_init(w, &driver_stop_label, false);
                w->scoped = true;
                w->rules_served = true;
                w->kill_in = scoped_drain_phases[k];
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 60 * SEC);
                if (w->engine) /* killed in drained: the run may have finished first */
                        kill_engine(w);
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 60 * SEC);
                assert_phases(w, scoped_drain_phases, ELEMENTSOF(scoped_drain_phases));
                assert_driver_out(w);
                assert_true(w->rule_creates >= 1 && w->rule_creates <= 2);
        }
}

/* ---- DeviceTaintRules: only drainer's own are deleted, a 409 is judged ---- */

static void set_node_ann(struct world *w, const char *key, const char *value) {
        cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(w->node, "metadata"),
                                                    "annotations");

        cJSON_DeleteItemFromObjectCaseSensitive(a, key);
        cJSON_AddStringToObject(a, key, value);
}

/* A scoped drain with rules of node-1 (--driver-stop label), drained and killed. */
static void driver_drained(struct world *w) {
        world_init(w, &driver_stop_label, false);
        w->scoped = true;
        w->rules_served = true;
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 60 * SEC);
        assert_driver_out(w);
        kill_engine(w);
}

/* drainer.io/taint-rules.DRIVER names, besides drainer's own rule (and its own under
 * the name an older drainer gave it), rules that are not drainer's for node-1 and the
 * driver, as node-1's own token may write the annotation: an admin's quarantine of a
 * GPU of node-2, and rules named like drainer's but with another node's annotation,
 * another pool, another driver, or another node's name (node-1-b's, under the old and
 * the new scheme). The uncordon reads each back, deletes only drainer's two (each with
 * its uid and resourceVersion as preconditions), leaves the others alone with a
 * DrainerForeignObject Event each and names them in its message, and still completes,
 * the record cleared. */
static void test_uncordon_deletes_only_drainers_rules(void **state) {
        struct world *w = *state;
        static const char *const foreign[] = {
                "admin-quarantine-bad-gpu",      "drainer-6-node-1-" DRIVER "-1",
                "drainer-6-node-1-" DRIVER "-2", "drainer-6-node-1-" DRIVER "-3",
                "drainer-node-1-b-" DRIVER "-0", "drainer-8-node-1-b-" DRIVER "-0",
        };
        _cleanup_free_ char *list = NULL;

        driver_drained(w);
        rule_store(w,
                   fake_api_json("{\"apiVersion\":\"resource.k8s.io/v1beta2\",\"kind\":\"DeviceTaintRule\","
                                 "\"metadata\":{\"name\":\"admin-quarantine-bad-gpu\"},\"spec\":{"
                                 "\"deviceSelector\":{\"driver\":\"" DRIVER "\",\"pool\":\"node-2\","
                                 "\"device\":\"gpu-3\"},\"taint\":{\"key\":\"example.com/bad\","
                                 "\"effect\":\"NoExecute\"}}}"));
        rule_store(w, rule_json(foreign[1], "node-2", NULL, NULL));          /* another node's annotation */
        rule_store(w, rule_json(foreign[2], NULL, NULL, "node-2"));          /* another pool */
        rule_store(w, rule_json(foreign[3], NULL, "nic.example.com", NULL)); /* another driver */
        rule_store(w, rule_json(foreign[4], "node-1-b", NULL, "node-1-b"));  /* node-1-b's, old name */
        rule_store(w, rule_json(foreign[5], NULL, NULL, NULL));              /* node-1-b's name, else ours */
        rule_store(w, rule_json(LEGACY_RULE, NULL, NULL, NULL));             /* ours, old name */
        list = test_asprintf("%s,%s,%s,%s,%s,%s,%s,%s", RULE_NAME, foreign[0], foreign[1], foreign[2],
                             foreign[3], foreign[4], foreign[5], LEGACY_RULE);
        set_node_ann(w, "drainer.io/taint-rules." DRIVER, list);

        run_engine(w, ENGINE_GOAL_UNCORDON);
        run_until(w, 60 * SEC);
        print_message("  %s\n", strna(w->message));
        assert_true(w->finished);
        if (w->result != 0)
                fail_msg("uncordon --driver ended %d: %s", w->result, strna(w->message));
        assert_string_equal(w->deleted_rules, RULE_NAME " " LEGACY_RULE " ");
        assert_int_equal(w->rule_deletes_sent, 2);
        assert_int_equal(w->rule_deletes_unconditional, 0);
        assert_int_equal(w->n_rules, ELEMENTSOF(foreign));
        for (size_t i = 0; i < ELEMENTSOF(foreign); i++) {
                assert_true(rule_at(w, foreign[i]) != SIZE_MAX);
                assert_non_null(strstr(w->message, foreign[i]));
        }
        assert_int_equal(w->events[EV_FOREIGN], ELEMENTSOF(foreign));
        assert_int_equal(drainer_annotations(w), 0);
        assert_true(driver_pod(w)->present && driver_pod(w)->ready);
}

/* drainer's rule deleted and made again by someone else (another node's) between the
 * read and the DELETE: the DELETE's uid precondition fails (409), the rule is read again,
 * found foreign and left alone. */
static void test_rule_swapped_before_delete(void **state) {
        struct world *w = *state;

        driver_drained(w);
        w->swap_on_read = RULE_NAME;
        run_engine(w, ENGINE_GOAL_UNCORDON);
        run_until(w, 60 * SEC);
        print_message("  %s\n", strna(w->message));
        assert_true(w->finished);
        assert_int_equal(w->result, 0);
        assert_int_equal(w->rule_deletes_sent, 1);
        assert_int_equal(w->rule_deletes_stale, 1);
        assert_int_equal(w->rule_deletes, 0);
        assert_int_equal(w->rule_reads, 2);
        assert_true(w->rule_present);
        assert_string_equal(
                json_str_of(w->rules[rule_at(w, RULE_NAME)], "metadata", "annotations", "drainer.io/node"),
                "node-2");
        assert_int_equal(w->events[EV_FOREIGN], 1);
        assert_int_equal(drainer_annotations(w), 0);
}

/* A 409 on the create: accepted when what holds the name is exactly drainer's rule for
 * node-1, the driver and its pool (an earlier run's); else (squatted: another node's
 * annotation and pool, or another driver) the drain fails in cordon naming the rule,
 * nothing is evicted and the driver not stopped, never reported out of service; its
 * uncordon leaves the squatted rule alone and completes. */
static void test_rule_conflict_judged(void **state) {
        struct world *w = *state;
        static const struct {
                const char *ann, *driver, *pool;
                bool ours;
        } cases[] = {
                { NULL, NULL, NULL, true },
                { "node-1-b", NULL, "node-1-b", false },
                { NULL, "nic.example.com", NULL, false },
                { NULL, NULL, "node-2", false },
        };

        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                if (k > 0)
                        w = renew(state);
                world_init(w, &driver_stop_label, false);
                w->scoped = true;
                w->rules_served = true;
                rule_store(w, rule_json(RULE_NAME, cases[k].ann, cases[k].driver, cases[k].pool));
                run_engine(w, ENGINE_GOAL_DRAIN);
                run_until(w, 60 * SEC);
                print_message("  409, %s: %s\n", cases[k].ours ? "drainer's" : "squatted",
                              strna(w->message));
                assert_int_equal(w->rule_reads, 1);
                if (cases[k].ours) {
                        assert_driver_out(w);
                        assert_int_equal(w->rule_creates, 1);
                        continue;
                }
                assert_true(w->finished);
                assert_int_equal(w->result, -EEXIST);
                assert_non_null(strstr(w->message, "DeviceTaintRule " RULE_NAME " already exists and is not "
                                                   "drainer's rule"));
                assert_string_equal(node_ann(w, "drainer.io/state." DRIVER), "cordon");
                assert_int_equal(w->evictions_sent, 0);
                assert_int_equal(w->label_pauses, 0);
                assert_true(driver_pod(w)->present);
                kill_engine(w);

                run_engine(w, ENGINE_GOAL_UNCORDON);
                run_until(w, 60 * SEC);
                print_message("    uncordon: %s\n", strna(w->message));
                assert_true(w->finished);
                assert_int_equal(w->result, 0);
                assert_int_equal(w->rule_deletes_sent, 0);
                assert_true(w->rule_present);
                assert_int_equal(w->events[EV_FOREIGN], 1);
                assert_int_equal(drainer_annotations(w), 0);
        }
}

/* A driver drain an older drainer recorded and was killed in (state cordon, its rule
 * made under the old name): this version records its own name next to the old one before
 * it creates the rule, drains, and the uncordon deletes both. */
static void test_legacy_rule_drain_resumed(void **state) {
        struct world *w = *state;

        world_init(w, &driver_stop_label, false);
        w->scoped = true;
        w->rules_served = true;
        set_node_ann(w, "drainer.io/started-at." DRIVER, "2025-06-15T13:59:00Z");
        set_node_ann(w, "drainer.io/state." DRIVER, "cordon");
        set_node_ann(w, "drainer.io/state-since." DRIVER, "2025-06-15T13:59:00Z");
        set_node_ann(w, "drainer.io/taint-rules." DRIVER, LEGACY_RULE);
        rule_store(w, rule_json(LEGACY_RULE, NULL, NULL, NULL));
        run_engine(w, ENGINE_GOAL_DRAIN);
        run_until(w, 60 * SEC);
        assert_true(w->finished);
        if (w->result != 0)
                fail_msg("drain ended %d: %s", w->result, strna(w->message));
        assert_string_equal(node_ann(w, "drainer.io/taint-rules." DRIVER), LEGACY_RULE "," RULE_NAME);
        assert_int_equal(w->rule_creates, 1);
        assert_true(w->rule_present);
        kill_engine(w);
        run_engine(w, ENGINE_GOAL_UNCORDON);
        run_until(w, 60 * SEC);
        assert_true(w->finished);
        if (w->result != 0)
                fail_msg("uncordon ended %d: %s", w->result, strna(w->message));
        assert_string_equal(w->deleted_rules, LEGACY_RULE " " RULE_NAME " ");
        assert_int_equal(w->n_rules, 0);
        assert_int_equal(w->rule_deletes_unconditional, 0);
        assert_int_equal(w->events[EV_FOREIGN], 0);
        assert_int_equal(drainer_annotations(w), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_drain_from_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_driver_scoped_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_device_drain_unsupported, setup, teardown),
                cmocka_unit_test_setup_teardown(test_driver_scoped_drain_resumes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_uncordon_deletes_only_drainers_rules, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rule_swapped_before_delete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rule_conflict_judged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_legacy_rule_drain_resumed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drain_resumes_from_every_phase, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restore_resumes_from_every_phase, setup, teardown),
                cmocka_unit_test_setup_teardown(test_uncordon_from_every_drain_phase, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drained_drain_again_does_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_uncordon_keeps_foreign_cordon, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pdb_429_retried_with_backoff, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pdb_held_named_in_message, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pod_that_never_terminates_times_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_allocated_claim_holds_wait_released, setup, teardown),
                cmocka_unit_test_setup_teardown(test_podgroup_claim_does_not_hold_driver, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unhealthy_driver_holds_restore, setup, teardown),
                cmocka_unit_test_setup_teardown(test_node_conditions, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
