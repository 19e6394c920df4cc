/* Leader election on one Lease (see leader.h): the candidate's reads, the take and the
 * renewals (PUT with the resourceVersion read or written last), the renew deadline
 * that ends a tenure and fences its writes, and the release on close. Three timers:
 * the next attempt (retry period), the renew deadline, and the close's wake-up. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/leader.h"
#include "drainer/kube/objects.h"

/* Every write names its field manager, as the slots' Leases do. */
#define WRITE_QUERY "?fieldManager=drainer"

enum leader_state {
        LEADER_IDLE,      /* not started */
        LEADER_CANDIDATE, /* reading, waiting for the Lease to expire, taking it */
        LEADER_LEADING,
        LEADER_OVER,    /* the tenure was lost: nothing more is sent */
        LEADER_CLOSING, /* leader_close(): the release (if any) in flight */
        LEADER_CLOSED,
};

enum leader_op {
        OP_NONE,
        OP_GET,
        OP_CREATE,
        OP_TAKE,  /* PUT over a free or expired Lease */
        OP_RENEW, /* PUT over our own */
        OP_RELEASE,
};

struct leader {
        struct kube_client *client;     /* borrowed, or own_client */
        struct kube_client *own_client; /* owned: leader_new_own_client()'s */
        struct timesrc *ts;             /* borrowed */
        char *ns, *name, *identity;
        char *create_path; /* .../namespaces/NS/leases?fieldManager=drainer */
        char *path;        /* .../leases/NAME?fieldManager=drainer */
        char *get_path;    /* .../leases/NAME */
        uint64_t duration_usec, deadline_usec, retry_usec;
        struct leader_callbacks cb;
        void *userdata;

        enum leader_state state;
        enum leader_op op;
        struct kube_call *call;
        uint64_t sent_at; /* of the call in flight */

        /* The Lease as last read or written. */
        char *rv;
        char *holder;
        int64_t acquire_usec, transitions;
        uint64_t holder_duration_usec; /* its leaseDurationSeconds (0: ours) */
        /* When this process first saw that version (monotonic): a holder's tenure is
         * over once the version stays unchanged for its lease duration from then. */
        char *seen_rv;
        uint64_t seen_at;

        uint64_t renewed_at;       /* monotonic time the last successful renewal was SENT */
        uint64_t closing_deadline; /* close: the release is sent only before this */
        unsigned rand_state;

        struct dtimer retry_timer, deadline_timer, close_timer;
        bool release_pending; /* close: give the Lease back once the call in flight ends */
        void (*close_done)(struct leader *l, void *userdata);
        void *close_userdata;
        int last_error; /* the persistent error reported last (reported once until it changes) */
};

static void attempt(struct leader *l);

static bool leader_may_write_closing(const struct leader *l) {
        return timesrc_now(l->ts) < l->closing_deadline;
}

void leader_identity_unique(const char *identity, char *buf, size_t size) {
        unsigned char rnd[4] = {};
        FILE *f = fopen("/dev/urandom", "re");

        if (!f || fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd)) {
                unsigned v = (unsigned)getpid() ^ (unsigned)time(NULL);

                memcpy(rnd, &v, sizeof(rnd));
        }
        if (f)
                fclose(f);
        snprintf(buf, size, "%s_%02x%02x%02x%02x", identity, rnd[0], rnd[1], rnd[2], rnd[3]);
}

int leader_options_check(const struct leader_options *o, const char **ret_message) {
        uint64_t lease = o->lease_duration_usec ?: LEADER_DEFAULT_LEASE_DURATION_USEC;
        uint64_t deadline = o->renew_deadline_usec ?: LEADER_DEFAULT_RENEW_DEADLINE_USEC;
        uint64_t retry = o->retry_period_usec ?: LEADER_DEFAULT_RETRY_PERIOD_USEC;

        if (!o->ns || !dns1123_label_is_valid(o->ns)) {
                *ret_message = "the Lease's namespace is not a valid namespace name";
                return -EINVAL;
        }
        if (!o->name || !*o->name || strlen(o->name) > 253 || strpbrk(o->name, "/%?#") ||
            strspn(o->name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(o->name)) {
                *ret_message = "the Lease's name is not a valid object name";
                return -EINVAL;
        }
        if (!o->identity || !*o->identity || strlen(o->identity) > 253) {
                *ret_message = "the identity is empty or longer than 253 bytes";
                return -EINVAL;
        }
        for (const unsigned char *p = (const unsigned char *)o->identity; *p; p++)
                if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\') {
                        *ret_message = "the identity holds a control character, a quote or a backslash";
                        return -EINVAL;
                }
        if (lease < USEC_PER_SEC) {
                *ret_message = "the lease duration is below 1 s";
                return -EINVAL;
        }
        if (deadline >= lease) {
                *ret_message = "the renew deadline must be shorter than the lease duration";
                return -EINVAL;
        }
        /* client-go's own rule: the retry period, jittered by 1.2, stays below the deadline */
        if (retry == 0 || retry * 12 / 10 >= deadline) {
                *ret_message = "the retry period (x1.2) must be shorter than the renew deadline";
                return -EINVAL;
        }
        return 0;
}

/* The retry period with client-go's jitter (up to +20 %), for a candidate; the leader
 * renews on the period itself. */
static uint64_t retry_delay(struct leader *l, bool jitter) {
        if (!jitter)
                return l->retry_usec;
        return l->retry_usec + (uint64_t)(rand_r(&l->rand_state) % 1001) * (l->retry_usec / 5) / 1000;
}

/* message is the API server's: its control characters are escaped before anything
 * prints it. */
static void report_error(struct leader *l, int error, const char *message) {
        _cleanup_free_ char *safe = message ? text_escape_controls(message, strlen(message)) : NULL;
        const char *m = safe ?: strerror(-error);

        if (error == l->last_error)
                return;
        l->last_error = error;
        log_warning("leader election: Lease %s/%s: %s", l->ns, l->name, m);
        if (l->cb.error)
                l->cb.error(l, error, m, l->userdata);
}

static void tenure_over(struct leader *l, int error) {
        if (l->state != LEADER_LEADING)
                return;
        l->state = LEADER_OVER;
        dtimer_stop(&l->retry_timer);
        dtimer_stop(&l->deadline_timer);
        if (l->call) {
                kube_call_cancel(l->call); /* its answer is ignored: OVER */
        }
        log_warning("leader election: lost the Lease %s/%s (%s)", l->ns, l->name,
                    error == -EBUSY ? "held by another" : "not renewed before the renew deadline");
        if (l->cb.lost)
                l->cb.lost(l, error, l->userdata);
}

/* Takes the Lease's fields; a new version restarts the expiry watch. */
static void observe(struct leader *l, const struct lease_rec *rec) {
        uint64_t now = timesrc_now(l->ts);

        if (!l->seen_rv || !streq(l->seen_rv, rec->resource_version)) {
                (void)text_replace(&l->seen_rv, rec->resource_version);
                l->seen_at = now;
        }
        (void)text_replace(&l->rv, rec->resource_version);
        (void)text_replace(&l->holder, rec->holder);
        l->acquire_usec = rec->acquire_time_usec;
        l->transitions = rec->transitions;
        l->holder_duration_usec =
                rec->duration_seconds > 0 ? (uint64_t)rec->duration_seconds * USEC_PER_SEC : 0;
}

static bool held_by_other(struct leader *l) {
        uint64_t dur = l->holder_duration_usec ?: l->duration_usec;

        return l->holder && *l->holder && !streq(l->holder, l->identity) &&
               timesrc_now(l->ts) < l->seen_at + dur;
}

static char *lease_body(struct leader *l, bool release) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        int64_t now = timesrc_realtime(l->ts);
        bool ours = l->holder && streq(l->holder, l->identity);
        char ta[48], tr[48];
        cJSON *meta, *spec, *labels;
        int64_t acquire = ours && l->acquire_usec ? l->acquire_usec : now;
        int64_t transitions = l->transitions + (!ours && l->holder && *l->holder ? 1 : 0);
        bool ok;

        if (!o || timesrc_format_micro(acquire, ta, sizeof(ta)) < 0 ||
            timesrc_format_micro(now, tr, sizeof(tr)) < 0)
                return NULL;
        ok = cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") &&
             cJSON_AddStringToObject(o, "kind", "Lease") &&
             (meta = cJSON_AddObjectToObject(o, "metadata")) &&
             cJSON_AddStringToObject(meta, "name", l->name) &&
             cJSON_AddStringToObject(meta, "namespace", l->ns) &&
             (!l->rv || cJSON_AddStringToObject(meta, "resourceVersion", l->rv)) &&
             (labels = cJSON_AddObjectToObject(meta, "labels")) &&
             cJSON_AddStringToObject(labels, "app.kubernetes.io/managed-by", "drainer") &&
             (spec = cJSON_AddObjectToObject(o, "spec")) &&
             (release || cJSON_AddStringToObject(spec, "holderIdentity", l->identity)) &&
             cJSON_AddNumberToObject(spec, "leaseDurationSeconds",
                                     release ? 1 : (double)MAX(l->duration_usec / USEC_PER_SEC, 1)) &&
             cJSON_AddStringToObject(spec, "acquireTime", ta) &&
             cJSON_AddStringToObject(spec, "renewTime", tr) &&
             cJSON_AddNumberToObject(spec, "leaseTransitions", (double)transitions);
        return ok ? cJSON_PrintUnformatted(o) : NULL;
}

static void schedule(struct leader *l, uint64_t after) {
        if (l->state == LEADER_CANDIDATE || l->state == LEADER_LEADING)
                dtimer_start(&l->retry_timer, after);
}

static void on_answer(const struct kube_result *res, void *userdata);

static void send(struct leader *l, enum leader_op op) {
        _cleanup_free_ char *body = NULL;
        int r;

        l->op = op;
        l->sent_at = timesrc_now(l->ts);
        switch (op) {
        case OP_GET:
                r = kube_get(l->client, l->get_path, on_answer, l, &l->call);
                break;
        case OP_CREATE:
                body = lease_body(l, false);
                r = body ? kube_create(l->client, l->create_path, body, on_answer, l, &l->call) : -ENOMEM;
                break;
        default:
                body = lease_body(l, op == OP_RELEASE);
                r = body ? kube_replace(l->client, l->path, body, on_answer, l, &l->call) : -ENOMEM;
                break;
        }
        if (r < 0) {
                l->call = NULL;
                l->op = OP_NONE;
                log_debug("leader election: cannot send: %s", strerror(-r));
                schedule(l, retry_delay(l, l->state == LEADER_CANDIDATE));
        }
}

/* A take or renewal succeeded; false when its answer came after the renew deadline
 * counted from its sending (the write permission it earned is already over). */
static bool became_leader(struct leader *l) {
        uint64_t now = timesrc_now(l->ts);

        if (now >= l->sent_at + l->deadline_usec) {
                log_warning("leader election: the Lease %s/%s was written, but its answer came %.1f s "
                            "later: past the renew deadline",
                            l->ns, l->name, (double)(now - l->sent_at) / (double)USEC_PER_SEC);
                if (l->state == LEADER_LEADING)
                        tenure_over(l, -ETIMEDOUT);
                return false;
        }
        l->renewed_at = l->sent_at;
        dtimer_start(&l->deadline_timer, l->renewed_at + l->deadline_usec - now);
        if (l->state == LEADER_LEADING)
                return true;
        l->state = LEADER_LEADING;
        log_info("leader election: this process (%s) leads through the Lease %s/%s", l->identity, l->ns,
                 l->name);
        if (l->cb.started)
                l->cb.started(l, l->userdata);
        return true;
}

/* A Lease write answered: the Lease it wrote. */
static int take_answer(struct leader *l, const struct kube_result *res) {
        _cleanup_(lease_rec_freep) struct lease_rec *rec = NULL;
        int r;

        if (!res->json)
                return -EBADMSG;
        r = lease_rec_from_json(res->json, &rec);
        if (r < 0)
                return r;
        if (!rec->resource_version)
                return -EBADMSG;
        observe(l, rec);
        return 0;
}

static void on_answer(const struct kube_result *res, void *userdata) {
        struct leader *l = userdata;
        enum leader_op op = l->op;
        _cleanup_(lease_rec_freep) struct lease_rec *rec = NULL;
        int r;

        l->call = NULL;
        l->op = OP_NONE;
        if (l->state == LEADER_CLOSING || l->state == LEADER_CLOSED) {
                if (op == OP_RELEASE && res->error < 0 && res->error != -ECANCELED)
                        log_debug("leader election: release: %s", strerror(-res->error));
                if (l->state == LEADER_CLOSING && l->release_pending && leader_may_write_closing(l)) {
                        l->release_pending = false;
                        send(l, OP_RELEASE);
                        if (l->call)
                                return;
                }
                if (l->state == LEADER_CLOSING && !l->close_timer.armed)
                        dtimer_start(&l->close_timer, 0);
                return;
        }
        if (l->state == LEADER_OVER || res->error == -ECANCELED)
                return;

        if (res->error == -EACCES || res->error == -EPERM)
                report_error(l, res->error, res->message);
        switch (op) {
        case OP_GET:
                if (res->error == -ENOENT) {
                        free(l->rv);
                        l->rv = NULL;
                        (void)text_replace(&l->holder, NULL);
                        l->transitions = 0;
                        return send(l, OP_CREATE);
                }
                if (res->error < 0)
                        break;
                if (!res->json || lease_rec_from_json(res->json, &rec) < 0 || !rec->resource_version) {
                        report_error(l, -EBADMSG, "the Lease cannot be read");
                        break;
                }
                observe(l, rec);
                l->last_error = 0;
                if (held_by_other(l)) {
                        if (l->state == LEADER_LEADING)
                                return tenure_over(l, -EBUSY);
                        /* wait: at the latest when it expires, or the next retry period */
                        break;
                }
                return send(l, l->state == LEADER_LEADING ? OP_RENEW : OP_TAKE);
        case OP_CREATE:
        case OP_TAKE:
        case OP_RENEW:
                if (res->error == 0) {
                        r = take_answer(l, res);
                        if (r < 0) {
                                report_error(l, r, "the API server's answer holds no Lease");
                                break;
                        }
                        l->last_error = 0;
                        if (!became_leader(l))
                                break;
                        return schedule(l, retry_delay(l, false));
                }
                /* 409: someone wrote in between (or created it first): read again now
                 * when renewing (the deadline runs), on the next period otherwise */
                if (res->error == -EEXIST || res->error == -EBUSY || res->status == 409) {
                        if (l->state == LEADER_LEADING)
                                return send(l, OP_GET);
                        break;
                }
                break;
        default:
                break;
        }
        if (res->error < 0 && res->error != -EACCES && res->error != -EPERM)
                log_debug("leader election: %s", strerror(-res->error));
        schedule(l, retry_delay(l, l->state == LEADER_CANDIDATE));
}

static void attempt(struct leader *l) {
        if (l->call)
                return;
        /* A leader past its renew deadline (a process that was frozen, a loop held up)
         * has lost: it does not write even its Lease again. */
        if (l->state == LEADER_LEADING && !leader_may_write(l))
                return tenure_over(l, -ETIMEDOUT);
        /* The leader renews over the version it wrote; a candidate reads first. */
        if (l->state == LEADER_LEADING && l->rv)
                send(l, OP_RENEW);
        else
                send(l, OP_GET);
}

static void on_retry_timer(struct dtimer *t) {
        struct leader *l = container_of(t, struct leader, retry_timer);

        if (l->state == LEADER_CANDIDATE || l->state == LEADER_LEADING)
                attempt(l);
}

static void on_deadline_timer(struct dtimer *t) {
        struct leader *l = container_of(t, struct leader, deadline_timer);

        if (l->state == LEADER_LEADING && !leader_may_write(l))
                tenure_over(l, -ETIMEDOUT);
}

static void on_close_timer(struct dtimer *t) {
        struct leader *l = container_of(t, struct leader, close_timer);

        if (l->state != LEADER_CLOSING || l->call)
                return;
        l->state = LEADER_CLOSED;
        if (l->close_done)
                l->close_done(l, l->close_userdata);
}

int leader_new_own_client(struct transport *t, struct timesrc *ts, const struct kube_config *cfg,
                          struct credentials *creds, const struct kube_client_options *impersonation,
                          const struct leader_options *o, const struct leader_callbacks *cb, void *userdata,
                          struct leader **ret) {
        struct kube_client *c = NULL;
        int r;

        r = kube_client_new(
                t, ts, cfg, creds,
                &(const struct kube_client_options){
                        .request_timeout_usec = o->renew_deadline_usec ?: LEADER_DEFAULT_RENEW_DEADLINE_USEC,
                        .impersonate_user = impersonation ? impersonation->impersonate_user : NULL,
                        .impersonate_groups = impersonation ? impersonation->impersonate_groups : NULL,
                        .n_impersonate_groups = impersonation ? impersonation->n_impersonate_groups : 0,
                },
                &c);
        if (r < 0)
                return r;
        r = leader_new(c, ts, o, cb, userdata, ret);
        if (r < 0) {
                kube_client_free(c);
                return r;
        }
        (*ret)->own_client = c;
        return 0;
}

int leader_new(struct kube_client *client, struct timesrc *ts, const struct leader_options *o,
               const struct leader_callbacks *cb, void *userdata, struct leader **ret) {
        _cleanup_(leader_freep) struct leader *l = NULL;
        const char *msg;
        unsigned seed = 2166136261u;
        int r;

        r = leader_options_check(o, &msg);
        if (r < 0)
                return r;
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->client = client;
        l->ts = ts;
        l->duration_usec = o->lease_duration_usec ?: LEADER_DEFAULT_LEASE_DURATION_USEC;
        l->deadline_usec = o->renew_deadline_usec ?: LEADER_DEFAULT_RENEW_DEADLINE_USEC;
        l->retry_usec = o->retry_period_usec ?: LEADER_DEFAULT_RETRY_PERIOD_USEC;
        if (cb)
                l->cb = *cb;
        l->userdata = userdata;
        for (const char *p = o->identity; *p; p++)
                seed = (seed ^ (unsigned char)*p) * 16777619u;
        l->rand_state = seed;
        if (!(l->ns = strdup(o->ns)) || !(l->name = strdup(o->name)) || !(l->identity = strdup(o->identity)))
                return -ENOMEM;
        /* (asprintf leaves its pointer undefined when it fails) */
        if (asprintf(&l->create_path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases" WRITE_QUERY,
                     o->ns) < 0) {
                l->create_path = NULL;
                return -ENOMEM;
        }
        if (asprintf(&l->get_path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", o->ns, o->name) <
            0) {
                l->get_path = NULL;
                return -ENOMEM;
        }
        if (asprintf(&l->path, "%s" WRITE_QUERY, l->get_path) < 0) {
                l->path = NULL;
                return -ENOMEM;
        }
        r = dtimer_init(&l->retry_timer, ts, on_retry_timer);
        if (r >= 0)
                r = dtimer_init(&l->deadline_timer, ts, on_deadline_timer);
        if (r >= 0)
                r = dtimer_init(&l->close_timer, ts, on_close_timer);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

int leader_start(struct leader *l) {
        if (l->state != LEADER_IDLE)
                return -EALREADY;
        l->state = LEADER_CANDIDATE;
        dtimer_start(&l->retry_timer, 0);
        return 0;
}

bool leader_leading(const struct leader *l) {
        return l && l->state == LEADER_LEADING;
}

bool leader_may_write(const struct leader *l) {
        return leader_leading(l) && timesrc_now(l->ts) < l->renewed_at + l->deadline_usec;
}

bool leader_write_gate(const char *method, const char *path, void *userdata) {
        const struct leader *l = userdata;

        (void)method;
        /* the Lease itself: the candidate's create and take, the leader's renewals */
        if (streq(path, l->create_path) || streq(path, l->path))
                return true;
        return leader_may_write(l);
}

const char *leader_holder(const struct leader *l) {
        return l->holder ?: "";
}

void leader_close(struct leader *l, void (*done)(struct leader *l, void *userdata), void *userdata) {
        bool release = leader_may_write(l);

        if (l->state == LEADER_CLOSING || l->state == LEADER_CLOSED)
                return;
        l->close_done = done;
        l->close_userdata = userdata;
        l->state = LEADER_CLOSING;
        l->closing_deadline = l->renewed_at + l->deadline_usec;
        dtimer_stop(&l->retry_timer);
        dtimer_stop(&l->deadline_timer);
        if (l->call) {
                /* its answer (-ECANCELED) sends the release, still inside the deadline */
                l->release_pending = release;
                kube_call_cancel(l->call);
                return;
        }
        if (release)
                send(l, OP_RELEASE);
        if (!l->call)
                dtimer_start(&l->close_timer, 0);
}

bool leader_idle(const struct leader *l) {
        return !l->call;
}

void leader_free(struct leader *l) {
        if (!l)
                return;
        kube_client_free(l->own_client); /* nothing of it in flight once the leader is idle */
        dtimer_done(&l->retry_timer);
        dtimer_done(&l->deadline_timer);
        dtimer_done(&l->close_timer);
        free(l->ns);
        free(l->name);
        free(l->identity);
        free(l->create_path);
        free(l->path);
        free(l->get_path);
        free(l->rv);
        free(l->holder);
        free(l->seen_rv);
        free(l);
}
