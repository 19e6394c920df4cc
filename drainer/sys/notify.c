/* sd_notify on the loop: READY=1, STATUS=, STOPPING=1, and WATCHDOG=1 pings from
 * a uv timer at half of $WATCHDOG_USEC, so a ping proves the loop still turns.
 * Owns one uv timer; sends nothing without $NOTIFY_SOCKET; never blocks. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>
#include <uv.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/sys/notify.h"

/* STATUS= is one line for `systemctl status`; longer text is cut. */
#define STATUS_MAX 512

struct notifier {
        uv_loop_t *loop; /* borrowed */
        uv_timer_t watchdog;
        bool enabled; /* $NOTIFY_SOCKET is set */
        uint64_t watchdog_usec;
        bool watchdog_running;
        bool closing;
        void (*close_cb)(void *userdata);
        void *close_userdata;
};

static void send_state(struct notifier *n, const char *state) {
        int r;

        if (!n || !n->enabled || n->closing)
                return;
        r = sd_notify(0, state);
        if (r < 0)
                log_debug_errno(r, "sd_notify(\"%.*s\") failed: %m, ignoring", (int)strcspn(state, "="),
                                state);
}

int notifier_new(uv_loop_t *loop, struct notifier **ret) {
        _cleanup_free_ struct notifier *n = NULL;
        const char *e;
        int r;

        if (!loop || !ret)
                return -EINVAL;
        n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->loop = loop;
        e = getenv("NOTIFY_SOCKET");
        n->enabled = e && *e;
        r = uv_timer_init(loop, &n->watchdog);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(n);
        return 0;
}

static void on_watchdog_timer(uv_timer_t *t) {
        struct notifier *n = container_of(t, struct notifier, watchdog);

        send_state(n, "WATCHDOG=1");
}

/* Starts the watchdog pings if systemd asked for them ($WATCHDOG_USEC, and
 * $WATCHDOG_PID naming this process if set). The timer is unreferenced: the
 * pings must not keep an otherwise finished loop alive. Calling it again is
 * harmless. */
int notifier_start(struct notifier *n) {
        uint64_t usec = 0, period_ms;
        int r;

        if (!n || n->closing)
                return -EINVAL;
        if (!n->enabled || n->watchdog_running)
                return 0;
        r = sd_watchdog_enabled(0, &usec);
        if (r < 0)
                return log_debug_errno(r,
                                       "Invalid $WATCHDOG_USEC/$WATCHDOG_PID: %m, watchdog pings disabled");
        if (r == 0 || usec == 0)
                return 0;

        /* Half the timeout, as sd_watchdog_enabled(3) recommends; never below 1 ms. */
        period_ms = MAX(usec / 2 / 1000, (uint64_t)1);
        r = uv_timer_start(&n->watchdog, on_watchdog_timer, period_ms, period_ms);
        if (r < 0)
                return r;
        uv_unref((uv_handle_t *)&n->watchdog);
        n->watchdog_usec = usec;
        n->watchdog_running = true;
        log_debug("Watchdog enabled: timeout %" PRIu64 " ms, pinging every %" PRIu64 " ms", usec / 1000,
                  period_ms);
        return 0;
}

void notifier_ready(struct notifier *n) {
        send_state(n, "READY=1");
}

void notifier_status(struct notifier *n, const char *fmt, ...) {
        char buf[sizeof("STATUS=") + STATUS_MAX];
        va_list ap;

        if (!n || !n->enabled || n->closing)
                return;
        strcpy(buf, "STATUS=");
        va_start(ap, fmt);
        vsnprintf(buf + strlen("STATUS="), STATUS_MAX + 1, fmt, ap);
        va_end(ap);
        /* The notify protocol is newline-separated: keep it one assignment. */
        for (char *p = buf; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        send_state(n, buf);
}

void notifier_stopping(struct notifier *n) {
        send_state(n, "STOPPING=1");
}

bool notifier_watchdog_enabled(const struct notifier *n) {
        return n && n->watchdog_running;
}

static void on_watchdog_closed(uv_handle_t *h) {
        struct notifier *n = container_of((uv_timer_t *)h, struct notifier, watchdog);
        void (*cb)(void *userdata) = n->close_cb;
        void *userdata = n->close_userdata;

        free(n);
        if (cb)
                cb(userdata);
}

/* Stops the pings and frees n once the timer handle is closed; close_cb (may be
 * NULL) runs then, from the loop. NULL n is a no-op (close_cb is not called). */
void notifier_close(struct notifier *n, void (*close_cb)(void *userdata), void *userdata) {
        if (!n || n->closing)
                return;
        n->closing = true;
        n->close_cb = close_cb;
        n->close_userdata = userdata;
        uv_close((uv_handle_t *)&n->watchdog, on_watchdog_closed);
}
