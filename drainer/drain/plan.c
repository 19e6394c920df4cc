/* The drain plan (DESIGN.md, "The sequence": preflight to stop-drivers): sorts a
 * node's pods into ordered eviction groups with kubectl drain's filters
 * (pkg/drain/filters.go), lists the claims that must leave the node, the driver
 * pods, the PDBs and every preflight blocker (plan-render.c prints it as text or
 * JSON). Owns only its arrays and the blocker messages; every record is borrowed;
 * no I/O.
 */
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
#include "drainer/base/text.h"
#include "drainer/dra/taintrule.h"
#include "drainer/drain/plan.h"

/* ---- names ---- */

static const char *const evict_group_table[_EVICT_GROUP_MAX] = {
        [EVICT_GROUP_CLAIM_HOLDERS] = "claim-holders",
        [EVICT_GROUP_CLAIM_HOLDERS_CRITICAL] = "claim-holders-critical",
        [EVICT_GROUP_REST] = "rest",
        [EVICT_GROUP_REST_CRITICAL] = "rest-critical",
        [EVICT_GROUP_DRIVERS] = "drivers",
        [EVICT_GROUP_NONE] = "none",
};

const char *evict_group_to_string(enum evict_group g) {
        if (g < 0 || g >= _EVICT_GROUP_MAX)
                return NULL;
        return evict_group_table[g];
}

static const char *const blocker_kind_table[_BLOCKER_KIND_MAX] = {
        [BLOCKER_UNMANAGED] = "unmanaged",
        [BLOCKER_EMPTYDIR] = "emptydir",
        [BLOCKER_DS_CLAIM_TOLERATES] = "daemonset-claim-tolerates",
        [BLOCKER_DRIVER_TOLERATES] = "driver-tolerates",
        [BLOCKER_DRIVER_UNHEALTHY] = "driver-unhealthy",
        [BLOCKER_MULTIPLE_PDBS] = "multiple-pdbs",
        [BLOCKER_CLAIM_HOLDER_FILTERED] = "claim-holder-filtered",
        [BLOCKER_DRAIN_EXCLUSIVE] = "drain-exclusive",
        [BLOCKER_DRIVER_STOP_KEY] = "driver-stop-key",
        [BLOCKER_DEVICE_UNKNOWN] = "device-unknown",
};

const char *blocker_kind_to_string(enum blocker_kind k) {
        if (k < 0 || k >= _BLOCKER_KIND_MAX)
                return NULL;
        return blocker_kind_table[k];
}

bool blocker_kind_holds_at_every_eviction(enum blocker_kind k) {
        /* A driver's health matters before the drain starts; once drivers are being
         * stopped they are unhealthy by design. */
        return k >= 0 && k < _BLOCKER_KIND_MAX && k != BLOCKER_DRIVER_UNHEALTHY &&
               k != BLOCKER_DRAIN_EXCLUSIVE && k != BLOCKER_DRIVER_STOP_KEY && k != BLOCKER_DEVICE_UNKNOWN;
}

size_t plan_eviction_blockers(const struct plan *p) {
        size_t n = 0;

        assert(p);
        for (size_t i = 0; i < p->n_blockers; i++)
                n += blocker_kind_holds_at_every_eviction(p->blockers[i].kind);
        return n;
}

bool plan_pod_wait_skipped(const struct plan_pod *pp, int64_t now_usec, uint64_t skip_usec) {
        assert(pp);
        if (skip_usec == 0 || !pp->pod->deleting || pp->pod->deletion_usec <= 0)
                return false;
        if (pp->cls == POD_CLASS_CLAIM_HOLDER || pp->cls == POD_CLASS_DRIVER || pod_holds_claims(pp->pod))
                return false;
        return now_usec - pp->pod->deletion_usec > (int64_t)MIN(skip_usec, (uint64_t)INT64_MAX);
}

/* ---- classification ---- */

static const char skip_pod_selector[] = "does not match --pod-selector";

static const struct node_taint drain_taint = { .key = DRAIN_TAINT_KEY, .effect = DRAIN_TAINT_EFFECT };

static bool tolerates_drain_taint(const struct pod_rec *p) {
        return tolerations_tolerate(p->tolerations, p->n_tolerations, &drain_taint);
}

/* Karpenter's rule: these two priority classes go last. */
static bool is_critical(const struct pod_rec *p) {
        return streq_ptr(p->priority_class_name, "system-cluster-critical") ||
               streq_ptr(p->priority_class_name, "system-node-critical");
}

/* Groups the Eviction API is used for in phases 2 and 3. */
static bool group_is_workload(enum evict_group g) {
        return g >= EVICT_GROUP_CLAIM_HOLDERS && g <= EVICT_GROUP_REST_CRITICAL;
}

static void classify(struct plan_pod *pp, const struct plan_options *o) {
        const struct pod_rec *p = pp->pod;

        pp->cls = pod_classify(p, &(const struct driver_filter){
                                          .selectors = o->driver_selectors,
                                          .n_selectors = o->n_driver_selectors,
                                          .namespaces = o->driver_namespaces,
                                          .n_namespaces = o->n_driver_namespaces,
                                  });
        pp->critical = is_critical(p);
        pp->skip_reason = NULL;

        switch (pp->cls) {
        case POD_CLASS_DRIVER: {
                const struct driver_stop_ops *stop = driver_stop_or_default(o->driver_stop);

                pp->group = stop->evicts_driver_pods ? EVICT_GROUP_DRIVERS : EVICT_GROUP_NONE;
                pp->skip_reason = stop->evicts_driver_pods ? NULL : stop->pods_stay;
                return;
        }
        case POD_CLASS_MIRROR:
                /* the API cannot evict a static pod's mirror; kubectl skips it silently */
                pp->group = EVICT_GROUP_NONE;
                pp->skip_reason = "mirror pod";
                return;
        case POD_CLASS_DAEMONSET:
                /* kubectl drain --ignore-daemonsets */
                pp->group = EVICT_GROUP_NONE;
                pp->skip_reason = "DaemonSet pod";
                return;
        default:
                break;
        }

        /* kubectl drain --pod-selector lists only the matching pods */
        if (o->pod_selector && !selector_matches(o->pod_selector, p->labels, p->n_labels)) {
                pp->group = EVICT_GROUP_NONE;
                pp->skip_reason = skip_pod_selector;
                return;
        }

        /* A finished pod (Succeeded or Failed, a DaemonSet's too) is evicted with the rest,
         * as kubectl drain does (filters.go: "any finished pod can be removed", no
         * --force or --delete-emptydir-data needed): terminal, it holds no reservation
         * (the resourceclaim controller drops it), and the Eviction API deletes it
         * whatever the budgets say. */
        if (pp->cls == POD_CLASS_CLAIM_HOLDER)
                pp->group = pp->critical ? EVICT_GROUP_CLAIM_HOLDERS_CRITICAL : EVICT_GROUP_CLAIM_HOLDERS;
        else
                pp->group = pp->critical ? EVICT_GROUP_REST_CRITICAL : EVICT_GROUP_REST;
}

static int cmp_ns_name(const char *ans, const char *aname, const char *bns, const char *bname) {
        int c = strcmp(strempty(ans), strempty(bns));

        return c != 0 ? c : strcmp(strempty(aname), strempty(bname));
}

static int cmp_plan_pod(const void *a, const void *b) {
        const struct plan_pod *x = a, *y = b;

        if (x->group != y->group)
                return x->group < y->group ? -1 : 1;
        return cmp_ns_name(x->pod->ns, x->pod->name, y->pod->ns, y->pod->name);
}

static int cmp_plan_claim(const void *a, const void *b) {
        const struct plan_claim *x = a, *y = b;

        return cmp_ns_name(x->claim->ns, x->claim->name, y->claim->ns, y->claim->name);
}

static int cmp_pdb_ptr(const void *a, const void *b) {
        const struct pdb_rec *x = *(const struct pdb_rec *const *)a, *y = *(const struct pdb_rec *const *)b;

        return cmp_ns_name(x->ns, x->name, y->ns, y->name);
}

/* ---- blockers ---- */

static int add_blocker_owned(struct plan *p, enum blocker_kind kind, const struct pod_rec *pod,
                             char *message) {
        int r;

        /* A few per pod at most: the pods' cap bounds them. */
        r = buf_grow_array(&p->blockers, &p->a_blockers, p->n_blockers + 1, sizeof(*p->blockers),
                           BUF_CAP_OBJECTS);
        if (r < 0) {
                free(message);
                return r;
        }
        p->blockers[p->n_blockers++] = (struct plan_blocker){ .kind = kind, .pod = pod, .message = message };
        return 0;
}

static int add_blocker(struct plan *p, enum blocker_kind kind, const struct pod_rec *pod, const char *fmt,
                       ...) _printf_(4, 5);

static int add_blocker(struct plan *p, enum blocker_kind kind, const struct pod_rec *pod, const char *fmt,
                       ...) {
        va_list ap;
        char *m;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        log_debug("plan: blocker %s: %s", blocker_kind_to_string(kind), m);
        return add_blocker_owned(p, kind, pod, m);
}

int plan_add_blocker(struct plan *p, enum blocker_kind kind, const struct pod_rec *pod,
                     const char *message) {
        char *m;

        assert(p);
        assert(kind >= 0 && kind < _BLOCKER_KIND_MAX);
        assert(message);

        m = strdup(message);
        if (!m)
                return -ENOMEM;
        return add_blocker_owned(p, kind, pod, m);
}

/* The kubectl drain filters (skipping what cannot apply to a pod we keep),
 * then drainer's own. A finished pod passes every one (filters.go: any finished
 * pod can be removed; the Eviction API ignores budgets for terminal pods). */
static int pod_blockers(struct plan *p, const struct plan_pod *pp, const struct plan_options *o) {
        const struct pod_rec *pod = pp->pod;
        int r;

        if (pp->cls == POD_CLASS_DRIVER) {
                const struct driver_stop_ops *stop = driver_stop_or_default(o->driver_stop);
                char *m = NULL;

                /* the strategy cannot stop this one (taint: it tolerates the drain taint) */
                r = stop->pod_blocker ? stop->pod_blocker(o->driver_stop_arg, pod, &m) : 0;
                if (r < 0)
                        return r;
                if (r > 0) {
                        r = add_blocker_owned(p, BLOCKER_DRIVER_TOLERATES, pod, m);
                        if (r < 0)
                                return r;
                }
                /* claims are unprepared through the driver: a sick driver leaves
                 * evicted claim holders Terminating (kubernetes#129402) */
                if (!o->ignore_driver_health &&
                    (pod->phase != POD_RUNNING || !pod->ready || pod->deleting)) {
                        r = add_blocker(p, BLOCKER_DRIVER_UNHEALTHY, pod,
                                        "DRA driver pod %s/%s is not Running and Ready (use "
                                        "--ignore-driver-health to override)",
                                        pod->ns, pod->name);
                        if (r < 0)
                                return r;
                }
                return 0;
        }

        if (pp->group == EVICT_GROUP_NONE) {
                if (pp->skip_reason == skip_pod_selector && pp->cls != POD_CLASS_FINISHED &&
                    pod_holds_claims(pod))
                        return add_blocker(
                                p, BLOCKER_CLAIM_HOLDER_FILTERED, pod,
                                "Pod %s/%s holds ResourceClaims but does not match --pod-selector, "
                                "so its claims would never leave the node",
                                pod->ns, pod->name);
                return 0;
        }

        assert(group_is_workload(pp->group));
        if (pp->cls == POD_CLASS_FINISHED)
                return 0;

        /* A pod already deleting is not evicted again: only what would bring it back matters. */
        if (!pod->deleting) {
                /* filters.go localStorageFilter, then unreplicatedFilter; errors() words them */
                if (pod->has_emptydir && !o->delete_emptydir_data) {
                        r = add_blocker(
                                p, BLOCKER_EMPTYDIR, pod,
                                "cannot delete Pods with local storage (use --delete-emptydir-data to "
                                "override): %s/%s",
                                pod->ns, pod->name);
                        if (r < 0)
                                return r;
                }
                if (!pod->has_controller && !o->force) {
                        r = add_blocker(
                                p, BLOCKER_UNMANAGED, pod,
                                "cannot delete Pods that declare no controller (use --force to override): "
                                "%s/%s",
                                pod->ns, pod->name);
                        if (r < 0)
                                return r;
                }
                /* eviction.go: PDBs are ignored for Pending and terminal pods; for the
                 * others, more than one PDB is a 500 on every try. */
                if (pp->n_pdbs_all > 1 && pod->phase != POD_PENDING) {
                        _cleanup_free_ char *names = NULL;
                        size_t size = 0;
                        FILE *f = open_memstream(&names, &size);
                        bool bad;

                        if (!f)
                                return -ENOMEM;
                        for (size_t i = 0; i < pp->n_pdbs; i++)
                                fprintf(f, "%s%s/%s", i > 0 ? ", " : "", pp->pdbs[i]->ns, pp->pdbs[i]->name);
                        if (pp->n_pdbs_all > pp->n_pdbs)
                                fputs(", ...", f);
                        bad = ferror(f);
                        if ((fclose(f) != 0) | bad)
                                return -ENOMEM;
                        r = add_blocker(p, BLOCKER_MULTIPLE_PDBS, pod,
                                        "cannot evict Pod %s/%s: it is covered by more than one "
                                        "PodDisruptionBudget (%s), which the eviction subresource does not "
                                        "support",
                                        pod->ns, pod->name, names);
                        if (r < 0)
                                return r;
                }
        }

        /* The DaemonSet controller recreates a pod wherever no untolerated
         * NoSchedule taint keeps it out (NodeShouldRunDaemonPod). */
        if (pod_rec_daemonset(pod) && pp->cls == POD_CLASS_CLAIM_HOLDER && tolerates_drain_taint(pod)) {
                r = add_blocker(
                        p, BLOCKER_DS_CLAIM_TOLERATES, pod,
                        "DaemonSet pod %s/%s holds ResourceClaims and tolerates %s:%s, so it would come "
                        "back after eviction; remove that toleration from DaemonSet %s/%s",
                        pod->ns, pod->name, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT, pod->ns,
                        strna(pod->controller->name));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- claims ---- */

/* The rule of claim_reserved_by_pod, for one reservedFor entry. */
static bool consumer_is_pod(const struct claim_consumer *r, const struct claim_rec *c,
                            const struct pod_rec *p) {
        if (r->api_group || !streq_ptr(r->resource, "pods") || !streq_ptr(p->ns, c->ns))
                return false;
        return r->uid ? streq_ptr(r->uid, p->uid) : streq_ptr(r->name, p->name);
}

/* Reserved, and only for driver pods of this node: a driver's own claim is
 * released when the driver goes, so it cannot hold the drain back. */
static bool claim_driver_own(const struct claim_rec *c, const struct plan *p) {
        if (c->n_reserved == 0)
                return false;
        for (size_t i = 0; i < c->n_reserved; i++) {
                bool found = false;

                for (size_t j = 0; j < p->n_pods && !found; j++)
                        found = p->pods[j].cls == POD_CLASS_DRIVER &&
                                consumer_is_pod(&c->reserved[i], c, p->pods[j].pod);
                if (!found)
                        return false;
        }
        return true;
}

bool plan_claim_in_scope(const struct claim_rec *c, const struct plan_options *o) {
        assert(c && o);
        if (o->n_devices > 0)
                return drain_devices_held(c, o->devices, o->n_devices);
        if (o->n_drivers == 0)
                return true;
        for (size_t i = 0; i < c->n_devices; i++)
                for (size_t d = 0; d < o->n_drivers; d++)
                        if (streq_ptr(c->devices[i].driver, o->drivers[d]))
                                return true;
        return false;
}

static const char skip_out_of_scope[] = "holds no ResourceClaim of the drivers drained";

static bool pod_holds_plan_claim(const struct plan *p, const struct pod_rec *pod) {
        for (size_t i = 0; i < p->n_claims; i++) {
                const struct claim_rec *c = p->claims[i].claim;

                if (!streq_ptr(c->ns, pod->ns))
                        continue;
                if (streq_ptr(pod->extended_claim_name, c->name))
                        return true;
                for (size_t j = 0; j < pod->n_claims; j++)
                        if (streq_ptr(pod->claims[j].claim_name, c->name))
                                return true;
                /* reserved for it (a claim the pod's status does not name yet) */
                for (size_t j = 0; j < c->n_reserved; j++)
                        if (consumer_is_pod(&c->reserved[j], c, pod))
                                return true;
        }
        return false;
}

bool plan_driver_in_scope(const char *driver, const struct plan_options *o) {
        if (o->n_devices > 0)
                return false; /* a device drain stops no driver */
        for (size_t d = 0; driver && d < o->n_drivers; d++)
                if (streq(driver, o->drivers[d]))
                        return true;
        return o->n_drivers == 0;
}

static const char skip_other_driver[] = "DRA driver pod of another driver: not drained";
static const char skip_device_driver[] = "DRA driver pod: a device drain leaves it running";
static const char skip_out_of_device_scope[] = "holds no ResourceClaim of the devices drained";

/* --driver: the workload pods that hold none of the scope's claims stay, and so do the
 * driver pods of other drivers (by their plugin directory, objects.h). A driver pod
 * whose driver is unknown is the scope's only while no pod is known to be its. */
static void scope_pods(struct plan *p, const struct plan_options *o) {
        bool known = false;

        for (size_t i = 0; i < p->n_pods; i++)
                if (p->pods[i].cls == POD_CLASS_DRIVER && p->pods[i].pod->plugin_driver &&
                    plan_driver_in_scope(p->pods[i].pod->plugin_driver, o))
                        known = true;
        for (size_t i = 0; i < p->n_pods; i++) {
                struct plan_pod *pp = &p->pods[i];
                const char *drv = pp->pod->plugin_driver;

                if (pp->cls == POD_CLASS_DRIVER &&
                    (o->n_devices > 0 || (drv ? !plan_driver_in_scope(drv, o) : known))) {
                        pp->cls = POD_CLASS_DAEMONSET;
                        pp->group = EVICT_GROUP_NONE;
                        pp->skip_reason = o->n_devices > 0 ? skip_device_driver : skip_other_driver;
                        continue;
                }
                if (!group_is_workload(pp->group) || pod_holds_plan_claim(p, pp->pod))
                        continue;
                pp->group = EVICT_GROUP_NONE;
                pp->skip_reason = o->n_devices > 0 ? skip_out_of_device_scope : skip_out_of_scope;
        }
}

static int collect_claims(struct plan *p, const struct pod_rec *const *pods, size_t n_pods,
                          const struct claim_rec *const *claims, size_t n_claims,
                          const struct slice_rec *const *slices, size_t n_slices,
                          const struct plan_options *o) {
        size_t n = 0, alloc = 0;
        int r;

        /* claims is every claim the cluster view holds: the array grows with the node's
         * own (one entry for each of them was 640 KiB in each engine's plan at 10,000
         * claims). */
        for (size_t i = 0; i < n_claims; i++) {
                enum claim_on_node_reason why;

                if (!claims[i] || !plan_claim_in_scope(claims[i], o))
                        continue;
                why = claim_on_node(claims[i], p->node->name, pods, n_pods, slices, n_slices);
                if (why == CLAIM_NOT_ON_NODE)
                        continue;
                r = buf_grow_array(&p->claims, &alloc, n + 1, sizeof(struct plan_claim), n_claims);
                if (r < 0)
                        return r;
                p->claims[n] = (struct plan_claim){
                        .claim = claims[i],
                        .why = why,
                        .driver_own = claim_driver_own(claims[i], p),
                        /* A device drain waits until the device is free, whatever the
                         * kubelet would ask of its driver. */
                        .no_node_ops = o->n_devices == 0 &&
                                       claim_skips_unprepare(claims[i], o->drivers, o->n_drivers),
                        .podgroup = claim_podgroup(claims[i]),
                        .podgroup_unused =
                                claim_podgroup_unused(claims[i], p->node->name, pods, n_pods) != NULL,
                };
                p->claims[n].podgroup_released = p->claims[n].podgroup_unused && o->n_devices == 0;
                if (plan_claim_blocks(&p->claims[n]))
                        p->n_claims_blocking++;
                n++;
        }
        p->n_claims = n;
        if (n > 1)
                qsort(p->claims, n, sizeof(struct plan_claim), cmp_plan_claim);
        return 0;
}

/* ---- PDBs ---- */

static void match_pdbs(struct plan_pod *pp, const struct pdb_rec *const *pdbs, size_t n_pdbs) {
        pp->n_pdbs = pp->n_pdbs_all = 0;
        for (size_t i = 0; i < n_pdbs; i++) {
                if (!pdbs[i] || !pdb_matches_pod(pdbs[i], pp->pod))
                        continue;
                if (pp->n_pdbs < ELEMENTSOF(pp->pdbs))
                        pp->pdbs[pp->n_pdbs++] = pdbs[i];
                pp->n_pdbs_all++;
        }
}

static int collect_pdbs(struct plan *p, const struct pdb_rec *const *pdbs, size_t n_pdbs) {
        size_t n = 0, alloc = 0;
        int r;

        /* pdbs is every budget of the cluster; the plan keeps those of its pods. */
        for (size_t i = 0; i < n_pdbs; i++) {
                bool covers = false;

                if (!pdbs[i])
                        continue;
                for (size_t j = 0; j < p->n_pods && !covers; j++)
                        covers = p->pods[j].group != EVICT_GROUP_NONE &&
                                 pdb_matches_pod(pdbs[i], p->pods[j].pod);
                if (!covers)
                        continue;
                r = buf_grow_array(&p->pdbs, &alloc, n + 1, sizeof(*p->pdbs), n_pdbs);
                if (r < 0)
                        return r;
                p->pdbs[n++] = pdbs[i];
        }
        p->n_pdbs = n;
        if (n > 1)
                qsort(p->pdbs, n, sizeof(*p->pdbs), cmp_pdb_ptr);
        return 0;
}

/* ---- build ---- */

int plan_claim_add_group_pod(struct plan_claim *pc, const char *name, const char *node, bool finished) {
        struct plan_group_pod *v, gp = { .finished = finished };

        assert(pc && name);
        v = reallocarray(pc->group_pods, pc->n_group_pods + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        pc->group_pods = v;
        gp.name = strdup(name);
        gp.node = node ? strdup(node) : NULL;
        if (!gp.name || (node && !gp.node)) {
                free(gp.name);
                free(gp.node);
                return -ENOMEM;
        }
        v[pc->n_group_pods++] = gp;
        return 0;
}

int plan_add_warning(struct plan *p, const char *message) {
        char **v, *m;

        assert(p && message);
        m = text_escape_controls(message, strlen(message)); /* may quote the API's words */
        v = m ? reallocarray(p->warnings, p->n_warnings + 1, sizeof(*v)) : NULL;
        if (!v) {
                free(m);
                return -ENOMEM;
        }
        p->warnings = v;
        v[p->n_warnings++] = m;
        return 0;
}

int64_t plan_grace_needed(const struct plan *p, int64_t *ret_holders, int64_t *ret_drivers) {
        int64_t holders = 0, drivers = 0;

        for (size_t i = 0; i < p->n_pods; i++) {
                const struct plan_pod *pp = &p->pods[i];
                int64_t g = pp->pod->termination_grace_seconds;

                if (pp->cls == POD_CLASS_DRIVER)
                        drivers = MAX(drivers, g);
                else if (pp->group == EVICT_GROUP_CLAIM_HOLDERS ||
                         pp->group == EVICT_GROUP_CLAIM_HOLDERS_CRITICAL)
                        holders = MAX(holders, g);
        }
        if (ret_holders)
                *ret_holders = holders;
        if (ret_drivers)
                *ret_drivers = drivers;
        return holders + drivers;
}

int plan_claim_group_pods_failed(struct plan_claim *pc, const char *message) {
        assert(pc && message);
        free(pc->group_pods_error);
        pc->group_pods_error = text_escape_controls(message, strlen(message)); /* the API's Status */
        return pc->group_pods_error ? 0 : -ENOMEM;
}

void plan_done(struct plan *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_claims; i++) {
                for (size_t k = 0; k < p->claims[i].n_group_pods; k++) {
                        free(p->claims[i].group_pods[k].name);
                        free(p->claims[i].group_pods[k].node);
                }
                free(p->claims[i].group_pods);
                free(p->claims[i].group_pods_error);
        }
        for (size_t i = 0; i < p->n_warnings; i++)
                free(p->warnings[i]);
        free(p->warnings);
        for (size_t i = 0; i < p->n_blockers; i++)
                free(p->blockers[i].message);
        free(p->blockers);
        free(p->pods);
        free(p->claims);
        free(p->pdbs);
        *p = (struct plan){};
}

int plan_build(const struct node_rec *node, const struct pod_rec *const *pods, size_t n_pods,
               const struct claim_rec *const *claims, size_t n_claims, const struct slice_rec *const *slices,
               size_t n_slices, const struct pdb_rec *const *pdbs, size_t n_pdbs,
               const struct plan_options *o, struct plan *ret) {
        _cleanup_(plan_done) struct plan p = { .node = node };
        size_t n = 0;
        int r;

        assert(node && node->name);
        assert(pods || n_pods == 0);
        assert(claims || n_claims == 0);
        assert(slices || n_slices == 0);
        assert(pdbs || n_pdbs == 0);
        assert(o);
        assert(ret);

        if (n_pods > 0) {
                p.pods = calloc(n_pods, sizeof(struct plan_pod));
                if (!p.pods)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n_pods; i++) {
                struct plan_pod *pp;

                if (!pods[i] || !streq_ptr(pods[i]->node_name, node->name))
                        continue;
                pp = &p.pods[n++];
                pp->pod = pods[i];
                classify(pp, o);
                match_pdbs(pp, pdbs, n_pdbs);
        }
        p.n_pods = n;

        r = collect_claims(&p, pods, n_pods, claims, n_claims, slices, n_slices, o);
        if (r < 0)
                return r;
        if (o->n_drivers > 0 || o->n_devices > 0)
                scope_pods(&p, o);
        if (n > 1)
                qsort(p.pods, n, sizeof(struct plan_pod), cmp_plan_pod);
        for (size_t i = 0; i < n; i++)
                p.n_per_group[p.pods[i].group]++;

        for (size_t i = 0; i < n; i++) {
                r = pod_blockers(&p, &p.pods[i], o);
                if (r < 0)
                        return r;
        }
        r = collect_pdbs(&p, pdbs, n_pdbs);
        if (r < 0)
                return r;

        log_debug("plan: node %s: %zu pods (%zu claim holders, %zu rest, %zu drivers, %zu stay), "
                  "%zu claims (%zu blocking), %zu blockers",
                  node->name, p.n_pods,
                  p.n_per_group[EVICT_GROUP_CLAIM_HOLDERS] +
                          p.n_per_group[EVICT_GROUP_CLAIM_HOLDERS_CRITICAL],
                  p.n_per_group[EVICT_GROUP_REST] + p.n_per_group[EVICT_GROUP_REST_CRITICAL],
                  p.n_per_group[EVICT_GROUP_DRIVERS], p.n_per_group[EVICT_GROUP_NONE], p.n_claims,
                  p.n_claims_blocking, p.n_blockers);

        *ret = p;
        p = (struct plan){};
        return 0;
}

size_t plan_driver_names(const struct slice_rec *const *slices, size_t n_slices, const char *node,
                         const char **ret, size_t max) {
        size_t n = 0;

        assert(slices || n_slices == 0);
        assert(node);
        assert(ret || max == 0);

        for (size_t i = 0; i < n_slices; i++) {
                if (!slices[i] || !slices[i]->driver || !streq_ptr(slices[i]->node_name, node))
                        continue;
                n = strv_sorted_insert(ret, n, max, slices[i]->driver);
        }
        return n;
}

const struct plan_claim *plan_find_claim(const struct plan *p, const char *ns, const char *name) {
        struct plan_claim key;
        struct claim_rec c = { .ns = ns, .name = name };

        if (p->n_claims == 0)
                return NULL;
        key.claim = &c;
        return bsearch(&key, p->claims, p->n_claims, sizeof(struct plan_claim), cmp_plan_claim);
}
