/* systemd and logind over D-Bus (sd-bus) on the libuv loop: the bus's fd is
 * polled by the loop, no helper thread. Unit control for the systemd:UNIT
 * driver-stop strategy, and logind's shutdown delay inhibitor for --on-shutdown. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "drainer/base/macro.h"
#include "drainer/dra/units.h"

struct uv_loop_s;
struct sysbus;

/* Connects to the system bus (sd_bus_open_system: honours $DBUS_SYSTEM_BUS_ADDRESS,
 * which the tests point at a private dbus-daemon) and attaches it to the loop.
 *
 * Every call below is asynchronous. A call that returns < 0 started nothing and
 * its callback never runs; one that returns 0 runs its callback exactly once,
 * from the loop, never from inside the call. D-Bus errors arrive as negative
 * errno (sd_bus_error_get_errno(): org.freedesktop.systemd1.NoSuchUnit is
 * -ENOENT, AccessDenied -EACCES, no reply -ETIMEDOUT, unknown names -EIO) with
 * the error's message where the callback has room for it. A lost connection
 * fails what is in flight with its errno; later calls return -ENOTCONN. At most
 * SYSBUS_OPS_MAX calls are in flight (-ENOBUFS beyond). */
#define SYSBUS_OPS_MAX 256
int sysbus_open(struct uv_loop_s *loop, struct sysbus **ret);
/* Detaches and closes; close_cb runs once the uv handles are closed. Calls still
 * in flight get -ECANCELED first, an inhibitor lock is released. NULL b is a
 * no-op. */
void sysbus_close(struct sysbus *b, void (*close_cb)(void *userdata), void *userdata);

/* ---- units (org.freedesktop.systemd1) ---- */

/* unit_job_fn (units.h): result is the JobRemoved result, or NULL when error < 0
 * (a D-Bus error, its message in message if any). */

/* StopUnit/StartUnit(unit, "replace"), then waits for the job's JobRemoved signal
 * (Subscribe()d, and matched before the method call so none is missed). A job
 * merged into one already queued completes with it. No timeout of its own:
 * systemd's job timeouts apply; sysbus_close() cancels. */
int sysbus_unit_stop(struct sysbus *b, const char *unit, unit_job_fn done, void *userdata);
int sysbus_unit_start(struct sysbus *b, const char *unit, unit_job_fn done, void *userdata);

/* ActiveState of the unit ("active", "inactive", "failed", "activating", ...):
 * GetUnit, or LoadUnit when the unit is not loaded (a unit with no unit file then
 * reads "inactive"), then the org.freedesktop.systemd1.Unit property. */
int sysbus_unit_active_state(struct sysbus *b, const char *unit, unit_state_fn done, void *userdata);

/* The three calls above as the engine's unit control (units.h); b may be NULL
 * (no bus: ops NULL). */
struct units sysbus_units(struct sysbus *b);

/* ---- logind (org.freedesktop.login1) ---- */

/* Called with true when a shutdown/reboot starts (the delay lock gives us until
 * InhibitDelayMaxUSec), false when it was cancelled (the lock is taken again). */
typedef void (*shutdown_fn)(bool active, void *userdata);

/* Takes a "shutdown" delay inhibitor lock (Inhibit("shutdown", who, why, "delay")) and
 * subscribes to PrepareForShutdown. cb runs once per PrepareForShutdown signal: true
 * while the lock is held (or not, if taking it failed) means drain now, then
 * sysbus_release_inhibitor(); false means the shutdown was cancelled and the lock
 * is being taken again. Also reads InhibitDelayMaxUSec for
 * sysbus_inhibit_delay_max(). Once per bus: -EBUSY the second time. */
int sysbus_inhibit_shutdown(struct sysbus *b, const char *who, const char *why, shutdown_fn cb,
                            void *userdata);
/* The outcome of each Inhibit call (the first one, and each re-take after a
 * cancelled shutdown): 0 when the lock is held, else negative errno and the D-Bus
 * error message (may be NULL); -ECANCELED when the bus closed first. */
typedef void (*inhibit_result_fn)(int error, const char *message, void *userdata);
/* sysbus_inhibit_shutdown() that also reports each Inhibit outcome (result may be NULL). */
int sysbus_inhibit_shutdown_full(struct sysbus *b, const char *who, const char *why, shutdown_fn cb,
                                 inhibit_result_fn result, void *userdata);
/* Releases the lock (closes the fd), letting the shutdown proceed. Harmless
 * without a lock; a lock still being taken is dropped when it arrives. */
void sysbus_release_inhibitor(struct sysbus *b);
bool sysbus_holds_inhibitor(const struct sysbus *b);
/* logind's InhibitDelayMaxUSec, for planning a drain within the allowed delay:
 * the value read when the inhibitor was taken or by the last
 * sysbus_inhibit_delay_max_async(). -ENODATA until one arrived. Never blocks. */
int sysbus_inhibit_delay_max(struct sysbus *b, uint64_t *ret_usec);
/* Reads InhibitDelayMaxUSec ("t" property of org.freedesktop.login1.Manager). */
typedef void (*inhibit_delay_fn)(int error, uint64_t usec, void *userdata);
int sysbus_inhibit_delay_max_async(struct sysbus *b, inhibit_delay_fn done, void *userdata);
