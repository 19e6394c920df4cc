/* systemd and logind over D-Bus (sd-bus) on the libuv loop: the bus's fd is
 * polled by the loop, no helper thread. Unit control for the systemd:UNIT
 * driver-stop strategy, and logind's shutdown delay inhibitor for --on-shutdown. */
#pragma once

#include <stdbool.h>

#include "drainer/macro.h"

struct uv_loop_s;
struct sysbus;

/* Connects to the system bus (sd_bus_open_system: honours $DBUS_SYSTEM_BUS_ADDRESS,
 * which the tests point at a private dbus-daemon) and attaches it to the loop. */
int sysbus_open(struct uv_loop_s *loop, struct sysbus **ret);
/* Detaches and closes; close_cb runs once the uv handles are closed. */
void sysbus_close(struct sysbus *b, void (*close_cb)(void *userdata), void *userdata);

/* ---- units (org.freedesktop.systemd1) ---- */

/* result: the JobRemoved result ("done", "failed", "canceled", "timeout", "dependency",
 * "skipped"), or NULL when error < 0 (D-Bus error, message in *message if any). Runs
 * exactly once, never from inside the call that started it. */
typedef void (*unit_job_fn)(int error, const char *result, const char *message, void *userdata);

/* StopUnit/StartUnit(unit, "replace"), then waits for the job's JobRemoved signal. */
int sysbus_unit_stop(struct sysbus *b, const char *unit, unit_job_fn done, void *userdata);
int sysbus_unit_start(struct sysbus *b, const char *unit, unit_job_fn done, void *userdata);

/* ActiveState of the unit ("active", "inactive", "failed", "activating", ...). */
typedef void (*unit_state_fn)(int error, const char *active_state, void *userdata);
int sysbus_unit_active_state(struct sysbus *b, const char *unit, unit_state_fn done, void *userdata);

/* ---- logind (org.freedesktop.login1) ---- */

/* Called with true when a shutdown/reboot starts (the delay lock gives us until
 * InhibitDelayMaxUSec), false when it was cancelled (the lock is taken again). */
typedef void (*shutdown_fn)(bool active, void *userdata);

/* Takes a "shutdown" delay inhibitor lock (Inhibit("shutdown", who, why, "delay")) and
 * subscribes to PrepareForShutdown. */
int sysbus_inhibit_shutdown(struct sysbus *b, const char *who, const char *why, shutdown_fn cb,
                            void *userdata);
/* Releases the lock (closes the fd), letting the shutdown proceed. */
void sysbus_release_inhibitor(struct sysbus *b);
bool sysbus_holds_inhibitor(const struct sysbus *b);
/* logind's InhibitDelayMaxUSec, for planning a drain within the allowed delay. */
int sysbus_inhibit_delay_max(struct sysbus *b, uint64_t *ret_usec);
