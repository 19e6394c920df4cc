/* Device health (devicehealth.h). Owns two watches (the ResourceSlices and the pods of
 * the node, or every node's slices) and the set of devices reported unhealthy at the
 * last look, keyed "NODE DEVICE". Level-triggered: every change schedules one look at
 * everything, debounced; a look compares the new set with the last and reports each
 * difference once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/hashmap.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/announcer.h"
#include "drainer/ctl/devicehealth.h"
#include "drainer/dra/nodeview.h"
#include "drainer/kube/events.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/objects.h"
#include "drainer/obs/metrics.h"

#define MAX_DEVICES   100000
#define DEBOUNCE_USEC USEC_PER_SEC
#define MAX_REPORTERS 3   /* named in a message; more are counted */
#define KEY_SEP       ' ' /* neither a node name nor a device ID holds one */

/* One device reported unhealthy. */
struct sick {
        char *node, *device;
        bool published;
        char *message; /* who reports it, as last told */
        bool seen;     /* in the look in progress */
};

/* A look in progress: who reports a device. */
struct report {
        char *node, *device;
        bool published;
        char *reporters[MAX_REPORTERS];
        size_t n;
};

struct device_health {
        struct kube_client *client;  /* borrowed */
        struct timesrc *ts;          /* borrowed */
        struct announcer *announcer; /* borrowed */
        const struct device_health_handlers *h;
        void *userdata;
        char *node;
        enum device_health_action action;
        uint64_t debounce_usec;
        char *fs; /* spec.nodeName=NODE */
        struct informer *slices, *pods;
        struct hashmap *sick; /* "NODE DEVICE" -> struct sick */
        struct dtimer look_timer, stop_timer;
        bool timers_ready, stopping, stopped;
};

static void sick_free(void *p) {
        struct sick *s = p;

        if (!s)
                return;
        free(s->node);
        free(s->device);
        free(s->message);
        free(s);
}

static void report_free(void *p) {
        struct report *r = p;

        if (!r)
                return;
        free(r->node);
        free(r->device);
        for (size_t i = 0; i < r->n && i < MAX_REPORTERS; i++)
                free(r->reporters[i]);
        free(r);
}

static char *key_of(const char *node, const char *device) {
        char *k;

        return asprintf(&k, "%s%c%s", node, KEY_SEP, device) < 0 ? NULL : k;
}

static const char *const action_names[_DEVICE_HEALTH_ACTION_MAX] = {
        [DEVICE_HEALTH_OFF] = "off",
        [DEVICE_HEALTH_REPORT] = "report",
        [DEVICE_HEALTH_DRAIN] = "drain-device",
};

const char *device_health_action_to_string(enum device_health_action a) {
        return a >= 0 && a < _DEVICE_HEALTH_ACTION_MAX ? action_names[a] : NULL;
}

enum device_health_action device_health_action_from_string(const char *s) {
        for (int a = 0; s && a < _DEVICE_HEALTH_ACTION_MAX; a++)
                if (streq(s, action_names[a]))
                        return a;
        return _DEVICE_HEALTH_ACTION_INVALID;
}

/* Adds a reporter of device on node to the look (reporter taken); published: device
 * is a device of a slice of node. */
static int add_report(struct hashmap *look, const char *node, const char *device, bool published,
                      char *reporter) {
        _cleanup_free_ char *key = key_of(node, device);
        struct report *r;
        int k;

        if (!key || !reporter) {
                free(reporter);
                return -ENOMEM;
        }
        r = hashmap_get(look, key);
        if (!r) {
                r = calloc(1, sizeof(*r));
                if (!r || !(r->node = strdup(node)) || !(r->device = strdup(device)) ||
                    (k = hashmap_put(look, key, r, NULL)) < 0) {
                        report_free(r);
                        free(reporter);
                        return -ENOMEM;
                }
        }
        r->published |= published;
        if (r->n < MAX_REPORTERS)
                r->reporters[r->n] = reporter;
        else
                free(reporter);
        r->n++;
        return 0;
}

/* A line for an Event: text_printf's, its control characters replaced (the slices' and
 * pods' strings are their writers'). */
#define printf_new(...) text_one_line(text_printf(__VA_ARGS__))

/* The look's reports: every slice's tainted devices, then (one node) every pod's
 * Unhealthy resources. published: "NODE DRIVER/POOL/DEVICE" of every device of a
 * slice with a node, to tell a device from a CDI ID in a pod's report. */
static int collect(struct device_health *d, struct hashmap *look, struct hashmap *published) {
        const void *rec;
        size_t i = 0;
        int r;

        while (informer_iterate(d->slices, &i, &rec)) {
                const struct slice_rec *s = rec;

                if (!s->node_name)
                        continue; /* a pool of no one node: whose device it is, is not said */
                for (size_t j = 0; j < s->n_devices; j++) {
                        _cleanup_free_ char *dev = NULL, *key = NULL;

                        if (!s->devices[j])
                                continue;
                        if (asprintf(&dev, "%s/%s/%s", s->driver, s->pool, s->devices[j]) < 0)
                                return -ENOMEM;
                        if (!(key = key_of(s->node_name, dev)))
                                return -ENOMEM;
                        if (hashmap_put(published, key, (void *)s, NULL) < 0)
                                return -ENOMEM;
                        if (!s->device_taints[j])
                                continue;
                        r = add_report(look, s->node_name, dev, true,
                                       printf_new("its ResourceSlice %s taints it %s", s->name,
                                                  s->device_taints[j]));
                        if (r < 0)
                                return r;
                }
        }
        i = 0;
        while (d->pods && informer_iterate(d->pods, &i, &rec)) {
                const struct pod_rec *p = rec;

                if (!p->node_name || p->phase == POD_SUCCEEDED || p->phase == POD_FAILED)
                        continue;
                for (size_t j = 0; j < p->n_unhealthy; j++) {
                        const struct resource_health *u = &p->unhealthy[j];
                        _cleanup_free_ char *key = key_of(p->node_name, u->id);

                        if (!key)
                                return -ENOMEM;
                        if (hashmap_get(published, key))
                                r = add_report(look, p->node_name, u->id, true,
                                               printf_new("pod %s/%s reports it Unhealthy (%s)", p->ns,
                                                          p->name, u->resource));
                        else
                                r = add_report(
                                        look, p->node_name, u->id, false,
                                        printf_new("pod %s/%s reports %s Unhealthy (%s), a resource ID "
                                                   "that is no device the node publishes (a CDI "
                                                   "device ID?)",
                                                   p->ns, p->name, u->id, u->resource));
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static char *join_reporters(const struct report *r) {
        _cleanup_free_ char *s = NULL;

        for (size_t i = 0; i < r->n && i < MAX_REPORTERS; i++) {
                char *n = printf_new("%s%s%s", strempty(s), s ? "; " : "", r->reporters[i]);

                if (!n)
                        return NULL;
                free(s);
                s = n;
        }
        if (r->n > MAX_REPORTERS)
                return printf_new("%s; and %zu more", strempty(s), r->n - MAX_REPORTERS);
        return TAKE_PTR(s);
}

static void tell(struct device_health *d, const struct sick *s, bool unhealthy) {
        _cleanup_free_ char *msg = NULL;
        const char *node = s->node, *device = s->device;
        const struct node_rec *n = d->h && d->h->node ? d->h->node(node, d->userdata) : NULL;

        if (!unhealthy) {
                _cleanup_free_ char *kept = NULL;

                if (d->action == DEVICE_HEALTH_DRAIN && s->published &&
                    !(kept = printf_new(
                              "; a drain of it stays until `drainer uncordon %s --device %s` after "
                              "the repair",
                              node, device)))
                        return (void)log_debug("device health: out of memory");
                msg = printf_new("device %s is no longer reported unhealthy (no taint of its driver in its "
                                 "ResourceSlice%s)%s",
                                 device, d->pods ? ", no pod's status says Unhealthy" : "", strempty(kept));
        } else if (d->action == DEVICE_HEALTH_DRAIN && s->published)
                msg = printf_new(
                        "device %s is unhealthy: %s. drainer drains it "
                        "(--on-unhealthy-device=drain-device): a NoSchedule DeviceTaintRule, then "
                        "the pods whose claims hold it evicted; the node and its other devices stay "
                        "in service",
                        device, s->message);
        else if (d->action == DEVICE_HEALTH_DRAIN)
                msg = printf_new("device %s is unhealthy: %s. It cannot be drained: no device of the "
                                 "node's ResourceSlices has that name",
                                 device, s->message);
        else
                msg = printf_new("device %s is unhealthy: %s. Nothing is evicted for it "
                                 "(--on-unhealthy-device=report); to take it out of service: "
                                 "drainer drain %s --device %s",
                                 device, s->message, node, device);
        if (!msg)
                return (void)log_debug("device health: out of memory");
        if (n)
                announcer_post(d->announcer, n, unhealthy ? EVENT_TYPE_WARNING : EVENT_TYPE_NORMAL,
                               unhealthy ? EVENT_REASON_DEVICE_UNHEALTHY : EVENT_REASON_DEVICE_HEALTHY, msg);
        if (unhealthy)
                metrics_set(metrics_family(DRAINER_METRIC_DEVICE_UNHEALTHY), METRIC_LABELS(node, device), 1);
        else
                metrics_remove(metrics_family(DRAINER_METRIC_DEVICE_UNHEALTHY), METRIC_LABELS(node, device));
        metrics_add(metrics_family(DRAINER_METRIC_DEVICE_HEALTH),
                    METRIC_LABELS(unhealthy ? "unhealthy" : "healthy"), 1);
        if (d->h && d->h->on_change)
                d->h->on_change(d,
                                &(const struct device_health_change){ .node = node,
                                                                      .device = device,
                                                                      .unhealthy = unhealthy,
                                                                      .published = s->published,
                                                                      .message = msg },
                                d->userdata);
}

static void look(struct device_health *d) {
        struct hashmap *now = hashmap_new(MAX_DEVICES), *published = hashmap_new(MAX_DEVICES);
        const char *key;
        void *v;
        size_t i = 0;
        int r = -ENOMEM;

        if (now && published)
                r = collect(d, now, published);
        hashmap_free(published, NULL);
        if (r < 0) {
                /* (cannot happen but out of memory, or past MAX_DEVICES: the next change looks again) */
                log_debug("device health: cannot look: %s", strerror(-r));
                hashmap_free(now, report_free);
                return;
        }
        while (hashmap_iterate(d->sick, &i, &key, &v))
                ((struct sick *)v)->seen = false;
        i = 0;
        while (hashmap_iterate(now, &i, &key, &v)) {
                struct report *rp = v;
                struct sick *s = hashmap_get(d->sick, key);
                _cleanup_free_ char *why = join_reporters(rp);

                if (!why)
                        continue;
                if (s) {
                        s->seen = true;
                        s->published = rp->published;
                        free(s->message);
                        s->message = TAKE_PTR(why);
                        continue;
                }
                s = calloc(1, sizeof(*s));
                if (!s || !(s->node = strdup(rp->node)) || !(s->device = strdup(rp->device)) ||
                    hashmap_put(d->sick, key, s, NULL) < 0) {
                        sick_free(s);
                        continue;
                }
                s->seen = true;
                s->published = rp->published;
                s->message = TAKE_PTR(why);
                tell(d, s, true);
        }
        hashmap_free(now, report_free);
        for (;;) {
                struct sick *gone = NULL;

                i = 0;
                while (hashmap_iterate(d->sick, &i, &key, &v))
                        if (!((struct sick *)v)->seen) {
                                gone = hashmap_remove(d->sick, key);
                                break;
                        }
                if (!gone)
                        break;
                tell(d, gone, false);
                sick_free(gone);
        }
}

static bool synced(const struct device_health *d) {
        return informer_synced(d->slices) && (!d->pods || informer_synced(d->pods));
}

static void on_look_timer(struct dtimer *t) {
        struct device_health *d = container_of(t, struct device_health, look_timer);

        if (!d->stopping && synced(d))
                look(d);
}

static void changed(struct device_health *d) {
        if (!d->stopping && !d->look_timer.armed)
                dtimer_start(&d->look_timer, d->debounce_usec);
}

static void on_add(struct informer *inf, const void *rec, void *userdata) {
        changed(userdata);
}

static void on_update(struct informer *inf, const void *old, const void *rec, void *userdata) {
        changed(userdata);
}

static void on_synced(struct informer *inf, void *userdata) {
        changed(userdata);
}

static void on_error(struct informer *inf, int error, const char *message, void *userdata) {
        struct device_health *d = userdata;

        if (d->h && d->h->on_error && !d->stopping)
                d->h->on_error(d, inf == d->pods ? "pods" : "resourceslices", error, message, d->userdata);
}

static void stop_check(struct device_health *d) {
        if (d->stopping && !d->stopped)
                dtimer_start(&d->stop_timer, 0);
}

static void on_stopped(struct informer *inf, void *userdata) {
        stop_check(userdata);
}

static void on_stop_timer(struct dtimer *t) {
        struct device_health *d = container_of(t, struct device_health, stop_timer);

        if (d->stopped || !device_health_idle(d))
                return;
        d->stopped = true;
        if (d->h && d->h->on_stopped)
                d->h->on_stopped(d, d->userdata);
}

int device_health_new(struct kube_client *client, struct timesrc *ts, struct announcer *announcer,
                      const struct device_health_options *o, const struct device_health_handlers *h,
                      void *userdata, struct device_health **ret) {
        static const struct informer_handlers ih = {
                .on_add = on_add,
                .on_update = on_update,
                .on_delete = on_add,
                .on_synced = on_synced,
                .on_error = on_error,
                .on_stopped = on_stopped,
        };
        _cleanup_(device_health_freep) struct device_health *d = NULL;
        int r;

        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (struct device_health){ .client = client,
                                     .ts = ts,
                                     .announcer = announcer,
                                     .h = h,
                                     .userdata = userdata,
                                     .action = o && o->action ? o->action : DEVICE_HEALTH_REPORT,
                                     .debounce_usec =
                                             o && o->debounce_usec ? o->debounce_usec : DEBOUNCE_USEC };
        if (o && o->node &&
            (!(d->node = strdup(o->node)) || asprintf(&d->fs, "spec.nodeName=%s", o->node) < 0)) {
                d->fs = NULL;
                return -ENOMEM;
        }
        d->sick = hashmap_new(MAX_DEVICES);
        if (!d->sick)
                return -ENOMEM;
        if ((r = dtimer_init(&d->look_timer, ts, on_look_timer)) < 0)
                return r;
        if ((r = dtimer_init(&d->stop_timer, ts, on_stop_timer)) < 0) {
                dtimer_done(&d->look_timer);
                return r;
        }
        d->timers_ready = true;
        r = informer_new(client, ts,
                         &(const struct informer_options){
                                 .kind = INFORMER_SLICES,
                                 .field_selector = d->fs,
                                 .api_prefixes = dra_api_prefixes(),
                         },
                         &ih, d, &d->slices);
        if (r < 0)
                return r;
        if (d->node) {
                r = informer_new(client, ts,
                                 &(const struct informer_options){
                                         .kind = INFORMER_PODS,
                                         .field_selector = d->fs,
                                 },
                                 &ih, d, &d->pods);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(d);
        return 0;
}

int device_health_start(struct device_health *d) {
        int r;

        r = informer_start(d->slices);
        if (r >= 0 && d->pods)
                r = informer_start(d->pods);
        return r;
}

void device_health_stop(struct device_health *d) {
        if (d->stopping)
                return;
        d->stopping = true;
        dtimer_stop(&d->look_timer);
        informer_stop(d->slices);
        if (d->pods)
                informer_stop(d->pods);
        stop_check(d);
}

bool device_health_idle(const struct device_health *d) {
        return !d || (informer_idle(d->slices) && (!d->pods || informer_idle(d->pods)));
}

size_t device_health_count(const struct device_health *d) {
        return d ? hashmap_size(d->sick) : 0;
}

void device_health_free(struct device_health *d) {
        if (!d)
                return;
        informer_free(d->slices);
        informer_free(d->pods);
        hashmap_free(d->sick, sick_free);
        if (d->timers_ready) {
                dtimer_done(&d->look_timer);
                dtimer_done(&d->stop_timer);
        }
        free(d->node);
        free(d->fs);
        free(d);
}
