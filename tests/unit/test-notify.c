/* Tests of sd_notify on the loop and of journald logging. The notifier talks to
 * a real $NOTIFY_SOCKET (an AF_UNIX datagram socket bound in a temp dir, read by
 * the same loop): READY=1, STATUS=, WATCHDOG=1 at half of $WATCHDOG_USEC while
 * the loop runs, STOPPING=1; nothing without the socket or for another
 * $WATCHDOG_PID. Journald: the $JOURNAL_STREAM check against stderr, and the
 * structured fields each line carries (through the logger's test sink), with
 * stderr as the fallback. Every loop ends with uv_loop_close() == 0. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/sys/notify.h"

#define MSGS_MAX 64

struct sink {
        char dir[64];
        char path[128];
        int fd;
        uv_poll_t poll;
        char *msgs[MSGS_MAX];
        uint64_t at[MSGS_MAX]; /* loop time of arrival, ms */
        unsigned n;
        uv_loop_t *loop;
};

static void sink_open(struct sink *s) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        memset(s, 0, sizeof(*s));
        strcpy(s->dir, "/tmp/drainer-notify-XXXXXX");
        assert_non_null(mkdtemp(s->dir));
        snprintf(s->path, sizeof(s->path), "%s/notify", s->dir);
        s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(s->fd >= 0);
        strcpy(sa.sun_path, s->path);
        assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

static void sink_read_all(struct sink *s) {
        char buf[4096];
        ssize_t l;

        while ((l = recv(s->fd, buf, sizeof(buf) - 1, 0)) >= 0) {
                buf[l] = 0;
                assert_true(s->n < MSGS_MAX);
                s->at[s->n] = s->loop ? uv_now(s->loop) : 0;
                s->msgs[s->n++] = strdup(buf);
        }
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

static void sink_close(struct sink *s) {
        for (unsigned i = 0; i < s->n; i++)
                free(s->msgs[i]);
        close(s->fd);
        unlink(s->path);
        rmdir(s->dir);
}

static unsigned sink_count(const struct sink *s, const char *msg) {
        unsigned c = 0;

        for (unsigned i = 0; i < s->n; i++)
                c += streq(s->msgs[i], msg);
        return c;
}

static void on_sink_readable(uv_poll_t *h, int status, int events) {
        struct sink *s = container_of(h, struct sink, poll);

        sink_read_all(s);
}

static void set_env(const char *notify, const char *usec, const char *pid) {
        if (notify)
                setenv("NOTIFY_SOCKET", notify, 1);
        else
                unsetenv("NOTIFY_SOCKET");
        if (usec)
                setenv("WATCHDOG_USEC", usec, 1);
        else
                unsetenv("WATCHDOG_USEC");
        if (pid)
                setenv("WATCHDOG_PID", pid, 1);
        else
                unsetenv("WATCHDOG_PID");
}

static void on_closed_flag(void *userdata) {
        (*(int *)userdata)++;
}

/* ---- the notify protocol on a real socket ---- */

struct run {
        struct notifier *n;
        uv_timer_t stop;
        uint64_t started;
        int closed;
};

static void on_stop_timer(uv_timer_t *t) {
        struct run *run = container_of(t, struct run, stop);

        notifier_stopping(run->n);
        notifier_close(run->n, on_closed_flag, &run->closed);
        /* Closed: no more calls reach it; a second close is a no-op. */
        uv_close((uv_handle_t *)t, NULL);
}

static void test_notify_socket(void **state) {
        uv_loop_t loop;
        struct sink s;
        struct run run = { 0 };
        char pid[32];
        unsigned pings = 0;
        uint64_t first_ping = 0;
        struct notifier *n;

        sink_open(&s);
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        set_env(s.path, "200000", pid);

        assert_int_equal(uv_loop_init(&loop), 0);
        s.loop = &loop;
        assert_int_equal(uv_poll_init(&loop, &s.poll, s.fd), 0);
        assert_int_equal(uv_poll_start(&s.poll, UV_READABLE, on_sink_readable), 0);

        assert_int_equal(notifier_new(&loop, &n), 0);
        run.n = n;
        assert_false(notifier_watchdog_enabled(n));
        /* uv timers count from the loop's cached time: fix it where the pings start. */
        uv_update_time(&loop);
        run.started = uv_now(&loop);
        assert_int_equal(notifier_start(n), 0);
        assert_true(notifier_watchdog_enabled(n));
        assert_int_equal(notifier_start(n), 0); /* again: harmless */

        notifier_ready(n);
        notifier_status(n, "Draining \"%s\": %d pods left\nsecond line", "node-1", 3);
        assert_int_equal(uv_timer_init(&loop, &run.stop), 0);
        assert_int_equal(uv_timer_start(&run.stop, on_stop_timer, 550, 0), 0);

        /* Runs until the stop timer closes the notifier; the sink's poll is still open. */
        while (run.closed == 0)
                uv_run(&loop, UV_RUN_ONCE);
        assert_int_equal(run.closed, 1);
        sink_read_all(&s);
        uv_close((uv_handle_t *)&s.poll, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&loop), 0);

        assert_true(s.n >= 5);
        assert_string_equal(s.msgs[0], "READY=1");
        /* One line: the newline became a space. */
        assert_string_equal(s.msgs[1], "STATUS=Draining \"node-1\": 3 pods left second line");
        for (unsigned i = 2; i < s.n - 1; i++) {
                assert_string_equal(s.msgs[i], "WATCHDOG=1");
                if (pings++ == 0)
                        first_ping = s.at[i];
        }
        assert_string_equal(s.msgs[s.n - 1], "STOPPING=1");
        /* Every 100 ms (half of 200 ms) for 550 ms: ~5; at least 2 even on a slow machine. */
        assert_true(pings >= 2);
        assert_true(pings <= 6);
        /* The first one after half the timeout, not at once. */
        assert_true(first_ping >= run.started + 90);
        sink_close(&s);
}

static void test_notify_without_socket(void **state) {
        uv_loop_t loop;
        struct notifier *n;
        int closed = 0;
        char pid[32];

        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        set_env(NULL, "200000", pid);
        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(notifier_new(&loop, &n), 0);
        assert_int_equal(notifier_start(n), 0);
        assert_false(notifier_watchdog_enabled(n));
        notifier_ready(n);
        notifier_status(n, "nothing %d", 1);
        notifier_stopping(n);
        notifier_close(n, on_closed_flag, &closed);
        assert_int_equal(closed, 0); /* only from the loop */
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(closed, 1);
        assert_int_equal(uv_loop_close(&loop), 0);

        notifier_close(NULL, on_closed_flag, &closed); /* no-op */
        assert_int_equal(closed, 1);
        assert_int_equal(notifier_new(NULL, &n), -EINVAL);
}

static void test_watchdog_for_another_pid(void **state) {
        uv_loop_t loop;
        struct sink s;
        struct notifier *n;
        int closed = 0;

        sink_open(&s);
        /* Inherited from a parent: the pings are not ours to send. */
        set_env(s.path, "200000", "1");
        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(notifier_new(&loop, &n), 0);
        assert_int_equal(notifier_start(n), 0);
        assert_false(notifier_watchdog_enabled(n));
        notifier_ready(n);
        notifier_close(n, on_closed_flag, &closed);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(closed, 1);
        assert_int_equal(uv_loop_close(&loop), 0);
        sink_read_all(&s);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.msgs[0], "READY=1");

        /* No $WATCHDOG_USEC at all. */
        set_env(s.path, NULL, NULL);
        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(notifier_new(&loop, &n), 0);
        assert_int_equal(notifier_start(n), 0);
        assert_false(notifier_watchdog_enabled(n));
        notifier_close(n, NULL, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&loop), 0);
        sink_close(&s);
}

static void test_watchdog_does_not_hold_the_loop(void **state) {
        uv_loop_t loop;
        struct sink s;
        struct notifier *n;
        char pid[32];
        int closed = 0;

        sink_open(&s);
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        set_env(s.path, "200000", pid);
        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(notifier_new(&loop, &n), 0);
        assert_int_equal(notifier_start(n), 0);
        assert_true(notifier_watchdog_enabled(n));
        /* Nothing else is alive: the loop ends at once rather than ping forever. */
        assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
        sink_read_all(&s);
        assert_int_equal(sink_count(&s, "WATCHDOG=1"), 0);
        notifier_close(n, on_closed_flag, &closed);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(closed, 1);
        assert_int_equal(uv_loop_close(&loop), 0);
        sink_close(&s);
        set_env(NULL, NULL, NULL);
}

/* ---- journald ---- */

#define ENTRIES_MAX 8

static struct {
        char *fields[ENTRIES_MAX][24];
        unsigned n_fields[ENTRIES_MAX];
        unsigned n;
        int fail; /* the sink's return value */
} journal;

static int capture(const struct iovec *iov, int n) {
        unsigned e;

        if (journal.fail < 0)
                return journal.fail;
        assert_true(journal.n < ENTRIES_MAX);
        assert_true(n <= 24);
        e = journal.n++;
        for (int i = 0; i < n; i++)
                journal.fields[e][i] = strndup(iov[i].iov_base, iov[i].iov_len);
        journal.n_fields[e] = (unsigned)n;
        return 0;
}

static void journal_reset(void) {
        for (unsigned e = 0; e < journal.n; e++)
                for (unsigned i = 0; i < journal.n_fields[e]; i++)
                        free(journal.fields[e][i]);
        memset(&journal, 0, sizeof(journal));
}

/* The value of field name in entry e, NULL if absent. */
static const char *field(unsigned e, const char *name) {
        size_t l = strlen(name);

        for (unsigned i = 0; i < journal.n_fields[e]; i++)
                if (strncmp(journal.fields[e][i], name, l) == 0 && journal.fields[e][i][l] == '=')
                        return journal.fields[e][i] + l + 1;
        return NULL;
}

static void test_journal_stream_check(void **state) {
        struct stat st;
        char v[64];

        assert_int_equal(fstat(STDERR_FILENO, &st), 0);
        unsetenv("JOURNAL_STREAM");
        assert_false(log_set_journal_auto());
        assert_false(log_get_journal());

        snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
        setenv("JOURNAL_STREAM", v, 1);
        assert_true(log_set_journal_auto());
        assert_true(log_get_journal());

        /* stderr redirected since systemd set it up: not the journal. */
        snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino + 1);
        setenv("JOURNAL_STREAM", v, 1);
        assert_false(log_set_journal_auto());
        assert_false(log_get_journal());

        static const char *const bad[] = {
                "", ":", "1", "1:", ":1", "a:b", "1:2:3", "-1:2", " 1:2", "1:2 ", "99999999999999999999999:1"
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                setenv("JOURNAL_STREAM", bad[i], 1);
                assert_false(log_set_journal_auto());
        }
        unsetenv("JOURNAL_STREAM");
        log_set_journal(true);
        assert_true(log_get_journal());
        log_set_journal(false);
        assert_false(log_get_journal());
}

static void test_journal_fields(void **state) {
        enum log_level saved = log_get_max_level();
        char big[LOG_FIELD_VALUE_MAX + 2], name[16];
        int line;

        journal_reset();
        log_set_journal_sink(capture);
        log_set_journal(true);
        log_set_max_level(LOG_LEVEL_DEBUG);

        assert_int_equal(log_set_field("NODE", "node-1"), 0);
        assert_int_equal(log_set_field("PHASE", "evict-claim-holders"), 0);
        assert_int_equal(log_set_field("POD", "demo/web-0"), 0);
        assert_int_equal(log_set_field("CLAIM", "demo/gpu-claim"), 0);

        line = __LINE__ + 1;
        assert_int_equal(log_info("Evicting \"%s\"", "demo/web-0"), 0);
        assert_int_equal(journal.n, 1);
        assert_string_equal(field(0, "MESSAGE"), "Evicting \"demo/web-0\"");
        assert_string_equal(field(0, "PRIORITY"), "6");
        assert_non_null(strstr(field(0, "CODE_FILE"), "test-notify.c"));
        assert_int_equal(atoi(field(0, "CODE_LINE")), line);
        assert_string_equal(field(0, "SYSLOG_IDENTIFIER"), "drainer");
        assert_string_equal(field(0, "NODE"), "node-1");
        assert_string_equal(field(0, "PHASE"), "evict-claim-holders");
        assert_string_equal(field(0, "POD"), "demo/web-0");
        assert_string_equal(field(0, "CLAIM"), "demo/gpu-claim");
        assert_null(field(0, "ERRNO"));

        /* Replace one, remove two. */
        assert_int_equal(log_set_field("PHASE", "wait-released"), 0);
        assert_int_equal(log_set_field("POD", NULL), 0);
        assert_int_equal(log_set_field("CLAIM", ""), 0);
        assert_int_equal(log_set_field("CLAIM", NULL), 0); /* absent: fine */
        assert_int_equal(log_error_errno(-ENOENT, "Claim gone: %m"), -ENOENT);
        assert_int_equal(log_warning("Slow"), 0);
        assert_int_equal(log_debug("Detail"), 0);
        assert_int_equal(journal.n, 4);
        assert_string_equal(field(1, "MESSAGE"), "Claim gone: No such file or directory");
        assert_string_equal(field(1, "PRIORITY"), "3");
        assert_string_equal(field(1, "ERRNO"), "2");
        assert_string_equal(field(1, "PHASE"), "wait-released");
        assert_null(field(1, "POD"));
        assert_null(field(1, "CLAIM"));
        assert_string_equal(field(2, "PRIORITY"), "4");
        assert_string_equal(field(3, "PRIORITY"), "7");
        assert_string_equal(field(3, "MESSAGE"), "Detail"); /* no "(file:line)" suffix: fields carry it */

        /* Levels above the maximum never reach the journal. */
        log_set_max_level(LOG_LEVEL_INFO);
        log_debug("hidden");
        assert_int_equal(journal.n, 4);

        /* Names journald accepts, and not the ones the logger owns. */
        assert_int_equal(log_set_field("node", "x"), -EINVAL);
        assert_int_equal(log_set_field("_PID", "1"), -EINVAL);
        assert_int_equal(log_set_field("1X", "1"), -EINVAL);
        assert_int_equal(log_set_field("", "1"), -EINVAL);
        assert_int_equal(log_set_field(NULL, "1"), -EINVAL);
        assert_int_equal(log_set_field("MESSAGE", "x"), -EINVAL);
        assert_int_equal(log_set_field("PRIORITY", "0"), -EINVAL);
        assert_int_equal(log_set_field("SYSLOG_IDENTIFIER", "x"), -EINVAL);
        assert_int_equal(log_set_field("A-B", "x"), -EINVAL);
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        assert_int_equal(log_set_field("NODE", big), -E2BIG);
        assert_int_equal(log_set_field("NODE", big + 1), 0); /* exactly the cap */
        /* NODE and PHASE are set: six more fit, the seventh does not. */
        for (int i = 0; i < LOG_FIELDS_MAX - 2; i++) {
                snprintf(name, sizeof(name), "EXTRA_%d", i);
                assert_int_equal(log_set_field(name, "v"), 0);
        }
        assert_int_equal(log_set_field("ONE_TOO_MANY", "v"), -E2BIG);
        assert_int_equal(log_set_field("NODE", "node-2"), 0); /* replacing still works when full */
        log_info("Full");
        assert_int_equal(journal.n, 5);
        assert_string_equal(field(4, "NODE"), "node-2");
        assert_string_equal(field(4, "EXTRA_5"), "v");
        log_clear_fields();
        log_info("Bare");
        assert_int_equal(journal.n, 6);
        assert_null(field(5, "NODE"));
        assert_null(field(5, "EXTRA_0"));

        log_set_max_level(saved);
        log_set_journal(false);
        log_set_journal_sink(NULL);
        journal_reset();
}

/* Runs f with stderr sent to a temp file; returns what it wrote (free it). */
static char *capture_stderr(void (*f)(void)) {
        char path[] = "/tmp/drainer-stderr-XXXXXX", *out;
        int fd = mkstemp(path), saved = dup(STDERR_FILENO);
        off_t size;

        assert_true(fd >= 0 && saved >= 0);
        fflush(stderr);
        assert_true(dup2(fd, STDERR_FILENO) >= 0);
        f();
        fflush(stderr);
        assert_true(dup2(saved, STDERR_FILENO) >= 0);
        close(saved);
        size = lseek(fd, 0, SEEK_END);
        out = calloc(1, (size_t)size + 1);
        assert_non_null(out);
        assert_int_equal(pread(fd, out, (size_t)size, 0), size);
        close(fd);
        unlink(path);
        return out;
}

static void log_one(void) {
        log_warning("Journal unreachable, line kept");
}

static void test_journal_fallback(void **state) {
        char *out;

        journal_reset();
        log_set_journal_sink(capture);
        log_set_journal(true);
        journal.fail = -ECONNREFUSED;
        out = capture_stderr(log_one);
        assert_string_equal(out, "warning: Journal unreachable, line kept\n");
        free(out);

        /* Journal off: stderr, the sink is not asked. */
        journal.fail = 0;
        log_set_journal(false);
        out = capture_stderr(log_one);
        assert_string_equal(out, "warning: Journal unreachable, line kept\n");
        assert_int_equal(journal.n, 0);
        free(out);
        log_set_journal_sink(NULL);

        /* (The real sd_journal_sendv() reports success when no journald listens, see
         * log.h: nothing to check here without one.) */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_notify_socket),
                cmocka_unit_test(test_notify_without_socket),
                cmocka_unit_test(test_watchdog_for_another_pid),
                cmocka_unit_test(test_watchdog_does_not_hold_the_loop),
                cmocka_unit_test(test_journal_stream_check),
                cmocka_unit_test(test_journal_fields),
                cmocka_unit_test(test_journal_fallback),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
