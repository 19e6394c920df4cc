/* The API server's side of the engine's tests (fake-apiserver.h): JSON builders and
 * the Node's merge patches. Owns nothing between calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fakes/fake-apiserver.h"
#include "fakes/test-env.h"

void fake_api_merge_patch(cJSON *target, const cJSON *patch) {
        const cJSON *p;

        cJSON_ArrayForEach(p, patch) {
                cJSON *t = cJSON_GetObjectItemCaseSensitive(target, p->string);

                if (cJSON_IsNull(p))
                        cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
                else if (cJSON_IsObject(p) && cJSON_IsObject(t))
                        fake_api_merge_patch(t, p);
                else {
                        cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
                        cJSON_AddItemToObject(target, p->string, cJSON_Duplicate(p, true));
                }
        }
}

char *fake_api_list(const char *kind, unsigned rv, char **items, size_t n) {
        size_t len = 256;
        char *s;

        for (size_t i = 0; i < n; i++)
                len += strlen(items[i]) + 1;
        s = malloc(len);
        assert_non_null(s);
        snprintf(s, len,
                 "{\"kind\":\"%s\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"%u\"},"
                 "\"items\":[",
                 kind, rv);
        for (size_t i = 0; i < n; i++) {
                if (i)
                        strcat(s, ",");
                strcat(s, items[i]);
                free(items[i]);
        }
        strcat(s, "]}");
        return s;
}

char *fake_api_list_strv(const char *kind, char **items) {
        size_t n = 0;

        while (items[n])
                n++;
        return fake_api_list(kind, 100, items, n);
}

void fake_api_expect_list_and_watch(struct fake_transport *ft, const char *path, const char *list_prefix,
                                    char *body) {
        char *watch = test_asprintf("%s%swatch=1", path, strchr(path, '?') ? "&" : "?");

        fake_transport_expect_json(ft, "GET", list_prefix, 200, body);
        free(body);
        fake_transport_expect(ft, "GET", watch, &(struct fake_reply){ .hold_open = true });
        free(watch);
}

char *fake_api_watch_event(const char *type, const char *obj) {
        return test_asprintf("{\"type\":\"%s\",\"object\":%s}\n", type, obj);
}

cJSON *fake_api_json(const char *s) {
        cJSON *j = cJSON_Parse(s);

        assert_non_null(j);
        return j;
}

char *fake_api_patch_node(struct fake_transport *ft, cJSON *node, unsigned *rv, const char *body) {
        return fake_api_patch_node_at(ft, FAKE_API_NODE, node, rv, body);
}

char *fake_api_patch_node_at(struct fake_transport *ft, const char *path, cJSON *node, unsigned *rv,
                             const char *body) {
        cJSON *patch = fake_api_json(body), *meta;
        char v[32], *obj;

        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "metadata"),
                                                "resourceVersion");
        fake_api_merge_patch(node, patch);
        cJSON_Delete(patch);
        meta = cJSON_GetObjectItemCaseSensitive(node, "metadata");
        assert_non_null(meta);
        snprintf(v, sizeof(v), "%u", ++*rv);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
        cJSON_AddStringToObject(meta, "resourceVersion", v);
        obj = cJSON_PrintUnformatted(node);
        assert_non_null(obj);
        fake_transport_expect_json(ft, "PATCH", path, 200, obj);
        return obj;
}

char *fake_api_pod(const struct fake_pod *p) {
        _cleanup_free_ char *uid = p->uid ? strdup(p->uid) : test_asprintf("uid-%s", p->name);
        _cleanup_free_ char *conditions =
                p->ready
                        ? test_asprintf(",\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]", p->ready)
                        : strdup("");
        _cleanup_free_ char *ip = p->pod_ip ? test_asprintf(",\"podIP\":\"%s\"", p->pod_ip) : strdup("");

        assert_non_null(uid);
        return test_asprintf("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\",\"uid\":\"%s\","
                             "\"resourceVersion\":\"%u\"%s%s},"
                             "\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"c\",\"image\":"
                             "\"x\"}]%s%s},\"status\":{\"phase\":\"Running\"%s%s%s%s}}",
                             p->name, uid, p->rv ? p->rv : 50, p->meta ? "," : "", p->meta ? p->meta : "",
                             p->spec ? "," : "", p->spec ? p->spec : "", conditions, ip,
                             p->status ? "," : "", p->status ? p->status : "");
}

char *fake_api_claim(const struct fake_claim *c) {
        _cleanup_free_ char *owner =
                c->owner_name
                        ? test_asprintf(",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
                                        "\"name\":\"%s\",\"uid\":\"%s\",\"controller\":true}]",
                                        c->owner_name, c->owner_uid)
                        : strdup("");
        _cleanup_free_ char *alloc =
                c->allocated ? test_asprintf(
                                       "\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\","
                                       "\"driver\":\"%s\",\"pool\":\"node-1\",\"device\":\"gpu-0\"}]},"
                                       "\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":"
                                       "\"metadata.name\",\"operator\":\"In\",\"values\":[\"node-1\"]}]}]}}",
                                       c->driver)
                             : strdup("");
        _cleanup_free_ char *reserved =
                c->reserved_podgroup
                        ? test_asprintf(
                                  "%s\"reservedFor\":[{\"apiGroup\":\"scheduling.k8s.io\",\"resource\":"
                                  "\"podgroups\",\"name\":\"%s\",\"uid\":\"pg-%s\"}]",
                                  c->allocated ? "," : "", c->reserved_podgroup, c->reserved_podgroup)
                : c->reserved_name
                        ? test_asprintf("%s\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"%s\","
                                        "\"uid\":\"%s\"}]",
                                        c->allocated ? "," : "", c->reserved_name, c->reserved_uid)
                        : strdup("");

        assert_true(owner && alloc && reserved);
        return test_asprintf("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"demo\",\"uid\":\"claim-%s\","
                             "\"resourceVersion\":\"%u\"%s},\"spec\":{\"devices\":{\"requests\":[{\"name\":"
                             "\"gpu\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\"}}]}},"
                             "\"status\":{%s%s}}",
                             c->name, c->name, c->rv, owner, alloc, reserved);
}

char *fake_api_slice(const char *driver, unsigned rv) {
        return test_asprintf(
                "{\"metadata\":{\"name\":\"node-1-gpu\",\"uid\":\"slice-1\",\"resourceVersion\":"
                "\"%u\"},\"spec\":{\"driver\":\"%s\",\"pool\":{\"name\":\"node-1\","
                "\"generation\":1,\"resourceSliceCount\":1},\"nodeName\":\"node-1\","
                "\"devices\":[{\"name\":\"gpu-0\"}]}}",
                rv, driver);
}
