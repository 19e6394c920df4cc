/* sd-bus on the libuv loop: the system bus fd is polled by a uv_poll, sd-bus's
 * timeouts run on a uv_timer, and sd_bus_process() is called from those two only.
 * Owns the bus, both handles, the in-flight calls and logind's inhibitor fd. Never
 * blocks (no sd_bus_call, no flush) and never calls back from inside a public call. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>
#include <uv.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/sys/sysbus.h"

#define SYSTEMD_DEST    "org.freedesktop.systemd1"
#define SYSTEMD_PATH    "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"
#define SYSTEMD_UNIT    "org.freedesktop.systemd1.Unit"
#define LOGIND_DEST     "org.freedesktop.login1"
#define LOGIND_PATH     "/org/freedesktop/login1"
#define LOGIND_MANAGER  "org.freedesktop.login1.Manager"
#define DBUS_PROPERTIES "org.freedesktop.DBus.Properties"

/* systemd's UNIT_NAME_MAX. */
#define UNIT_NAME_MAX 256
/* sd_bus_process() calls per loop callback, so a chatty bus cannot starve the loop. */
#define PROCESS_BATCH 64
/* JobRemoved signals kept per call that has not seen its job path yet. */
#define EARLY_MAX     4

/* systemd's and logind's error names as errno, as systemd's bus-common-errors.c
 * maps them (libsystemd does not export that table to its users). */
static const sd_bus_error_map sysbus_errors[] = {
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.NoSuchUnit", ENOENT),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.NoUnitForPID", ESRCH),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.NoSuchJob", ENOENT),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.NotSubscribed", EINVAL),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.AlreadySubscribed", EINVAL),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.OnlyByDependency", EINVAL),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.TransactionJobsConflicting", EDEADLK),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.TransactionOrderIsCyclic", EDEADLK),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.TransactionIsDestructive", EDEADLK),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.UnitMasked", ERFKILL),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.UnitGenerated", EADDRNOTAVAIL),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.UnitLinked", ELOOP),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.JobTypeNotApplicable", EBADR),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.NoIsolation", EPERM),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.ShuttingDown", ECANCELED),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.ScopeNotRunning", EHOSTDOWN),
        SD_BUS_ERROR_MAP("org.freedesktop.systemd1.UnitInactive", ENOLINK),
        SD_BUS_ERROR_MAP("org.freedesktop.login1.OperationInProgress", EINPROGRESS),
        SD_BUS_ERROR_MAP("org.freedesktop.login1.NoSuchSession", ENXIO),
        SD_BUS_ERROR_MAP("org.freedesktop.login1.NoSuchUser", ENXIO),
        SD_BUS_ERROR_MAP_END,
};

enum op_kind {
        OP_JOB,   /* StopUnit/StartUnit, then JobRemoved */
        OP_STATE, /* GetUnit or LoadUnit, then Get ActiveState */
        OP_DELAY, /* Get InhibitDelayMaxUSec */
};

enum op_step {
        STEP_CALL,     /* waiting for a method reply */
        STEP_JOB,      /* waiting for the JobRemoved of op->job */
        STEP_LOAD,     /* LoadUnit after GetUnit said NoSuchUnit */
        STEP_PROPERTY, /* Get ActiveState of the unit object */
};

struct early {
        char *path;   /* owned */
        char *result; /* owned */
};

struct op {
        struct op *prev, *next;
        struct sysbus *b; /* borrowed */
        enum op_kind kind;
        enum op_step step;
        char *unit;        /* owned */
        char *job;         /* owned: the job path, from StopUnit/StartUnit's reply */
        sd_bus_slot *slot; /* owned: the call in flight */
        struct early early[EARLY_MAX];
        unsigned n_early;
        union {
                unit_job_fn job;
                unit_state_fn state;
                inhibit_delay_fn delay;
        } done;
        void *userdata;
};

struct sysbus {
        uv_loop_t *loop; /* borrowed */
        sd_bus *bus;     /* owned */
        uv_poll_t poll;
        uv_timer_t timer;
        int poll_events; /* UV_READABLE|UV_WRITABLE armed now, -1 when stopped */
        int broken;      /* < 0: the connection failed with this errno */
        bool closing;
        unsigned handles_open;
        void (*close_cb)(void *userdata);
        void *close_userdata;

        struct op *ops; /* owned, in flight */
        size_t n_ops;

        /* systemd1 */
        sd_bus_slot *job_match;      /* owned: JobRemoved */
        sd_bus_slot *subscribe_call; /* owned */
        bool job_match_failed;

        /* logind */
        shutdown_fn shutdown_cb;
        inhibit_result_fn inhibit_result;
        void *inhibit_userdata;
        char *who, *why;             /* owned */
        sd_bus_slot *shutdown_match; /* owned: PrepareForShutdown */
        sd_bus_slot *inhibit_call;   /* owned */
        sd_bus_slot *delay_call;     /* owned */
        int inhibit_fd;              /* owned, -1 when not held */
        bool want_lock;
        bool have_delay_max;
        uint64_t delay_max;
};

static void bus_rearm(struct sysbus *b, bool more);

/* ---- errors ---- */

/* The negative errno of a method error reply (0 for a method return). */
static int reply_errno(sd_bus_message *m, const char **ret_message) {
        const sd_bus_error *e = sd_bus_message_get_error(m);
        int r;

        if (!e) {
                *ret_message = NULL;
                return 0;
        }
        r = sd_bus_error_get_errno(e);
        *ret_message = e->message ? e->message : e->name;
        return r > 0 ? -r : -EIO;
}

/* ---- in-flight calls ---- */

static struct op *op_new(struct sysbus *b, enum op_kind kind, const char *unit, void *userdata) {
        struct op *op = calloc(1, sizeof(*op));

        if (!op)
                return NULL;
        op->b = b;
        op->kind = kind;
        op->userdata = userdata;
        if (unit) {
                op->unit = strdup(unit);
                if (!op->unit)
                        return mfree(op);
        }
        return op;
}

static void op_link(struct op *op) {
        struct sysbus *b = op->b;

        op->next = b->ops;
        if (b->ops)
                b->ops->prev = op;
        b->ops = op;
        b->n_ops++;
}

static void op_unlink(struct op *op) {
        struct sysbus *b = op->b;

        if (op->prev)
                op->prev->next = op->next;
        else
                b->ops = op->next;
        if (op->next)
                op->next->prev = op->prev;
        op->prev = op->next = NULL;
        b->n_ops--;
}

static void op_free(struct op *op) {
        if (!op)
                return;
        sd_bus_slot_unref(op->slot);
        for (unsigned i = 0; i < op->n_early; i++) {
                free(op->early[i].path);
                free(op->early[i].result);
        }
        free(op->unit);
        free(op->job);
        free(op);
}

/* Unlinks op, runs its callback once, frees it. result/state point into memory
 * that stays valid for the callback only. */
static void op_finish(struct op *op, int error, const char *value, const char *message) {
        op_unlink(op);
        op->slot = sd_bus_slot_unref(op->slot);
        switch (op->kind) {
        case OP_JOB:
                op->done.job(error, error < 0 ? NULL : value, message, op->userdata);
                break;
        case OP_STATE:
                op->done.state(error, error < 0 ? NULL : value, op->userdata);
                break;
        case OP_DELAY:
                op->done.delay(error, error < 0 ? 0 : *(const uint64_t *)value, op->userdata);
                break;
        }
        op_free(op);
}

static bool usable(const struct sysbus *b) {
        return b && !b->closing && b->broken == 0;
}

static int check_room(const struct sysbus *b) {
        if (!b)
                return -EINVAL;
        if (b->closing)
                return -ECANCELED;
        if (b->broken < 0)
                return -ENOTCONN;
        if (b->n_ops >= SYSBUS_OPS_MAX)
                return -ENOBUFS;
        return 0;
}

/* ---- the bus on the loop ---- */

static void on_bus_poll(uv_poll_t *h, int status, int events);
static void on_bus_timer(uv_timer_t *t);

/* Fails everything in flight with b->broken. Runs from the loop (a zero timer),
 * so a failure noticed inside a public call is still reported asynchronously. */
static void on_fail_timer(uv_timer_t *t) {
        struct sysbus *b = container_of(t, struct sysbus, timer);
        int error = b->broken;

        b->subscribe_call = sd_bus_slot_unref(b->subscribe_call);
        b->delay_call = sd_bus_slot_unref(b->delay_call);
        while (b->ops && !b->closing)
                op_finish(b->ops, error, NULL, "Connection to the system bus lost");
        if (b->inhibit_call && !b->closing) {
                b->inhibit_call = sd_bus_slot_unref(b->inhibit_call);
                if (b->inhibit_result)
                        b->inhibit_result(error, "Connection to the system bus lost", b->inhibit_userdata);
        }
}

static void bus_fail(struct sysbus *b, int error) {
        if (b->broken < 0 || b->closing)
                return;
        log_debug_errno(error, "System bus connection failed: %m");
        b->broken = error < 0 ? error : -EIO;
        uv_poll_stop(&b->poll);
        b->poll_events = -1;
        uv_timer_start(&b->timer, on_fail_timer, 0, 0);
}

/* sd_bus_get_timeout() is absolute CLOCK_MONOTONIC µs: sd-bus's clock, read here
 * only to turn its deadline into the relative delay a uv timer wants. */
static uint64_t monotonic_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Arms the poll for what sd-bus waits on and the timer for its next deadline;
 * more means sd-bus still had work when the batch ended: come back at once. */
static void bus_rearm(struct sysbus *b, bool more) {
        uint64_t until;
        int events, uv_events, r;

        if (!usable(b))
                return;
        events = sd_bus_get_events(b->bus);
        if (events < 0)
                return bus_fail(b, events);
        uv_events = ((events & POLLIN) ? UV_READABLE : 0) | ((events & POLLOUT) ? UV_WRITABLE : 0);
        if (uv_events != b->poll_events) {
                r = uv_events ? uv_poll_start(&b->poll, uv_events, on_bus_poll) : uv_poll_stop(&b->poll);
                if (r < 0)
                        return bus_fail(b, r);
                b->poll_events = uv_events;
        }

        if (more) {
                uv_timer_start(&b->timer, on_bus_timer, 0, 0);
                return;
        }
        r = sd_bus_get_timeout(b->bus, &until);
        if (r < 0)
                return bus_fail(b, r);
        if (r == 0 || until == UINT64_MAX)
                uv_timer_stop(&b->timer);
        else {
                uint64_t now = monotonic_usec();

                /* Round up: waking a millisecond early would only spin. */
                uv_timer_start(&b->timer, on_bus_timer, until <= now ? 0 : (until - now + 999) / 1000, 0);
        }
}

static void bus_process(struct sysbus *b) {
        unsigned i;
        int r;

        for (i = 0; i < PROCESS_BATCH; i++) {
                if (!usable(b))
                        return;
                r = sd_bus_process(b->bus, NULL);
                if (r < 0)
                        return bus_fail(b, r);
                if (r == 0)
                        break;
        }
        bus_rearm(b, i == PROCESS_BATCH);
}

static void on_bus_poll(uv_poll_t *h, int status, int events) {
        /* On a poll error, sd_bus_process() finds the socket's error itself. */
        bus_process(container_of(h, struct sysbus, poll));
}

static void on_bus_timer(uv_timer_t *t) {
        bus_process(container_of(t, struct sysbus, timer));
}

int sysbus_open(uv_loop_t *loop, struct sysbus **ret) {
        struct sysbus *b;
        int fd, r;

        if (!loop || !ret)
                return -EINVAL;
        /* Process-wide and idempotent. */
        r = sd_bus_error_add_map(sysbus_errors);
        if (r < 0)
                return r;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->loop = loop;
        b->poll_events = -1;
        b->inhibit_fd = -1;

        r = sd_bus_open_system_with_description(&b->bus, "drainer");
        if (r < 0) {
                free(b);
                return log_debug_errno(r, "Failed to connect to the system bus: %m");
        }
        fd = sd_bus_get_fd(b->bus);
        if (fd < 0) {
                sd_bus_close_unref(b->bus);
                free(b);
                return fd;
        }
        r = uv_poll_init(loop, &b->poll, fd);
        if (r < 0) {
                sd_bus_close_unref(b->bus);
                free(b);
                return r;
        }
        /* Cannot fail (libuv's uv_timer_init always returns 0). */
        uv_timer_init(loop, &b->timer);
        b->handles_open = 2;

        /* The connection is still authenticating: the first arm waits for that. */
        bus_rearm(b, false);
        *ret = b;
        return 0;
}

static void close_finish(struct sysbus *b) {
        void (*cb)(void *userdata) = b->close_cb;
        void *userdata = b->close_userdata;

        b->job_match = sd_bus_slot_unref(b->job_match);
        b->subscribe_call = sd_bus_slot_unref(b->subscribe_call);
        b->shutdown_match = sd_bus_slot_unref(b->shutdown_match);
        b->delay_call = sd_bus_slot_unref(b->delay_call);
        while (b->ops)
                op_finish(b->ops, -ECANCELED, NULL, NULL);
        if (b->inhibit_call) {
                b->inhibit_call = sd_bus_slot_unref(b->inhibit_call);
                if (b->inhibit_result)
                        b->inhibit_result(-ECANCELED, NULL, b->inhibit_userdata);
        }
        if (b->inhibit_fd >= 0)
                close(b->inhibit_fd);
        /* No flush: it would block on a peer that stopped reading; nothing we
         * send matters once we are closing. */
        sd_bus_close_unref(b->bus);
        free(b->who);
        free(b->why);
        free(b);
        if (cb)
                cb(userdata);
}

static void on_handle_closed(uv_handle_t *h) {
        struct sysbus *b = h->data;

        if (--b->handles_open == 0)
                close_finish(b);
}

void sysbus_close(struct sysbus *b, void (*close_cb)(void *userdata), void *userdata) {
        if (!b || b->closing)
                return;
        b->closing = true;
        b->close_cb = close_cb;
        b->close_userdata = userdata;
        b->poll.data = b;
        b->timer.data = b;
        uv_close((uv_handle_t *)&b->poll, on_handle_closed);
        uv_close((uv_handle_t *)&b->timer, on_handle_closed);
}

/* ---- units ---- */

static void op_stash_early(struct op *op, const char *path, const char *result) {
        struct early e = { strdup(path), strdup(result) };

        if (!e.path || !e.result) {
                free(e.path);
                free(e.result);
                return;
        }
        if (op->n_early == EARLY_MAX) {
                free(op->early[0].path);
                free(op->early[0].result);
                memmove(op->early, op->early + 1, (EARLY_MAX - 1) * sizeof(op->early[0]));
                op->n_early--;
        }
        op->early[op->n_early++] = e;
}

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct sysbus *b = userdata;
        const char *path, *unit, *result;
        uint32_t id;
        int r;

        r = sd_bus_message_read(m, "uoss", &id, &path, &unit, &result);
        if (r < 0) {
                log_debug_errno(r, "Malformed JobRemoved signal: %m, ignoring");
                return 0;
        }
        log_debug("Job %" PRIu32 " (%s) of unit \"%s\" removed: %s", id, path, unit, result);

        /* A job may end before its reply reaches us in theory; keep its result for
         * calls on that unit still waiting for their job path. Done before any
         * callback runs, so calls started from a callback do not see it. */
        for (struct op *op = b->ops; op; op = op->next)
                if (op->kind == OP_JOB && op->step == STEP_CALL && streq(op->unit, unit))
                        op_stash_early(op, path, result);

        /* Every call whose job this was (a merged job serves several). The list
         * changes under callbacks: rescan from the head after each. */
        for (;;) {
                struct op *op;

                for (op = b->ops; op; op = op->next)
                        if (op->kind == OP_JOB && op->step == STEP_JOB && streq(op->job, path))
                                break;
                if (!op || b->closing)
                        break;
                op_finish(op, 0, result, NULL);
        }
        return 0;
}

static int on_job_match_installed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct sysbus *b = userdata;
        const char *message;
        int r = reply_errno(m, &message);

        if (r == 0)
                return 0;
        log_debug_errno(r, "Failed to watch systemd's JobRemoved: %s", strna(message));
        /* Without the match no job would ever finish: fail the calls that wait for
         * one, and install it again on the next call (not from inside this callback). */
        b->job_match_failed = true;
        for (;;) {
                struct op *op;

                for (op = b->ops; op; op = op->next)
                        if (op->kind == OP_JOB)
                                break;
                if (!op || b->closing)
                        break;
                op_finish(op, r, NULL, message);
        }
        return 0;
}

static int on_subscribe_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct sysbus *b = userdata;
        const char *message;
        int r = reply_errno(m, &message);

        b->subscribe_call = sd_bus_slot_unref(b->subscribe_call);
        /* Older systemd refuses a second Subscribe from the same client; either way
         * we are subscribed. */
        if (r < 0)
                log_debug_errno(r, "systemd Subscribe() failed: %s, ignoring", strna(message));
        return 0;
}

/* systemd sends JobRemoved on the system bus only while a client is subscribed;
 * the match goes first so the daemon already routes the signal when our method
 * call reaches systemd (one connection's messages are handled in order). */
static int ensure_job_watch(struct sysbus *b) {
        int r;

        if (b->job_match_failed) {
                b->job_match = sd_bus_slot_unref(b->job_match);
                b->job_match_failed = false;
        }
        if (b->job_match)
                return 0;
        r = sd_bus_match_signal_async(b->bus, &b->job_match, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                      "JobRemoved", on_job_removed, on_job_match_installed, b);
        if (r < 0)
                return r;
        if (!b->subscribe_call) {
                r = sd_bus_call_method_async(b->bus, &b->subscribe_call, SYSTEMD_DEST, SYSTEMD_PATH,
                                             SYSTEMD_MANAGER, "Subscribe", on_subscribe_reply, b, NULL);
                if (r < 0) {
                        b->job_match = sd_bus_slot_unref(b->job_match);
                        return r;
                }
        }
        return 0;
}

static int on_unit_job_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct op *op = userdata;
        const char *message, *path;
        int r = reply_errno(m, &message);

        op->slot = sd_bus_slot_unref(op->slot);
        if (r < 0) {
                op_finish(op, r, NULL, message);
                return 0;
        }
        r = sd_bus_message_read(m, "o", &path);
        if (r < 0) {
                op_finish(op, r, NULL, "Malformed reply from systemd");
                return 0;
        }
        op->job = strdup(path);
        if (!op->job) {
                op_finish(op, -ENOMEM, NULL, NULL);
                return 0;
        }
        op->step = STEP_JOB;
        log_debug("Unit \"%s\": job %s queued", op->unit, path);
        for (unsigned i = 0; i < op->n_early; i++)
                if (streq(op->early[i].path, path)) {
                        op_finish(op, 0, op->early[i].result, NULL);
                        return 0;
                }
        return 0;
}

static int unit_job(struct sysbus *b, const char *method, const char *unit, unit_job_fn done,
                    void *userdata) {
        struct op *op;
        int r;

        r = check_room(b);
        if (r < 0)
                return r;
        if (!unit || !*unit || strlen(unit) > UNIT_NAME_MAX || !done)
                return -EINVAL;
        r = ensure_job_watch(b);
        if (r < 0)
                return r;
        op = op_new(b, OP_JOB, unit, userdata);
        if (!op)
                return -ENOMEM;
        op->done.job = done;
        r = sd_bus_call_method_async(b->bus, &op->slot, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, method,
                                     on_unit_job_reply, op, "ss", unit, "replace");
        if (r < 0) {
                op_free(op);
                return r;
        }
        op_link(op);
        bus_rearm(b, false);
        return 0;
}

int sysbus_unit_stop(struct sysbus *b, const char *unit, unit_job_fn done, void *userdata) {
        return unit_job(b, "StopUnit", unit, done, userdata);
}

int sysbus_unit_start(struct sysbus *b, const char *unit, unit_job_fn done, void *userdata) {
        return unit_job(b, "StartUnit", unit, done, userdata);
}

static int on_active_state_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct op *op = userdata;
        const char *message, *state;
        int r = reply_errno(m, &message);

        op->slot = sd_bus_slot_unref(op->slot);
        if (r < 0) {
                log_debug_errno(r, "Reading ActiveState of \"%s\" failed: %s", op->unit, strna(message));
                op_finish(op, r, NULL, message);
                return 0;
        }
        r = sd_bus_message_enter_container(m, 'v', "s");
        if (r >= 0)
                r = sd_bus_message_read(m, "s", &state);
        if (r < 0) {
                op_finish(op, r, NULL, NULL);
                return 0;
        }
        op_finish(op, 0, state, NULL);
        return 0;
}

static int on_unit_path_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct op *op = userdata;
        struct sysbus *b = op->b;
        const char *message, *path;
        int r = reply_errno(m, &message);

        op->slot = sd_bus_slot_unref(op->slot);
        if (r < 0 && op->step == STEP_CALL &&
            sd_bus_error_has_name(sd_bus_message_get_error(m), "org.freedesktop.systemd1.NoSuchUnit")) {
                /* Not loaded: LoadUnit loads it, or yields its not-found object. */
                op->step = STEP_LOAD;
                r = sd_bus_call_method_async(b->bus, &op->slot, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                             "LoadUnit", on_unit_path_reply, op, "s", op->unit);
                if (r >= 0)
                        return 0;
                message = NULL;
        }
        if (r >= 0)
                r = sd_bus_message_read(m, "o", &path);
        if (r >= 0) {
                op->step = STEP_PROPERTY;
                r = sd_bus_call_method_async(b->bus, &op->slot, SYSTEMD_DEST, path, DBUS_PROPERTIES, "Get",
                                             on_active_state_reply, op, "ss", SYSTEMD_UNIT, "ActiveState");
        }
        if (r < 0) {
                log_debug_errno(r, "Looking up unit \"%s\" failed: %s", op->unit, strna(message));
                op_finish(op, r, NULL, message);
        }
        return 0;
}

int sysbus_unit_active_state(struct sysbus *b, const char *unit, unit_state_fn done, void *userdata) {
        struct op *op;
        int r;

        r = check_room(b);
        if (r < 0)
                return r;
        if (!unit || !*unit || strlen(unit) > UNIT_NAME_MAX || !done)
                return -EINVAL;
        op = op_new(b, OP_STATE, unit, userdata);
        if (!op)
                return -ENOMEM;
        op->done.state = done;
        r = sd_bus_call_method_async(b->bus, &op->slot, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                     "GetUnit", on_unit_path_reply, op, "s", unit);
        if (r < 0) {
                op_free(op);
                return r;
        }
        op_link(op);
        bus_rearm(b, false);
        return 0;
}

static int units_stop(void *ctx, const char *unit, unit_job_fn done, void *userdata) {
        return sysbus_unit_stop(ctx, unit, done, userdata);
}

static int units_start(void *ctx, const char *unit, unit_job_fn done, void *userdata) {
        return sysbus_unit_start(ctx, unit, done, userdata);
}

static int units_active_state(void *ctx, const char *unit, unit_state_fn done, void *userdata) {
        return sysbus_unit_active_state(ctx, unit, done, userdata);
}

struct units sysbus_units(struct sysbus *b) {
        static const struct unit_ops ops = {
                .stop = units_stop,
                .start = units_start,
                .active_state = units_active_state,
        };

        return b ? (struct units){ .ops = &ops, .ctx = b } : (struct units){};
}

/* ---- logind ---- */

static int read_delay_max(sd_bus_message *m, uint64_t *ret) {
        int r = sd_bus_message_enter_container(m, 'v', "t");

        return r < 0 ? r : sd_bus_message_read(m, "t", ret);
}

static int on_delay_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct op *op = userdata;
        struct sysbus *b = op->b;
        const char *message;
        uint64_t usec = 0;
        int r = reply_errno(m, &message);

        op->slot = sd_bus_slot_unref(op->slot);
        if (r >= 0)
                r = read_delay_max(m, &usec);
        if (r >= 0) {
                b->delay_max = usec;
                b->have_delay_max = true;
        }
        op_finish(op, r < 0 ? r : 0, (const char *)&usec, message);
        return 0;
}

static int call_delay_max(struct sysbus *b, sd_bus_slot **slot, sd_bus_message_handler_t cb,
                          void *userdata) {
        return sd_bus_call_method_async(b->bus, slot, LOGIND_DEST, LOGIND_PATH, DBUS_PROPERTIES, "Get", cb,
                                        userdata, "ss", LOGIND_MANAGER, "InhibitDelayMaxUSec");
}

int sysbus_inhibit_delay_max_async(struct sysbus *b, inhibit_delay_fn done, void *userdata) {
        struct op *op;
        int r;

        r = check_room(b);
        if (r < 0)
                return r;
        if (!done)
                return -EINVAL;
        op = op_new(b, OP_DELAY, NULL, userdata);
        if (!op)
                return -ENOMEM;
        op->done.delay = done;
        r = call_delay_max(b, &op->slot, on_delay_reply, op);
        if (r < 0) {
                op_free(op);
                return r;
        }
        op_link(op);
        bus_rearm(b, false);
        return 0;
}

int sysbus_inhibit_delay_max(struct sysbus *b, uint64_t *ret_usec) {
        if (!b || !ret_usec)
                return -EINVAL;
        if (!b->have_delay_max)
                return -ENODATA;
        *ret_usec = b->delay_max;
        return 0;
}

static int on_cached_delay_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct sysbus *b = userdata;
        const char *message;
        uint64_t usec;
        int r = reply_errno(m, &message);

        b->delay_call = sd_bus_slot_unref(b->delay_call);
        if (r >= 0)
                r = read_delay_max(m, &usec);
        if (r < 0) {
                log_debug_errno(r, "Reading logind's InhibitDelayMaxUSec failed: %s, ignoring",
                                strna(message));
                return 0;
        }
        b->delay_max = usec;
        b->have_delay_max = true;
        return 0;
}

static void inhibit_report(struct sysbus *b, int error, const char *message) {
        if (b->inhibit_result)
                b->inhibit_result(error, message, b->inhibit_userdata);
}

static int on_inhibit_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct sysbus *b = userdata;
        const char *message;
        int r = reply_errno(m, &message), fd;

        b->inhibit_call = sd_bus_slot_unref(b->inhibit_call);
        if (r >= 0)
                r = sd_bus_message_read(m, "h", &fd);
        if (r < 0) {
                log_debug_errno(r, "logind Inhibit(\"shutdown\", \"delay\") failed: %s", strna(message));
                inhibit_report(b, r, message);
                return 0;
        }
        /* The message owns fd and closes it with the message: keep our own copy. */
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
                r = -errno;
                inhibit_report(b, r, NULL);
                return 0;
        }
        if (!b->want_lock || b->inhibit_fd >= 0) {
                /* Released while it was on its way: let the shutdown go on. */
                close(fd);
                log_debug("Shutdown inhibitor arrived after its release, dropped");
        } else {
                b->inhibit_fd = fd;
                log_debug("Holding a logind shutdown delay inhibitor (fd %d)", fd);
        }
        inhibit_report(b, 0, NULL);
        return 0;
}

static int inhibit_take(struct sysbus *b) {
        if (b->inhibit_call || b->inhibit_fd >= 0)
                return 0;
        return sd_bus_call_method_async(b->bus, &b->inhibit_call, LOGIND_DEST, LOGIND_PATH, LOGIND_MANAGER,
                                        "Inhibit", on_inhibit_reply, b, "ssss", "shutdown", b->who, b->why,
                                        "delay");
}

static int on_prepare_for_shutdown(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct sysbus *b = userdata;
        int active, r;

        r = sd_bus_message_read(m, "b", &active);
        if (r < 0) {
                log_debug_errno(r, "Malformed PrepareForShutdown signal: %m, ignoring");
                return 0;
        }
        log_debug("logind: PrepareForShutdown(%s)", active ? "true" : "false");
        if (!active) {
                /* Cancelled: take the lock again for the next shutdown. */
                b->want_lock = true;
                r = inhibit_take(b);
                if (r < 0) {
                        log_debug_errno(r, "Taking the shutdown inhibitor again failed: %m");
                        inhibit_report(b, r, NULL);
                        if (b->closing)
                                return 0;
                }
                bus_rearm(b, false);
        }
        b->shutdown_cb(active, b->inhibit_userdata);
        return 0;
}

static int on_shutdown_match_installed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct sysbus *b = userdata;
        const char *message;
        int r = reply_errno(m, &message);

        if (r < 0) {
                log_debug_errno(r, "Failed to watch logind's PrepareForShutdown: %s", strna(message));
                inhibit_report(b, r, message);
        }
        return 0;
}

int sysbus_inhibit_shutdown_full(struct sysbus *b, const char *who, const char *why, shutdown_fn cb,
                                 inhibit_result_fn result, void *userdata) {
        int r;

        r = check_room(b);
        if (r < 0)
                return r;
        if (!who || !why || !cb)
                return -EINVAL;
        if (b->shutdown_cb)
                return -EBUSY;
        b->who = strdup(who);
        b->why = strdup(why);
        if (!b->who || !b->why) {
                r = -ENOMEM;
                goto fail;
        }
        /* The match first: a PrepareForShutdown right after the lock is taken is not missed. */
        r = sd_bus_match_signal_async(b->bus, &b->shutdown_match, LOGIND_DEST, LOGIND_PATH, LOGIND_MANAGER,
                                      "PrepareForShutdown", on_prepare_for_shutdown,
                                      on_shutdown_match_installed, b);
        if (r < 0)
                goto fail;
        b->want_lock = true;
        r = inhibit_take(b);
        if (r < 0)
                goto fail;
        if (!b->delay_call && call_delay_max(b, &b->delay_call, on_cached_delay_reply, b) < 0)
                log_debug("Could not ask logind for InhibitDelayMaxUSec, ignoring");
        b->shutdown_cb = cb;
        b->inhibit_result = result;
        b->inhibit_userdata = userdata;
        bus_rearm(b, false);
        return 0;

fail:
        b->shutdown_match = sd_bus_slot_unref(b->shutdown_match);
        b->inhibit_call = sd_bus_slot_unref(b->inhibit_call);
        b->want_lock = false;
        b->who = mfree(b->who);
        b->why = mfree(b->why);
        return r;
}

int sysbus_inhibit_shutdown(struct sysbus *b, const char *who, const char *why, shutdown_fn cb,
                            void *userdata) {
        return sysbus_inhibit_shutdown_full(b, who, why, cb, NULL, userdata);
}

void sysbus_release_inhibitor(struct sysbus *b) {
        if (!b)
                return;
        b->want_lock = false;
        if (b->inhibit_fd >= 0) {
                close(b->inhibit_fd);
                b->inhibit_fd = -1;
                log_debug("Released the logind shutdown delay inhibitor");
        }
}

bool sysbus_holds_inhibitor(const struct sysbus *b) {
        return b && b->inhibit_fd >= 0;
}
