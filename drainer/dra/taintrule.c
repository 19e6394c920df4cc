/* DeviceTaintRules for driver-scoped drains: API discovery (which version of
 * resource.k8s.io serves devicetaintrules), the rules' names and bodies, the pools
 * of a driver on a node. Owns only its discovery call; sends no rule itself. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/dra/taintrule.h"
#include "drainer/kube/client.h"
#include "drainer/kube/objects.h"

/* Newest first: v1 from 1.37 (GA), v1beta2 in 1.36 (gate and runtime-config). v1alpha3
 * (1.33-1.35, alpha) is not used: an alpha API is no promise. */
static const char *const versions[] = { "v1", "v1beta2" };

struct taint_rule_discovery {
        struct kube_client *client; /* borrowed */
        struct kube_call *call;
        size_t at; /* index into versions */
        taint_rule_discover_fn done;
        void *userdata;
        bool cancelled;
};

bool taint_rule_listed(const void *resource_list_json) {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive((const cJSON *)resource_list_json, "resources");
        const cJSON *r;

        cJSON_ArrayForEach(r, res) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(r, "name");

                if (cJSON_IsString(name) && streq(name->valuestring, "devicetaintrules"))
                        return true;
        }
        return false;
}

static int ask(struct taint_rule_discovery *d);

static void on_group(const struct kube_result *res, void *userdata) {
        struct taint_rule_discovery *d = userdata;
        struct taint_rule_api api = {};

        d->call = NULL;
        if (res->error == -ECANCELED || d->cancelled) {
                d->done(-ECANCELED, NULL, d->userdata);
                free(d);
                return;
        }
        if (res->error == 0 && taint_rule_listed(res->json)) {
                api.served = true;
                snprintf(api.prefix, sizeof(api.prefix), "/apis/resource.k8s.io/%s", versions[d->at]);
                snprintf(api.api_version, sizeof(api.api_version), "resource.k8s.io/%s", versions[d->at]);
                d->done(0, &api, d->userdata);
                free(d);
                return;
        }
        /* 404: this version is not served; another error: the server could not say. */
        if (res->error < 0 && res->error != -ENOENT) {
                log_debug("discovery of resource.k8s.io/%s failed: %s", versions[d->at],
                          strna(res->message));
                d->done(res->error, NULL, d->userdata);
                free(d);
                return;
        }
        if (++d->at < ELEMENTSOF(versions)) {
                int r = ask(d);

                if (r >= 0)
                        return;
                d->done(r, NULL, d->userdata);
                free(d);
                return;
        }
        d->done(0, &api, d->userdata);
        free(d);
}

static int ask(struct taint_rule_discovery *d) {
        char path[64];

        snprintf(path, sizeof(path), "/apis/resource.k8s.io/%s", versions[d->at]);
        return kube_get(d->client, path, on_group, d, &d->call);
}

int taint_rule_discover(struct kube_client *c, taint_rule_discover_fn done, void *userdata,
                        struct taint_rule_discovery **ret) {
        struct taint_rule_discovery *d;
        int r;

        assert(c && done);
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (struct taint_rule_discovery){ .client = c, .done = done, .userdata = userdata };
        r = ask(d);
        if (r < 0) {
                free(d);
                return r;
        }
        if (ret)
                *ret = d;
        return 0;
}

void taint_rule_discovery_cancel(struct taint_rule_discovery *d) {
        if (!d)
                return;
        d->cancelled = true;
        if (d->call)
                kube_call_cancel(d->call);
}

size_t taint_rule_pools(const struct slice_rec *const *slices, size_t n_slices, const char *node,
                        const char *driver, const char **ret, size_t max) {
        size_t n = 0;

        assert(slices || n_slices == 0);
        for (size_t i = 0; i < n_slices; i++) {
                const struct slice_rec *s = slices[i];

                if (!s || !s->pool || !streq_ptr(s->driver, driver) || !streq_ptr(s->node_name, node))
                        continue;
                n = strv_sorted_insert(ret, n, max, s->pool);
        }
        return n;
}

/* Node names and driver names are DNS subdomains: lowercase letters, digits, '-' and '.',
 * so no character could end NODE unambiguously inside a name that must be a DNS
 * subdomain too ("drainer-NODE-" of node-1 is a prefix of node-1-b's). The length of
 * NODE in front says where NODE ends: from "drainer-LEN-" a reader takes exactly LEN
 * characters, so two different nodes' names differ within their first 8 + digits(LEN) +
 * 1 + LEN characters, and no node's name is a prefix of another's. */
int taint_rule_name(const char *node, const char *driver, size_t i, char **ret) {
        char *s;

        assert(node && driver && ret);
        if (asprintf(&s, "drainer-%zu-%s-%s-%zu", strlen(node), node, driver, i) < 0)
                return -ENOMEM;
        if (strlen(s) > 253) {
                free(s);
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

/* Whether s starts with prefix and the rest is a decimal index. */
static bool prefix_then_index(const char *s, const char *prefix) {
        size_t l = strlen(prefix), d;

        if (strncmp(s, prefix, l) != 0)
                return false;
        d = strspn(s + l, "0123456789");
        return d > 0 && d <= 20 && s[l + d] == '\0';
}

enum taint_rule_naming taint_rule_naming(const char *name, const char *node, const char *driver) {
        _cleanup_free_ char *current = NULL, *legacy = NULL;

        if (!name || !node || !driver)
                return TAINT_RULE_NAME_FOREIGN;
        if (asprintf(&current, "drainer-%zu-%s-%s-", strlen(node), node, driver) < 0) {
                current = NULL;
                return TAINT_RULE_NAME_FOREIGN;
        }
        if (prefix_then_index(name, current))
                return TAINT_RULE_NAME_CURRENT;
        if (asprintf(&legacy, "drainer-%s-%s-", node, driver) < 0) {
                legacy = NULL;
                return TAINT_RULE_NAME_FOREIGN;
        }
        if (prefix_then_index(name, legacy))
                return TAINT_RULE_NAME_LEGACY;
        return TAINT_RULE_NAME_FOREIGN;
}

static const char *str_at(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The first member of o (an object) not in allowed[] whose value is not null, or NULL. */
static const char *other_member(const cJSON *o, const char *const *allowed, size_t n) {
        const cJSON *m;

        cJSON_ArrayForEach(m, o) {
                bool ok = cJSON_IsNull(m);

                for (size_t i = 0; i < n && !ok; i++)
                        ok = m->string && streq(m->string, allowed[i]);
                if (!ok)
                        return m->string ? m->string : "?";
        }
        return NULL;
}

/* taint_rule_check, and with device (not NULL) taint_rule_device_check. */
static int check(const cJSON *rule, const char *name, const char *node, const char *driver,
                 const char *const *pools, size_t n_pools, const char *device, const char *effect, char *why,
                 size_t why_size) {
        static const char *const spec_members[] = { "deviceSelector", "taint" };
        static const char *const selector_members[] = { "driver", "pool", "device" };
        static const char *const taint_members[] = { "key", "value", "effect", "timeAdded" };
        const cJSON *meta, *spec, *sel, *taint;
        const char *v, *pool, *other;
        bool pool_ok = false;

        assert(name && node && driver && why && why_size > 0);
        meta = cJSON_GetObjectItemCaseSensitive(rule, "metadata");
        spec = cJSON_GetObjectItemCaseSensitive(rule, "spec");
        sel = cJSON_GetObjectItemCaseSensitive(spec, "deviceSelector");
        taint = cJSON_GetObjectItemCaseSensitive(spec, "taint");
        if (!cJSON_IsObject(rule) || !cJSON_IsObject(meta)) {
                snprintf(why, why_size, "it is not a DeviceTaintRule object");
                return -EPERM;
        }
        if (!streq_ptr(str_at(meta, "name"), name)) {
                snprintf(why, why_size, "the API server answered with another object (%s)",
                         strna(str_at(meta, "name")));
                return -EPERM;
        }
        if (taint_rule_naming(name, node, driver) == TAINT_RULE_NAME_FOREIGN) {
                snprintf(why, why_size, "its name is not drainer's for node %s and driver %s", node, driver);
                return -EPERM;
        }
        if (!str_at(meta, "uid") || !*str_at(meta, "uid")) {
                snprintf(why, why_size, "it has no uid");
                return -EPERM;
        }
        v = str_at(cJSON_GetObjectItemCaseSensitive(meta, "labels"), TAINT_RULE_LABEL_MANAGED);
        if (!streq_ptr(v, "drainer")) {
                snprintf(why, why_size, "its label " TAINT_RULE_LABEL_MANAGED " is %s, not drainer",
                         strna(v));
                return -EPERM;
        }
        v = str_at(cJSON_GetObjectItemCaseSensitive(meta, "annotations"), TAINT_RULE_ANN_NODE);
        if (!streq_ptr(v, node)) {
                snprintf(why, why_size, "its annotation " TAINT_RULE_ANN_NODE " is %s, not %s", strna(v),
                         node);
                return -EPERM;
        }
        if (!cJSON_IsObject(spec) || !cJSON_IsObject(sel) || !cJSON_IsObject(taint)) {
                snprintf(why, why_size, "it has no spec.deviceSelector or spec.taint");
                return -EPERM;
        }
        if ((other = other_member(spec, spec_members, ELEMENTSOF(spec_members)))) {
                snprintf(why, why_size, "its spec has %s, which drainer never writes", other);
                return -EPERM;
        }
        if ((other = other_member(sel, selector_members, ELEMENTSOF(selector_members) - !device))) {
                snprintf(why, why_size, "its deviceSelector has %s, which drainer never writes", other);
                return -EPERM;
        }
        v = str_at(sel, "driver");
        if (!streq_ptr(v, driver)) {
                snprintf(why, why_size, "it selects driver %s, not %s", strna(v), driver);
                return -EPERM;
        }
        pool = str_at(sel, "pool");
        for (size_t i = 0; pool && i < n_pools && !pool_ok; i++)
                pool_ok = streq_ptr(pools[i], pool);
        if (!pool_ok) {
                snprintf(why, why_size, "it selects pool %s, not a pool of driver %s on node %s",
                         strna(pool), driver, node);
                return -EPERM;
        }
        if (device && !streq_ptr(str_at(sel, "device"), device)) {
                snprintf(why, why_size, "it selects device %s, not %s", strna(str_at(sel, "device")),
                         device);
                return -EPERM;
        }
        if ((other = other_member(taint, taint_members, ELEMENTSOF(taint_members))) ||
            !streq_ptr(str_at(taint, "key"), TAINT_RULE_TAINT_KEY) ||
            !streq_ptr(str_at(taint, "effect"), effect) ||
            (str_at(taint, "value") && *str_at(taint, "value")) ||
            (cJSON_GetObjectItemCaseSensitive(taint, "value") && !str_at(taint, "value") &&
             !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(taint, "value")))) {
                snprintf(why, why_size, "its taint is not " TAINT_RULE_TAINT_KEY ":%s", effect);
                return -EPERM;
        }
        return 0;
}

int taint_rule_check(const void *rule_json, const char *name, const char *node, const char *driver,
                     const char *const *pools, size_t n_pools, char *why, size_t why_size) {
        return check(rule_json, name, node, driver, pools, n_pools, NULL, TAINT_RULE_TAINT_EFFECT, why,
                     why_size);
}

int taint_rule_device_check(const void *rule_json, const char *name, const char *node, const char *driver,
                            const char *pool, const char *device, char *why, size_t why_size) {
        _cleanup_free_ char *want = NULL;
        const char *pools[1] = { pool };
        int r;

        assert(name && node && driver && pool && device && why && why_size > 0);
        r = taint_rule_device_name(node, driver, pool, device, &want);
        if (r < 0 || !streq(name, want)) {
                snprintf(why, why_size, "its name is not drainer's for device %s/%s/%s of node %s", driver,
                         pool, device, node);
                return -EPERM;
        }
        return check(rule_json, name, node, driver, pools, 1, device, TAINT_RULE_TAINT_EFFECT, why,
                     why_size);
}

static int body(const struct taint_rule_api *api, const char *name, const char *node, const char *driver,
                const char *pool, const char *device, const char *effect, char **ret) {
        cJSON *root = cJSON_CreateObject(), *meta, *labels, *ann, *spec, *sel, *taint;
        char *s = NULL;

        assert(api && name && node && driver && pool && ret);
        if (!root || !cJSON_AddStringToObject(root, "apiVersion", api->api_version) ||
            !cJSON_AddStringToObject(root, "kind", "DeviceTaintRule") ||
            !(meta = cJSON_AddObjectToObject(root, "metadata")) ||
            !cJSON_AddStringToObject(meta, "name", name) ||
            !(labels = cJSON_AddObjectToObject(meta, "labels")) ||
            !cJSON_AddStringToObject(labels, TAINT_RULE_LABEL_MANAGED, "drainer") ||
            !(ann = cJSON_AddObjectToObject(meta, "annotations")) ||
            !cJSON_AddStringToObject(ann, TAINT_RULE_ANN_NODE, node) ||
            !(spec = cJSON_AddObjectToObject(root, "spec")) ||
            !(sel = cJSON_AddObjectToObject(spec, "deviceSelector")) ||
            !cJSON_AddStringToObject(sel, "driver", driver) || !cJSON_AddStringToObject(sel, "pool", pool) ||
            (device && !cJSON_AddStringToObject(sel, "device", device)) ||
            !(taint = cJSON_AddObjectToObject(spec, "taint")) ||
            !cJSON_AddStringToObject(taint, "key", TAINT_RULE_TAINT_KEY) ||
            !cJSON_AddStringToObject(taint, "effect", effect) || !(s = cJSON_PrintUnformatted(root))) {
                cJSON_Delete(root);
                return -ENOMEM;
        }
        cJSON_Delete(root);
        *ret = s;
        return 0;
}

int taint_rule_body(const struct taint_rule_api *api, const char *name, const char *node, const char *driver,
                    const char *pool, char **ret) {
        return body(api, name, node, driver, pool, NULL, TAINT_RULE_TAINT_EFFECT, ret);
}

int taint_rule_device_body(const struct taint_rule_api *api, const char *name, const char *node,
                           const char *driver, const char *pool, const char *device, char **ret) {
        assert(device);
        return body(api, name, node, driver, pool, device, TAINT_RULE_TAINT_EFFECT, ret);
}

int taint_rule_device_name(const char *node, const char *driver, const char *pool, const char *device,
                           char **ret) {
        uint64_t h;
        char *s;

        assert(node && driver && pool && device && ret);
        h = text_fnv1a(text_fnv1a(text_fnv1a(TEXT_FNV1A_BASIS, pool), "/"), device);
        /* 19 digits, from 10^18: never one of a driver drain's small pool indices */
        if (asprintf(&s, "drainer-%zu-%s-%s-%" PRIu64, strlen(node), node, driver,
                     UINT64_C(1000000000000000000) + h % UINT64_C(9000000000000000000)) < 0)
                return -ENOMEM;
        if (strlen(s) > 253) {
                free(s);
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

int taint_rule_preview_name(const char *node, const char *driver, const char *pool, const char *device,
                            char **ret) {
        _cleanup_free_ char *dev = NULL;
        const char *idx;
        char *s;
        int r;

        assert(node && driver && pool && device && ret);
        r = taint_rule_device_name(node, driver, pool, device, &dev);
        if (r < 0)
                return r;
        idx = strrchr(dev, '-') + 1; /* the device drain's 19 digits */
        if (asprintf(&s, "drainer-%zu-%s-%s-2%s", strlen(node), node, driver, idx) < 0)
                return -ENOMEM;
        if (strlen(s) > 253) {
                free(s);
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

int taint_rule_preview_body(const struct taint_rule_api *api, const char *name, const char *node,
                            const char *driver, const char *pool, const char *device, char **ret) {
        assert(device);
        return body(api, name, node, driver, pool, device, TAINT_RULE_PREVIEW_EFFECT, ret);
}

int taint_rule_preview_check(const void *rule_json, const char *name, const char *node, const char *driver,
                             const char *pool, const char *device, char *why, size_t why_size) {
        _cleanup_free_ char *want = NULL;
        const char *pools[1] = { pool };
        int r;

        assert(name && node && driver && pool && device && why && why_size > 0);
        r = taint_rule_preview_name(node, driver, pool, device, &want);
        if (r < 0 || !streq(name, want)) {
                snprintf(why, why_size, "its name is not drainer's preview for device %s/%s/%s of node %s",
                         driver, pool, device, node);
                return -EPERM;
        }
        return check(rule_json, name, node, driver, pools, 1, device, TAINT_RULE_PREVIEW_EFFECT, why,
                     why_size);
}

/* Reads "N <what>" at *p (N decimal, then one space and exactly what), singular or plural
 * as the controller writes it ("1 pod would", "2 pods would"); moves *p past it. */
static int read_count(const char **p, const char *one, const char *many, long *ret) {
        const char *s = *p, *what;
        long n = 0;
        size_t d = strspn(s, "0123456789"), l;

        if (d == 0 || d > 9)
                return -EBADMSG;
        for (size_t i = 0; i < d; i++)
                n = n * 10 + (s[i] - '0');
        if (s[d] != ' ')
                return -EBADMSG;
        what = n == 1 ? one : many;
        l = strlen(what);
        if (strncmp(s + d + 1, what, l) != 0)
                return -EBADMSG;
        *p = s + d + 1 + l;
        *ret = n;
        return 0;
}

int taint_rule_preview_parse(const void *rule_json, struct taint_rule_preview *ret) {
        const cJSON *rule = rule_json, *meta, *gen, *conds, *c;
        struct taint_rule_preview pv = {};
        const char *m;

        assert(ret);
        meta = cJSON_GetObjectItemCaseSensitive(rule, "metadata");
        gen = cJSON_GetObjectItemCaseSensitive(meta, "generation");
        conds = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rule, "status"),
                                                 "conditions");
        if (!cJSON_IsNumber(gen))
                return -EBADMSG;
        cJSON_ArrayForEach(c, conds) {
                const cJSON *og = cJSON_GetObjectItemCaseSensitive(c, "observedGeneration");

                if (!streq_ptr(str_at(c, "type"), "EvictionInProgress"))
                        continue;
                /* an answer for an older spec is no answer */
                if (!cJSON_IsNumber(og) || og->valuedouble != gen->valuedouble)
                        return -EAGAIN;
                if (!streq_ptr(str_at(c, "reason"), "NoEffect") || !(m = str_at(c, "message")))
                        return -EBADMSG;
                if (read_count(&m, "published device selected. ", "published devices selected. ",
                               &pv.published) < 0 ||
                    read_count(&m, "allocated device selected. ", "allocated devices selected. ",
                               &pv.allocated) < 0 ||
                    read_count(&m, "pod would be evicted in ", "pods would be evicted in ", &pv.pods) < 0 ||
                    read_count(&m, "namespace ", "different namespaces ", &pv.namespaces) < 0 ||
                    strncmp(m, "if the effect was NoExecute.", strlen("if the effect was NoExecute.")) != 0)
                        return -EBADMSG;
                *ret = pv;
                return 0;
        }
        return -EAGAIN;
}
