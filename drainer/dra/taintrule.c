/* DeviceTaintRules for driver-scoped drains: API discovery (which version of
 * resource.k8s.io serves devicetaintrules), the rules' names and bodies, the pools
 * of a driver on a node. Owns only its discovery call; sends no rule itself. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/client.h"
#include "drainer/log.h"
#include "drainer/objects.h"
#include "drainer/taintrule.h"

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
                size_t at;
                bool dup = false;

                if (!s || !s->pool || !streq_ptr(s->driver, driver) || !streq_ptr(s->node_name, node))
                        continue;
                for (at = 0; at < n; at++) {
                        int c = strcmp(s->pool, ret[at]);

                        if (c == 0)
                                dup = true;
                        if (c <= 0)
                                break;
                }
                if (dup || at >= max)
                        continue;
                if (n == max)
                        n--;
                memmove(ret + at + 1, ret + at, (n - at) * sizeof(*ret));
                ret[at] = s->pool;
                n++;
        }
        return n;
}

int taint_rule_name(const char *node, const char *driver, size_t i, char **ret) {
        char *s;

        assert(node && driver && ret);
        if (asprintf(&s, "drainer-%s-%s-%zu", node, driver, i) < 0)
                return -ENOMEM;
        if (strlen(s) > 253) {
                free(s);
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

int taint_rule_body(const struct taint_rule_api *api, const char *name, const char *node, const char *driver,
                    const char *pool, char **ret) {
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
            !(taint = cJSON_AddObjectToObject(spec, "taint")) ||
            !cJSON_AddStringToObject(taint, "key", TAINT_RULE_TAINT_KEY) ||
            !cJSON_AddStringToObject(taint, "effect", TAINT_RULE_TAINT_EFFECT) ||
            !(s = cJSON_PrintUnformatted(root))) {
                cJSON_Delete(root);
                return -ENOMEM;
        }
        cJSON_Delete(root);
        *ret = s;
        return 0;
}
