/* Reads kept whole (collect.h): the client's callbacks gather the answer into cJSON
 * owned by the collect. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/kube/client.h"
#include "drainer/kube/collect.h"

static void on_collected(const struct kube_result *res, void *userdata) {
        struct kube_collect *c = userdata;

        c->running = false;
        c->call = NULL;
        if (c->error == 0)
                c->error = res->error;
        c->status = res->status;
        if (res->message && !(c->message = strdup(res->message)) && c->error == 0)
                c->error = -ENOMEM;
        if (c->error == 0 && res->json && !c->items && !(c->json = cJSON_Duplicate(res->json, true)))
                c->error = -ENOMEM;
        c->done(c, c->userdata);
}

static int on_page(const cJSON *items, void *userdata) {
        struct kube_collect *c = userdata;
        const cJSON *it;

        cJSON_ArrayForEach(it, items) {
                cJSON *copy = cJSON_Duplicate(it, true);

                if (!copy) {
                        c->error = -ENOMEM;
                        return -ENOMEM;
                }
                cJSON_AddItemToArray(c->items, copy);
        }
        return 0;
}

static void collect_init(struct kube_collect *c, kube_collect_fn done, void *userdata) {
        *c = (struct kube_collect){ .done = done, .userdata = userdata, .running = true };
}

int kube_collect_get(struct kube_client *client, const char *path, kube_collect_fn done, void *userdata,
                     struct kube_collect *c) {
        int r;

        collect_init(c, done, userdata);
        r = kube_get(client, path, on_collected, c, &c->call);
        if (r < 0)
                c->running = false;
        return r;
}

int kube_collect_list(struct kube_client *client, const char *path, unsigned limit, const char *rv,
                      kube_collect_fn done, void *userdata, struct kube_collect *c) {
        int r;

        collect_init(c, done, userdata);
        c->items = cJSON_CreateArray();
        if (!c->items) {
                c->running = false;
                return -ENOMEM;
        }
        r = kube_list(client, path, limit, rv, on_page, on_collected, c, &c->call);
        if (r < 0) {
                c->running = false;
                cJSON_Delete(c->items);
                c->items = NULL;
        }
        return r;
}

void kube_collect_cancel(struct kube_collect *c) {
        if (c->running && c->call)
                kube_call_cancel(c->call);
}

void kube_collect_done(struct kube_collect *c) {
        free(c->message);
        cJSON_Delete(c->json);
        cJSON_Delete(c->items);
        c->message = NULL;
        c->json = c->items = NULL;
        c->error = 0;
        c->status = 0;
}
