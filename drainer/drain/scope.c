/* The state of a drain scoped to one DRA driver: the same drainer.io/ keys with
 * ".DRIVER" after them, read through a view that looks like a node's own state,
 * and the rule that a node drain and a driver drain of a node exclude each other.
 * Pure functions over records. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/macro.h"
#include "drainer/drain/device.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "state-int.h"

/* ---- driver-scoped state ---- */

/* The scope of a drainer.io/ key: what follows the first dot after the prefix (NULL:
 * none, the node's own), and the length of the plain key before it. */
static const char *key_scope(const char *key, size_t *ret_plain_len) {
        const char *dot;

        if (strncmp(key, DRAINER_ANN_PREFIX, strlen(DRAINER_ANN_PREFIX)) != 0)
                return NULL;
        dot = strchr(key + strlen(DRAINER_ANN_PREFIX), '.');
        if (!dot)
                return NULL;
        *ret_plain_len = (size_t)(dot - key);
        return dot + 1;
}

int drain_scope_check(const char *driver, char *msg, size_t size) {
        /* the longest plain name part: "was-unschedulable" */
        size_t room = 63 - strlen(DRAINER_ANN_WAS_UNSCHEDULABLE) + strlen(DRAINER_ANN_PREFIX) - 1;

        assert(driver);
        if (!drain_driver_name_is_valid(driver)) {
                snprintf(msg, size,
                         "--driver: \"%s\" is not a DRA driver name (a DNS subdomain of at most %d "
                         "characters, as in ResourceSlice spec.driver)",
                         driver, DRIVER_NAME_MAX);
                return -EINVAL;
        }
        if (strlen(driver) > room) {
                snprintf(msg, size,
                         "--driver: \"%s\" is longer than the %zu characters drainer's per-driver "
                         "annotations "
                         "(" DRAINER_ANN_WAS_UNSCHEDULABLE ".NAME) leave for it",
                         driver, room);
                return -EINVAL;
        }
        return 0;
}

int drain_scope_view_init(struct drain_scope_view *ret, const struct node_rec *n, const char *scope) {
        size_t n_kv = 0, bytes = 0, at = 0;

        assert(ret && n);
        *ret = (struct drain_scope_view){ .node = *n };
        for (size_t i = 0; i < n->n_annotations; i++)
                bytes += strlen(n->annotations[i].key) + 1;
        if (n->n_annotations > 0) {
                ret->kv = calloc(n->n_annotations, sizeof(*ret->kv));
                ret->keys = malloc(bytes);
                if (!ret->kv || !ret->keys) {
                        drain_scope_view_done(ret);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key, *sc;
                size_t plain = 0;

                sc = key_scope(k, &plain);
                if (!scope ? sc != NULL : !sc || !streq(sc, scope))
                        continue;
                if (!sc)
                        plain = strlen(k);
                memcpy(ret->keys + at, k, plain);
                ret->keys[at + plain] = 0;
                ret->kv[n_kv++] = (struct kv){ .key = ret->keys + at, .value = n->annotations[i].value };
                at += plain + 1;
        }
        ret->node.annotations = ret->kv;
        ret->node.n_annotations = n_kv;
        return 0;
}

void drain_scope_view_done(struct drain_scope_view *v) {
        if (!v)
                return;
        free(v->kv);
        free(v->keys);
        *v = (struct drain_scope_view){};
}

int drain_scope_patch(const char *scope, char **body) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *ann, *a;
        char *s;

        assert(body && *body);
        if (!scope)
                return 0;
        root = cJSON_Parse(*body);
        if (!root)
                return -ENOMEM; /* our own patch: only out of memory makes it unparseable */
        ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"),
                                               "annotations");
        cJSON_ArrayForEach(a, ann) {
                char *k;

                if (!a->string || strncmp(a->string, DRAINER_ANN_PREFIX, strlen(DRAINER_ANN_PREFIX)) != 0)
                        continue;
                if (asprintf(&k, "%s.%s", a->string, scope) < 0)
                        return -ENOMEM;
                free(a->string);
                a->string = k;
        }
        s = cJSON_PrintUnformatted(root);
        if (!s)
                return -ENOMEM;
        free(*body);
        *body = s;
        return 0;
}

const char *drain_scope_conflict(const struct node_rec *n, const char *scope) {
        assert(n);
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key, *sc;
                size_t plain = 0;

                sc = key_scope(k, &plain);
                if (plain != strlen(DRAINER_ANN_STATE) || strncmp(k, DRAINER_ANN_STATE, plain) != 0) {
                        if (!sc && scope && streq(k, DRAINER_ANN_STATE))
                                return "";
                        continue;
                }
                if (!scope && sc)
                        return sc;
        }
        return NULL;
}

void drain_scope_foreach(const struct node_rec *n,
                         void (*f)(const char *driver, size_t len, const char *phase, void *userdata),
                         void *userdata) {
        assert(n && f);
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key, *sc;
                size_t plain = 0;

                sc = key_scope(k, &plain);
                if (sc && plain == strlen(DRAINER_ANN_STATE) && strncmp(k, DRAINER_ANN_STATE, plain) == 0 &&
                    !drain_scope_is_device(sc))
                        f(sc, strlen(sc), n->annotations[i].value, userdata);
        }
}
