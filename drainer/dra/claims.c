/* DESIGN.md "Terms" as code: claim-holding pods, claims on a node, pod
 * classes. Works on borrowed records only; allocates nothing and logs
 * nothing, so callers may run it on every reconcile. */
#include <assert.h>
#include <string.h>

#include "drainer/dra/claims.h"

const char *const claims_default_driver_selectors[] = {
        "app.kubernetes.io/component=kubeletplugin",
        "nvidia-dra-driver-gpu-component=kubelet-plugin",
        "dra-driver-nvidia-gpu-component=kubelet-plugin",
        NULL,
};

bool pod_holds_claims(const struct pod_rec *p) {
        assert(p);

        if (p->extended_claim_name)
                return true;
        for (size_t i = 0; i < p->n_claims; i++)
                if (p->claims[i].claim_name)
                        return true;
        return false;
}

static bool is_pod_consumer(const struct claim_consumer *r) {
        return !r->api_group && streq_ptr(r->resource, "pods");
}

static bool consumer_is_pod(const struct claim_consumer *r, const struct claim_rec *c,
                            const struct pod_rec *p) {
        if (!is_pod_consumer(r) || !streq_ptr(p->ns, c->ns))
                return false;
        if (r->uid)
                return streq_ptr(r->uid, p->uid);
        return streq_ptr(r->name, p->name);
}

bool claim_reserved_by_pod(const struct claim_rec *c, const struct pod_rec *p) {
        assert(c);
        assert(p);

        for (size_t i = 0; i < c->n_reserved; i++)
                if (consumer_is_pod(&c->reserved[i], c, p))
                        return true;
        return false;
}

static const char *const claim_on_node_reason_table[_CLAIM_ON_NODE_REASON_MAX] = {
        [CLAIM_NOT_ON_NODE] = "not-on-node",
        [CLAIM_RESERVED_BY_NODE_POD] = "reserved-by-node-pod",
        [CLAIM_ALLOCATED_NODE_SELECTOR] = "allocated-node-selector",
        [CLAIM_ALLOCATED_NODE_SLICE] = "allocated-node-slice",
};

DEFINE_STRING_TABLE_LOOKUP(claim_on_node_reason, enum claim_on_node_reason, _CLAIM_ON_NODE_REASON_MAX,
                           _CLAIM_ON_NODE_REASON_INVALID)

enum claim_on_node_reason claim_on_node(const struct claim_rec *c, const char *node,
                                        const struct pod_rec *const *pods, size_t n_pods,
                                        const struct slice_rec *const *slices, size_t n_slices) {
        assert(c);
        assert(node);
        assert(pods || n_pods == 0);
        assert(slices || n_slices == 0);

        /* (a) Reserved for a pod of the node. The resourceclaim controller keeps
         * a scheduled pod in reservedFor until it is terminal or gone. */
        for (size_t i = 0; i < c->n_reserved; i++) {
                const struct claim_consumer *r = &c->reserved[i];

                if (!is_pod_consumer(r))
                        continue;
                for (size_t j = 0; j < n_pods; j++)
                        if (pods[j] && streq_ptr(pods[j]->node_name, node) && consumer_is_pod(r, c, pods[j]))
                                return CLAIM_RESERVED_BY_NODE_POD;
        }

        if (!c->allocated)
                return CLAIM_NOT_ON_NODE;

        /* (b) Node-local allocation: the allocator writes this exact selector
         * whenever a device comes from a slice with a node name. */
        if (streq_ptr(c->selector_node, node))
                return CLAIM_ALLOCATED_NODE_SELECTOR;

        /* ... or a device from a pool published by a slice of the node. */
        for (size_t i = 0; i < c->n_devices; i++) {
                const struct claim_device *d = &c->devices[i];

                for (size_t j = 0; j < n_slices; j++) {
                        const struct slice_rec *s = slices[j];

                        if (s && streq_ptr(s->node_name, node) && streq_ptr(s->driver, d->driver) &&
                            streq_ptr(s->pool, d->pool))
                                return CLAIM_ALLOCATED_NODE_SLICE;
                }
        }

        return CLAIM_NOT_ON_NODE;
}

bool claim_skips_unprepare(const struct claim_rec *c, const char *const *drivers, size_t n_drivers) {
        size_t n = 0;

        assert(c);
        assert(drivers || n_drivers == 0);
        if (!c->allocated)
                return false;
        for (size_t i = 0; i < c->n_devices; i++) {
                const struct claim_device *d = &c->devices[i];
                bool in_scope = n_drivers == 0;

                for (size_t k = 0; k < n_drivers && !in_scope; k++)
                        in_scope = streq_ptr(d->driver, drivers[k]);
                if (!in_scope)
                        continue;
                if (!d->skip_unprepare)
                        return false;
                n++;
        }
        return n > 0;
}

static bool is_podgroup_consumer(const struct claim_consumer *r) {
        return streq_ptr(r->api_group, "scheduling.k8s.io") && streq_ptr(r->resource, "podgroups");
}

const struct claim_consumer *claim_podgroup(const struct claim_rec *c) {
        assert(c);
        for (size_t i = 0; i < c->n_reserved; i++)
                if (is_podgroup_consumer(&c->reserved[i]))
                        return &c->reserved[i];
        return NULL;
}

bool pod_uses_claim(const struct pod_rec *p, const struct claim_rec *c) {
        assert(p);
        assert(c);
        if (!streq_ptr(p->ns, c->ns))
                return false;
        if (streq_ptr(p->extended_claim_name, c->name))
                return true;
        for (size_t i = 0; i < p->n_claims; i++)
                if (streq_ptr(p->claims[i].claim_name, c->name))
                        return true;
        return false;
}

const struct claim_consumer *claim_podgroup_unused(const struct claim_rec *c, const char *node,
                                                   const struct pod_rec *const *pods, size_t n_pods) {
        const struct claim_consumer *group = claim_podgroup(c);

        assert(node);
        assert(pods || n_pods == 0);
        if (!group)
                return NULL;
        for (size_t j = 0; j < n_pods; j++) {
                const struct pod_rec *p = pods[j];

                if (!p || !streq_ptr(p->node_name, node))
                        continue;
                /* A pod of the node in reservedFor holds it as any claim (rule (a)). */
                if (claim_reserved_by_pod(c, p))
                        return NULL;
                if (p->phase != POD_SUCCEEDED && p->phase != POD_FAILED && pod_uses_claim(p, c))
                        return NULL;
        }
        return group;
}

static const char *const pod_class_table[_POD_CLASS_MAX] = {
        [POD_CLASS_DRIVER] = "driver",       [POD_CLASS_MIRROR] = "mirror",
        [POD_CLASS_DAEMONSET] = "daemonset", [POD_CLASS_CLAIM_HOLDER] = "claim-holder",
        [POD_CLASS_WORKLOAD] = "workload",   [POD_CLASS_FINISHED] = "finished",
};

DEFINE_STRING_TABLE_LOOKUP(pod_class, enum pod_class, _POD_CLASS_MAX, _POD_CLASS_INVALID)

bool pod_is_driver(const struct pod_rec *p, const struct driver_filter *f) {
        const struct owner_ref *c;
        bool match = false;

        assert(p);

        if (!f)
                return false;
        /* Labels are the pod creator's to choose, so they only pick among DaemonSet pods:
         * a tenant's look-alike must not hold every drain or restore. */
        c = p->controller;
        if (!c || !c->controller || !streq_ptr(c->kind, "DaemonSet") ||
            !streq_ptr(c->api_version, "apps/v1"))
                return false;
        if (f->n_namespaces > 0) {
                bool in = false;

                for (size_t i = 0; i < f->n_namespaces && !in; i++)
                        in = streq_ptr(f->namespaces[i], p->ns);
                if (!in)
                        return false;
        }
        assert(f->selectors || f->n_selectors == 0);
        for (size_t i = 0; i < f->n_selectors && !match; i++)
                match = f->selectors[i] && selector_matches(f->selectors[i], p->labels, p->n_labels);
        return match;
}

enum pod_class pod_classify(const struct pod_rec *p, const struct driver_filter *f) {
        assert(p);

        if (pod_is_driver(p, f))
                return POD_CLASS_DRIVER;
        if (p->mirror)
                return POD_CLASS_MIRROR;
        if (p->phase == POD_SUCCEEDED || p->phase == POD_FAILED)
                return POD_CLASS_FINISHED;
        if (pod_holds_claims(p))
                return POD_CLASS_CLAIM_HOLDER;
        if (p->controller && streq_ptr(p->controller->kind, "DaemonSet"))
                return POD_CLASS_DAEMONSET;
        return POD_CLASS_WORKLOAD;
}
