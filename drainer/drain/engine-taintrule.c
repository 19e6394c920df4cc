/* The DeviceTaintRules of a driver-scoped drain (--driver: one per pool) or a
 * device-scoped one (--device: one per device, never a cordon instead): whether the API server
 * serves them, their record on the Node before they exist, their creation (a 409 is
 * read back and judged before it counts), and their deletion, each only once read
 * back and found to be drainer's rule for this node and driver. It deletes nothing
 * because an annotation names it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "engine-int.h"

/* ---- driver-scoped drains: DeviceTaintRules (--driver) ---- */

#define MAX_RULE_POOLS 8

/* Whether this drain keeps new claims off the drivers' devices with DeviceTaintRules
 * (else by cordoning the node: a node drain, or the fallback where the API server
 * serves none). A recorded drain goes on the way it started: only a cordon records
 * was-unschedulable. */
bool engine_uses_rules(const struct engine *e) {
        if (!e->scope)
                return false;
        if (e->o.plan.n_devices > 0)
                return true; /* a device drain never cordons (refused where no rule is served) */
        if (e->has_st && e->st.has_phase && drain_phase_changes_node(e->st.phase))
                return !e->st.has_was_unschedulable;
        return e->o.plan.isolation == PLAN_ISOLATE_TAINT_RULE;
}

/* New work is kept off: the node cordoned and tainted, or (rules) the rules were made
 * in phase cordon, which a drain leaves only once every one was answered. */
bool engine_isolated(const struct engine *e, const struct node_rec *n) {
        return engine_uses_rules(e) || node_cordoned(n);
}

static void on_rules_discovered(int error, const struct taint_rule_api *api, void *userdata) {
        struct engine *e = userdata;

        e->disc = NULL;
        engine_note_idle(e);
        if (error == -ECANCELED)
                return;
        if (error < 0)
                return engine_finish(e, error,
                                     "cannot ask the API server whether it serves DeviceTaintRules: %s",
                                     strerror(-error));
        e->rule_api = *api;
        if (!api->served && e->o.plan.n_devices > 0 && e->o.goal == ENGINE_GOAL_DRAIN)
                /* No fallback to a cordon: that would take every device of the node out of
                 * service, which is not what was asked. */
                return engine_finish(e, -EOPNOTSUPP,
                                     "refused: the API server serves no DeviceTaintRule (resource.k8s.io "
                                     "v1, or v1beta2 with the DRADeviceTaintRules gate on): a device drain "
                                     "needs one to keep new claims off the devices; nothing was changed "
                                     "(drain the driver, --driver, or the node instead)");
        e->o.plan.isolation = api->served ? PLAN_ISOLATE_TAINT_RULE : PLAN_ISOLATE_CORDON_FALLBACK;
        e->o.plan.taint_rule_api = api->served ? e->rule_api.api_version : NULL;
        e->summary.isolation = e->o.plan.isolation;
        e->disc_done = true;
        engine_schedule_reconcile(e);
}

int engine_discover_rules(struct engine *e) {
        return taint_rule_discover(e->client, on_rules_discovered, e, &e->disc);
}

static void rule_forget(struct engine *e) {
        cJSON_Delete(e->rule_obj);
        e->rule_obj = NULL;
        e->rule_read = e->rule_conflict = false;
}

/* A rule request failed: fatal (permissions, a bad request), or retried in 2 s. */
static void rule_failed(struct engine *e, const struct kube_result *res) {
        if (res->error == -EACCES || res->error == -EINVAL)
                return engine_finish(e, res->error, "DeviceTaintRule: %s",
                                     res->message ? res->message : strerror(-res->error));
        log_debug("DeviceTaintRule request failed: %s, retrying", strna(res->message));
        engine_retry_at(e, timesrc_now(e->ts) + 2 * USEC_PER_SEC);
}

static void on_rule_created(const struct kube_result *res, void *userdata) {
        struct engine *e = userdata;

        e->rule_call = NULL;
        engine_note_idle(e);
        if (res->error == -ECANCELED)
                return;
        /* 409: a rule of that name is there (an earlier run of this drain made it, or
         * someone else did): it counts only once read and found to be ours. */
        if (res->error == -EEXIST || res->error == -EBUSY)
                e->rule_conflict = true;
        else if (res->error < 0)
                return rule_failed(e, res);
        else
                e->rules_done++;
        e->changed = true;
        engine_schedule_reconcile(e);
}

static void on_rule_read(const struct kube_result *res, void *userdata) {
        struct engine *e = userdata;

        e->rule_call = NULL;
        engine_note_idle(e);
        if (res->error == -ECANCELED)
                return;
        if (res->error < 0 && res->error != -ENOENT)
                return rule_failed(e, res);
        cJSON_Delete(e->rule_obj);
        e->rule_obj = res->error == 0 && res->json ? cJSON_Duplicate(res->json, true) : NULL;
        if (res->error == 0 && !e->rule_obj)
                return engine_finish(e, -ENOMEM, "out of memory");
        e->rule_read = true;
        engine_schedule_reconcile(e);
}

static void on_rule_deleted(const struct kube_result *res, void *userdata) {
        struct engine *e = userdata;

        e->rule_call = NULL;
        engine_note_idle(e);
        if (res->error == -ECANCELED)
                return;
        /* 409: the preconditions failed (another object of that name, or the rule changed
         * since it was read): read it again and judge again. 404: gone already. */
        if (res->error == -EEXIST || res->error == -EBUSY) {
                rule_forget(e);
                return engine_schedule_reconcile(e);
        }
        if (res->error < 0 && res->error != -ENOENT)
                return rule_failed(e, res);
        rule_forget(e);
        e->changed = true;
        e->rules_done++;
        engine_schedule_reconcile(e);
}

static int read_rule(struct engine *e, const char *name, size_t len) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/devicetaintrules/%.*s", e->rule_api.prefix, (int)len, name) < 0)
                return -ENOMEM;
        return kube_get(e->client, path, on_rule_read, e, &e->rule_call);
}

/* The pools of driver on the node (borrowed from the view's slices). */
static size_t node_pools(struct engine *e, const char *node, const char *driver, struct node_input *in,
                         const char **pools, size_t max) {
        if (node_view_collect(e->view, in) < 0)
                return 0;
        return taint_rule_pools(in->slices, in->n_slices, node, driver, pools, max);
}

/* The rules of the scope, in order: for each driver, one per pool of its ResourceSlices
 * on the node. Calls f for each (strings valid during the call); stops when f returns
 * non-zero and returns that, else 0; -ENOMEM. */
static int foreach_rule(struct engine *e, const struct node_rec *n,
                        int (*f)(struct engine *e, const char *name, const char *driver, const char *pool,
                                 const char *device, void *userdata),
                        void *userdata) {
        struct node_input in;
        int r = 0;

        /* --device: one rule per device, whatever the slices say now (checked in preflight) */
        for (size_t d = 0; d < e->o.plan.n_devices && r == 0; d++) {
                const struct drain_device *dv = &e->o.plan.devices[d];
                _cleanup_free_ char *name = NULL;

                r = taint_rule_device_name(n->name, dv->driver, dv->pool, dv->device, &name);
                if (r < 0)
                        return r;
                r = f(e, name, dv->driver, dv->pool, dv->device, userdata);
        }
        if (e->o.plan.n_devices > 0)
                return r;
        if (node_view_collect(e->view, &in) < 0)
                return -ENOMEM;
        for (size_t d = 0; d < e->o.plan.n_drivers && r == 0; d++) {
                const char *pools[MAX_RULE_POOLS];
                size_t np = taint_rule_pools(in.slices, in.n_slices, n->name, e->o.plan.drivers[d], pools,
                                             MAX_RULE_POOLS);

                for (size_t i = 0; i < np && r == 0; i++) {
                        _cleanup_free_ char *name = NULL;

                        r = taint_rule_name(n->name, e->o.plan.drivers[d], i, &name);
                        if (r < 0)
                                break;
                        r = f(e, name, e->o.plan.drivers[d], pools[i], NULL, userdata);
                }
        }
        node_input_done(&in);
        return r;
}

static int add_rule_name(struct engine *e, const char *name, const char *driver, const char *pool,
                         const char *device, void *userdata) {
        FILE *f = userdata;

        fprintf(f, "%s%s", ftell(f) > 0 ? "," : "", name);
        return 0;
}

/* drainer.io/taint-rules of this drain, comma-joined (malloc'd; "" for none). */
static int rule_names(struct engine *e, const struct node_rec *n, char **ret) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        int r;

        if (!f)
                return -ENOMEM;
        r = foreach_rule(e, n, add_rule_name, f);
        if ((fclose(f) != 0 || r < 0)) {
                free(buf);
                return r < 0 ? r : -ENOMEM;
        }
        *ret = buf;
        return 0;
}

struct rule_at {
        size_t i, want;
        const struct node_rec *n;
};

/* Whether name is in the comma-joined list. */
static bool listed(const char *list, const char *name) {
        size_t l = strlen(name);

        for (const char *p = list; p && *p;) {
                size_t k = strcspn(p, ",");

                if (k == l && strncmp(p, name, l) == 0)
                        return true;
                p += k;
                if (*p == ',')
                        p++;
        }
        return false;
}

static int create_rule(struct engine *e, const char *name, const char *driver, const char *pool,
                       const char *device, void *userdata) {
        struct rule_at *at = userdata;
        _cleanup_free_ char *body = NULL, *path = NULL;
        char why[256];
        int r;

        if (at->i++ < at->want)
                return 0;
        /* Recorded before it is created (a drain an older drainer recorded under other
         * names, or pools that changed since): the uncordon deletes what the record names. */
        if (!listed(e->st.taint_rules, name)) {
                char *patch = NULL;

                if (asprintf(&body, "%s%s%s", e->st.taint_rules ? e->st.taint_rules : "",
                             e->st.taint_rules && *e->st.taint_rules ? "," : "", name) < 0) {
                        body = NULL;
                        return -ENOMEM;
                }
                r = drain_patch_taint_rules(at->n, body, NULL, &patch);
                if (r < 0)
                        return r;
                engine_patch_node(e, patch);
                return 1;
        }
        if (e->rule_conflict && e->rule_read) {
                const char *pools[1] = { pool };

                /* What holds the name must be exactly what this drain would have made:
                 * else nothing keeps new claims off the driver's devices. */
                if (!e->rule_obj) { /* gone since: create it again */
                        rule_forget(e);
                } else if (device ? taint_rule_device_check(e->rule_obj, name, e->o.node, driver, pool,
                                                            device, why, sizeof(why)) < 0
                                  : taint_rule_check(e->rule_obj, name, e->o.node, driver, pools, 1, why,
                                                     sizeof(why)) < 0) {
                        if (device) {
                                engine_finish(
                                        e, -EEXIST,
                                        "DeviceTaintRule %s already exists and is not drainer's rule "
                                        "for device %s/%s/%s of node %s (%s): nothing keeps new claims "
                                        "off the device, so the drain stops here; find out who made "
                                        "it, delete it, then run the drain again",
                                        name, driver, pool, device, e->o.node, why);
                                return -EEXIST;
                        }
                        engine_finish(
                                e, -EEXIST,
                                "DeviceTaintRule %s already exists and is not drainer's rule for driver %s "
                                "of node %s (%s): nothing keeps new claims off the driver's devices, so the "
                                "drain stops here; find out who made it, delete it, then run the drain "
                                "again "
                                "(or drainer uncordon %s --driver %s)",
                                name, driver, e->o.node, why, e->o.node, driver);
                        return -EEXIST;
                } else {
                        rule_forget(e);
                        e->rules_done++;
                        at->want++;
                        return 0; /* on to the next one */
                }
        }
        if (e->rule_conflict) {
                r = read_rule(e, name, strlen(name));
                return r < 0 ? r : 1;
        }
        r = device ? taint_rule_device_body(&e->rule_api, name, e->o.node, driver, pool, device, &body)
                   : taint_rule_body(&e->rule_api, name, e->o.node, driver, pool, &body);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/devicetaintrules", e->rule_api.prefix) < 0)
                return -ENOMEM;
        r = kube_create(e->client, path, body, on_rule_created, e, &e->rule_call);
        return r < 0 ? r : 1;
}

/* Creates the scope's rules one after the other; true once each was answered. */
bool engine_create_rules(struct engine *e, const struct node_rec *n) {
        struct rule_at at = { .want = e->rules_done, .n = n };
        int r;

        if (e->rules_ok)
                return true;
        if (e->rule_call || e->node_call)
                return false;
        r = foreach_rule(e, n, create_rule, &at);
        if (r == -EEXIST && e->finished)
                return false;
        if (r < 0) {
                engine_finish(e, r, "cannot create the DeviceTaintRule: %s", strerror(-r));
                return false;
        }
        if (r > 0) {
                engine_set_message(e, "creating DeviceTaintRule %zu of the drivers' pools",
                                   e->rules_done + 1);
                return false;
        }
        e->rules_ok = true;
        return true;
}

/* The rule read for the name drainer.io/taint-rules names is drainer's rule
 * for this node and one of the scope's drivers (its name, annotation, label, selector of
 * the driver and a pool of the driver's ResourceSlices on the node, taint): 0, or
 * -EPERM with why. */
static int judge_rule(struct engine *e, const char *name, char *why, size_t why_size) {
        snprintf(why, why_size, "its name is not drainer's for node %s and driver %s", e->o.node,
                 strna(e->scope));
        /* --device: one of the devices given now (the record names; it never decides) */
        for (size_t d = 0; d < e->o.plan.n_devices; d++) {
                const struct drain_device *dv = &e->o.plan.devices[d];
                _cleanup_free_ char *want = NULL;

                if (taint_rule_device_name(e->o.node, dv->driver, dv->pool, dv->device, &want) < 0 ||
                    !streq(want, name))
                        continue;
                return taint_rule_device_check(e->rule_obj, name, e->o.node, dv->driver, dv->pool,
                                               dv->device, why, why_size);
        }
        if (e->o.plan.n_devices > 0) {
                snprintf(why, why_size,
                         "its name is not drainer's for a device given with --device on node %s", e->o.node);
                return -EPERM;
        }
        for (size_t d = 0; d < e->o.plan.n_drivers; d++) {
                const char *driver = e->o.plan.drivers[d], *pools[MAX_RULE_POOLS];
                struct node_input in = {};
                size_t np;
                int r;

                if (taint_rule_naming(name, e->o.node, driver) == TAINT_RULE_NAME_FOREIGN)
                        continue;
                np = node_pools(e, e->o.node, driver, &in, pools, MAX_RULE_POOLS);
                r = taint_rule_check(e->rule_obj, name, e->o.node, driver, pools, np, why, why_size);
                node_input_done(&in);
                return r;
        }
        return -EPERM;
}

/* A rule the Node names that is not drainer's: left alone, said (a warning and a
 * notice naming it), and kept for the final message; the record goes with the rest. */
static void leave_rule(struct engine *e, const struct node_rec *n, const char *name, const char *why) {
        _cleanup_free_ char *m = NULL;
        char *left = NULL;

        if (asprintf(&m,
                     "DeviceTaintRule %s, named in " DRAINER_ANN_TAINT_RULES ".%s of node %s, is not "
                     "drainer's rule for this node and driver (%s): left alone, not deleted",
                     name, strna(e->scope), e->o.node, why) < 0) {
                m = NULL;
                return;
        }
        log_warning("%s", m);
        engine_tell(e, n, ENGINE_NOTICE_FOREIGN_RULE, m);
        if (asprintf(&left, "%s%s%s (%s)", e->rules_left ? e->rules_left : "", e->rules_left ? "; " : "",
                     name, why) >= 0) {
                free(e->rules_left);
                e->rules_left = left;
        }
}

/* The i-th name of a comma-joined list (len bytes), or NULL. */
static const char *nth_name(const char *list, size_t i, size_t *ret_len) {
        for (const char *p = list; p && *p;) {
                size_t l = strcspn(p, ",");

                if (i-- == 0) {
                        *ret_len = l;
                        return p;
                }
                p += l;
                if (*p == ',')
                        p++;
        }
        return NULL;
}

/* DeleteOptions with preconditions on uid and resourceVersion (malloc'd), or NULL. */
static char *delete_preconditions(const char *uid, const char *rv) {
        cJSON *o = cJSON_CreateObject(), *pre;
        char *s = NULL;

        if (o && cJSON_AddStringToObject(o, "kind", "DeleteOptions") &&
            cJSON_AddStringToObject(o, "apiVersion", "v1") &&
            (pre = cJSON_AddObjectToObject(o, "preconditions")) &&
            cJSON_AddStringToObject(pre, "uid", uid) &&
            (!rv || cJSON_AddStringToObject(pre, "resourceVersion", rv)))
                s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return s;
}

/* One step for the rule the record names at rules_done: read it, judge it, delete it.
 * 0: done with it (gone, deleted or left alone); 1: a request is out; < 0: finished. */
static int delete_rule(struct engine *e, const struct node_rec *n, const char *name) {
        _cleanup_free_ char *path = NULL, *opts = NULL;
        char why[256];
        int r;

        if (!e->rule_read) {
                r = read_rule(e, name, strlen(name));
                if (r < 0) {
                        engine_finish(e, r, "cannot read DeviceTaintRule %s: %s", name, strerror(-r));
                        return r;
                }
                engine_set_message(e, "reading DeviceTaintRule %s", name);
                return 1;
        }
        if (!e->rule_obj) /* 404: gone already */
                return 0;
        if (judge_rule(e, name, why, sizeof(why)) < 0) {
                leave_rule(e, n, name, why);
                return 0;
        }
        /* The uid and resourceVersion read are the preconditions: a rule deleted and made
         * again by someone else in between, or changed since, is read and judged again. */
        opts = delete_preconditions(json_str(e->rule_obj, "metadata.uid"),
                                    json_str(e->rule_obj, "metadata.resourceVersion"));
        if (!opts || asprintf(&path, "%s/devicetaintrules/%s", e->rule_api.prefix, name) < 0) {
                engine_finish(e, -ENOMEM, "out of memory");
                return -ENOMEM;
        }
        r = kube_delete(e->client, path, opts, on_rule_deleted, e, &e->rule_call);
        if (r < 0) {
                engine_finish(e, r, "cannot delete DeviceTaintRule %s: %s", name, strerror(-r));
                return r;
        }
        engine_set_message(e, "deleting DeviceTaintRule %s", name);
        return 1;
}

/* Deletes the rules drainer.io/taint-rules names, one after the other, each only once
 * read back from the API server and found to be drainer's rule for this node and driver
 * (judge_rule), with its uid and resourceVersion as preconditions. The annotation is no
 * authority (anyone who may patch the Node writes it): a rule that is not drainer's is
 * left alone and said, and the record goes with the rest. True once each is gone or
 * left. */
bool engine_delete_rules(struct engine *e, const struct node_rec *n) {
        const char *list = e->st.taint_rules, *p;
        size_t l;

        if (e->rules_ok || !list || !*list)
                return true;
        if (e->rule_call)
                return false;
        if (!e->rule_api.served) {
                engine_finish(
                        e, -EOPNOTSUPP,
                        "the API server serves no DeviceTaintRule (resource.k8s.io v1 or v1beta2) any more: "
                        "cannot delete %s; delete them by hand once it does, then run the uncordon again",
                        list);
                return false;
        }
        while ((p = nth_name(list, e->rules_done, &l))) {
                _cleanup_free_ char *name = strndup(p, l);
                int r;

                if (!name) {
                        engine_finish(e, -ENOMEM, "out of memory");
                        return false;
                }
                r = delete_rule(e, n, name);
                if (r != 0)
                        return false;
                rule_forget(e);
                e->rules_done++;
        }
        e->rules_ok = true;
        return true;
}

/* The start of a driver-scoped drain with rules: the record of the rules and state
 * cordon in one write (the rules follow in phase cordon). */
void engine_isolate(struct engine *e, const struct node_rec *n) {
        _cleanup_free_ char *names = NULL;
        char *body = NULL;
        int r;

        r = rule_names(e, n, &names);
        if (r < 0)
                return engine_finish(e, r, "out of memory");
        r = drain_patch_isolate(n, timesrc_realtime(e->ts), names,
                                e->o.plan.n_devices > 0
                                        ? "keeping new claims off the devices (DeviceTaintRule)"
                                        : "keeping new claims off the driver's devices (DeviceTaintRule)",
                                &body);
        if (r < 0)
                return engine_finish(e, r, "cannot build the node patch: %s", strerror(-r));
        if (e->o.plan.n_devices > 0) {
                /* the devices, for an overlapping drain's refusal and for status */
                _cleanup_free_ char *list = drain_devices_format(e->o.plan.devices, e->o.plan.n_devices);

                r = list ? drain_devices_patch_add(&body, list) : -ENOMEM;
                if (r < 0) {
                        free(body);
                        return engine_finish(e, r, "out of memory");
                }
        }
        e->rules_ok = false;
        e->rules_done = 0;
        rule_forget(e);
        engine_patch_node(e, body);
}
