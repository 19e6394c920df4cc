/* `drainer doctor`, the verb: its flags, the reads (drainer/doctor/gather.c)
 * and, with --prometheus, the guide's queries (drainer/doctor/prom.c) run at
 * once on the loop, the rules (drainer/doctor/rules.c) over what they found,
 * and the report printed. Decides no finding itself; never writes. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "drainargs.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/text.h"
#include "drainer/doctor/doctor-gather.h"
#include "drainer/doctor/doctor-prom.h"
#include "drainer/doctor/doctor-rules.h"
#include "drainer/dra/claims.h"
#include "output.h"
#include "verbs.h"

/* gather reads at most this many selectors */
_Static_assert(DOCTOR_DRIVER_SELECTORS_MAX >= MAX_DRIVER_SELECTORS, "doctor: too few driver selectors");

struct doctor_opts {
        const char *node;
        const char *prometheus;
        const char *driver_selectors[MAX_DRIVER_SELECTORS + 1];
        size_t n_driver_selectors;
};

static int on_doctor_opt(int opt, const char *arg, void *userdata) {
        struct doctor_opts *o = userdata;

        switch (opt) {
        case 'N':
                o->node = arg;
                return 0;
        case 'P':
                if (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0)
                        return log_error_errno(
                                EINVAL, "--prometheus: expected an http:// or https:// URL, got \"%s\"",
                                arg);
                o->prometheus = arg;
                return 0;
        case 'D':
                return driver_selector_add(o->driver_selectors, &o->n_driver_selectors, arg);
        }
        return -EINVAL;
}

static int print_report(const struct doctor_data *d, const struct doctor_opts *o,
                        const struct doctor_report *rep, enum output_format fmt) {
        if (fmt == OUTPUT_JSON) {
                _cleanup_(cJSON_Deletep) cJSON *root = doctor_report_to_json(rep);
                cJSON *cl = root ? doctor_data_to_json(d, o->node, o->prometheus) : NULL;
                int r;

                if (!cl || !cJSON_AddItemToObject(root, "cluster", cl)) {
                        cJSON_Delete(cl);
                        return log_oom();
                }
                r = output_print(root, false); /* -o json, yaml or name */
                if (r < 0)
                        return r;
                return ferror(stdout) ? -EIO : 0;
        }
        printf("drainer doctor: %zu %s, %zu %s, %zu %s", d->nodes.n,
               text_plural(d->nodes.n, "node", "nodes"), d->claims.n,
               text_plural(d->claims.n, "ResourceClaim", "ResourceClaims"), d->drivers.n,
               text_plural(d->drivers.n, "DRA driver", "DRA drivers"));
        for (size_t i = 0; i < d->drivers.n; i++)
                printf("%s%s", i == 0 ? " (" : ", ", d->drivers.v[i]->name);
        printf("%s%s%s; Prometheus: %s\n", d->drivers.n ? ")" : "", o->node ? "; node " : "",
               o->node ? o->node : "", o->prometheus ? o->prometheus : "not asked (--prometheus URL)");
        printf("against \"Good practices for Dynamic Resource Allocation as a Cluster Admin\" "
               "(kubernetes.io/docs/concepts/cluster-administration/dra)\n\n");
        if (doctor_report_print_text(rep, stdout) < 0)
                return -EIO;
        printf("\n%zu FAIL, %zu WARN, %zu PASS\n", doctor_report_count(rep, DOCTOR_FAIL),
               doctor_report_count(rep, DOCTOR_WARN), doctor_report_count(rep, DOCTOR_PASS));
        fflush(stdout);
        return ferror(stdout) ? -EIO : 0;
}

/* ---- the run: reads and Prometheus's answers in parallel, then the report ---- */

struct doctor_run {
        struct doctor_opts opts;
        enum output_format fmt;
        struct app *app;
        struct doctor_data data;
        bool data_ready;
        struct doctor_prom_results prom;
        struct doctor_gather *gather; /* while gathering */
        bool gathering, asking;
        int gather_error, prom_error;
        char *gather_message;
};

/* Both answers are in: the report, and the exit code it gives. */
static int doctor_report(struct doctor_run *run) {
        struct doctor_report rep = {};
        int r;

        if (run->prom_error < 0)
                return log_error_errno(run->prom_error, "--prometheus %s: cannot start a query: %m",
                                       run->opts.prometheus);
        if (run->gather_error < 0) {
                if (run->gather_message)
                        return log_error_errno(run->gather_error, "%s", run->gather_message);
                if (run->gather_error == -ENOMEM)
                        return log_oom();
                return log_error_errno(run->gather_error, "Cannot check: %m");
        }
        r = doctor_rules_run(&run->data, run->opts.prometheus, run->opts.prometheus ? &run->prom : NULL,
                             &rep);
        if (r < 0)
                r = log_oom();
        else
                r = print_report(&run->data, &run->opts, &rep, run->fmt);
        if (r >= 0)
                r = doctor_report_exit_code(&rep);
        doctor_report_done(&rep);
        return r;
}

static void doctor_maybe_done(struct doctor_run *run) {
        int r;

        if (run->gathering || run->asking || run->app->quit)
                return;
        r = doctor_report(run);
        app_quit(run->app, r < 0 ? app_exit_code(r) : r);
}

static void on_gathered(int error, const char *message, void *userdata) {
        struct doctor_run *run = userdata;

        run->gathering = false;
        run->gather = NULL;
        run->gather_error = error;
        run->gather_message = message ? strdup(message) : NULL;
        if (run->app->quit) /* stopping */
                app_stopped(run->app);
        else
                doctor_maybe_done(run);
}

static void on_prom_done(int error, void *userdata) {
        struct doctor_run *run = userdata;

        run->asking = false;
        run->prom_error = error;
        /* Not every query could be sent: the report cannot be made; stop the reads. */
        if (error < 0 && run->gathering)
                doctor_gather_cancel(run->gather);
        doctor_maybe_done(run);
}

static int doctor_parse(int argc, char **argv, struct global_flags *g, void *state) {
        static const struct option extra[] = {
                { "node", required_argument, NULL, 'N' },
                { "prometheus", required_argument, NULL, 'P' },
                { "driver-selector", required_argument, NULL, 'D' },
                {},
        };
        struct doctor_run *run = state;
        int r;

        r = verb_parse(argc, argv, g, extra, on_doctor_opt, &run->opts);
        if (r <= 0)
                return r;
        if (argc - optind != 0) {
                log_error("drainer doctor: unexpected argument \"%s\" (use --node NODE); see 'drainer "
                          "doctor --help'",
                          argv[optind]);
                return -EINVAL;
        }
        /* Checked before any request; gather takes them as strings (its list calls). */
        r = driver_selectors_check(run->opts.driver_selectors, run->opts.n_driver_selectors);
        if (r < 0)
                return r;
        run->fmt = g->output;
        return 1;
}

static int doctor_start(struct app *a, void *state) {
        struct doctor_run *run = state;
        const struct doctor_opts *o = &run->opts;
        const char *const *selectors =
                o->n_driver_selectors > 0 ? o->driver_selectors : claims_default_driver_selectors;
        int r;

        run->app = a;
        r = doctor_data_init(&run->data, o->node);
        if (r < 0)
                return log_oom();
        run->data_ready = true;
        r = doctor_gather_start(a->client, a->transport, &run->data, selectors, on_gathered, run,
                                &run->gather);
        if (r < 0)
                return log_error_errno(r, "Cannot read the cluster: %m");
        run->gathering = true;
        if (o->prometheus) {
                r = doctor_prom_start(a->transport, o->prometheus, &run->prom, on_prom_done, run);
                if (r < 0)
                        /* the reads are cancelled by stop */
                        return log_error_errno(r, "--prometheus %s: cannot start a query: %m",
                                               o->prometheus);
                run->asking = true;
        }
        /* The reads go on while Prometheus answers. */
        return 0;
}

/* After the report nothing is in flight; after a failed start the reads may be. */
static void doctor_stop(struct app *a, void *state) {
        struct doctor_run *run = state;

        if (run->gathering)
                doctor_gather_cancel(run->gather); /* on_gathered says stopped */
        else
                app_stopped(a);
}

static void doctor_free(void *state) {
        struct doctor_run *run = state;

        doctor_prom_results_done(&run->prom);
        free(run->gather_message);
        if (run->data_ready)
                doctor_data_done(&run->data);
}

const struct verb_ops verb_doctor_ops = {
        .state_size = sizeof(struct doctor_run),
        .parse = doctor_parse,
        .start = doctor_start,
        .stop = doctor_stop,
        .free = doctor_free,
};
