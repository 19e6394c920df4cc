/* Whether a driver-scoped drain's DRA driver gets seamless upgrades (seamless.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/client.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/text.h"
#include "drainer/upgrade.h"
#include "seamless.h"

#define MAX_CANDIDATES 8

struct read {
        bool done;
        int error;
        char *message;
        cJSON *json;  /* a GET's answer */
        cJSON *items; /* a list's items */
};

static void on_read(const struct kube_result *res, void *userdata) {
        struct read *rd = userdata;

        rd->done = true;
        rd->error = res->error;
        rd->message = res->message ? strdup(res->message) : NULL;
        if (res->json)
                rd->json = cJSON_Duplicate(res->json, true);
}

static int on_read_page(const cJSON *items, void *userdata) {
        struct read *rd = userdata;
        const cJSON *it;

        if (!rd->items && !(rd->items = cJSON_CreateArray()))
                return -ENOMEM;
        cJSON_ArrayForEach(it, items) {
                cJSON *c = cJSON_Duplicate(it, true);

                if (!c)
                        return -ENOMEM;
                cJSON_AddItemToArray(rd->items, c);
        }
        return 0;
}

static void read_done(struct read *rd) {
        free(rd->message);
        cJSON_Delete(rd->json);
        cJSON_Delete(rd->items);
        *rd = (struct read){};
}

static int read_path(struct app *app, const char *path, bool list, struct read *rd) {
        int r = list ? kube_list(app->client, path, 500, "0", on_read_page, on_read, rd, NULL)
                     : kube_get(app->client, path, on_read, rd, NULL);

        if (r < 0)
                return log_error_errno(r, "cannot read %s: %m", path);
        app_run_until(app, &rd->done);
        if (rd->error < 0)
                return log_error_errno(rd->error, "cannot read %s: %s", path,
                                       rd->message ? rd->message : strerror(-rd->error));
        if (list && !rd->items && !(rd->items = cJSON_CreateArray()))
                return log_oom();
        return 0;
}

/* Whether the DaemonSet's pod template names the driver (its args, env, ...). */
static bool names_driver(const cJSON *ds, const char *driver) {
        _cleanup_free_ char *t = cJSON_PrintUnformatted(json_path(ds, "spec.template"));

        return t && strstr(t, driver);
}

int seamless_check(struct app *app, const char *driver, const struct pod_rec *const *drivers, size_t n,
                   struct seamless_answer *ret) {
        cJSON *cand[MAX_CANDIDATES] = {};
        size_t n_cand = 0, pick = 0, n_named = 0;
        _cleanup_free_ char *ppath = NULL;
        _cleanup_free_ const char **versions = NULL;
        char **nodes = NULL;
        size_t n_nodes = 0, n_versions = 0;
        struct read pods = {}, nl = {};
        const cJSON *ds, *it;
        const char *uid;
        int r = 0;

        *ret = (struct seamless_answer){};
        for (size_t i = 0; i < n && n_cand < MAX_CANDIDATES; i++) {
                const struct owner_ref *c = drivers[i]->controller;
                _cleanup_free_ char *path = NULL;
                struct read rd = {};
                bool dup = false;

                if (!c || !streq_ptr(c->kind, "DaemonSet") || !c->name)
                        continue;
                for (size_t j = 0; j < n_cand; j++)
                        dup = dup || streq_ptr(json_str(cand[j], "metadata.uid"), c->uid);
                if (dup)
                        continue;
                if (asprintf(&path, "/apis/apps/v1/namespaces/%s/daemonsets/%s", drivers[i]->ns, c->name) <
                    0) {
                        r = log_oom();
                        goto out;
                }
                r = read_path(app, path, false, &rd);
                if (r < 0) {
                        read_done(&rd);
                        goto out;
                }
                cand[n_cand++] = TAKE_PTR(rd.json);
                read_done(&rd);
        }
        if (n_cand == 0) {
                snprintf(ret->why, sizeof(ret->why), "no DaemonSet of driver %s has a pod on the node",
                         driver);
                goto out;
        }
        for (size_t j = 0; j < n_cand; j++)
                if (names_driver(cand[j], driver)) {
                        pick = n_named++ == 0 ? j : pick;
                }
        if (n_cand > 1 && n_named != 1) {
                snprintf(ret->why, sizeof(ret->why),
                         "%zu DRA driver DaemonSets run on the node and %s of them names %s in its pod "
                         "template",
                         n_cand, n_named ? "more than one" : "none", driver);
                goto out;
        }
        ds = cand[pick];
        uid = json_str(ds, "metadata.uid");
        snprintf(ret->daemonset, sizeof(ret->daemonset), "%s/%s", strna(json_str(ds, "metadata.namespace")),
                 strna(json_str(ds, "metadata.name")));

        /* The nodes its pods run on, and their kubelets. */
        if (asprintf(&ppath, "/api/v1/namespaces/%s/pods", strna(json_str(ds, "metadata.namespace"))) < 0) {
                r = log_oom();
                goto out;
        }
        r = read_path(app, ppath, true, &pods);
        if (r >= 0)
                r = read_path(app, "/api/v1/nodes", true, &nl);
        if (r < 0)
                goto out;
        cJSON_ArrayForEach(it, pods.items) {
                const cJSON *ref;
                const char *node = json_str(it, "spec.nodeName");
                bool ours = false;

                cJSON_ArrayForEach(ref, json_path(it, "metadata.ownerReferences")) ours =
                        ours ||
                        (json_bool(ref, "controller", false) && streq_ptr(json_str(ref, "uid"), uid));
                if (ours && node && strv_push_unique(&nodes, &n_nodes, node) < 0) {
                        r = log_oom();
                        goto out;
                }
        }
        versions = calloc(n_nodes ? n_nodes : 1, sizeof(*versions));
        if (!versions) {
                r = log_oom();
                goto out;
        }
        for (size_t j = 0; j < n_nodes; j++) {
                const char *v = NULL;

                cJSON_ArrayForEach(it, nl.items) if (streq_ptr(json_str(it, "metadata.name"), nodes[j])) v =
                        json_str(it, "status.nodeInfo.kubeletVersion");
                versions[n_versions++] = v;
        }
        ret->seamless = driver_upgrade_seamless(ds, versions, n_versions, ret->why, sizeof(ret->why)) > 0;
        r = 0;
out:
        for (size_t j = 0; j < n_cand; j++)
                cJSON_Delete(cand[j]);
        strv_free_n(nodes, n_nodes);
        read_done(&pods);
        read_done(&nl);
        return r;
}
