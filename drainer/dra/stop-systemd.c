/* --driver-stop systemd:UNIT, for drivers that do not run as pods: stops and
 * starts the configured unit through the unit control cmd/ injects (units.h),
 * and reads its ActiveState; a failed job or query is retried with backoff.
 * Owns the unit's last state and the one call in flight; only the configured
 * unit is ever asked about, stopped or started (a recorded one elsewhere is
 * refused by undo_allowed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/base/timesrc.h"
#include "drainer/dra/driverstop.h"

/* A failed unit job or state query is retried after 1, 2, 4 ... s, at most this long. */
#define UNIT_RETRY_BASE_USEC (1 * USEC_PER_SEC)
#define UNIT_RETRY_CAP_USEC  (30 * USEC_PER_SEC)
/* systemd's UNIT_NAME_MAX is 256 including the NUL. */
#define UNIT_NAME_MAX        255

/* The userdata of a unit call: unit calls cannot be cancelled, so a call still
 * running when the instance goes keeps its ticket, with owner NULL. */
struct unit_ticket {
        struct unitctl *owner;
};

struct unitctl {
        struct driver_stop *s;
        struct unit_ticket *call; /* the job or state query in flight */
        char *state;              /* last ActiveState seen, or NULL */
        char *error;              /* last failure, for messages */
        unsigned failures;        /* failed jobs and queries in a row */
        uint64_t retry_at;        /* no job or query before this (monotonic µs) */
};

static const char *const unit_down[] = { "inactive", "failed", NULL };
static const char *const unit_up[] = { "active", "reloading", NULL };

static bool unit_is(const char *state, const char *const *any) {
        for (; state && *any; any++)
                if (streq(state, *any))
                        return true;
        return false;
}

/* systemd's unit_name_is_valid(), roughly: [A-Za-z0-9:_.\-@]+ with a
 * non-empty type suffix after the last dot and a non-empty name before it. */
static bool unit_name_is_valid(const char *s) {
        size_t n = strlen(s);
        const char *dot = strrchr(s, '.');

        if (n == 0 || n > UNIT_NAME_MAX || !dot || dot == s || !dot[1])
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      strchr(":_.\\-@", *p)))
                        return false;
        for (const char *p = dot + 1; *p; p++)
                if (!(*p >= 'a' && *p <= 'z'))
                        return false;
        return true;
}

static int unit_check_arg(const char *arg, char *msg, size_t size) {
        if (strchr(arg, '.'))
                return 0;
        snprintf(msg, size, "--driver-stop systemd:%s: name the unit with its type, e.g. %s.service", arg,
                 arg);
        return -EINVAL;
}

static void unit_describe(const char *arg, const struct pod_rec *const *drivers, size_t n, FILE *f) {
        fprintf(f, "stop unit %s", strna(arg));
}

static int unit_init(struct driver_stop *s) {
        struct unitctl *u = calloc(1, sizeof(*u));

        if (!u)
                return -ENOMEM;
        u->s = s;
        s->data = u;
        return 0;
}

static void unit_done(struct driver_stop *s) {
        struct unitctl *u = s->data;

        if (!u)
                return;
        if (u->call)
                u->call->owner = NULL; /* its callback frees it */
        free(u->state);
        free(u->error);
        free(u);
}

static uint64_t now(struct unitctl *u) {
        return timesrc_now(u->s->env.ts);
}

static void changed(struct unitctl *u) {
        if (u->s->env.changed)
                u->s->env.changed(u->s->env.userdata);
}

/* After a failure: no new job or query for a while, doubling up to the cap, so a
 * unit that cannot start (or a bus that refuses) is asked a few times a minute,
 * never in a loop. */
static void unit_failed(struct unitctl *u) {
        uint64_t d = UNIT_RETRY_BASE_USEC;

        for (unsigned i = 0; i < u->failures && d < UNIT_RETRY_CAP_USEC; i++)
                d *= 2;
        u->failures++;
        u->retry_at = now(u) + MIN(d, UNIT_RETRY_CAP_USEC);
        if (u->s->env.wake_at)
                u->s->env.wake_at(u->s->env.userdata, u->retry_at);
}

static bool backing_off(struct unitctl *u) {
        if (now(u) >= u->retry_at)
                return false;
        if (u->s->env.wake_at)
                u->s->env.wake_at(u->s->env.userdata, u->retry_at);
        return true;
}

/* The owner of a finished call, or NULL when it is gone. */
static struct unitctl *call_done(void *userdata) {
        struct unit_ticket *t = userdata;
        struct unitctl *u = t->owner;

        free(t);
        if (u)
                u->call = NULL;
        return u;
}

static struct unit_ticket *call_new(struct unitctl *u) {
        struct unit_ticket *t = calloc(1, sizeof(*t));

        if (t)
                t->owner = u;
        return t;
}

static void on_unit_state(int error, const char *active_state, void *userdata) {
        struct unitctl *u = call_done(userdata);

        if (!u || error == -ECANCELED)
                return;
        free(u->state);
        u->state = error < 0 ? NULL : strdup(active_state);
        free(u->error);
        u->error = error < 0 ? strdup(strerror(-error)) : NULL;
        if (error < 0) {
                log_debug("reading the state of unit %s failed: %s, retrying", u->s->arg, strerror(-error));
                unit_failed(u);
        }
        changed(u);
}

static void on_unit_job(int error, const char *result, const char *message, void *userdata) {
        struct unitctl *u = call_done(userdata);

        if (!u || error == -ECANCELED)
                return;
        free(u->error);
        u->error = NULL;
        if (error < 0 || !streq_ptr(result, "done")) {
                if (asprintf(&u->error, "%s", error < 0 ? (message ? message : strerror(-error)) : result) <
                    0)
                        u->error = NULL;
                log_debug("job of unit %s: %s, retrying", u->s->arg, strna(u->error));
                unit_failed(u);
        } else
                u->failures = 0;
        /* Read the state again: the job's result alone does not say the unit is down/up. */
        u->state = mfree(u->state);
        changed(u);
}

/* The unit's ActiveState once known (starting a query if needed), else NULL. */
static const char *unit_state(struct unitctl *u) {
        const struct units *units = &u->s->env.units;
        struct unit_ticket *t;

        if (u->state)
                return u->state;
        if (u->call || !units->ops || backing_off(u))
                return NULL;
        t = call_new(u);
        if (!t)
                return NULL;
        if (units->ops->active_state(units->ctx, u->s->arg, on_unit_state, t) < 0) {
                free(t);
                unit_failed(u);
                return NULL;
        }
        u->call = t;
        return NULL;
}

/* "starting unit U: failed (3 attempts, next in 4 s)" and the like. */
static void unit_message(struct unitctl *u, const char *doing, char *msg, size_t size) {
        uint64_t t = now(u);
        unsigned n = u->s->host_actions;

        if (u->error && u->retry_at > t)
                snprintf(msg, size, "%s unit %s: %s (%u attempt%s, next in %llu s)", doing, strna(u->s->arg),
                         u->error, n, n == 1 ? "" : "s",
                         (unsigned long long)((u->retry_at - t + USEC_PER_SEC - 1) / USEC_PER_SEC));
        else
                snprintf(msg, size, "%s unit %s%s%s", doing, strna(u->s->arg), u->error ? ": " : "",
                         strempty(u->error));
}

/* Moves the unit towards stopped (stop) or started; ret says if that failed. */
static void unit_drive(struct unitctl *u, bool stop, struct driver_stop_action *ret) {
        const struct units *units = &u->s->env.units;
        struct unit_ticket *t;
        const char *st;
        int r;

        driver_stop_action_set(ret, DRIVER_STOP_WAIT, NULL);
        if (!units->ops)
                return driver_stop_action_fail(
                        ret, -ENOTCONN, "--driver-stop systemd:%s needs the system bus", strna(u->s->arg));
        st = unit_state(u);
        if (!st || u->call || unit_is(st, stop ? unit_down : unit_up) || backing_off(u))
                return;
        t = call_new(u);
        if (!t)
                return driver_stop_action_fail(ret, -ENOMEM, "out of memory");
        r = stop ? units->ops->stop(units->ctx, u->s->arg, on_unit_job, t)
                 : units->ops->start(units->ctx, u->s->arg, on_unit_job, t);
        if (r < 0) {
                free(t);
                return driver_stop_action_fail(ret, r, "cannot %s unit %s: %s", stop ? "stop" : "start",
                                               u->s->arg, strerror(-r));
        }
        u->call = t;
        u->s->host_actions++;
}

static int unit_preflight(struct driver_stop *s, struct driver_stop_action *ret) {
        struct unitctl *u = s->data;
        const char *st;

        driver_stop_action_set(ret, DRIVER_STOP_WAIT, NULL);
        if (!s->env.units.ops) {
                driver_stop_action_fail(ret, -ENOTCONN, "--driver-stop systemd:%s needs the system bus",
                                        strna(s->arg));
                return -ENOTCONN;
        }
        st = unit_state(u);
        if (!st) {
                driver_stop_action_set(ret, DRIVER_STOP_WAIT, "preflight: reading the state of unit %s",
                                       strna(s->arg));
                return 0;
        }
        if (!unit_is(st, unit_up)) {
                driver_stop_action_set(ret, DRIVER_STOP_WAIT,
                                       "DRA driver unit %s is %s, not active (use --ignore-driver-health to "
                                       "override)",
                                       strna(s->arg), st);
                return -EIO;
        }
        return 1;
}

static void unit_stop(struct driver_stop *s, const struct driver_stop_view *v,
                      struct driver_stop_action *ret) {
        unit_drive(s->data, true, ret);
}

static bool unit_stopped(struct driver_stop *s, const struct driver_stop_view *v, char *msg, size_t size) {
        struct unitctl *u = s->data;

        if (unit_is(u->state, unit_down))
                return true;
        unit_message(u, "stopping", msg, size);
        return false;
}

/* undo_allowed() lets only the configured unit through: s is its instance. */
static void unit_undo(struct driver_stop *s, const struct driver_stop_record *r,
                      const struct driver_stop_view *v, struct driver_stop_action *ret) {
        if (!s || !streq_ptr(s->arg, r->arg))
                return driver_stop_action_fail(ret, -EPERM, "unit %s is not this configuration's",
                                               strna(r->arg));
        unit_drive(s->data, false, ret);
}

static bool unit_undone(struct driver_stop *s, const struct driver_stop_record *r,
                        const struct driver_stop_view *v, char *msg, size_t size) {
        struct unitctl *u = s ? s->data : NULL;

        if (!u || !unit_is(u->state, unit_up)) {
                if (u)
                        unit_message(u, "starting", msg, size);
                return false;
        }
        return driver_stop_pods_back(r, v, msg, size);
}

static int unit_read_record(const cJSON *entry, struct driver_stop_record *rec,
                            struct driver_stop_bad *ret_bad) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(entry, "unit");

        if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
                return *ret_bad = (struct driver_stop_bad){ "unit", NULL, "is not a string" }, -EBADMSG;
        if (!cJSON_IsString(v))
                return *ret_bad = (struct driver_stop_bad){ "unit", NULL, "is missing" }, -EBADMSG;
        if (!unit_name_is_valid(v->valuestring))
                return *ret_bad = (struct driver_stop_bad){ "unit", v->valuestring,
                                                            "is not a systemd unit name" },
                       -EBADMSG;
        rec->arg = strdup(v->valuestring);
        return rec->arg ? 0 : -ENOMEM;
}

static int unit_write_record(const struct driver_stop_record *rec, cJSON *entry) {
        if (!rec->arg || !unit_name_is_valid(rec->arg))
                return -EINVAL;
        return cJSON_AddStringToObject(entry, "unit", rec->arg) ? 0 : -ENOMEM;
}

/* Only the configured unit is ever started. */
static bool unit_undo_allowed(const struct driver_stop_ops *ops, const char *arg,
                              const struct driver_stop_record *r) {
        return ops == &driver_stop_systemd && streq_ptr(arg, r->arg);
}

static bool unit_health(struct driver_stop *s, const struct driver_stop_record *r, char *key, size_t size,
                        bool *ret_healthy) {
        struct unitctl *u = s ? s->data : NULL;

        if (!u || (r ? !streq_ptr(r->arg, s->arg) : !u->state))
                return false;
        snprintf(key, size, "systemd:%s", s->arg);
        *ret_healthy = unit_is(u->state, unit_up);
        return true;
}

const struct driver_stop_ops driver_stop_systemd = {
        .name = "systemd",
        .arg_usage = "UNIT",
        .needs_units = true,
        .pods_stay = "DRA driver: stopped by systemd",
        .check_arg = unit_check_arg,
        .describe = unit_describe,
        .init = unit_init,
        .done = unit_done,
        .preflight = unit_preflight,
        .stop = unit_stop,
        .stopped = unit_stopped,
        .undo = unit_undo,
        .undone = unit_undone,
        .read_record = unit_read_record,
        .write_record = unit_write_record,
        .undo_allowed = unit_undo_allowed,
        .health = unit_health,
};
