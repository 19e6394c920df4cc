/* What every CLI verb shares: the parsed global flags, and the loop with its
 * time source, transport and API client, set up from the kubeconfig. */
#pragma once

#include <stdbool.h>
#include <uv.h>

#include <cjson/cJSON.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/reach.h"

/* Exit codes, documented in `drainer --help` and the README. */
enum {
        EXIT_DONE = 0,
        EXIT_ERROR = 1,
        EXIT_USAGE = 2,
        EXIT_TIMEOUT = 3,
        EXIT_REFUSED = 4,
        /* 5 and 6 are doctor's (verb-doctor.c). Added later, never renumbered (hooks
         * branch on them): */
        EXIT_UNREACHABLE = 7,  /* the API server cannot be reached: connection refused, DNS
                               * name not found, TLS, or no answer before --timeout */
        EXIT_NOT_FOUND = 8,    /* the node does not exist */
        EXIT_CONFIG = 9,       /* the kubeconfig (or the credentials it names) is invalid */
        EXIT_FORBIDDEN = 10,   /* the API server refused the credentials (401, 403) */
        EXIT_UNSUPPORTED = 11, /* the API server does not serve what was asked for (--device:
                                * DeviceTaintRules); nothing was changed */
};

/* Interrupted by SIGINT or SIGTERM (N): 128 + N, as a shell says it; not 1, so that a hook
 * tells "the state stays on the Node, run me again" from an error. */
#define EXIT_INTERRUPTED(signum) (128 + (signum))

/* -EHOSTDOWN, as a verb's result: --timeout ran out while the API server had never
 * answered (or had answered only failures for a while): exit 7, not 3. */
#define APP_ERR_API_SILENT (-EHOSTDOWN)

enum output_format {
        OUTPUT_TEXT,
        OUTPUT_JSON,
};

/* Global flags without a short form (verb flags use 0x100.. and 0x200..). */
enum {
        OPT_GLOBAL_AS = 0x1f0,
        OPT_GLOBAL_AS_GROUP,
        OPT_GLOBAL_REQUEST_TIMEOUT,
        OPT_GLOBAL_VERBOSE,
        OPT_GLOBAL_COLOR,
        OPT_GLOBAL_QPS_MAX,
};

/* --kube-api-qps: a number (fixed), auto (adaptive), or not given: fixed 20, but
 * auto for serve --all-nodes (cluster mode: one client for the whole fleet). */
enum qps_mode {
        QPS_DEFAULT,
        QPS_FIXED,
        QPS_AUTO,
};

struct global_flags {
        const char *kubeconfig;
        const char *context;
        double qps;
        enum qps_mode qps_mode;
        double qps_max; /* --kube-api-qps-max; 0: KUBE_QPS_MAX_DEFAULT (also turns auto on) */
        int burst;
        enum output_format output;
        int verbose;
        /* --as, --as-group (repeatable), --request-timeout: as kubectl's */
        const char *as_user;
        const char *as_groups[KUBE_MAX_IMPERSONATE_GROUPS];
        size_t n_as_groups;
        uint64_t request_timeout_usec; /* 0: the client's default (30 s) */
        unsigned chunk_size;           /* --chunk-size: objects per list request; 0: 500 */
};

struct app;
/* What a verb does on SIGINT or SIGTERM (app_signals_start). */
typedef void (*app_signal_fn)(struct app *a, int signum, void *userdata);

struct app {
        struct global_flags flags;
        uv_loop_t loop;
        bool loop_ready;
        struct timesrc *ts;          /* owned */
        struct transport *transport; /* owned */
        struct kube_config *cfg;     /* owned */
        struct credentials *creds;   /* owned */
        struct kube_client *client;  /* owned */
        struct kube_reach reach;     /* the API server's reachability, said while the loop runs */
        /* The verb's work is over (app_quit) with this exit code; the verb has closed
         * what it started (app_stopped). */
        bool quit, stopped;
        int exit_code;
        /* SIGINT and SIGTERM, while a verb takes them (app_signals_start) */
        uv_signal_t sigint, sigterm;
        bool signals_ready;
        app_signal_fn on_signal;
        void *signal_userdata;
};

/* Loads the configuration and connects the client. Logs a clear one-line error
 * and returns negative errno on failure. */
int app_init(struct app *a, const struct global_flags *flags);
/* Runs the loop once (uv_run UV_RUN_ONCE, whose result it returns); while calls are
 * in flight it says so when the API server has answered only failures for 5 s. */
int app_run_once(struct app *a);
/* Runs the loop until *done is true (or nothing is left to run). */
int app_run_until(struct app *a, const bool *done);

/* The composition root (main.c) alone runs the loop; a verb (verbs.h: struct verb_ops)
 * starts its work and says when it is over: */
/* The verb's work is over: the root leaves the loop and asks the verb to stop. The
 * first call's exit code wins. */
void app_quit(struct app *a, int exit_code);
/* The verb closed everything it had on the loop (from its stop, or later). */
void app_stopped(struct app *a);
/* The root's loop: runs until app_quit(); a loop that runs dry before that is a
 * verb that forgot to quit: logged, EXIT_ERROR. Returns the exit code. */
int app_run(struct app *a);
/* The root's wait for app_stopped() after the verb's stop (or until nothing is left
 * on the loop of the verb's). */
void app_run_until_stopped(struct app *a);
/* SIGINT and SIGTERM go to on_signal(a, signum, userdata) from now on, instead of
 * ending the process, until app_signals_stop() (or app_done()). */
void app_signals_start(struct app *a, app_signal_fn on_signal, void *userdata);
/* Back to the default: the next SIGINT or SIGTERM ends the process. The handles close
 * on the loop; app_done() waits for them. Nothing if they are not started. */
void app_signals_stop(struct app *a);
/* Cancels what is in flight, closes every handle, checks uv_loop_close(). */
int app_done(struct app *a);

/* Maps a negative errno from a verb to its exit code: 0, -ETIMEDOUT 3, the API server
 * unreachable (transport errors, APP_ERR_API_SILENT) 7, -ENOENT 8, -EACCES 10, else 1. */
int app_exit_code(int r);
/* The exit code's word for -o json's "error": "api-unreachable", "node-not-found",
 * "kubeconfig-invalid", "forbidden", "usage", "timeout", "refused", "error"; NULL for 0. */
const char *app_exit_code_to_string(int code);
/* What every failure prints with -o json when the verb has no summary of its own (bad
 * flags, an invalid kubeconfig, an API server that cannot be reached before anything was
 * read): {schemaVersion, verb, node, result: "error", error, exitCode, message}, and
 * nothing it did not observe. node may be NULL. The one place this document is built. */
cJSON *app_error_summary(const char *verb, const char *node, int exit_code, const char *message);
