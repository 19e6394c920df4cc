/* A stand-in for systemd (org.freedesktop.systemd1) and logind
 * (org.freedesktop.login1) on a private dbus-daemon, for test-sysbus. It owns
 * both names on $DBUS_SYSTEM_BUS_ADDRESS, prints "READY" on stdout once it does,
 * and runs until SIGTERM or the bus goes away. Its own sd-event loop: it is a
 * separate program, not drainer code.
 *
 * systemd1 Manager: Subscribe, StopUnit/StartUnit (job path now, JobRemoved
 * after JOB_DELAY_MS, only to subscribers, as systemd does), GetUnit, LoadUnit;
 * unit objects under /org/freedesktop/systemd1/unit with Id, LoadState,
 * ActiveState. Units: "dra-driver.service" (active), "idle.service" (inactive),
 * "broken.service" (its start job ends "failed", ActiveState "failed"),
 * "slow.service" (active; its jobs take a minute), plus any given as arguments
 * (active; "UNIT=STATE" gives another ActiveState, e.g. reboot.target=inactive). A unit whose name contains "broken" fails, "slow" is slow, and
 * "eager" finishes its job at once, sending JobRemoved before the method reply;
 * StopUnit/StartUnit of a "hang" unit never reply.
 * login1 Manager: Inhibit (returns the write end of a pipe and watches the read
 * end for the caller closing it), InhibitDelayMaxUSec, PrepareForShutdown.
 * Test-only interface io.drainer.Test on /org/freedesktop/login1:
 * EmitPrepareForShutdown(b), Inhibitors() -> (u held, u released,
 * s last_what, s last_who, s last_mode), Subscribers() -> u. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#define UNIT_PREFIX  "/org/freedesktop/systemd1/unit"
#define UNITS_MAX    32
#define INHIBIT_MAX  16
#define JOB_DELAY_MS 20
#define SLOW_JOB_MS  60000
#define HUNG_MAX     16

struct unit {
        char *name;
        char *path;
        const char *load_state;   /* "loaded" or "not-found" */
        const char *active_state; /* "active", "inactive", "failed", ... */
        bool fails;
        bool slow;
        bool eager;
        bool hangs;
};

struct job {
        uint32_t id;
        char path[64];
        struct unit *unit;
        bool start;
};

static sd_bus *bus;
static sd_event *event;
static struct unit units[UNITS_MAX];
static unsigned n_units;
static uint32_t next_job = 1;
static sd_bus_message *hung[HUNG_MAX];
static unsigned n_hung;
static unsigned subscribers;
static unsigned inhibit_held, inhibit_released;
static char last_what[64], last_who[128], last_mode[32];

static struct unit *unit_add(const char *name, const char *load_state, const char *active_state) {
        struct unit *u;

        if (n_units == UNITS_MAX)
                return NULL;
        u = &units[n_units];
        u->name = strdup(name);
        if (!u->name || sd_bus_path_encode(UNIT_PREFIX, name, &u->path) < 0) {
                free(u->name);
                return NULL;
        }
        u->load_state = load_state;
        u->active_state = active_state;
        u->fails = strstr(name, "broken") != NULL;
        u->slow = strstr(name, "slow") != NULL;
        u->eager = strstr(name, "eager") != NULL;
        u->hangs = strstr(name, "hang") != NULL;
        n_units++;
        return u;
}

static struct unit *unit_by_name(const char *name) {
        for (unsigned i = 0; i < n_units; i++)
                if (strcmp(units[i].name, name) == 0)
                        return &units[i];
        return NULL;
}

static struct unit *unit_by_path(const char *path) {
        for (unsigned i = 0; i < n_units; i++)
                if (strcmp(units[i].path, path) == 0)
                        return &units[i];
        return NULL;
}

/* ---- systemd1 ---- */

static void job_finish(struct job *j) {
        const char *result = "done";

        if (j->start && j->unit->fails) {
                j->unit->active_state = "failed";
                result = "failed";
        } else
                j->unit->active_state = j->start ? "active" : "inactive";
        /* systemd sends JobRemoved on the API bus only while someone is subscribed. */
        if (subscribers > 0)
                sd_bus_emit_signal(bus, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                   "JobRemoved", "uoss", j->id, j->path, j->unit->name, result);
}

static int on_job_done(sd_event_source *s, uint64_t usec, void *userdata) {
        struct job *j = userdata;

        job_finish(j);
        free(j);
        sd_event_source_unref(s);
        return 0;
}

static int method_unit_job(sd_bus_message *m, bool start, sd_bus_error *error) {
        const char *name, *mode;
        struct unit *u;
        struct job *j;
        sd_event_source *s;
        int r;

        r = sd_bus_message_read(m, "ss", &name, &mode);
        if (r < 0)
                return r;
        if (strcmp(mode, "replace") != 0 && strcmp(mode, "fail") != 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Job mode %s invalid.", mode);
        u = unit_by_name(name);
        if (!u || strcmp(u->load_state, "loaded") != 0)
                return sd_bus_error_setf(error, "org.freedesktop.systemd1.NoSuchUnit", "Unit %s %s.", name,
                                         start ? "not found" : "not loaded");
        if (u->hangs) {
                /* Keep the call unanswered: the caller's method timeout must fire. */
                if (n_hung < HUNG_MAX)
                        hung[n_hung++] = sd_bus_message_ref(m);
                return 1;
        }
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->id = next_job++;
        j->unit = u;
        j->start = start;
        snprintf(j->path, sizeof(j->path), "/org/freedesktop/systemd1/job/%u", j->id);
        u->active_state = start ? "activating" : "deactivating";
        if (u->eager) {
                /* The signal before the reply: a client must not miss it. */
                job_finish(j);
                r = sd_bus_reply_method_return(m, "o", j->path);
                free(j);
                return r;
        }
        r = sd_event_add_time_relative(event, &s, CLOCK_MONOTONIC,
                                       (u->slow ? SLOW_JOB_MS : JOB_DELAY_MS) * 1000, 0, on_job_done, j);
        if (r < 0) {
                free(j);
                return r;
        }
        return sd_bus_reply_method_return(m, "o", j->path);
}

static int method_stop_unit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return method_unit_job(m, false, error);
}

static int method_start_unit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return method_unit_job(m, true, error);
}

static int method_subscribe(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        subscribers++;
        return sd_bus_reply_method_return(m, NULL);
}

static int method_get_unit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *name;
        struct unit *u;
        int r;

        r = sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        u = unit_by_name(name);
        if (!u)
                return sd_bus_error_setf(error, "org.freedesktop.systemd1.NoSuchUnit", "Unit %s not loaded.",
                                         name);
        return sd_bus_reply_method_return(m, "o", u->path);
}

static int method_load_unit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *name;
        struct unit *u;
        int r;

        r = sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        u = unit_by_name(name);
        if (!u)
                u = unit_add(name, "not-found", "inactive");
        if (!u)
                return -ENOMEM;
        return sd_bus_reply_method_return(m, "o", u->path);
}

static int unit_find(sd_bus *b, const char *path, const char *interface, void *userdata, void **found,
                     sd_bus_error *error) {
        struct unit *u = unit_by_path(path);

        if (!u)
                return 0;
        *found = u;
        return 1;
}

static int prop_unit_string(sd_bus *b, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        struct unit *u = userdata;

        if (strcmp(property, "Id") == 0)
                return sd_bus_message_append(reply, "s", u->name);
        if (strcmp(property, "LoadState") == 0)
                return sd_bus_message_append(reply, "s", u->load_state);
        return sd_bus_message_append(reply, "s", u->active_state);
}

static const sd_bus_vtable systemd_manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Subscribe", "", "", method_subscribe, 0),
        SD_BUS_METHOD("StopUnit", "ss", "o", method_stop_unit, 0),
        SD_BUS_METHOD("StartUnit", "ss", "o", method_start_unit, 0),
        SD_BUS_METHOD("GetUnit", "s", "o", method_get_unit, 0),
        SD_BUS_METHOD("LoadUnit", "s", "o", method_load_unit, 0),
        SD_BUS_SIGNAL("JobRemoved", "uoss", 0),
        SD_BUS_VTABLE_END,
};

static const sd_bus_vtable unit_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", prop_unit_string, 0, 0),
        SD_BUS_PROPERTY("LoadState", "s", prop_unit_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("ActiveState", "s", prop_unit_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_VTABLE_END,
};

/* ---- login1 ---- */

static int on_inhibitor_closed(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        /* EOF (or HUP): every copy of the write end is closed, the lock is gone. */
        char buf[16];

        if (read(fd, buf, sizeof(buf)) > 0)
                return 0;
        inhibit_held--;
        inhibit_released++;
        sd_event_source_unref(s);
        close(fd);
        return 0;
}

static int method_inhibit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *what, *who, *why, *mode;
        sd_event_source *s;
        int p[2], r;

        r = sd_bus_message_read(m, "ssss", &what, &who, &why, &mode);
        if (r < 0)
                return r;
        if (strcmp(mode, "block") != 0 && strcmp(mode, "delay") != 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Invalid mode specification %s",
                                         mode);
        if (strcmp(what, "shutdown") != 0 && strcmp(what, "sleep") != 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Invalid what specification %s",
                                         what);
        if (inhibit_held >= INHIBIT_MAX)
                return sd_bus_error_set(error, SD_BUS_ERROR_LIMITS_EXCEEDED, "Too many inhibitors");
        snprintf(last_what, sizeof(last_what), "%s", what);
        snprintf(last_who, sizeof(last_who), "%s", who);
        snprintf(last_mode, sizeof(last_mode), "%s", mode);

        /* As logind: the caller gets the write end of a FIFO; the lock lasts until it closes it. */
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        r = sd_event_add_io(event, &s, p[0], EPOLLIN, on_inhibitor_closed, NULL);
        if (r < 0) {
                close(p[0]);
                close(p[1]);
                return r;
        }
        inhibit_held++;
        r = sd_bus_reply_method_return(m, "h", p[1]);
        /* The reply carried a duplicate; ours must go or EOF would never come. */
        close(p[1]);
        return r;
}

static int prop_delay_max(sd_bus *b, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "t", (uint64_t)5000000);
}

static const sd_bus_vtable login_manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Inhibit", "ssss", "h", method_inhibit, 0),
        SD_BUS_PROPERTY("InhibitDelayMaxUSec", "t", prop_delay_max, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_SIGNAL("PrepareForShutdown", "b", 0),
        SD_BUS_VTABLE_END,
};

static int method_emit_prepare(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        int active, r;

        r = sd_bus_message_read(m, "b", &active);
        if (r < 0)
                return r;
        r = sd_bus_emit_signal(bus, "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                               "PrepareForShutdown", "b", active);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, NULL);
}

static int method_inhibitors(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sd_bus_reply_method_return(m, "uusss", inhibit_held, inhibit_released, last_what, last_who,
                                          last_mode);
}

static int method_subscribers(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sd_bus_reply_method_return(m, "u", subscribers);
}

static const sd_bus_vtable test_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("EmitPrepareForShutdown", "b", "", method_emit_prepare, 0),
        SD_BUS_METHOD("Inhibitors", "", "uusss", method_inhibitors, 0),
        SD_BUS_METHOD("Subscribers", "", "u", method_subscribers, 0),
        SD_BUS_VTABLE_END,
};

int main(int argc, char **argv) {
        sigset_t ss;
        int r;

        if (!unit_add("dra-driver.service", "loaded", "active") ||
            !unit_add("idle.service", "loaded", "inactive") ||
            !unit_add("broken.service", "loaded", "inactive") ||
            !unit_add("slow.service", "loaded", "active") ||
            !unit_add("eager.service", "loaded", "active") || !unit_add("hang.service", "loaded", "active"))
                return 1;
        for (int i = 1; i < argc; i++) {
                char *eq = strchr(argv[i], '=');

                if (eq)
                        *eq = 0;
                if (!unit_add(argv[i], "loaded", eq ? eq + 1 : "active"))
                        return 1;
        }

        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigprocmask(SIG_BLOCK, &ss, NULL);

        r = sd_event_default(&event);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);
        if (r >= 0)
                r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = sd_bus_attach_event(bus, event, 0);
        if (r >= 0)
                r = sd_bus_set_exit_on_disconnect(bus, true);
        if (r >= 0)
                r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/systemd1",
                                             "org.freedesktop.systemd1.Manager", systemd_manager_vtable,
                                             NULL);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(bus, NULL, UNIT_PREFIX, "org.freedesktop.systemd1.Unit",
                                               unit_vtable, unit_find, NULL);
        if (r >= 0)
                r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/login1",
                                             "org.freedesktop.login1.Manager", login_manager_vtable, NULL);
        if (r >= 0)
                r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/login1", "io.drainer.Test",
                                             test_vtable, NULL);
        if (r >= 0)
                r = sd_bus_request_name(bus, "org.freedesktop.systemd1", 0);
        if (r >= 0)
                r = sd_bus_request_name(bus, "org.freedesktop.login1", 0);
        if (r < 0) {
                fprintf(stderr, "fake-systemd: setup failed: %s\n", strerror(-r));
                return 1;
        }
        printf("READY\n");
        fflush(stdout);

        r = sd_event_loop(event);
        for (unsigned i = 0; i < n_hung; i++)
                sd_bus_message_unref(hung[i]);
        sd_bus_flush_close_unref(bus);
        sd_event_unref(event);
        for (unsigned i = 0; i < n_units; i++) {
                free(units[i].name);
                free(units[i].path);
        }
        return r < 0 ? 1 : 0;
}
