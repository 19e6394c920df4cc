/* Device-scoped drains (device.h): parsing --device, the scope of a set of devices,
 * its record on the Node, which claims hold a device, and the drains a device drain
 * must not overlap. Pure functions over records; sends nothing. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/macro.h"
#include "drainer/base/text.h"
#include "drainer/drain/device.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "state-int.h"

static bool lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A DNS label (RFC 1123): what ResourceSlice device names are. */
static bool dns_label(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 63 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!lower_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

/* A pool name: DNS subdomains separated by '/', at most 253 (ResourcePool.name). */
static bool pool_name(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 253 || s[0] == '/' || s[n - 1] == '/' || strstr(s, "//"))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!lower_alnum(s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '/')
                        return false;
        return true;
}

int drain_device_parse(const char *arg, char *buf, struct drain_device *ret, char *msg, size_t size) {
        char *first, *last;

        assert(arg && buf && ret && msg);
        strcpy(buf, arg);
        first = strchr(buf, '/');
        last = strrchr(buf, '/');
        if (!first || first == last) {
                snprintf(msg, size,
                         "--device: \"%s\" is not DRIVER/POOL/DEVICE (as in a ResourceClaim's "
                         "status.allocation.devices.results[]: driver, pool, device)",
                         arg);
                return -EINVAL;
        }
        *first = *last = '\0';
        if (!drain_driver_name_is_valid(buf)) {
                snprintf(msg, size, "--device %s: \"%s\" is not a DRA driver name (a DNS subdomain)", arg,
                         buf);
                return -EINVAL;
        }
        if (!pool_name(first + 1)) {
                snprintf(msg, size, "--device %s: \"%s\" is not a pool name", arg, first + 1);
                return -EINVAL;
        }
        if (!dns_label(last + 1)) {
                snprintf(msg, size, "--device %s: \"%s\" is not a device name (a DNS label)", arg, last + 1);
                return -EINVAL;
        }
        *ret = (struct drain_device){ .driver = buf, .pool = first + 1, .device = last + 1 };
        return 0;
}

bool drain_device_eq(const struct drain_device *a, const struct drain_device *b) {
        return streq_ptr(a->driver, b->driver) && streq_ptr(a->pool, b->pool) &&
               streq_ptr(a->device, b->device);
}

/* The hash of one device; the set's is the sum of its members' (order-free). */
static uint64_t device_hash(const struct drain_device *d) {
        uint64_t h = text_fnv1a(TEXT_FNV1A_BASIS, d->driver);

        h = text_fnv1a(h, "/");
        h = text_fnv1a(h, d->pool);
        h = text_fnv1a(h, "/");
        return text_fnv1a(h, d->device);
}

void drain_devices_scope(const struct drain_device *d, size_t n, char *ret) {
        uint64_t h = 0;

        assert(d || n == 0);
        for (size_t i = 0; i < n; i++) {
                bool dup = false;

                for (size_t j = 0; j < i && !dup; j++)
                        dup = drain_device_eq(&d[i], &d[j]);
                if (!dup)
                        h += device_hash(&d[i]) * UINT64_C(0x9e3779b97f4a7c15);
        }
        snprintf(ret, DRAIN_DEVICE_SCOPE_SIZE, DRAIN_DEVICE_SCOPE_PREFIX "D%016" PRIX64, h);
}

bool drain_scope_is_device(const char *scope) {
        return scope && strncmp(scope, DRAIN_DEVICE_SCOPE_PREFIX, strlen(DRAIN_DEVICE_SCOPE_PREFIX)) == 0 &&
               scope[strlen(DRAIN_DEVICE_SCOPE_PREFIX)] == 'D';
}

char *drain_devices_format(const struct drain_device *d, size_t n) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return NULL;
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s/%s/%s", i > 0 ? "," : "", d[i].driver, d[i].pool, d[i].device);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* Whether the entry of len bytes at p is device d. */
static bool entry_is(const char *p, size_t len, const struct drain_device *d) {
        size_t ld = strlen(d->driver), lp = strlen(d->pool), lv = strlen(d->device);

        return len == ld + lp + lv + 2 && strncmp(p, d->driver, ld) == 0 && p[ld] == '/' &&
               strncmp(p + ld + 1, d->pool, lp) == 0 && p[ld + 1 + lp] == '/' &&
               strncmp(p + ld + lp + 2, d->device, lv) == 0;
}

bool drain_devices_listed(const char *list, const struct drain_device *d, size_t n, size_t *ret_at) {
        for (const char *p = list; p && *p;) {
                size_t l = strcspn(p, ",");

                for (size_t i = 0; i < n; i++)
                        if (entry_is(p, l, &d[i])) {
                                if (ret_at)
                                        *ret_at = i;
                                return true;
                        }
                p += l;
                if (*p == ',')
                        p++;
        }
        return false;
}

bool drain_devices_held(const struct claim_rec *c, const struct drain_device *d, size_t n) {
        assert(c);
        for (size_t i = 0; i < c->n_devices; i++)
                for (size_t j = 0; j < n; j++)
                        if (drain_device_eq(&(const struct drain_device){ c->devices[i].driver,
                                                                          c->devices[i].pool,
                                                                          c->devices[i].device },
                                            &d[j]))
                                return true;
        return false;
}

char *drain_devices_conflict(const struct node_rec *n, const char *scope, const struct drain_device *d,
                             size_t n_devices) {
        size_t pre = strlen(DRAINER_ANN_STATE);

        assert(n && scope);
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key, *sc;
                _cleanup_free_ char *dk = NULL;
                const char *list;

                if (strncmp(k, DRAINER_ANN_STATE, pre) != 0)
                        continue;
                if (k[pre] == '\0')
                        return strdup("node");
                if (k[pre] != '.')
                        continue; /* state-since */
                sc = k + pre + 1;
                if (streq(sc, scope))
                        continue; /* this drain itself: resumed */
                if (!drain_scope_is_device(sc)) {
                        for (size_t j = 0; j < n_devices; j++)
                                if (streq(sc, d[j].driver))
                                        return strdup(sc);
                        continue;
                }
                if (asprintf(&dk, DRAINER_ANN_DEVICES ".%s", sc) < 0)
                        return NULL;
                list = kv_get(n->annotations, n->n_annotations, dk);
                /* a device drain whose record names no devices: it may hold any of them */
                if (!list || drain_devices_listed(list, d, n_devices, NULL))
                        return strdup(list ? list : sc);
        }
        return NULL;
}

int drain_devices_on_node(const struct drain_device *d, size_t n, const struct slice_rec *const *slices,
                          size_t n_slices, const char *node, char *msg, size_t size) {
        assert((d || n == 0) && (slices || n_slices == 0) && node && msg);
        for (size_t i = 0; i < n; i++) {
                bool found = false, driver = false, pool = false;

                for (size_t j = 0; j < n_slices && !found; j++) {
                        const struct slice_rec *s = slices[j];

                        if (!s || !streq_ptr(s->node_name, node) || !streq_ptr(s->driver, d[i].driver))
                                continue;
                        driver = true;
                        if (!streq_ptr(s->pool, d[i].pool))
                                continue;
                        pool = true;
                        for (size_t k = 0; k < s->n_devices && s->devices && !found; k++)
                                found = streq_ptr(s->devices[k], d[i].device);
                }
                if (found)
                        continue;
                snprintf(msg, size,
                         "--device %s/%s/%s: node %s publishes no such device (%s); see kubectl get "
                         "resourceslices --field-selector spec.nodeName=%s -o yaml",
                         d[i].driver, d[i].pool, d[i].device, node,
                         !driver ? "no ResourceSlice of that driver on the node"
                         : !pool ? "no pool of that name of the driver on the node"
                                 : "the pool's ResourceSlices list no device of that name",
                         node);
                return -ENXIO;
        }
        return 0;
}

int drain_devices_patch_add(char **body, const char *list) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *meta, *ann;
        char *s;

        assert(body && *body && list);
        root = cJSON_Parse(*body);
        if (!root)
                return -EINVAL;
        meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
        if (!meta && !(meta = cJSON_AddObjectToObject(root, "metadata")))
                return -ENOMEM;
        ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
        if (!ann && !(ann = cJSON_AddObjectToObject(meta, "annotations")))
                return -ENOMEM;
        if (!cJSON_IsObject(ann))
                return -EINVAL;
        cJSON_DeleteItemFromObjectCaseSensitive(ann, DRAINER_ANN_DEVICES);
        if (!cJSON_AddStringToObject(ann, DRAINER_ANN_DEVICES, list))
                return -ENOMEM;
        s = cJSON_PrintUnformatted(root);
        if (!s)
                return -ENOMEM;
        free(*body);
        *body = s;
        return 0;
}

char *drain_devices_of_driver(const struct node_rec *n, const char *driver) {
        size_t pre = strlen(DRAINER_ANN_DEVICES "."), l = strlen(driver);

        assert(n && driver);
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key, *v = n->annotations[i].value;

                if (strncmp(k, DRAINER_ANN_DEVICES ".", pre) != 0 || !drain_scope_is_device(k + pre) || !v)
                        continue;
                for (const char *p = v; *p;) {
                        size_t len = strcspn(p, ",");

                        if (len > l && strncmp(p, driver, l) == 0 && p[l] == '/')
                                return strdup(v);
                        p += len;
                        if (*p == ',')
                                p++;
                }
        }
        return NULL;
}

void drain_devices_foreach(const struct node_rec *n,
                           void (*f)(const char *devices, const char *phase, const char *scope,
                                     void *userdata),
                           void *userdata) {
        size_t pre = strlen(DRAINER_ANN_STATE ".");

        assert(n && f);
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key;
                _cleanup_free_ char *dk = NULL;

                if (strncmp(k, DRAINER_ANN_STATE ".", pre) != 0 || !drain_scope_is_device(k + pre))
                        continue;
                if (asprintf(&dk, DRAINER_ANN_DEVICES ".%s", k + pre) < 0) {
                        dk = NULL;
                        continue;
                }
                f(kv_get(n->annotations, n->n_annotations, dk), n->annotations[i].value, k + pre, userdata);
        }
}
