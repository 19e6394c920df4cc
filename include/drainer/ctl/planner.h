/* The planner: one node's plan (a node drain's or one --driver's) read as `drainer
 * plan` and `drain --dry-run` show it, one read after the other from the loop (the
 * node's snapshot, the DeviceTaintRule discovery, the driver's label key, the health
 * probes, the seamless check), then, on request, kubectl's server dry run (the cordon
 * patch and every eviction, dryRun=All). Reads only (a dry run persists nothing);
 * prints nothing: the verb renders what it says. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/ctl/profile.h"
#include "drainer/dra/nodeview.h"
#include "drainer/dra/seamless.h"
#include "drainer/drain/plan.h"

struct kube_client;
struct timesrc;
struct transport;
struct planner;

/* One request of the server dry run and its answer. */
struct planner_answer {
        bool done;
        int error; /* 0, or a negative errno (-ENOENT: the pod is gone already) */
        long status;
        bool ns_terminating; /* 403 NamespaceTerminating */
        char *message;       /* the Status message, or NULL */
};

/* What was read, valid until planner_close(); plan is final once on_ready said 0. */
struct planner_result {
        const struct node_input *in; /* the snapshot's; in->node is the Node as read */
        const struct node_rec *node; /* the Node as the scope sees it (--driver: its keys only) */
        struct plan plan;
        struct plan_options po;
        bool seam_known; /* --driver on a DRA cluster: whether the driver upgrades seamlessly */
        struct seamless_answer seam;
        struct planner_answer cordon;  /* the server dry run's cordon patch */
        struct planner_answer *evicts; /* one per pod of plan (done at once for those not sent) */
        /* --device where DeviceTaintRules are served and nothing blocks the drain: the
         * None-effect preview (note owned by the planner) */
        struct plan_device_preview preview;
};

struct planner_callbacks {
        /* The plan is built (error 0), or it could not be: message says why for people
         * (NULL: out of memory). */
        void (*on_ready)(struct planner *p, int error, const char *message, void *userdata);
        /* The server dry run: the cordon patch was answered (res->cordon); error < 0 ends
         * the dry run (on_dry_run_done does not follow). */
        void (*on_cordoned)(struct planner *p, int error, void *userdata);
        /* An eviction of pod is about to be sent (dry run). */
        void (*on_evicting)(struct planner *p, const struct pod_rec *pod, void *userdata);
        /* Every eviction is answered (res->evicts); error < 0: out of memory. */
        void (*on_dry_run_done)(struct planner *p, int error, void *userdata);
};

struct planner_options {
        const char *node;                    /* borrowed */
        const struct drain_profile *profile; /* borrowed, for the planner's life */
        bool key_from_daemonset;             /* --driver without --driver-stop: label KEY read */
};

/* Starts the reads; cb->on_ready runs once, from the loop. 0 or a negative errno
 * (nothing started, no callback). */
int planner_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
                const struct planner_options *o, const struct planner_callbacks *cb, void *userdata,
                struct planner **ret);
struct planner_result *planner_result(struct planner *p);
/* After on_ready said 0: the server dry run (the profile's grace; never 0 for a claim
 * holder nor a driver pod, as the drain sends). 0, or a negative errno with
 * *ret_message saying why (malloc'd, NULL: out of memory; nothing sent, no callback). */
int planner_dry_run(struct planner *p, char **ret_message);
/* Cancels what is in flight; no callback runs after this; closed (NULL ok) runs from
 * the loop once every read has ended, then the planner is freed. */
void planner_close(struct planner *p, void (*closed)(void *userdata), void *userdata);
/* The server dry run's answers (once on_dry_run_done said 0), as kubectl prints them:
 * to f ("pod/NAME evicted (server dry run)", ..., "node/NAME drained (server dry run)"),
 * or, f NULL, into j: {node, dryRun: "server", cordoned, evictions: [{namespace, name,
 * group, result: evicted|held|namespace-terminating|failed, message}], stays:
 * [{namespace, name, reason}], ok}. Returns how many evictions failed (a budget's 429
 * or a namespace being deleted is no failure). */
size_t planner_dry_run_report(const struct planner_result *res, FILE *f, cJSON *j);
