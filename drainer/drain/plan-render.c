/* The drain plan as text (`drainer plan`, the preflight report) and as JSON
 * (`-o json`), alone or as plan's report of a node. Reads a built plan; writes only to the FILE or the cJSON tree it
 * returns. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/buf.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/dra/nodeview.h"
#include "drainer/dra/seamless.h"
#include "drainer/dra/taintrule.h"
#include "drainer/drain/plan.h"

/* ---- text ---- */

static void print_devices(FILE *f, const struct claim_rec *c, const char *sep) {
        for (size_t i = 0; i < c->n_devices; i++)
                fprintf(f, "%s%s/%s/%s", i > 0 ? sep : "", strna(c->devices[i].driver),
                        strna(c->devices[i].pool), strna(c->devices[i].device));
}

static void print_pod_claim(FILE *f, const struct plan *p, const char *ns, const char *name, bool *first) {
        const struct plan_claim *pc = plan_find_claim(p, ns, name);

        fprintf(f, "%s%s/%s", *first ? "" : ", ", ns, name);
        *first = false;
        if (pc && pc->claim->n_devices > 0) {
                fputs(" (", f);
                print_devices(f, pc->claim, ", ");
                fputc(')', f);
        }
}

static int nsname_width(const struct plan *p) {
        size_t w = 0;

        for (size_t i = 0; i < p->n_pods; i++)
                if (p->pods[i].group != EVICT_GROUP_NONE)
                        w = MAX(w, strlen(p->pods[i].pod->ns) + 1 + strlen(p->pods[i].pod->name));
        return (int)MIN(w, (size_t)60);
}

static void print_group_pods(FILE *f, const struct plan *p, enum evict_group g, int width) {
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];
                const struct pod_rec *pod = pp->pod;
                bool holds = pod_holds_claims(pod), ds = pod_rec_daemonset(pod), first = true;
                char nsname[512];

                if (pp->group != g)
                        continue;
                snprintf(nsname, sizeof nsname, "%s/%s", pod->ns, pod->name);
                if (!holds && pp->n_pdbs == 0 && !pod->deleting && !ds) {
                        fprintf(f, "      %s\n", nsname);
                        continue;
                }
                fprintf(f, "      %-*s", width, nsname);
                if (holds) {
                        fputs("  claims ", f);
                        for (size_t j = 0; j < pod->n_claims; j++)
                                if (pod->claims[j].claim_name)
                                        print_pod_claim(f, p, pod->ns, pod->claims[j].claim_name, &first);
                        if (pod->extended_claim_name)
                                print_pod_claim(f, p, pod->ns, pod->extended_claim_name, &first);
                }
                for (size_t j = 0; j < pp->n_pdbs; j++)
                        fprintf(f, "  (PDB %s/%s allows %d disruption%s)", pp->pdbs[j]->ns,
                                pp->pdbs[j]->name, pp->pdbs[j]->disruptions_allowed,
                                pp->pdbs[j]->disruptions_allowed == 1 ? "" : "s");
                if (ds)
                        fprintf(f, "  (DaemonSet %s/%s)", pod->ns, strna(pod->controller->name));
                if (pod->deleting)
                        fputs("  (deleting)", f);
                fputc('\n', f);
        }
}

static void print_group(FILE *f, const struct plan *p, const char *prefix, enum evict_group g, int width) {
        size_t n = p->n_per_group[g];

        fprintf(f, "%s (%zu)%s\n", prefix, n, n > 0 ? ":" : "");
        print_group_pods(f, p, g, width);
}

static int claim_width(const struct plan *p) {
        size_t w = 0;

        for (size_t i = 0; i < p->n_claims; i++)
                w = MAX(w, strlen(p->claims[i].claim->ns) + 1 + strlen(p->claims[i].claim->name));
        return (int)MIN(w, (size_t)60);
}

static void print_claim(FILE *f, const struct plan_claim *pc, int width) {
        const struct claim_rec *c = pc->claim;
        char nsname[512];

        snprintf(nsname, sizeof nsname, "%s/%s", c->ns, c->name);
        fprintf(f, "      %-*s  ", width, nsname);
        if (c->n_reserved == 0)
                fputs(pc->why == CLAIM_ALLOCATED_NODE_SELECTOR
                              ? "allocated on the node, reserved for nobody"
                              : "allocated from a ResourceSlice of the node, "
                                "reserved for nobody",
                      f);
        else {
                fputs("reserved for ", f);
                for (size_t i = 0; i < c->n_reserved; i++) {
                        const struct claim_consumer *r = &c->reserved[i];

                        if (i > 0)
                                fputs(", ", f);
                        if (!r->api_group && streq_ptr(r->resource, "pods"))
                                fprintf(f, "%s/%s", c->ns, strna(r->name));
                        else if (r == pc->podgroup)
                                fprintf(f, "PodGroup %s/%s", c->ns, strna(r->name));
                        else
                                fprintf(f, "%s %s/%s", strna(r->resource), c->ns, strna(r->name));
                }
        }
        if (c->n_devices > 0) {
                fputs("; devices ", f);
                print_devices(f, c, ", ");
        }
        if (c->deleting)
                fputs(" (deleting)", f);
        if (pc->driver_own)
                fputs(" (DRA driver's own claim: does not hold the drain back)", f);
        if (pc->no_node_ops)
                fputs(" (its devices skip NodeUnprepareResources: no driver needed, does not hold the drain "
                      "back)",
                      f);
        if (pc->podgroup_released)
                fputs(" (no pod of the node uses it: unprepared here, does not hold the drain back; it "
                      "stays "
                      "allocated until its PodGroup is deleted)",
                      f);
        else if (pc->podgroup_unused)
                fputs(" (no pod of the node uses it, but its devices stay allocated until its PodGroup is "
                      "deleted)",
                      f);
        fputc('\n', f);
        if (pc->podgroup && pc->group_pods_error)
                fprintf(f, "      %*s  its pods: not read (%s)\n", width, "", pc->group_pods_error);
        else if (pc->podgroup && pc->group_pods_read) {
                fprintf(f, "      %*s  its pods: ", width, "");
                for (size_t i = 0; i < pc->n_group_pods; i++) {
                        const struct plan_group_pod *gp = &pc->group_pods[i];

                        fprintf(f, "%s%s/%s %s%s%s", i ? ", " : "", c->ns, gp->name,
                                gp->node ? "on " : "not scheduled", strempty(gp->node),
                                gp->finished ? " (finished)" : "");
                }
                fputs(pc->n_group_pods ? "\n" : "none\n", f);
        }
}

/* What the strategy will do to the node's driver pods, e.g. "evict ns/a (DaemonSet ns/x)". */
static int describe_stop(FILE *f, const struct plan *p, const struct plan_options *o) {
        const struct driver_stop_ops *stop = driver_stop_or_default(o->driver_stop);
        _cleanup_free_ const struct pod_rec **drivers = calloc(p->n_pods + 1, sizeof(*drivers));
        size_t n = 0;

        if (!drivers)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_pods; i++)
                if (p->pods[i].cls == POD_CLASS_DRIVER)
                        drivers[n++] = p->pods[i].pod;
        fprintf(f, " 5. stop DRA drivers (%s): ", stop->name);
        if (stop->arg_usage && !o->driver_stop_arg)
                fprintf(f, "(no %s: see the blockers) ", stop->arg_usage);
        else if (o->driver_stop_arg_from)
                fprintf(f, "(%s %s from the nodeSelector of %s) ", stop->arg_usage, o->driver_stop_arg,
                        o->driver_stop_arg_from);
        stop->describe(o->driver_stop_arg, drivers, n, f);
        fputc('\n', f);
        return 0;
}

int plan_print_text(const struct plan *p, const struct plan_options *o, FILE *f) {
        const char *was;
        bool tainted, first, cordoned_before;
        int width, cwidth;

        assert(p && p->node);
        assert(o);
        assert(f);

        tainted = node_rec_find_taint(p->node, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT);
        width = nsname_width(p);
        cwidth = claim_width(p);
        /* drainer records whether the node was cordoned before it cordoned it */
        was = kv_get(p->node->annotations, p->node->n_annotations, DRAINER_ANN_WAS_UNSCHEDULABLE);
        cordoned_before = was ? streq(was, "true") : p->node->unschedulable;

        fprintf(f, "Plan for node %s (%s%s)\n", p->node->name,
                p->node->unschedulable ? "already unschedulable" : "schedulable",
                tainted ? ", drain taint set" : "");

        if (o->n_drivers > 0) {
                fputs("Scoped to DRA driver", f);
                for (size_t i = 0; i < o->n_drivers; i++)
                        fprintf(f, "%s %s", i == 0 ? (o->n_drivers > 1 ? "s" : "") : ",", o->drivers[i]);
                fprintf(f, " (--driver): %sonly pods holding claims of these drivers' devices are evicted\n",
                        o->isolation == PLAN_ISOLATE_TAINT_RULE ? "the node stays schedulable; " : "");
        }
        if (o->n_devices > 0) {
                fputs("Scoped to device", f);
                for (size_t i = 0; i < o->n_devices; i++)
                        fprintf(f, "%s %s/%s/%s", i == 0 ? (o->n_devices > 1 ? "s" : "") : ",",
                                o->devices[i].driver, o->devices[i].pool, o->devices[i].device);
                fputs(" (--device): the node stays schedulable and its DRA driver running; only pods "
                      "whose claims hold these devices are evicted (Eviction API, budgets respected)\n",
                      f);
        }
        if (o->n_devices > 0 && o->isolation == PLAN_ISOLATE_TAINT_RULE)
                fprintf(f,
                        " 1. DeviceTaintRule (%s) %s:%s for each device: no new claim is allocated "
                        "on it; the node is not cordoned. (A NoExecute taint would hit the same pods "
                        "below, deleted without the Eviction API.)\n",
                        strna(o->taint_rule_api), TAINT_RULE_TAINT_KEY, TAINT_RULE_TAINT_EFFECT);
        else if (o->n_devices > 0)
                fputs(" 1. refused: the API server serves no DeviceTaintRule (resource.k8s.io v1, or "
                      "v1beta2 with the DRADeviceTaintRules gate on): a device drain does not run here "
                      "(no fallback to a cordon; exit 11)\n",
                      f);
        else if (o->n_drivers > 0 && o->isolation == PLAN_ISOLATE_TAINT_RULE)
                fprintf(f,
                        " 1. DeviceTaintRule (%s) %s:%s for each pool of the drivers on the node: no new "
                        "claim "
                        "is allocated on their devices here; the node is not cordoned\n",
                        strna(o->taint_rule_api), TAINT_RULE_TAINT_KEY, TAINT_RULE_TAINT_EFFECT);
        else
                fprintf(f, " 1. cordon: spec.unschedulable=true, taint %s:%s%s%s\n", DRAIN_TAINT_KEY,
                        DRAIN_TAINT_EFFECT,
                        cordoned_before ? " (cordoned before the drain: uncordon leaves it cordoned)" : "",
                        o->n_drivers > 0 ? " (fallback: the API server serves no DeviceTaintRule, "
                                           "resource.k8s.io v1 or v1beta2, so the whole node is cordoned)"
                                         : "");

        print_group(f, p, " 2. evict claim holders", EVICT_GROUP_CLAIM_HOLDERS, width);
        print_group(f, p, "    then critical claim holders", EVICT_GROUP_CLAIM_HOLDERS_CRITICAL, width);
        print_group(f, p, " 3. evict the rest", EVICT_GROUP_REST, width);
        print_group(f, p, "    then critical pods", EVICT_GROUP_REST_CRITICAL, width);

        fprintf(f,
                o->n_devices > 0
                        ? " 4. wait until the pods are gone and no ResourceClaim holds the devices (%zu "
                          "claim%s now)%s\n"
                        : " 4. wait until the pods are gone and no ResourceClaim is on the node (%zu "
                          "claim%s now)%s\n",
                p->n_claims_blocking, p->n_claims_blocking == 1 ? "" : "s", p->n_claims > 0 ? ":" : "");
        for (size_t i = 0; i < p->n_claims; i++)
                print_claim(f, &p->claims[i], cwidth);

        if (o->n_devices > 0)
                fputs(" 5. no DRA driver is stopped: it keeps serving the node's other devices\n", f);
        else if (describe_stop(f, p, o) < 0)
                return -ENOMEM;

        fputs("Stays on the node:", f);
        first = true;
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];

                if (pp->group != EVICT_GROUP_NONE)
                        continue;
                fprintf(f, "%s %s/%s (%s)", first ? "" : ",", pp->pod->ns, pp->pod->name,
                        strna(pp->skip_reason));
                first = false;
        }
        fputs(first ? " nothing\n" : "\n", f);

        fputs("PodDisruptionBudgets:", f);
        for (size_t i = 0; i < p->n_pdbs; i++) {
                const struct pdb_rec *b = p->pdbs[i];

                fprintf(f, "%s %s/%s: %d disruption%s allowed (%d/%d healthy, %d desired)", i > 0 ? ";" : "",
                        b->ns, b->name, b->disruptions_allowed, b->disruptions_allowed == 1 ? "" : "s",
                        b->current_healthy, b->expected_pods, b->desired_healthy);
        }
        fputs(p->n_pdbs == 0 ? " none\n" : "\n", f);

        if (p->n_blockers == 0)
                fputs("Preflight: no blockers\n", f);
        else {
                fprintf(f, "Blockers (%zu):\n", p->n_blockers);
                for (size_t i = 0; i < p->n_blockers; i++)
                        fprintf(f, "  - %s\n", p->blockers[i].message);
        }
        if (p->n_warnings > 0)
                fprintf(f, "Warnings (%zu):\n", p->n_warnings);
        for (size_t i = 0; i < p->n_warnings; i++)
                fprintf(f, "  - %s\n", p->warnings[i]);

        return ferror(f) ? -EIO : 0;
}

/* ---- JSON ---- */

static int add_str(cJSON *o, const char *k, const char *v) {
        return (v ? cJSON_AddStringToObject(o, k, v) : cJSON_AddNullToObject(o, k)) ? 0 : -ENOMEM;
}

static int add_num(cJSON *o, const char *k, double v) {
        return cJSON_AddNumberToObject(o, k, v) ? 0 : -ENOMEM;
}

static int add_bool(cJSON *o, const char *k, bool v) {
        return cJSON_AddBoolToObject(o, k, v) ? 0 : -ENOMEM;
}

static int add_item(cJSON *container, const char *k, cJSON *item) {
        bool ok;

        if (!item)
                return -ENOMEM;
        ok = k ? cJSON_AddItemToObject(container, k, item) : cJSON_AddItemToArray(container, item);
        if (!ok) {
                cJSON_Delete(item);
                return -ENOMEM;
        }
        return 0;
}

/* Appends "ns/name" (or "name" when ns is NULL) to an array. */
static int push_nsname(cJSON *arr, const char *ns, const char *name) {
        char buf[512];

        if (ns)
                snprintf(buf, sizeof buf, "%s/%s", ns, strna(name));
        else
                snprintf(buf, sizeof buf, "%s", strna(name));
        return add_item(arr, NULL, cJSON_CreateString(buf));
}

static cJSON *new_ns_name(const char *ns, const char *name) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();

        if (!o || add_str(o, "namespace", ns) < 0 || add_str(o, "name", name) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static cJSON *pod_json(const struct plan_pod *pp) {
        _cleanup_(cJSON_Deletep) cJSON *o = new_ns_name(pp->pod->ns, pp->pod->name);
        const struct pod_rec *pod = pp->pod;
        cJSON *claims, *pdbs;

        if (!o)
                return NULL;
        claims = cJSON_AddArrayToObject(o, "claims");
        pdbs = cJSON_AddArrayToObject(o, "pdbs");
        if (!claims || !pdbs)
                return NULL;
        for (size_t i = 0; i < pod->n_claims; i++)
                if (pod->claims[i].claim_name && push_nsname(claims, pod->ns, pod->claims[i].claim_name) < 0)
                        return NULL;
        if (pod->extended_claim_name && push_nsname(claims, pod->ns, pod->extended_claim_name) < 0)
                return NULL;
        for (size_t i = 0; i < pp->n_pdbs; i++)
                if (push_nsname(pdbs, pp->pdbs[i]->ns, pp->pdbs[i]->name) < 0)
                        return NULL;
        if (add_bool(o, "deleting", pod->deleting) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static cJSON *claim_json(const struct plan_claim *pc) {
        const struct claim_rec *c = pc->claim;
        _cleanup_(cJSON_Deletep) cJSON *o = new_ns_name(c->ns, c->name);
        cJSON *devices, *reserved;
        char group[512];

        if (!o || add_str(o, "reason", claim_on_node_reason_to_string(pc->why)) < 0)
                return NULL;
        devices = cJSON_AddArrayToObject(o, "devices");
        reserved = cJSON_AddArrayToObject(o, "reservedFor");
        if (!devices || !reserved)
                return NULL;
        for (size_t i = 0; i < c->n_devices; i++) {
                _cleanup_(cJSON_Deletep) cJSON *d = cJSON_CreateObject();

                if (!d || add_str(d, "driver", c->devices[i].driver) < 0 ||
                    add_str(d, "pool", c->devices[i].pool) < 0 ||
                    add_str(d, "device", c->devices[i].device) < 0 ||
                    add_item(devices, NULL, TAKE_PTR(d)) < 0)
                        return NULL;
        }
        for (size_t i = 0; i < c->n_reserved; i++) {
                const struct claim_consumer *r = &c->reserved[i];
                char buf[512];
                int k;

                if (!r->api_group && streq_ptr(r->resource, "pods"))
                        k = push_nsname(reserved, c->ns, r->name);
                else {
                        snprintf(buf, sizeof buf, "%s%s%s %s/%s", strempty(r->api_group),
                                 r->api_group ? "/" : "", strna(r->resource), c->ns, strna(r->name));
                        k = push_nsname(reserved, NULL, buf);
                }
                if (k < 0)
                        return NULL;
        }
        if (add_bool(o, "driverOwn", pc->driver_own) < 0 ||
            add_bool(o, "noNodeOperations", pc->no_node_ops) < 0)
                return NULL;
        if (pc->podgroup)
                snprintf(group, sizeof group, "%s/%s", c->ns, strna(pc->podgroup->name));
        if (add_str(o, "podGroup", pc->podgroup ? group : NULL) < 0 ||
            add_bool(o, "podGroupUnused", pc->podgroup_unused) < 0)
                return NULL;
        if (!pc->group_pods_read) {
                if (!cJSON_AddNullToObject(o, "podGroupPods"))
                        return NULL;
        } else {
                cJSON *gps = cJSON_AddArrayToObject(o, "podGroupPods");

                if (!gps)
                        return NULL;
                for (size_t i = 0; i < pc->n_group_pods; i++) {
                        _cleanup_(cJSON_Deletep) cJSON *g = cJSON_CreateObject();

                        if (!g || add_str(g, "name", pc->group_pods[i].name) < 0 ||
                            add_str(g, "node", pc->group_pods[i].node) < 0 ||
                            add_bool(g, "finished", pc->group_pods[i].finished) < 0 ||
                            add_item(gps, NULL, TAKE_PTR(g)) < 0)
                                return NULL;
                }
        }
        if ((pc->group_pods_error && add_str(o, "podGroupPodsError", pc->group_pods_error) < 0) ||
            add_bool(o, "deleting", c->deleting) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static int json_groups(cJSON *root, const struct plan *p) {
        cJSON *groups = cJSON_AddArrayToObject(root, "groups");

        if (!groups)
                return -ENOMEM;
        for (enum evict_group g = 0; g < EVICT_GROUP_NONE; g++) {
                _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
                cJSON *pods;

                if (!o || add_str(o, "name", evict_group_to_string(g)) < 0)
                        return -ENOMEM;
                pods = cJSON_AddArrayToObject(o, "pods");
                if (!pods)
                        return -ENOMEM;
                for (size_t i = 0; i < p->n_pods; i++)
                        if (p->pods[i].group == g && add_item(pods, NULL, pod_json(&p->pods[i])) < 0)
                                return -ENOMEM;
                if (add_item(groups, NULL, TAKE_PTR(o)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int json_drivers_stays(cJSON *root, const struct plan *p, const struct plan_options *o) {
        cJSON *drivers = cJSON_AddArrayToObject(root, "drivers"),
              *stays = cJSON_AddArrayToObject(root, "stays");

        if (!drivers || !stays)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];
                const struct pod_rec *pod = pp->pod;

                if (pp->cls == POD_CLASS_DRIVER) {
                        _cleanup_(cJSON_Deletep) cJSON *d = new_ns_name(pod->ns, pod->name);
                        char ds[512];

                        if (pod_rec_daemonset(pod))
                                snprintf(ds, sizeof ds, "%s/%s", pod->ns, strna(pod->controller->name));
                        if (!d || add_str(d, "strategy", driver_stop_or_default(o->driver_stop)->name) < 0 ||
                            add_str(d, "daemonset", pod_rec_daemonset(pod) ? ds : NULL) < 0 ||
                            (o->driver_stop_arg && add_str(d, "arg", o->driver_stop_arg) < 0) ||
                            (o->driver_stop_arg_from &&
                             add_str(d, "argFrom", o->driver_stop_arg_from) < 0) ||
                            (pod->plugin_driver && add_str(d, "driver", pod->plugin_driver) < 0) ||
                            add_item(drivers, NULL, TAKE_PTR(d)) < 0)
                                return -ENOMEM;
                }
                if (pp->group == EVICT_GROUP_NONE) {
                        _cleanup_(cJSON_Deletep) cJSON *s = new_ns_name(pod->ns, pod->name);

                        if (!s || add_str(s, "reason", pp->skip_reason) < 0 ||
                            add_item(stays, NULL, TAKE_PTR(s)) < 0)
                                return -ENOMEM;
                }
        }
        return 0;
}

static int json_pdbs_blockers(cJSON *root, const struct plan *p) {
        cJSON *pdbs = cJSON_AddArrayToObject(root, "pdbs"),
              *blockers = cJSON_AddArrayToObject(root, "blockers"),
              *warnings = cJSON_AddArrayToObject(root, "warnings");

        if (!pdbs || !blockers || !warnings)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_warnings; i++)
                if (add_item(warnings, NULL, cJSON_CreateString(p->warnings[i])) < 0)
                        return -ENOMEM;
        for (size_t i = 0; i < p->n_pdbs; i++) {
                const struct pdb_rec *b = p->pdbs[i];
                _cleanup_(cJSON_Deletep) cJSON *o = new_ns_name(b->ns, b->name);

                if (!o || add_num(o, "disruptionsAllowed", b->disruptions_allowed) < 0 ||
                    add_num(o, "currentHealthy", b->current_healthy) < 0 ||
                    add_num(o, "desiredHealthy", b->desired_healthy) < 0 ||
                    add_num(o, "expectedPods", b->expected_pods) < 0 ||
                    add_item(pdbs, NULL, TAKE_PTR(o)) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < p->n_blockers; i++) {
                const struct plan_blocker *b = &p->blockers[i];
                _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
                char pod[512];

                if (b->pod)
                        snprintf(pod, sizeof pod, "%s/%s", b->pod->ns, b->pod->name);
                if (!o || add_str(o, "kind", blocker_kind_to_string(b->kind)) < 0 ||
                    add_str(o, "pod", b->pod ? pod : NULL) < 0 || add_str(o, "message", b->message) < 0 ||
                    add_item(blockers, NULL, TAKE_PTR(o)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

cJSON *plan_to_json(const struct plan *p, const struct plan_options *o) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *claims;

        assert(p && p->node);
        assert(o);

        root = cJSON_CreateObject();
        if (!root || add_str(root, "node", p->node->name) < 0 ||
            add_bool(root, "unschedulable", p->node->unschedulable) < 0 || json_groups(root, p) < 0)
                return NULL;

        claims = cJSON_AddArrayToObject(root, "claims");
        if (!claims)
                return NULL;
        for (size_t i = 0; i < p->n_claims; i++)
                if (add_item(claims, NULL, claim_json(&p->claims[i])) < 0)
                        return NULL;

        if (o->n_devices > 0) {
                cJSON *scope = cJSON_AddObjectToObject(root, "scope"), *devs;

                if (!scope || !(devs = cJSON_AddArrayToObject(scope, "devices")))
                        return NULL;
                for (size_t i = 0; i < o->n_devices; i++) {
                        cJSON *d = cJSON_CreateObject();

                        if (!d || !cJSON_AddItemToArray(devs, d) ||
                            add_str(d, "driver", o->devices[i].driver) < 0 ||
                            add_str(d, "pool", o->devices[i].pool) < 0 ||
                            add_str(d, "device", o->devices[i].device) < 0)
                                return NULL;
                }
                if (add_str(scope, "isolation",
                            o->isolation == PLAN_ISOLATE_TAINT_RULE ? "deviceTaintRule" : "unsupported") <
                            0 ||
                    (o->isolation == PLAN_ISOLATE_TAINT_RULE &&
                     add_str(scope, "deviceTaintRuleAPI", o->taint_rule_api) < 0))
                        return NULL;
        }
        if (o->n_drivers > 0) {
                cJSON *scope = cJSON_AddObjectToObject(root, "scope"), *drivers;

                if (!scope || !(drivers = cJSON_AddArrayToObject(scope, "drivers")))
                        return NULL;
                for (size_t i = 0; i < o->n_drivers; i++)
                        if (!cJSON_AddItemToArray(drivers, cJSON_CreateString(o->drivers[i])))
                                return NULL;
                if (add_str(scope, "isolation",
                            o->isolation == PLAN_ISOLATE_TAINT_RULE ? "deviceTaintRule" : "cordon") < 0 ||
                    (o->isolation == PLAN_ISOLATE_TAINT_RULE &&
                     add_str(scope, "deviceTaintRuleAPI", o->taint_rule_api) < 0))
                        return NULL;
        }
        if (json_drivers_stays(root, p, o) < 0 || json_pdbs_blockers(root, p) < 0 ||
            add_bool(root, "ok", p->n_blockers == 0) < 0)
                return NULL;
        return TAKE_PTR(root);
}

/* ---- the report: the plan with the DRA API, the Node's readiness, the seamless upgrade ---- */

static bool out_of_service_tainted_node(const struct node_rec *n) {
        return node_rec_find_taint(n, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_EFFECT) != NULL;
}

/* What the report says of the node's readiness and of --out-of-service. */
static void print_readiness(const struct node_rec *n, const struct plan_report *r, FILE *f) {
        char since[64] = "?", due[64] = "?";

        if (n->not_ready_since_usec > 0) {
                (void)timesrc_format_rfc3339(n->not_ready_since_usec, since, sizeof(since));
                (void)timesrc_format_rfc3339(n->not_ready_since_usec + (int64_t)r->out_of_service_after_usec,
                                             due, sizeof(due));
        }
        if (!n->ready)
                fprintf(f,
                        "\nNode %s is not Ready (since %s): its kubelet is down or not reporting, so it "
                        "can neither\nterminate the evicted pods nor unprepare their ResourceClaims: "
                        "they are not released until it is back.\n",
                        n->name, since);
        if (!r->out_of_service)
                return;
        fprintf(f,
                "\nOut of service (--out-of-service, for a machine that is off): once the node has been "
                "not Ready\nfor %.0f s (--out-of-service-after, from its Ready condition's "
                "lastTransitionTime), drainer applies\nthe taint " OUT_OF_SERVICE_TAINT_KEY
                "=" OUT_OF_SERVICE_TAINT_VALUE ":" OUT_OF_SERVICE_TAINT_EFFECT ": the control plane "
                "then deletes\nthe node's pods and releases their ResourceClaims WITHOUT the kubelet's "
                "unprepare. 'drainer uncordon'\nremoves the taint once the node is Ready again. Now: ",
                (double)r->out_of_service_after_usec / USEC_PER_SEC);
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

/* --device: the controller's count beside the claims-based list above. */
static void print_preview(const struct plan_report *r, FILE *f) {
        const struct plan_options *o = r->plan_options;
        const struct plan_device_preview *pp = r->preview;

        if (!pp || o->n_devices == 0)
                return;
        if (pp->asked)
                fputs("Preview (a DeviceTaintRule with the effect None, made and deleted by this plan): "
                      "what the device taint eviction controller says a NoExecute taint would evict:\n",
                      f);
        for (size_t i = 0; pp->asked && i < o->n_devices && i < DRAIN_MAX_DEVICES; i++) {
                if (!pp->known[i]) {
                        fprintf(f, "  %s/%s/%s: no answer\n", o->devices[i].driver, o->devices[i].pool,
                                o->devices[i].device);
                        continue;
                }
                fprintf(f,
                        "  %s/%s/%s: %ld pod%s in %ld namespace%s (%ld of %ld selected devices allocated)\n",
                        o->devices[i].driver, o->devices[i].pool, o->devices[i].device, pp->pv[i].pods,
                        pp->pv[i].pods == 1 ? "" : "s", pp->pv[i].namespaces,
                        pp->pv[i].namespaces == 1 ? "" : "s", pp->pv[i].allocated, pp->pv[i].published);
        }
        if (pp->note)
                fprintf(f, "%s: %s; the claims-based list above alone\n",
                        pp->asked ? "Preview incomplete" : "No preview (effect None)", pp->note);
}

static int json_preview(cJSON *j, const struct plan_report *r) {
        const struct plan_options *o = r->plan_options;
        const struct plan_device_preview *pp = r->preview;
        cJSON *pv, *devs;

        if (!pp || o->n_devices == 0)
                return 0;
        if (!(pv = cJSON_AddObjectToObject(j, "noneEffectPreview")) ||
            !cJSON_AddBoolToObject(pv, "asked", pp->asked) ||
            !(pp->note ? cJSON_AddStringToObject(pv, "note", pp->note)
                       : cJSON_AddNullToObject(pv, "note")) ||
            !(devs = cJSON_AddArrayToObject(pv, "devices")))
                return -ENOMEM;
        for (size_t i = 0; pp->asked && i < o->n_devices && i < DRAIN_MAX_DEVICES; i++) {
                cJSON *d = cJSON_CreateObject();
                char name[512];

                snprintf(name, sizeof(name), "%s/%s/%s", o->devices[i].driver, o->devices[i].pool,
                         o->devices[i].device);
                if (!d || !cJSON_AddItemToArray(devs, d) || !cJSON_AddStringToObject(d, "device", name))
                        return -ENOMEM;
                if (pp->known[i] &&
                    (!cJSON_AddNumberToObject(d, "publishedDevices", (double)pp->pv[i].published) ||
                     !cJSON_AddNumberToObject(d, "allocatedDevices", (double)pp->pv[i].allocated) ||
                     !cJSON_AddNumberToObject(d, "pods", (double)pp->pv[i].pods) ||
                     !cJSON_AddNumberToObject(d, "namespaces", (double)pp->pv[i].namespaces)))
                        return -ENOMEM;
        }
        return 0;
}

int plan_report_print(const struct plan_report *r, FILE *f) {
        const struct node_input *in = r->in;
        const char *driver = r->seam ? r->plan_options->drivers[0] : NULL;
        int ret;

        if (in->dra_off)
                fprintf(f, "DRA: not served by this cluster (no resource.k8s.io v1, v1beta2 or "
                           "v1beta1): "
                           "drained as kubectl drain would, without claim logic\n");
        else if (in->dra_api)
                fprintf(f, "DRA API: %s\n", in->dra_api);
        ret = plan_print_text(r->plan, r->plan_options, f);
        print_readiness(in->node, r, f);
        print_preview(r, f);
        if (r->seam && r->seam->seamless)
                fprintf(f,
                        "Seamless upgrade of %s: yes, %s: to update it, no drain is needed "
                        "('maintain --driver' runs its command without evicting anything; "
                        "--force-drain drains first)\n",
                        driver, r->seam->why);
        else if (r->seam)
                fprintf(f,
                        "Seamless upgrade of %s: no, %s; to update it across the cluster: drainer "
                        "rollout %s --driver %s\n",
                        driver, r->seam->why,
                        r->seam->daemonset[0] ? r->seam->daemonset : "NAMESPACE/DAEMONSET", driver);
        return ret;
}

static void json_readiness(cJSON *j, const struct node_rec *n, const struct plan_report *r) {
        char buf[64];
        cJSON *o;

        cJSON_AddBoolToObject(j, "nodeReady", n->ready);
        if (!n->ready && n->not_ready_since_usec > 0 &&
            timesrc_format_rfc3339(n->not_ready_since_usec, buf, sizeof(buf)) >= 0)
                cJSON_AddStringToObject(j, "nodeNotReadySince", buf);
        if (!r->out_of_service)
                return;
        o = cJSON_AddObjectToObject(j, "outOfService");
        if (!o)
                return;
        cJSON_AddStringToObject(o, "taint",
                                OUT_OF_SERVICE_TAINT_KEY "=" OUT_OF_SERVICE_TAINT_VALUE
                                                         ":" OUT_OF_SERVICE_TAINT_EFFECT);
        cJSON_AddNumberToObject(o, "afterSeconds", (double)r->out_of_service_after_usec / USEC_PER_SEC);
        cJSON_AddBoolToObject(o, "tainted", out_of_service_tainted_node(n));
        if (!n->ready && n->not_ready_since_usec > 0 &&
            timesrc_format_rfc3339(n->not_ready_since_usec + (int64_t)r->out_of_service_after_usec, buf,
                                   sizeof(buf)) >= 0)
                cJSON_AddStringToObject(o, "dueAt", buf);
}

cJSON *plan_report_to_json(const struct plan_report *r) {
        _cleanup_(cJSON_Deletep) cJSON *j = plan_to_json(r->plan, r->plan_options);
        const struct node_input *in = r->in;

        if (!j)
                return NULL;
        if (in->dra_api)
                cJSON_AddStringToObject(j, "draApi", in->dra_api);
        else
                cJSON_AddNullToObject(j, "draApi");
        cJSON_AddBoolToObject(j, "draServed", !in->dra_off);
        json_readiness(j, in->node, r);
        if (json_preview(j, r) < 0)
                return NULL;
        if (r->seam) {
                cJSON *o = cJSON_AddObjectToObject(j, "seamlessUpgrade");

                if (o) {
                        cJSON_AddBoolToObject(o, "seamless", r->seam->seamless);
                        if (r->seam->daemonset[0])
                                cJSON_AddStringToObject(o, "daemonset", r->seam->daemonset);
                        cJSON_AddStringToObject(o, "reason", r->seam->why);
                }
        }
        return TAKE_PTR(j);
}
