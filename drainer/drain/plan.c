/* The drain plan (DESIGN.md phases 0-5): sorts a node's pods into ordered
 * eviction groups with kubectl drain's filters (pkg/drain/filters.go), lists the
 * claims that must leave the node, the driver pods, the PDBs and every preflight
 * blocker, and prints all of it as text or JSON. Owns only its arrays and the
 * blocker messages; every record is borrowed. No I/O but the FILE it is given. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/buf.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/plan.h"
#include "drainer/selector.h"
#include "drainer/taintrule.h"

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
               k != BLOCKER_DRAIN_EXCLUSIVE && k != BLOCKER_DRIVER_STOP_KEY;
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

static bool is_daemonset_pod(const struct pod_rec *p) {
        return p->controller && streq_ptr(p->controller->kind, "DaemonSet");
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
        if (is_daemonset_pod(pod) && pp->cls == POD_CLASS_CLAIM_HOLDER && tolerates_drain_taint(pod)) {
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
        for (size_t d = 0; driver && d < o->n_drivers; d++)
                if (streq(driver, o->drivers[d]))
                        return true;
        return o->n_drivers == 0;
}

static const char skip_other_driver[] = "DRA driver pod of another driver: not drained";

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

                if (pp->cls == POD_CLASS_DRIVER && (drv ? !plan_driver_in_scope(drv, o) : known)) {
                        pp->cls = POD_CLASS_DAEMONSET;
                        pp->group = EVICT_GROUP_NONE;
                        pp->skip_reason = skip_other_driver;
                        continue;
                }
                if (!group_is_workload(pp->group) || pod_holds_plan_claim(p, pp->pod))
                        continue;
                pp->group = EVICT_GROUP_NONE;
                pp->skip_reason = skip_out_of_scope;
        }
}

static int collect_claims(struct plan *p, const struct pod_rec *const *pods, size_t n_pods,
                          const struct claim_rec *const *claims, size_t n_claims,
                          const struct slice_rec *const *slices, size_t n_slices,
                          const struct plan_options *o) {
        size_t n = 0;

        if (n_claims == 0)
                return 0;
        p->claims = calloc(n_claims, sizeof(struct plan_claim));
        if (!p->claims)
                return -ENOMEM;

        for (size_t i = 0; i < n_claims; i++) {
                enum claim_on_node_reason why;

                if (!claims[i] || !plan_claim_in_scope(claims[i], o))
                        continue;
                why = claim_on_node(claims[i], p->node->name, pods, n_pods, slices, n_slices);
                if (why == CLAIM_NOT_ON_NODE)
                        continue;
                p->claims[n] = (struct plan_claim){
                        .claim = claims[i],
                        .why = why,
                        .driver_own = claim_driver_own(claims[i], p),
                };
                if (!p->claims[n].driver_own)
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
        size_t n = 0;

        if (n_pdbs == 0)
                return 0;
        p->pdbs = calloc(n_pdbs, sizeof(*p->pdbs));
        if (!p->pdbs)
                return -ENOMEM;
        for (size_t i = 0; i < n_pdbs; i++) {
                bool covers = false;

                if (!pdbs[i])
                        continue;
                for (size_t j = 0; j < p->n_pods && !covers; j++)
                        covers = p->pods[j].group != EVICT_GROUP_NONE &&
                                 pdb_matches_pod(pdbs[i], p->pods[j].pod);
                if (covers)
                        p->pdbs[n++] = pdbs[i];
        }
        p->n_pdbs = n;
        if (n > 1)
                qsort(p->pdbs, n, sizeof(*p->pdbs), cmp_pdb_ptr);
        return 0;
}

/* ---- build ---- */

void plan_done(struct plan *p) {
        if (!p)
                return;
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
        if (o->n_drivers > 0)
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
                const char *d;
                size_t at;
                bool dup = false;

                if (!slices[i] || !slices[i]->driver || !streq_ptr(slices[i]->node_name, node))
                        continue;
                d = slices[i]->driver;
                /* insertion into a sorted array, keeping the first max names */
                for (at = 0; at < n; at++) {
                        int c = strcmp(d, ret[at]);

                        if (c == 0)
                                dup = true;
                        if (c <= 0)
                                break;
                }
                if (dup || at >= max)
                        continue;
                if (n == max)
                        n--; /* drop the last */
                memmove(ret + at + 1, ret + at, (n - at) * sizeof(*ret));
                ret[at] = d;
                n++;
        }
        return n;
}

/* ---- text ---- */

static const struct plan_claim *find_claim(const struct plan *p, const char *ns, const char *name) {
        struct plan_claim key;
        struct claim_rec c = { .ns = ns, .name = name };

        if (p->n_claims == 0)
                return NULL;
        key.claim = &c;
        return bsearch(&key, p->claims, p->n_claims, sizeof(struct plan_claim), cmp_plan_claim);
}

static void print_devices(FILE *f, const struct claim_rec *c, const char *sep) {
        for (size_t i = 0; i < c->n_devices; i++)
                fprintf(f, "%s%s/%s/%s", i > 0 ? sep : "", strna(c->devices[i].driver),
                        strna(c->devices[i].pool), strna(c->devices[i].device));
}

static void print_pod_claim(FILE *f, const struct plan *p, const char *ns, const char *name, bool *first) {
        const struct plan_claim *pc = find_claim(p, ns, name);

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
                bool holds = pod_holds_claims(pod), ds = is_daemonset_pod(pod), first = true;
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
        fputc('\n', f);
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
        if (o->n_drivers > 0 && o->isolation == PLAN_ISOLATE_TAINT_RULE)
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
                " 4. wait until the pods are gone and no ResourceClaim is on the node (%zu claim%s now)%s\n",
                p->n_claims_blocking, p->n_claims_blocking == 1 ? "" : "s", p->n_claims > 0 ? ":" : "");
        for (size_t i = 0; i < p->n_claims; i++)
                print_claim(f, &p->claims[i], cwidth);

        if (describe_stop(f, p, o) < 0)
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
        if (add_bool(o, "driverOwn", pc->driver_own) < 0 || add_bool(o, "deleting", c->deleting) < 0)
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

                        if (is_daemonset_pod(pod))
                                snprintf(ds, sizeof ds, "%s/%s", pod->ns, strna(pod->controller->name));
                        if (!d || add_str(d, "strategy", driver_stop_or_default(o->driver_stop)->name) < 0 ||
                            add_str(d, "daemonset", is_daemonset_pod(pod) ? ds : NULL) < 0 ||
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
              *blockers = cJSON_AddArrayToObject(root, "blockers");

        if (!pdbs || !blockers)
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
