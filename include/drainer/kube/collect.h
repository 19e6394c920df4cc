/* One read kept whole: a GET's object, or every page of a list gathered into one
 * array, for callers that decide from the whole answer (the seamless-upgrade check,
 * the rollout's DaemonSet and its pods). Asynchronous: done runs once, from the loop,
 * never from inside the call that started the read. The collect lives in the
 * caller's memory until done has run (or kube_collect_cancel(), whose done then
 * runs with -ECANCELED). */
#pragma once

#include <stdbool.h>

#include <cjson/cJSON.h>

struct kube_client;
struct kube_call;
struct kube_collect;

typedef void (*kube_collect_fn)(struct kube_collect *c, void *userdata);

struct kube_collect {
        /* the answer, valid in done and until kube_collect_done() */
        int error;     /* 0, or a negative errno (the API's, -ENOMEM, -ECANCELED) */
        long status;   /* the HTTP status, 0 if none */
        char *message; /* the Status message or transport error, or NULL */
        cJSON *json;   /* a GET's object */
        cJSON *items;  /* a list's items (an array, empty when none) */
        bool running;
        /* private */
        struct kube_call *call;
        kube_collect_fn done;
        void *userdata;
};

/* GET path into c->json. 0, or a negative errno (nothing started, done never runs). */
int kube_collect_get(struct kube_client *client, const char *path, kube_collect_fn done, void *userdata,
                     struct kube_collect *c);
/* Lists path (every page of limit items) into c->items. rv "0" reads the watch cache
 * (cheap, possibly behind); NULL a consistent list from etcd (what a decision right
 * after a write needs). */
int kube_collect_list(struct kube_client *client, const char *path, unsigned limit, const char *rv,
                      kube_collect_fn done, void *userdata, struct kube_collect *c);
/* Stops a running read: done runs later with -ECANCELED. */
void kube_collect_cancel(struct kube_collect *c);
/* Frees the answer (not while running); the collect may be started again. */
void kube_collect_done(struct kube_collect *c);
