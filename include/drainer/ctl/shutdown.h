/* `serve --on-shutdown` as a controller: while logind's shutdown delay lock is held, a
 * shutdown asks (drainer.io/request=drain, recording this boot's id) for the drain of
 * this host's node and lets the shutdown go on once the node is drained, or a little
 * before logind's InhibitDelayMaxUSec runs out; the daemon of the next boot sees
 * another boot's id and asks for the node's restore. It acts through an ops table (the
 * real one: the system bus and the drain manager), prints nothing (its lines go to
 * on_note) and knows no exit code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/log.h"

struct timesrc;
struct node_rec;
struct shutdown_drain;

/* The annotation that records which boot asked for the drain. */
#define DRAINER_ANN_SHUTDOWN_BOOT "drainer.io/shutdown-boot-id"

/* What the controller acts through: the lock on bus, the Nodes through nodes. */
struct shutdown_ops {
        /* Takes the delay lock; shutdown(active) on each PrepareForShutdown, result on
         * each outcome of taking it (sysbus_inhibit_shutdown_full()). */
        int (*inhibit)(void *bus, void (*shutdown)(bool active, void *userdata),
                       void (*result)(int error, const char *message, void *userdata), void *userdata);
        int (*delay_max)(void *bus, uint64_t *ret_usec);
        bool (*holds)(void *bus);
        void (*release)(void *bus);
        /* The Node as watched, or NULL; a merge patch (body taken) to it, -EBUSY while the
         * previous one is in flight. */
        const struct node_rec *(*node)(void *nodes, const char *name);
        int (*patch)(void *nodes, const char *name, char *body);
};

/* bus is a struct sysbus, nodes a struct drain_manager. */
extern const struct shutdown_ops shutdown_sysbus_ops;

struct shutdown_handlers {
        /* A line for people (error: the errno it is about, or 0). */
        void (*on_note)(struct shutdown_drain *s, enum log_level level, int error, const char *line,
                        void *userdata);
};

/* This boot's id (/proc/sys/kernel/random/boot_id), "" when unreadable. */
void shutdown_read_boot_id(char *buf, size_t size);

/* node and boot_id are copied. 0 or -ENOMEM. */
int shutdown_drain_new(struct timesrc *ts, const char *node, const char *boot_id,
                       const struct shutdown_ops *ops, void *bus, void *nodes,
                       const struct shutdown_handlers *h, void *userdata, struct shutdown_drain **ret);
/* Takes the lock: 0, or ops->inhibit()'s negative errno. */
int shutdown_drain_start(struct shutdown_drain *s);
/* The Node n changed (any node: others are ignored): after a reboot, a drain another
 * boot asked for is undone; during a shutdown, a drained node lets it go on. */
void shutdown_drain_node_changed(struct shutdown_drain *s, const struct node_rec *n);
/* Stops the deadline; nothing more happens. */
void shutdown_drain_stop(struct shutdown_drain *s);
/* NULL ok; returns NULL. */
struct shutdown_drain *shutdown_drain_free(struct shutdown_drain *s);
