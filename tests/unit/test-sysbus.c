/* Tests of sysbus (sd-bus on the libuv loop) against a private dbus-daemon and
 * fakes/fake-systemd, a stand-in owning org.freedesktop.systemd1 and
 * org.freedesktop.login1: unit stop/start through JobRemoved and ActiveState,
 * D-Bus errors as negative errno, the logind delay inhibitor through
 * PrepareForShutdown(true/false) with the stand-in watching the lock's fd, close
 * cancelling what is in flight, a bus that dies. Each test gets its own daemon
 * (config in a temp dir, $DBUS_SYSTEM_BUS_ADDRESS pointing at it) and ends with
 * uv_loop_close() == 0. Skipped when dbus-daemon is not installed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <systemd/sd-bus.h>
#include <uv.h>

#include "drainer/base/macro.h"
#include "drainer/sys/sysbus.h"

#ifndef FAKE_SYSTEMD
#error "FAKE_SYSTEMD must name the fake-systemd executable"
#endif

#define WAIT_MS 5000

struct env {
        bool skip;
        char dir[64];
        char path[128]; /* the bus socket */
        pid_t daemon, fake;
        sd_bus *ctl; /* the test's own blocking connection, for io.drainer.Test */
        uv_loop_t loop;
        uv_timer_t guard;
        bool timed_out;
        struct sysbus *b;
        int closed;
};

static char *find_dbus_daemon(void) {
        const char *e = getenv("DBUS_DAEMON"), *path = getenv("PATH");
        char *copy, *save = NULL, *found = NULL;

        if (e && *e)
                return access(e, X_OK) == 0 ? strdup(e) : NULL;
        copy = strdup(path ? path : "/usr/bin:/bin");
        assert_non_null(copy);
        for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
                char *p;

                assert_true(asprintf(&p, "%s/dbus-daemon", d) > 0);
                if (access(p, X_OK) == 0)
                        found = p;
                else
                        free(p);
        }
        free(copy);
        return found;
}

/* Reads one line from fd into buf within WAIT_MS; false on EOF or timeout. */
static bool read_line(int fd, char *buf, size_t size) {
        size_t n = 0;

        while (n + 1 < size) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t l;

                if (poll(&p, 1, WAIT_MS) <= 0)
                        return false;
                l = read(fd, buf + n, 1);
                if (l <= 0)
                        return false;
                if (buf[n] == '\n')
                        break;
                n++;
        }
        buf[n] = 0;
        return true;
}

/* Starts argv with its stdout (or fd 3 if on_fd3) on a pipe and waits for its first line. */
static pid_t spawn(char *const argv[], bool on_fd3, char *line, size_t size) {
        int p[2];
        pid_t pid;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (dup2(p[1], on_fd3 ? 3 : STDOUT_FILENO) < 0)
                        _exit(127);
                execv(argv[0], argv);
                _exit(127);
        }
        close(p[1]);
        if (!read_line(p[0], line, size))
                fail_msg("%s did not start", argv[0]);
        close(p[0]);
        return pid;
}

static void stop_child(pid_t *pid, int sig) {
        if (*pid <= 0)
                return;
        kill(*pid, sig);
        assert_int_equal(waitpid(*pid, NULL, 0), *pid);
        *pid = 0;
}

static int setup(void **state) {
        struct env *t = calloc(1, sizeof(*t));
        char conf[160], addr[200], line[512];
        _cleanup_free_ char *daemon = find_dbus_daemon();
        FILE *f;

        assert_non_null(t);
        *state = t;
        if (!daemon) {
                t->skip = true;
                return 0;
        }
        strcpy(t->dir, "/tmp/drainer-sysbus-XXXXXX");
        assert_non_null(mkdtemp(t->dir));
        snprintf(t->path, sizeof(t->path), "%s/bus", t->dir);
        snprintf(conf, sizeof(conf), "%s/bus.conf", t->dir);
        f = fopen(conf, "we");
        assert_non_null(f);
        /* A session-like bus that allows everything; no service activation. */
        fprintf(f,
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
                " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                "<busconfig>\n"
                "  <type>session</type>\n"
                "  <listen>unix:path=%s</listen>\n"
                "  <auth>EXTERNAL</auth>\n"
                "  <policy context=\"default\">\n"
                "    <allow send_destination=\"*\" eavesdrop=\"true\"/>\n"
                "    <allow eavesdrop=\"true\"/>\n"
                "    <allow own=\"*\"/>\n"
                "  </policy>\n"
                "</busconfig>\n",
                t->path);
        assert_int_equal(fclose(f), 0);

        {
                char arg_conf[200];
                char *argv[] = { daemon, arg_conf, "--nofork", "--nosyslog", "--print-address=3", NULL };

                snprintf(arg_conf, sizeof(arg_conf), "--config-file=%s", conf);
                t->daemon = spawn(argv, true, line, sizeof(line));
        }
        assert_non_null(strstr(line, t->path));
        snprintf(addr, sizeof(addr), "unix:path=%s", t->path);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", addr, 1);

        {
                char *argv[] = { FAKE_SYSTEMD, NULL };

                t->fake = spawn(argv, false, line, sizeof(line));
        }
        assert_string_equal(line, "READY");
        assert_int_equal(sd_bus_open_system(&t->ctl), 0);

        assert_int_equal(uv_loop_init(&t->loop), 0);
        assert_int_equal(uv_timer_init(&t->loop, &t->guard), 0);
        return 0;
}

static int teardown(void **state) {
        struct env *t = *state;
        char p[160];

        if (!t->skip) {
                sd_bus_flush_close_unref(t->ctl);
                stop_child(&t->fake, SIGTERM);
                stop_child(&t->daemon, SIGTERM);
                unlink(t->path);
                snprintf(p, sizeof(p), "%s/bus.conf", t->dir);
                unlink(p);
                rmdir(t->dir);
        }
        free(t);
        return 0;
}

#define SKIP_WITHOUT_DBUS(t)                                                       \
        do {                                                                       \
                if ((t)->skip) {                                                   \
                        fprintf(stderr, "# dbus-daemon not installed, skipped\n"); \
                        skip();                                                    \
                }                                                                  \
        } while (0)

static void on_guard(uv_timer_t *h) {
        container_of(h, struct env, guard)->timed_out = true;
}

/* Runs the loop until *count reaches want, at most WAIT_MS. */
static void run_until(struct env *t, const int *count, int want) {
        t->timed_out = false;
        uv_timer_start(&t->guard, on_guard, WAIT_MS, 0);
        while (*count < want && !t->timed_out)
                uv_run(&t->loop, UV_RUN_ONCE);
        uv_timer_stop(&t->guard);
        if (*count < want)
                fail_msg("timed out waiting (%d of %d)", *count, want);
}

/* Runs the loop for ms milliseconds. */
static void run_for(struct env *t, unsigned ms) {
        t->timed_out = false;
        uv_timer_start(&t->guard, on_guard, ms, 0);
        while (!t->timed_out)
                uv_run(&t->loop, UV_RUN_ONCE);
}

static void on_closed(void *userdata) {
        (*(int *)userdata)++;
}

/* Closes the bus and the guard; the loop must then close cleanly. */
static void finish(struct env *t) {
        if (t->b) {
                sysbus_close(t->b, on_closed, &t->closed);
                assert_int_equal(t->closed, 0);
                t->b = NULL;
        }
        uv_close((uv_handle_t *)&t->guard, NULL);
        assert_int_equal(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
        assert_int_equal(uv_loop_close(&t->loop), 0);
}

/* ---- what callbacks saw ---- */

struct seen {
        int calls;
        int error;
        char value[128];
        char message[256];
};

static void copy(char *dst, size_t size, const char *s) {
        snprintf(dst, size, "%s", s ? s : "(null)");
}

static void on_job(int error, const char *result, const char *message, void *userdata) {
        struct seen *s = userdata;

        s->calls++;
        s->error = error;
        copy(s->value, sizeof(s->value), result);
        copy(s->message, sizeof(s->message), message);
        if (error < 0)
                assert_null(result);
        else
                assert_non_null(result);
}

static void on_state(int error, const char *active_state, void *userdata) {
        struct seen *s = userdata;

        s->calls++;
        s->error = error;
        copy(s->value, sizeof(s->value), active_state);
}

static void on_delay(int error, uint64_t usec, void *userdata) {
        struct seen *s = userdata;

        s->calls++;
        s->error = error;
        snprintf(s->value, sizeof(s->value), "%llu", (unsigned long long)usec);
}

static const char *active_state(struct env *t, const char *unit) {
        static struct seen s;

        memset(&s, 0, sizeof(s));
        assert_int_equal(sysbus_unit_active_state(t->b, unit, on_state, &s), 0);
        assert_int_equal(s.calls, 0);
        run_until(t, &s.calls, 1);
        assert_int_equal(s.calls, 1);
        assert_int_equal(s.error, 0);
        return s.value;
}

static void job(struct env *t, bool start, const char *unit, struct seen *s) {
        memset(s, 0, sizeof(*s));
        assert_int_equal((start ? sysbus_unit_start : sysbus_unit_stop)(t->b, unit, on_job, s), 0);
        assert_int_equal(s->calls, 0); /* never from inside the call */
        run_until(t, &s->calls, 1);
        assert_int_equal(s->calls, 1);
}

/* ---- units ---- */

static void test_unit_stop_start(void **state) {
        struct env *t = *state;
        struct seen s, s2, s3;
        sd_bus_message *reply = NULL;
        uint32_t subscribers;

        SKIP_WITHOUT_DBUS(t);
        assert_int_equal(sysbus_open(&t->loop, &t->b), 0);

        assert_string_equal(active_state(t, "dra-driver.service"), "active");
        job(t, false, "dra-driver.service", &s);
        assert_int_equal(s.error, 0);
        assert_string_equal(s.value, "done");
        assert_string_equal(active_state(t, "dra-driver.service"), "inactive");

        /* JobRemoved is sent only to subscribers: we are one. */
        assert_int_equal(sd_bus_call_method(t->ctl, "org.freedesktop.login1", "/org/freedesktop/login1",
                                            "io.drainer.Test", "Subscribers", NULL, &reply, NULL),
                         1);
        assert_int_equal(sd_bus_message_read(reply, "u", &subscribers), 1);
        reply = sd_bus_message_unref(reply);
        assert_int_equal(subscribers, 1); /* once, however many calls */

        job(t, true, "dra-driver.service", &s);
        assert_int_equal(s.error, 0);
        assert_string_equal(s.value, "done");
        assert_string_equal(active_state(t, "dra-driver.service"), "active");

        /* A job that fails is a result, not an error. */
        job(t, true, "broken.service", &s);
        assert_int_equal(s.error, 0);
        assert_string_equal(s.value, "failed");
        assert_string_equal(active_state(t, "broken.service"), "failed");

        /* JobRemoved before the reply (ordering systemd does not produce, but
         * nothing forbids): still matched to the job. */
        job(t, false, "eager.service", &s);
        assert_int_equal(s.error, 0);
        assert_string_equal(s.value, "done");
        assert_string_equal(active_state(t, "eager.service"), "inactive");
        job(t, true, "eager.service", &s);
        assert_string_equal(s.value, "done");

        /* Several at once, each answered once. */
        memset(&s, 0, sizeof(s));
        memset(&s2, 0, sizeof(s2));
        memset(&s3, 0, sizeof(s3));
        assert_int_equal(sysbus_unit_stop(t->b, "dra-driver.service", on_job, &s), 0);
        assert_int_equal(sysbus_unit_start(t->b, "idle.service", on_job, &s2), 0);
        assert_int_equal(sysbus_unit_active_state(t->b, "broken.service", on_state, &s3), 0);
        run_until(t, &s.calls, 1);
        run_until(t, &s2.calls, 1);
        run_until(t, &s3.calls, 1);
        assert_string_equal(s.value, "done");
        assert_string_equal(s2.value, "done");
        assert_string_equal(s3.value, "failed");
        assert_string_equal(active_state(t, "dra-driver.service"), "inactive");
        assert_string_equal(active_state(t, "idle.service"), "active");
        assert_int_equal(s.calls + s2.calls + s3.calls, 3);

        finish(t);
        assert_int_equal(t->closed, 1);
}

static void test_unit_errors(void **state) {
        struct env *t = *state;
        struct seen s;

        SKIP_WITHOUT_DBUS(t);
        assert_int_equal(sysbus_open(&t->loop, &t->b), 0);

        /* org.freedesktop.systemd1.NoSuchUnit -> -ENOENT, with systemd's message. */
        job(t, false, "nope.service", &s);
        assert_int_equal(s.error, -ENOENT);
        assert_string_equal(s.value, "(null)");
        assert_string_equal(s.message, "Unit nope.service not loaded.");
        job(t, true, "nope.service", &s);
        assert_int_equal(s.error, -ENOENT);
        assert_string_equal(s.message, "Unit nope.service not found.");

        /* GetUnit says NoSuchUnit, LoadUnit yields the not-found unit: inactive. */
        assert_string_equal(active_state(t, "nope.service"), "inactive");

        /* Refused at the call: nothing started, no callback. */
        memset(&s, 0, sizeof(s));
        assert_int_equal(sysbus_unit_stop(t->b, NULL, on_job, &s), -EINVAL);
        assert_int_equal(sysbus_unit_stop(t->b, "", on_job, &s), -EINVAL);
        assert_int_equal(sysbus_unit_start(t->b, "x.service", NULL, &s), -EINVAL);
        assert_int_equal(sysbus_unit_active_state(t->b, "", on_state, &s), -EINVAL);
        assert_int_equal(sysbus_unit_stop(NULL, "x.service", on_job, &s), -EINVAL);
        {
                char longname[300];

                memset(longname, 'a', sizeof(longname) - 1);
                longname[sizeof(longname) - 1] = 0;
                assert_int_equal(sysbus_unit_stop(t->b, longname, on_job, &s), -EINVAL);
        }
        /* Not valid UTF-8: sd-bus refuses to marshal it. */
        assert_true(sysbus_unit_stop(t->b, "bad\xff.service", on_job, &s) < 0);
        assert_int_equal(sysbus_inhibit_shutdown(t->b, "drainer", "x", NULL, NULL), -EINVAL);
        {
                uint64_t usec = 7;

                assert_int_equal(sysbus_inhibit_delay_max(t->b, &usec), -ENODATA);
                assert_int_equal(usec, 7);
        }
        assert_false(sysbus_holds_inhibitor(t->b));
        sysbus_release_inhibitor(t->b); /* nothing held: harmless */
        uv_run(&t->loop, UV_RUN_NOWAIT);
        assert_int_equal(s.calls, 0);

        finish(t);
        assert_int_equal(t->closed, 1);
}

/* A method call nobody answers ends by sd-bus's timeout, which only the uv
 * timer armed from sd_bus_get_timeout() can fire. */
static void test_call_timeout(void **state) {
        struct env *t = *state;
        struct seen s = { 0 };
        uint64_t start;

        SKIP_WITHOUT_DBUS(t);
        setenv("SYSTEMD_BUS_TIMEOUT", "300ms", 1);
        assert_int_equal(sysbus_open(&t->loop, &t->b), 0);
        unsetenv("SYSTEMD_BUS_TIMEOUT");
        uv_update_time(&t->loop);
        start = uv_now(&t->loop);
        assert_int_equal(sysbus_unit_stop(t->b, "hang.service", on_job, &s), 0);
        run_until(t, &s.calls, 1);
        assert_int_equal(s.error, -ETIMEDOUT);
        assert_true(uv_now(&t->loop) - start >= 290);
        /* The bus is still fine. */
        assert_string_equal(active_state(t, "dra-driver.service"), "active");
        finish(t);
        assert_int_equal(t->closed, 1);
}

/* ---- logind ---- */

struct shutdown_seen {
        int calls, n_true, n_false;
        bool last;
        int results, result_error;
        bool held_at_true;
        struct sysbus *b;
};

static void on_shutdown(bool active, void *userdata) {
        struct shutdown_seen *s = userdata;

        s->calls++;
        s->last = active;
        if (active) {
                s->n_true++;
                s->held_at_true = sysbus_holds_inhibitor(s->b);
        } else
                s->n_false++;
}

static void on_inhibit_result(int error, const char *message, void *userdata) {
        struct shutdown_seen *s = userdata;

        s->results++;
        s->result_error = error;
}

struct inhibitors {
        uint32_t held, released;
        char what[64], who[128], mode[32];
};

static void ctl_inhibitors(struct env *t, struct inhibitors *ret) {
        sd_bus_message *reply = NULL;
        const char *what, *who, *mode;

        assert_int_equal(sd_bus_call_method(t->ctl, "org.freedesktop.login1", "/org/freedesktop/login1",
                                            "io.drainer.Test", "Inhibitors", NULL, &reply, NULL),
                         1);
        assert_int_equal(sd_bus_message_read(reply, "uusss", &ret->held, &ret->released, &what, &who, &mode),
                         1);
        copy(ret->what, sizeof(ret->what), what);
        copy(ret->who, sizeof(ret->who), who);
        copy(ret->mode, sizeof(ret->mode), mode);
        sd_bus_message_unref(reply);
}

/* The stand-in notices a closed fd on its own loop: ask until it has. */
static void wait_inhibitors(struct env *t, uint32_t held, uint32_t released) {
        struct inhibitors i;

        for (int n = 0; n < WAIT_MS / 10; n++) {
                ctl_inhibitors(t, &i);
                if (i.held == held && i.released == released)
                        return;
                usleep(10000);
        }
        fail_msg("stand-in sees %u held, %u released; want %u, %u", i.held, i.released, held, released);
}

static void emit_prepare(struct env *t, bool active) {
        assert_int_equal(sd_bus_call_method(t->ctl, "org.freedesktop.login1", "/org/freedesktop/login1",
                                            "io.drainer.Test", "EmitPrepareForShutdown", NULL, NULL, "b",
                                            (int)active),
                         1);
}

static void test_inhibitor(void **state) {
        struct env *t = *state;
        struct shutdown_seen s = { 0 };
        struct inhibitors i;
        struct seen d = { 0 };
        uint64_t usec = 0;

        SKIP_WITHOUT_DBUS(t);
        assert_int_equal(sysbus_open(&t->loop, &t->b), 0);
        s.b = t->b;

        assert_int_equal(sysbus_inhibit_shutdown_full(t->b, "drainer", "Draining node-1 before shutdown",
                                                      on_shutdown, on_inhibit_result, &s),
                         0);
        assert_int_equal(s.results, 0);
        assert_false(sysbus_holds_inhibitor(t->b));
        assert_int_equal(sysbus_inhibit_shutdown(t->b, "drainer", "again", on_shutdown, &s), -EBUSY);
        run_until(t, &s.results, 1);
        assert_int_equal(s.result_error, 0);
        assert_true(sysbus_holds_inhibitor(t->b));
        ctl_inhibitors(t, &i);
        assert_int_equal(i.held, 1);
        assert_int_equal(i.released, 0);
        assert_string_equal(i.what, "shutdown");
        assert_string_equal(i.mode, "delay");
        assert_string_equal(i.who, "drainer");

        /* InhibitDelayMaxUSec was read along with the lock. */
        while (sysbus_inhibit_delay_max(t->b, &usec) == -ENODATA)
                uv_run(&t->loop, UV_RUN_ONCE);
        assert_int_equal(usec, 5000000);
        assert_int_equal(sysbus_inhibit_delay_max_async(t->b, on_delay, &d), 0);
        assert_int_equal(d.calls, 0);
        run_until(t, &d.calls, 1);
        assert_int_equal(d.error, 0);
        assert_string_equal(d.value, "5000000");

        /* Shutdown starts: we learn it while still holding the lock, drain, release. */
        emit_prepare(t, true);
        run_until(t, &s.calls, 1);
        assert_int_equal(s.n_true, 1);
        assert_true(s.last);
        assert_true(s.held_at_true);
        sysbus_release_inhibitor(t->b);
        assert_false(sysbus_holds_inhibitor(t->b));
        wait_inhibitors(t, 0, 1);
        sysbus_release_inhibitor(t->b); /* twice: harmless */

        /* Cancelled: told so, and the lock is taken again. */
        emit_prepare(t, false);
        run_until(t, &s.calls, 2);
        assert_int_equal(s.n_false, 1);
        assert_false(s.last);
        run_until(t, &s.results, 2);
        assert_int_equal(s.result_error, 0);
        assert_true(sysbus_holds_inhibitor(t->b));
        wait_inhibitors(t, 1, 1);

        /* Cancelled again while we still hold it: no second lock. */
        emit_prepare(t, false);
        run_until(t, &s.calls, 3);
        assert_int_equal(s.results, 2);
        wait_inhibitors(t, 1, 1);

        /* Closing the bus lets go of the lock. */
        finish(t);
        assert_int_equal(t->closed, 1);
        wait_inhibitors(t, 0, 2);
        assert_int_equal(s.calls, 3);
}

static void test_close_cancels(void **state) {
        struct env *t = *state;
        struct shutdown_seen sh = { 0 };
        struct seen s = { 0 }, s2 = { 0 }, d = { 0 };

        SKIP_WITHOUT_DBUS(t);
        assert_int_equal(sysbus_open(&t->loop, &t->b), 0);
        assert_int_equal(sysbus_unit_stop(t->b, "dra-driver.service", on_job, &s), 0);
        assert_int_equal(sysbus_unit_active_state(t->b, "dra-driver.service", on_state, &s2), 0);
        assert_int_equal(sysbus_inhibit_delay_max_async(t->b, on_delay, &d), 0);
        assert_int_equal(
                sysbus_inhibit_shutdown_full(t->b, "drainer", "x", on_shutdown, on_inhibit_result, &sh), 0);
        sysbus_close(t->b, on_closed, &t->closed);
        sysbus_close(t->b, on_closed, &t->closed); /* twice: harmless */
        t->b = NULL;
        assert_int_equal(s.calls + s2.calls + d.calls + sh.results + t->closed, 0);
        finish(t);
        assert_int_equal(t->closed, 1);
        assert_int_equal(s.calls, 1);
        assert_int_equal(s.error, -ECANCELED);
        assert_int_equal(s2.calls, 1);
        assert_int_equal(s2.error, -ECANCELED);
        assert_int_equal(d.calls, 1);
        assert_int_equal(d.error, -ECANCELED);
        assert_int_equal(sh.results, 1);
        assert_int_equal(sh.result_error, -ECANCELED);
        assert_int_equal(sh.calls, 0);
        sysbus_close(NULL, on_closed, &t->closed); /* no-op */
        assert_int_equal(t->closed, 1);
}

/* Closing from inside a callback that sd_bus_process() runs. */
struct closer {
        struct env *t;
        int calls;
};

static void on_job_then_close(int error, const char *result, const char *message, void *userdata) {
        struct closer *c = userdata;

        c->calls++;
        sysbus_close(c->t->b, on_closed, &c->t->closed);
        c->t->b = NULL;
}

static void test_close_from_callback(void **state) {
        struct env *t = *state;
        struct closer c = { t, 0 };
        struct seen other = { 0 };

        SKIP_WITHOUT_DBUS(t);
        assert_int_equal(sysbus_open(&t->loop, &t->b), 0);
        assert_int_equal(sysbus_unit_stop(t->b, "idle.service", on_job_then_close, &c), 0);
        assert_int_equal(sysbus_unit_stop(t->b, "dra-driver.service", on_job, &other), 0);
        run_until(t, &t->closed, 1);
        assert_int_equal(c.calls, 1);
        assert_int_equal(other.calls, 1);
        /* Either it finished before the close or was cancelled by it. */
        assert_true(other.error == 0 || other.error == -ECANCELED);
        finish(t);
        assert_int_equal(t->closed, 1);
}

static void test_bus_lost(void **state) {
        struct env *t = *state;
        struct seen s = { 0 }, s2 = { 0 };
        struct shutdown_seen never = { 0 };

        SKIP_WITHOUT_DBUS(t);
        assert_int_equal(sysbus_open(&t->loop, &t->b), 0);
        assert_string_equal(active_state(t, "dra-driver.service"), "active");

        /* A reply that cannot come: the stand-in dies, the daemon answers for it. */
        assert_int_equal(sysbus_unit_stop(t->b, "slow.service", on_job, &s), 0);
        run_for(t, 100); /* the job is queued: waiting for its JobRemoved */
        assert_int_equal(s.calls, 0);
        assert_int_equal(sysbus_unit_active_state(t->b, "dra-driver.service", on_state, &s2), 0);
        stop_child(&t->fake, SIGKILL);
        run_until(t, &s2.calls, 1);
        /* NoReply, or ServiceUnknown when the daemon routes the call after the death. */
        assert_true(s2.error == -ETIMEDOUT || s2.error == -EHOSTUNREACH);
        assert_int_equal(s.calls, 0);

        /* Then the bus itself goes: the job's wait ends with the connection's error. */
        stop_child(&t->daemon, SIGKILL);
        run_until(t, &s.calls, 1);
        assert_true(s.error < 0);
        assert_true(s.error != -ECANCELED);
        assert_string_equal(s.message, "Connection to the system bus lost");
        /* Nothing more is started on a dead connection. */
        assert_int_equal(sysbus_unit_start(t->b, "dra-driver.service", on_job, &s), -ENOTCONN);
        assert_int_equal(sysbus_inhibit_shutdown(t->b, "drainer", "x", on_shutdown, &never), -ENOTCONN);
        run_for(t, 50);
        assert_int_equal(s.calls, 1);
        assert_int_equal(s2.calls, 1);
        finish(t);
        assert_int_equal(t->closed, 1);
}

static void test_no_bus(void **state) {
        struct env *t = *state;
        char addr[200];
        struct sysbus *b = NULL;

        SKIP_WITHOUT_DBUS(t);
        snprintf(addr, sizeof(addr), "unix:path=%s/nobody-listens", t->dir);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", addr, 1);
        assert_true(sysbus_open(&t->loop, &b) < 0);
        assert_null(b);
        assert_int_equal(sysbus_open(NULL, &b), -EINVAL);
        finish(t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_unit_stop_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unit_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_call_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_inhibitor, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_cancels, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_from_callback, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bus_lost, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_bus, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
