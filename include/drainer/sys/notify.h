/* sd_notify on the loop: READY=1, STATUS=, STOPPING=1, and WATCHDOG=1 pings at
 * half the unit's WatchdogSec while the loop is alive. A no-op outside systemd
 * (no $NOTIFY_SOCKET). Journald: structured logging when stderr is the journal. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct uv_loop_s;
struct notifier;

int notifier_new(struct uv_loop_s *loop, struct notifier **ret);
/* Starts the watchdog pings if $WATCHDOG_USEC is set for this pid. */
int notifier_start(struct notifier *n);
void notifier_ready(struct notifier *n);
/* STATUS= line (one line, shown by systemctl status). */
void notifier_status(struct notifier *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void notifier_stopping(struct notifier *n);
/* Closes the watchdog timer; close_cb after the uv handle is closed. */
void notifier_close(struct notifier *n, void (*close_cb)(void *userdata), void *userdata);
bool notifier_watchdog_enabled(const struct notifier *n);
