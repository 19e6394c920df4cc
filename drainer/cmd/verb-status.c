/* `drainer status NODE`: one read-only snapshot of a node as a drain sees it
 * (snapshot.h: the Node, its pods, the node's ResourceSlices and all
 * ResourceClaims, listed concurrently), classified; --watch reprints what the
 * status watch (ctl/statuswatch.c) hands it.
 * A verb_ops verb: it starts the reads and prints when they are in; the composition
 * root runs the loop. */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/base/argval.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/fleetview.h"
#include "drainer/ctl/statusview.h"
#include "drainer/ctl/statuswatch.h"
#include "drainer/dra/claims.h"
#include "drainer/dra/nodeview.h"
#include "drainer/dra/recjson.h"
#include "drainer/dra/snapshot.h"
#include "drainer/drain/device.h"
#include "drainer/drain/state.h"
#include "drainer/kube/client.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/objects.h"
#include "output.h"
#include "verbs.h"

/* What status shows: no budgets. */
#define STATUS_PARTS (NODE_VIEW_ALL & ~NODE_VIEW_PDBS)

struct status_opts {
        const char *driver_selectors[MAX_DRIVER_SELECTORS + 1];
        size_t n_driver_selectors;
        const char *driver_namespaces[MAX_DRIVER_NAMESPACES + 1];
        size_t n_driver_namespaces;
        bool watch;
        bool all;             /* --all: the fleet at a glance */
        const char *selector; /* -l: the fleet of these nodes */
};

/* A driver drained by `drain --driver` (drainer.io/state.NAME): out of service until
 * `uncordon --driver NAME`. */
static void print_driver_out(const char *driver, size_t len, const char *phase, void *userdata) {
        fprintf(userdata,
                "  DRA driver %.*s: out of service (drain --driver, phase %s; back with: drainer uncordon "
                "NODE "
                "--driver %.*s)\n",
                (int)len, driver, strna(phase), (int)len, driver);
}

static void print_devices_out(const char *devices, const char *phase, const char *scope, void *userdata) {
        fprintf(userdata,
                "  device %s: out of service (drain --device, phase %s; back with: drainer uncordon NODE "
                "--device ..., the same devices)\n",
                devices ? devices : scope, strna(phase));
}

static const struct argval_field status_fields[] = {
        ARGVAL_SWITCH('W', struct status_opts, watch),
        ARGVAL_SWITCH('A', struct status_opts, all),
        ARGVAL_STRING('l', struct status_opts, selector),
        {},
};

static int on_status_opt(int opt, const char *arg, void *userdata) {
        struct status_opts *o = userdata;

        if (argval_store(status_fields, opt, arg, flag_on(arg), o))
                return 0;
        if (opt == 'S')
                return driver_namespace_add(o->driver_namespaces, &o->n_driver_namespaces, arg);
        if (opt != 'D')
                return -EINVAL;
        return driver_selector_add(o->driver_selectors, &o->n_driver_selectors, arg);
}

static const char *const class_title[_POD_CLASS_MAX] = {
        [POD_CLASS_DRIVER] = "DRA driver pods",
        [POD_CLASS_CLAIM_HOLDER] = "Claim holders (evicted first)",
        [POD_CLASS_WORKLOAD] = "Other workload (evicted next)",
        [POD_CLASS_DAEMONSET] = "DaemonSet pods (stay)",
        [POD_CLASS_MIRROR] = "Mirror pods (stay)",
        [POD_CLASS_FINISHED] = "Finished pods (evicted with the rest)",
};

/* Prints the node's records (their arrays sorted in place). */
static int print_status(const struct node_input *s, const struct status_opts *o, enum output_format fmt,
                        bool compact) {
        _cleanup_(status_view_done) struct status_view view = {};
        struct selector **sels = NULL;
        size_t n_sels = 0;
        const struct pod_rec **pods = s->pods;
        const struct claim_rec **claims = s->claims;
        const struct node_rec *n = s->node;
        const char *owner;
        int r;

        r = driver_selectors_parse(o->driver_selectors, o->n_driver_selectors, &sels, &n_sels);
        if (r < 0)
                return r;
        r = status_view_build(s,
                              &(const struct driver_filter){
                                      .selectors = (const struct selector *const *)sels,
                                      .n_selectors = n_sels,
                                      .namespaces = o->driver_namespaces,
                                      .n_namespaces = o->n_driver_namespaces,
                              },
                              &view);
        selectors_free(sels, n_sels);
        if (r < 0)
                return log_oom();
        owner = view.cordoned_by;

        if (fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *root = status_view_to_json(&view);

                if (!root)
                        return log_oom();
                return output_print(root, compact); /* -o json, yaml or name */
        }

        /* Text for a terminal: what the API holds (annotation values, taints, names)
         * is written with its control characters escaped, so that nothing a node's
         * credential wrote into drainer.io/message can clear or drive the screen. */
        _cleanup_free_ char *text = NULL, *safe = NULL;
        size_t text_len = 0;
        FILE *out = open_memstream(&text, &text_len);

        if (!out)
                return log_oom();
        fprintf(out, "Node %s: %s%s%s%s\n", n->name, n->ready ? "Ready" : "NotReady",
                n->unschedulable ? ", cordoned" : ", schedulable", owner ? " by " : "", strempty(owner));
        for (size_t i = 0; i < n->n_taints; i++)
                fprintf(out, "  taint %s%s%s:%s\n", n->taints[i].key, n->taints[i].value ? "=" : "",
                        strempty(n->taints[i].value), strna(n->taints[i].effect));
        if (n->n_annotations == 0)
                fprintf(out, "  drainer: no drain recorded\n");
        drain_scope_foreach(n, print_driver_out, out);
        drain_devices_foreach(n, print_devices_out, out);
        for (size_t i = 0; i < n->n_annotations; i++)
                fprintf(out, "  %s: %s\n", n->annotations[i].key, n->annotations[i].value);

        if (s->dra_off)
                fprintf(out,
                        "  DRA: not served by this cluster (no resource.k8s.io v1, v1beta2 or v1beta1): no "
                        "claims or slices; a drain is kubectl drain's\n");
        else if (s->dra_api)
                fprintf(out, "  DRA API: %s\n", s->dra_api);

        fprintf(out, "\nPods (%zu)\n", s->n_pods);
        for (size_t k = 0; k < ELEMENTSOF(status_class_order); k++) {
                enum pod_class c = status_class_order[k];
                size_t count = status_view_count(&view, c);

                if (count == 0)
                        continue;
                fprintf(out, "  %s: %zu\n", class_title[c], count);
                for (size_t i = 0; i < s->n_pods; i++) {
                        const struct pod_rec *p = pods[i];

                        if (view.cls[i] != c)
                                continue;
                        fprintf(out, "    %s/%s  %s%s%s", p->ns, p->name,
                                strna(pod_phase_to_string(p->phase)), p->ready ? " Ready" : "",
                                p->deleting ? " Terminating" : "");
                        if (p->controller)
                                fprintf(out, "  %s/%s", strna(p->controller->kind),
                                        strna(p->controller->name));
                        for (size_t j = 0; j < p->n_claims; j++)
                                if (p->claims[j].claim_name)
                                        fprintf(out, "%s%s", j == 0 ? "  claims: " : ", ",
                                                p->claims[j].claim_name);
                        if (p->extended_claim_name)
                                fprintf(out, "  extended-resource claim: %s", p->extended_claim_name);
                        fprintf(out, "\n");
                }
        }

        fprintf(out, "\nResourceClaims on the node (%zu)\n", view.n_on_node);
        for (size_t i = 0; i < s->n_claims; i++) {
                const struct claim_rec *c = claims[i];

                if (view.why[i] == CLAIM_NOT_ON_NODE)
                        continue;
                fprintf(out, "  %s/%s  %s%s%s\n", c->ns, c->name,
                        claim_on_node_reason_to_string(view.why[i]), c->deleting ? ", deleting" : "",
                        status_view_claim_note(&view, i));
                for (size_t j = 0; j < c->n_devices; j++)
                        fprintf(out, "    device %s/%s/%s (request %s)\n", strna(c->devices[j].driver),
                                strna(c->devices[j].pool), strna(c->devices[j].device),
                                strna(c->devices[j].request));
                for (size_t j = 0; j < c->n_reserved; j++)
                        fprintf(out, "    reserved for %s %s/%s\n", strna(c->reserved[j].resource), c->ns,
                                strna(c->reserved[j].name));
        }
        fprintf(out, "\nResourceSlices of the node (%zu)\n", s->n_slices);
        for (size_t i = 0; i < s->n_slices; i++) {
                const struct slice_rec *sl = s->slices[i];

                fprintf(out, "  %s  driver %s, pool %s, %zu %s\n", sl->name, sl->driver, sl->pool,
                        sl->n_devices, text_plural(sl->n_devices, "device", "devices"));
        }
        if (fclose(out) != 0)
                return log_oom();
        safe = text_escape_controls(text, text_len);
        if (!safe)
                return log_oom();
        fputs(safe, stdout);
        return 0;
}

/* One status, as the composition root runs it (verbs.h): the one-shot snapshot, or
 * with --watch a node view kept current by its informers, reprinted (at most every
 * 250 ms) whenever one of them changes until SIGINT or SIGTERM. */
struct status_run {
        struct status_opts opts;
        enum output_format fmt;
        const char *node_name;
        struct app *app;                /* borrowed */
        struct node_snapshot *snapshot; /* owned, until closed */
        struct status_watch *watch;     /* owned, until closed: --watch */
        struct informer *fleet;         /* owned, until idle: --all / -l */
        bool tty;
        unsigned closing; /* views whose close has not called back yet */
};

static void status_closed_one(struct status_run *run) {
        assert(run->closing > 0);
        if (--run->closing == 0)
                app_stopped(run->app);
}

static void on_snapshot_done(struct node_snapshot *s, int error, const char *what, void *userdata) {
        struct status_run *run = userdata;
        int r;

        if (error < 0)
                r = error == -ENOMEM && !what ? log_oom() : log_error_errno(error, "%s", strna(what));
        else
                r = print_status(node_snapshot_input(s), &run->opts, run->fmt, false);
        app_quit(run->app, r < 0 ? app_exit_code(r) : EXIT_DONE);
}

static void on_snapshot_closed(void *userdata) {
        status_closed_one(userdata);
}

/* --watch: a change the watch (ctl/statuswatch.c) debounced, printed. */
static void on_watch_change(struct status_watch *w, const struct node_input *in, void *userdata) {
        struct status_run *run = userdata;
        char when[32];

        if (run->app->quit)
                return;
        if (!in) {
                app_quit(run->app, app_exit_code(log_oom()));
                return;
        }
        if (timesrc_format_rfc3339(timesrc_realtime(run->app->ts), when, sizeof(when)) < 0)
                strcpy(when, "?");
        if (!in->node) {
                if (run->fmt == OUTPUT_JSON)
                        printf("{\"time\":\"%s\",\"node\":null}\n", when);
                else
                        printf("%s--- %s\nnode \"%s\" not found (waiting for it)\n",
                               run->tty ? "\033[H\033[2J" : "", when, run->node_name);
                fflush(stdout);
                return;
        }
        if (run->fmt != OUTPUT_JSON)
                printf("%s--- %s\n", run->tty ? "\033[H\033[2J" : "", when);
        print_status(in, &run->opts, run->fmt, true);
        fflush(stdout);
}

static void on_watch_error(struct status_watch *w, const char *part, int error, const char *message,
                           void *userdata) {
        log_warning("watching %s: %s, retrying", part, message ? message : strerror(-error));
}

static void on_watch_closed(void *userdata) {
        status_closed_one(userdata);
}

static void on_signal(struct app *a, int signum, void *userdata) {
        app_quit(a, EXIT_DONE);
}

static int start_watch(struct status_run *run) {
        static const struct status_watch_handlers h = {
                .on_change = on_watch_change,
                .on_error = on_watch_error,
        };
        struct app *a = run->app;
        int r;

        run->tty = output_live(STDOUT_FILENO); /* --color, TERM=dumb */
        r = status_watch_new(a->client, a->ts, run->node_name, STATUS_PARTS, 250 * USEC_PER_MSEC, &h, run,
                             &run->watch);
        if (r < 0)
                return log_error_errno(r, "Cannot start watching: %m");
        app_signals_start(a, on_signal, run);
        return 0;
}

/* ---- --all / -l: the fleet at a glance (one list of the Nodes) ---- */

static int print_fleet(struct informer *inf, const struct status_opts *o, enum output_format fmt) {
        _cleanup_free_ const void **recs = NULL;
        size_t n = 0, counts[_FLEET_CLASS_MAX];
        const char *const *fleet_class_name = fleet_class_names;
        struct fleet_row *rows = NULL;

        if (informer_collect(inf, &recs, &n) < 0 ||
            fleet_rows_build((const struct node_rec **)recs, n, &rows, counts) < 0)
                return log_oom();
        if (fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *root = fleet_rows_to_json(rows, n, counts, o->selector);
                _cleanup_free_ char *out = root ? cJSON_PrintUnformatted(root) : NULL;

                fleet_rows_free(rows, n);
                if (!out)
                        return log_oom();
                printf("%s\n", out);
                return 0;
        }
        printf("%zu node%s%s%s%s\n", n, n == 1 ? "" : "s", o->selector ? " (-l " : "", strempty(o->selector),
               o->selector ? ")" : "");
        for (int c = 0; c < _FLEET_CLASS_MAX; c++)
                printf("  %-11s %zu\n", fleet_class_name[c], counts[c]);
        if (counts[FLEET_IN_SERVICE] < n)
                printf("\n%-24s %-10s %-9s %-21s %s\n", "NODE", "STATUS", "WHY", "SINCE", "MESSAGE");
        for (size_t i = 0; i < n; i++) {
                const struct fleet_row *row = &rows[i];
                char since[64] = "-";
                _cleanup_free_ char *safe = NULL;

                if (row->c == FLEET_IN_SERVICE)
                        continue;
                if (row->since_usec > 0)
                        (void)timesrc_format_rfc3339(row->since_usec, since, sizeof(since));
                safe = row->message ? text_escape_controls(row->message, strlen(row->message)) : NULL;
                printf("%-24s %-10s %-9s %-21s %s\n", row->name,
                       row->has_phase && row->c != FLEET_FAILED ? drain_phase_to_string(row->phase)
                                                                : fleet_class_name[row->c],
                       row->reason ? row->reason : "-", since, safe ? safe : "-");
        }
        fleet_rows_free(rows, n);
        return 0;
}

static void on_fleet_synced(struct informer *inf, void *userdata) {
        struct status_run *run = userdata;
        int r = print_fleet(inf, &run->opts, run->fmt);

        fflush(stdout);
        app_quit(run->app, r < 0 ? app_exit_code(r) : EXIT_DONE);
}

static void on_fleet_error(struct informer *inf, int error, const char *message, void *userdata) {
        struct status_run *run = userdata;
        int r = log_error_errno(error, "listing nodes: %s", message ? message : strerror(-error));

        app_quit(run->app, app_exit_code(r));
}

static void on_fleet_stopped(struct informer *inf, void *userdata) {
        struct status_run *run = userdata;

        informer_free(run->fleet);
        run->fleet = NULL;
        status_closed_one(run);
}

static int start_fleet(struct status_run *run) {
        static const struct informer_handlers h = {
                .on_synced = on_fleet_synced,
                .on_error = on_fleet_error,
                .on_stopped = on_fleet_stopped,
        };
        int r;

        r = informer_new(run->app->client, run->app->ts,
                         &(const struct informer_options){
                                 .kind = INFORMER_NODES,
                                 .label_selector = run->opts.selector,
                                 .once = true,
                         },
                         &h, run, &run->fleet);
        if (r >= 0)
                r = informer_start(run->fleet);
        if (r < 0)
                return log_error_errno(r, "Cannot start listing nodes: %m");
        return 0;
}

/* Stops the list; 1 if its close calls back (status_closed_one), 0 if it is done. */
static int stop_fleet(struct status_run *run) {
        if (!run->fleet)
                return 0;
        informer_stop(run->fleet);
        if (!informer_idle(run->fleet))
                return 1;
        informer_free(run->fleet);
        run->fleet = NULL;
        return 0;
}

static int status_parse(int argc, char **argv, struct global_flags *g, void *state) {
        static const struct option extra[] = {
                { "driver-selector", required_argument, NULL, 'D' },
                { "driver-namespace", required_argument, NULL, 'S' },
                { "watch", no_argument, NULL, 'W' },
                { "all", no_argument, NULL, 'A' },
                { "selector", required_argument, NULL, 'l' },
                {},
        };
        struct status_run *run = state;
        int r;

        r = verb_parse(argc, argv, g, extra, on_status_opt, &run->opts);
        if (r <= 0)
                return r;
        if (run->opts.all || run->opts.selector) {
                _cleanup_(selector_freep) struct selector *sel = NULL;
                _cleanup_free_ char *err = NULL;

                if (argc != optind)
                        return log_error_errno(EINVAL, "drainer status: --all and -l take no NODE argument");
                if (run->opts.watch)
                        return log_error_errno(EINVAL, "drainer status: --watch is for one NODE");
                if (run->opts.selector && selector_parse(run->opts.selector, &sel, &err) < 0)
                        return log_error_errno(EINVAL, "drainer status: -l: %s", strna(err));
                run->fmt = g->output;
                return 1;
        }
        if (argc - optind != 1) {
                log_error("drainer status: expected exactly one NODE argument; see 'drainer status --help'");
                return -EINVAL;
        }
        run->node_name = argv[optind];
        if (run->opts.n_driver_selectors > 0) {
                /* Validate before any request is made. */
                r = driver_selectors_check(run->opts.driver_selectors, run->opts.n_driver_selectors);
                if (r < 0)
                        return r;
        }
        run->fmt = g->output;
        return 1;
}

static int status_start(struct app *a, void *state) {
        struct status_run *run = state;
        int r;

        run->app = a;
        if (run->opts.all || run->opts.selector)
                return start_fleet(run);
        if (run->opts.watch)
                return start_watch(run);
        r = node_snapshot_start(a->client, a->ts, run->node_name, false, on_snapshot_done, run,
                                &run->snapshot);
        if (r < 0)
                return log_error_errno(r, "Cannot start the API requests: %m");
        return 0;
}

/* Closes what start made: the snapshot, or the view (and gives the signals back); the root
 * hears app_stopped() once the last of them called back. */
static void status_stop(struct app *a, void *state) {
        struct status_run *run = state;

        run->closing = 1; /* this call's own, so that no close completes the stop early */
        run->closing += stop_fleet(run);
        if (run->snapshot) {
                run->closing++;
                node_snapshot_close(run->snapshot, on_snapshot_closed, run);
                run->snapshot = NULL;
        }
        if (run->watch) {
                run->closing++;
                status_watch_close(TAKE_PTR(run->watch), on_watch_closed, run);
        }
        app_signals_stop(a);
        status_closed_one(run);
}

const struct verb_ops verb_status_ops = {
        .state_size = sizeof(struct status_run),
        .parse = status_parse,
        .start = status_start,
        .stop = status_stop,
};
