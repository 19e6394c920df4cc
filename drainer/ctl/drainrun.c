/* The run of drain, uncordon and maintain (drainrun.h): the runs, their KEYs, the bus,
 * maintain's seamless check, the fleet; one step after the other, from the loop. Owns
 * everything it starts and closes it all; prints nothing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/ctl/drainrun.h"
#include "drainer/ctl/preparation.h"
#include "drainer/sys/sysbus.h"

struct drain_run {
        struct kube_client *client; /* borrowed */
        struct transport *transport;
        struct timesrc *ts;
        struct uv_loop_s *loop;
        struct drain_run_options o;
        const struct drain_run_callbacks *cb;
        void *userdata;

        size_t n_runs, per_node;
        struct drain_profile *profiles; /* each run's: the command's, or scoped to one driver */
        struct fleet_run *runs;
        char **keys; /* each run's KEY read from its DaemonSet (owned) */
        bool key_refused;

        struct drain_preparation *prep;
        struct sysbus *bus;
        struct drain_fleet *fleet;
        bool fleet_running;

        unsigned pending; /* closes, the fleet, a command still to come */
        bool closing;
        void (*closed)(void *userdata);
        void *closed_userdata;
};

static void maybe_closed(struct drain_run *r) {
        void (*closed)(void *userdata) = r->closed;

        if (!r->closing || r->pending > 0 || !closed)
                return;
        r->closed = NULL; /* once */
        closed(r->closed_userdata);
}

void drain_run_free(struct drain_run *r) {
        if (!r)
                return;
        drain_fleet_free(r->fleet);
        for (size_t i = 0; i < r->n_runs; i++)
                free(r->keys[i]);
        free(r->keys);
        free(r->runs);
        free(r->profiles);
        free(r);
}

/* Something of ours ended: false if closing (nothing more is reported then). */
static bool op_ended(struct drain_run *r) {
        r->pending--;
        if (!r->closing)
                return true;
        maybe_closed(r);
        return false;
}

static void fail(struct drain_run *r, enum drain_run_step step, int error, const char *message) {
        r->cb->on_failed(r, step, error, message, r->userdata);
}

static void fleet_start(struct drain_run *r);

/* ---- the fleet's callbacks, handed on (nothing once closing) ---- */

static void on_node_start(struct drain_fleet *f, const struct fleet_node *n, void *userdata) {
        struct drain_run *r = userdata;

        if (!r->closing && r->cb->fleet.on_node_start)
                r->cb->fleet.on_node_start(f, n, r->userdata);
}

static void on_progress(struct drain_fleet *f, const struct fleet_node *n, const struct engine_progress *p,
                        void *userdata) {
        struct drain_run *r = userdata;

        if (!r->closing && r->cb->fleet.on_progress)
                r->cb->fleet.on_progress(f, n, p, r->userdata);
}

static void on_trail(struct drain_fleet *f, const struct fleet_node *n, const struct engine_trail *t,
                     void *userdata) {
        struct drain_run *r = userdata;

        if (!r->closing && r->cb->fleet.on_trail)
                r->cb->fleet.on_trail(f, n, t, r->userdata);
}

static void on_node_done(struct drain_fleet *f, const struct fleet_node *n, void *userdata) {
        struct drain_run *r = userdata;

        if (!r->closing && r->cb->fleet.on_node_done)
                r->cb->fleet.on_node_done(f, n, r->userdata);
}

static void on_command(struct drain_fleet *f, char *const *argv, void *userdata) {
        struct drain_run *r = userdata;

        if (!r->closing && r->cb->fleet.on_command)
                r->cb->fleet.on_command(f, argv, r->userdata);
}

static void on_fleet_command_done(struct drain_fleet *f, int status, int error, void *userdata) {
        struct drain_run *r = userdata;

        if (!r->closing && r->cb->fleet.on_command_done)
                r->cb->fleet.on_command_done(f, status, error, r->userdata);
}

static void on_fleet_finished(struct drain_fleet *f, void *userdata) {
        struct drain_run *r = userdata;

        r->fleet_running = false;
        if (op_ended(r) && r->cb->fleet.on_finished)
                r->cb->fleet.on_finished(f, r->userdata);
}

/* ---- the steps ---- */

static void on_prep_key(struct drain_preparation *p, size_t i, int error, const char *key, const char *from,
                        const char *why, void *userdata) {
        struct drain_run *r = userdata;

        if (error >= 0) {
                r->keys[i] = strdup(key);
                if (!r->keys[i])
                        error = -ENOMEM;
                else
                        r->profiles[i].stop_arg = r->keys[i];
        }
        if (error < 0)
                r->key_refused = true;
        r->cb->on_key(r, i, &r->runs[i], error, key, from, why, r->userdata);
}

/* The runs are set: the system bus, then the seamless check or the fleet. */
static void runs_go(struct drain_run *r) {
        const struct drain_profile *pr = r->o.profile;
        int k;

        if (r->cb->on_runs_set)
                r->cb->on_runs_set(r, r->userdata);
        if (r->closing)
                return;
        /* The system bus: needed for --driver-stop systemd:UNIT; elsewhere (no bus, e.g. in
         * a container) simply absent. One for every node. */
        k = sysbus_open(r->loop, &r->bus);
        if (k < 0) {
                r->bus = NULL;
                if (pr->stop->needs_units)
                        return fail(r, DRAIN_RUN_BUS, k, NULL);
        }
        if (r->o.goal == FLEET_GOAL_MAINTAIN && r->n_runs == 1 && pr->n_drivers > 0 && !pr->force_drain) {
                k = drain_preparation_check_seamless(r->prep, r->runs[0].node, pr);
                if (k < 0)
                        fail(r, DRAIN_RUN_SEAMLESS, k, NULL);
                return;
        }
        fleet_start(r);
}

static void on_prep_keys_done(struct drain_preparation *p, int error, const char *message, void *userdata) {
        struct drain_run *r = userdata;

        if (error < 0)
                return fail(r, DRAIN_RUN_KEYS, error, message);
        if (r->key_refused)
                return fail(r, DRAIN_RUN_KEY_REFUSED, -EPERM, NULL);
        runs_go(r);
}

static void on_command_done(int status, int error, void *userdata) {
        struct drain_run *r = userdata;

        if (op_ended(r))
                r->cb->on_command_done(r, status, error, r->userdata);
}

static void on_prep_seamless(struct drain_preparation *p, int error, const char *message,
                             const struct seamless_answer *ans, void *userdata) {
        struct drain_run *r = userdata;
        int k;

        if (error < 0)
                return fail(r, DRAIN_RUN_SEAMLESS, error, message);
        r->cb->on_seamless(r, ans, r->userdata);
        if (r->closing)
                return;
        if (!ans->seamless) {
                fleet_start(r);
                return;
        }
        /* A driver that upgrades seamlessly needs no drain: the command alone */
        k = fleet_command_spawn(r->loop, r->o.command, on_command_done, r);
        if (k < 0)
                return fail(r, DRAIN_RUN_COMMAND, k, NULL);
        r->pending++;
}

static void fleet_start(struct drain_run *r) {
        static const struct drain_fleet_callbacks cb = {
                .on_node_start = on_node_start,
                .on_progress = on_progress,
                .on_trail = on_trail,
                .on_node_done = on_node_done,
                .on_command = on_command,
                .on_command_done = on_fleet_command_done,
                .on_finished = on_fleet_finished,
        };
        int k;

        k = drain_fleet_new(
                r->client, r->transport, r->ts, r->loop,
                &(const struct drain_fleet_options){
                        .goal = r->o.goal,
                        .runs = r->runs,
                        .n_runs = r->n_runs,
                        .max_parallel = (r->o.max_parallel ? r->o.max_parallel : 1) * (unsigned)r->per_node,
                        .command = r->o.command,
                        .restore_on_failure = r->o.profile->restore_on_failure,
                        .units = sysbus_units(r->bus),
                        .share_informers = r->o.share_informers,
                        .linger_usec = r->o.linger_usec,
                        .out_of_service = r->o.out_of_service,
                        .out_of_service_after_usec = r->o.out_of_service_after_usec,
                        .bound_unread = r->o.bound_unread,
                        .instance = r->o.instance,
                },
                &cb, r, &r->fleet);
        if (k < 0)
                return fail(r, DRAIN_RUN_FLEET_SETUP, k, NULL);
        k = drain_fleet_start(r->fleet);
        if (k < 0)
                return fail(r, DRAIN_RUN_FLEET_START, k, NULL);
        r->fleet_running = true;
        r->pending++; /* until on_finished */
}

int drain_run_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
                  struct uv_loop_s *loop, const struct drain_run_options *o,
                  const struct drain_run_callbacks *cb, void *userdata, struct drain_run **ret) {
        static const struct preparation_callbacks prep_cb = {
                .on_key = on_prep_key,
                .on_keys_done = on_prep_keys_done,
                .on_seamless = on_prep_seamless,
        };
        struct drain_run *r;

        if (o->n_nodes == 0)
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        *r = (struct drain_run){
                .client = client,
                .transport = transport,
                .ts = ts,
                .loop = loop,
                .o = *o,
                .cb = cb,
                .userdata = userdata,
                .per_node = o->profile->n_drivers > 1 ? o->profile->n_drivers : 1,
        };
        r->n_runs = o->n_nodes * r->per_node;
        r->profiles = calloc(r->n_runs, sizeof(*r->profiles));
        r->runs = calloc(r->n_runs, sizeof(*r->runs));
        r->keys = calloc(r->n_runs, sizeof(*r->keys));
        if (!r->profiles || !r->runs || !r->keys ||
            drain_preparation_new(client, ts, &prep_cb, r, &r->prep) < 0) {
                free(r->profiles);
                free(r->runs);
                free(r->keys);
                free(r);
                return -ENOMEM;
        }
        for (size_t i = 0; i < r->n_runs; i++) {
                if (o->profile->n_drivers > 1)
                        drain_profile_for_driver(o->profile, i % r->per_node, &r->profiles[i]);
                else
                        r->profiles[i] = *o->profile;
                r->runs[i] =
                        (struct fleet_run){ .node = o->nodes[i / r->per_node], .profile = &r->profiles[i] };
        }
        *ret = r;
        return 0;
}

size_t drain_run_size(const struct drain_run *r) {
        return r->n_runs;
}

size_t drain_run_per_node(const struct drain_run *r) {
        return r->per_node;
}

int drain_run_start(struct drain_run *r) {
        /* each run's label KEY from its driver's DaemonSet (driverkey.h), before anything
         * is changed */
        if (r->o.key_from_daemonset)
                return drain_preparation_read_keys(r->prep, r->runs, r->n_runs);
        runs_go(r);
        return 0;
}

void drain_run_interrupt(struct drain_run *r) {
        if (r && r->fleet_running)
                drain_fleet_stop(r->fleet);
}

static void on_part_closed(void *userdata) {
        struct drain_run *r = userdata;

        r->pending--;
        maybe_closed(r);
}

void drain_run_close(struct drain_run *r, void (*closed)(void *userdata), void *userdata) {
        if (!r)
                return;
        r->closing = true;
        r->closed = closed;
        r->closed_userdata = userdata;
        r->pending++; /* this call's own: closed never runs inside a close below */
        if (r->fleet_running)
                drain_fleet_stop(r->fleet); /* on_finished follows */
        if (r->bus) {
                r->pending++;
                sysbus_close(TAKE_PTR(r->bus), on_part_closed, r);
        }
        if (r->prep) {
                r->pending++;
                drain_preparation_close(TAKE_PTR(r->prep), on_part_closed, r);
        }
        r->pending--;
        maybe_closed(r);
}
