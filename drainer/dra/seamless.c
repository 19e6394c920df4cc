/* Whether a driver-scoped drain's DRA driver gets seamless upgrades (seamless.h): the
 * candidate DaemonSets one GET each, then the DaemonSet's namespace's pods and the
 * Nodes, each a read kept whole (collect.h); the decision is upgrade.h's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/dra/seamless.h"
#include "drainer/dra/upgrade.h"
#include "drainer/kube/collect.h"

#define MAX_CANDIDATES 8

enum seamless_step {
        STEP_DAEMONSETS, /* GET candidate i */
        STEP_PODS,       /* the DaemonSet's namespace's pods */
        STEP_NODES,      /* every Node, for its kubelet version */
};

struct seamless_check {
        struct kube_client *client;
        char *driver;
        char *paths[MAX_CANDIDATES]; /* the candidates' DaemonSet paths, one per controller uid */
        size_t n_paths, next;
        cJSON *cand[MAX_CANDIDATES];
        size_t n_cand;
        const cJSON *ds; /* the pick, one of cand */
        enum seamless_step step;
        struct kube_collect read;
        cJSON *pods;
        struct seamless_answer ans;
        struct dtimer answer; /* answers from the loop when nothing is to be read */
        bool answer_ready;
        bool cancelled;
        seamless_done_fn done;
        void *userdata;
};

static void check_free(struct seamless_check *s) {
        for (size_t i = 0; i < s->n_paths; i++)
                free(s->paths[i]);
        for (size_t i = 0; i < s->n_cand; i++)
                cJSON_Delete(s->cand[i]);
        cJSON_Delete(s->pods);
        kube_collect_done(&s->read);
        if (s->answer_ready)
                dtimer_done(&s->answer);
        free(s->driver);
        free(s);
}

static void finish(struct seamless_check *s, int error, const char *what) {
        s->done(error, what, error < 0 ? NULL : &s->ans, s->userdata);
        check_free(s);
}

static void on_read(struct kube_collect *c, void *userdata);

static int read_next(struct seamless_check *s) {
        const char *ns;
        _cleanup_free_ char *path = NULL;

        switch (s->step) {
        case STEP_DAEMONSETS:
                if (s->next < s->n_paths)
                        return kube_collect_get(s->client, s->paths[s->next], on_read, s, &s->read);
                return 1; /* all read */
        case STEP_PODS:
                ns = json_str(s->ds, "metadata.namespace");
                if (asprintf(&path, "/api/v1/namespaces/%s/pods", strna(ns)) < 0)
                        return -ENOMEM;
                return kube_collect_list(s->client, path, 500, "0", on_read, s, &s->read);
        case STEP_NODES:
                return kube_collect_list(s->client, "/api/v1/nodes", 500, "0", on_read, s, &s->read);
        }
        return -EINVAL;
}

/* Whether the DaemonSet's pod template names the driver (its args, env, ...). */
static bool names_driver(const cJSON *ds, const char *driver) {
        _cleanup_free_ char *t = cJSON_PrintUnformatted(json_path(ds, "spec.template"));

        return t && strstr(t, driver);
}

/* The DaemonSets are read: pick the driver's. 1 to read on, 0 when the answer is
 * known without (none, or no single one). */
static int pick_daemonset(struct seamless_check *s) {
        size_t pick = 0, n_named = 0;

        if (s->n_cand == 0) {
                snprintf(s->ans.why, sizeof(s->ans.why), "no DaemonSet of driver %s has a pod on the node",
                         s->driver);
                return 0;
        }
        for (size_t j = 0; j < s->n_cand; j++)
                if (names_driver(s->cand[j], s->driver))
                        pick = n_named++ == 0 ? j : pick;
        if (s->n_cand > 1 && n_named != 1) {
                snprintf(s->ans.why, sizeof(s->ans.why),
                         "%zu DRA driver DaemonSets run on the node and %s of them names %s in its pod "
                         "template",
                         s->n_cand, n_named ? "more than one" : "none", s->driver);
                return 0;
        }
        s->ds = s->cand[pick];
        snprintf(s->ans.daemonset, sizeof(s->ans.daemonset), "%s/%s",
                 strna(json_str(s->ds, "metadata.namespace")), strna(json_str(s->ds, "metadata.name")));
        return 1;
}

/* The nodes the DaemonSet's pods run on, and their kubelets: the decision. */
static int decide(struct seamless_check *s, const cJSON *nodes) {
        const char *uid = json_str(s->ds, "metadata.uid");
        _cleanup_free_ const char **versions = NULL;
        char **names = NULL;
        size_t n_names = 0;
        const cJSON *it;

        cJSON_ArrayForEach(it, s->pods) {
                const cJSON *ref;
                const char *node = json_str(it, "spec.nodeName");
                bool ours = false;

                cJSON_ArrayForEach(ref, json_path(it, "metadata.ownerReferences")) ours =
                        ours ||
                        (json_bool(ref, "controller", false) && streq_ptr(json_str(ref, "uid"), uid));
                if (ours && node && strv_push_unique(&names, &n_names, node) < 0) {
                        strv_free_n(names, n_names);
                        return -ENOMEM;
                }
        }
        versions = calloc(n_names ? n_names : 1, sizeof(*versions));
        if (!versions) {
                strv_free_n(names, n_names);
                return -ENOMEM;
        }
        for (size_t j = 0; j < n_names; j++)
                cJSON_ArrayForEach(it, nodes) if (streq_ptr(json_str(it, "metadata.name"), names[j]))
                        versions[j] = json_str(it, "status.nodeInfo.kubeletVersion");
        s->ans.seamless =
                driver_upgrade_seamless(s->ds, versions, n_names, s->ans.why, sizeof(s->ans.why)) > 0;
        strv_free_n(names, n_names);
        return 0;
}

/* The next read after one that succeeded; the answer once nothing is left to read. */
static void advance(struct seamless_check *s) {
        int r;

        if (s->step == STEP_DAEMONSETS && s->next >= s->n_paths) {
                if (pick_daemonset(s) == 0) {
                        finish(s, 0, NULL);
                        return;
                }
                s->step = STEP_PODS;
        }
        r = read_next(s);
        if (r < 0)
                finish(s, r, "cannot start a read");
}

static void on_read(struct kube_collect *c, void *userdata) {
        struct seamless_check *s = userdata;
        _cleanup_free_ char *what = NULL;
        int r;

        if (s->cancelled && c->error == 0)
                c->error = -ECANCELED;
        if (c->error < 0) {
                const char *path = s->step == STEP_DAEMONSETS ? s->paths[s->next]
                                   : s->step == STEP_PODS     ? "the driver DaemonSet's pods"
                                                              : "/api/v1/nodes";

                if (asprintf(&what, "cannot read %s: %s", path,
                             c->message ? c->message : strerror(-c->error)) < 0)
                        what = NULL;
                finish(s, c->error, what);
                return;
        }
        switch (s->step) {
        case STEP_DAEMONSETS:
                s->cand[s->n_cand++] = TAKE_PTR(c->json);
                s->next++;
                break;
        case STEP_PODS:
                s->pods = TAKE_PTR(c->items);
                s->step = STEP_NODES;
                break;
        case STEP_NODES:
                r = decide(s, c->items);
                finish(s, r, r < 0 ? "out of memory" : NULL);
                return;
        }
        kube_collect_done(c);
        advance(s);
}

/* No DaemonSet to read: the answer all the same from the loop. */
static void on_answer_timer(struct dtimer *t) {
        struct seamless_check *s = container_of(t, struct seamless_check, answer);

        if (s->cancelled) {
                finish(s, -ECANCELED, "cancelled");
                return;
        }
        advance(s);
}

int seamless_check_start(struct kube_client *client, struct timesrc *ts, const char *driver,
                         const struct pod_rec *const *drivers, size_t n, seamless_done_fn done,
                         void *userdata, struct seamless_check **ret) {
        struct seamless_check *s;
        const char *uids[MAX_CANDIDATES];
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->client = client;
        s->done = done;
        s->userdata = userdata;
        s->driver = strdup(driver);
        r = dtimer_init(&s->answer, ts, on_answer_timer);
        if (r < 0 || !s->driver) {
                check_free(s);
                return r < 0 ? r : -ENOMEM;
        }
        s->answer_ready = true;
        for (size_t i = 0; i < n && s->n_paths < MAX_CANDIDATES; i++) {
                const struct owner_ref *c = drivers[i]->controller;
                bool dup = false;

                if (!c || !streq_ptr(c->kind, "DaemonSet") || !c->name)
                        continue;
                for (size_t j = 0; j < s->n_paths; j++)
                        dup = dup || streq_ptr(uids[j], c->uid);
                if (dup)
                        continue;
                if (asprintf(&s->paths[s->n_paths], "/apis/apps/v1/namespaces/%s/daemonsets/%s",
                             drivers[i]->ns, c->name) < 0) {
                        check_free(s);
                        return -ENOMEM;
                }
                uids[s->n_paths++] = c->uid;
        }
        if (s->n_paths == 0)
                dtimer_start(&s->answer, 0);
        else {
                r = read_next(s);
                if (r < 0) {
                        check_free(s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

void seamless_check_cancel(struct seamless_check *s) {
        s->cancelled = true;
        kube_collect_cancel(&s->read);
}
