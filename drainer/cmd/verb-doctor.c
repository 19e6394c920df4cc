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
#include "drainer/claims.h"
#include "drainer/doctor-gather.h"
#include "drainer/doctor-prom.h"
#include "drainer/doctor-rules.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/selector.h"
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
                _cleanup_free_ char *out = NULL;
                cJSON *cl, *drv;

                if (!root)
                        return log_oom();
                cl = cJSON_AddObjectToObject(root, "cluster");
                if (!cl)
                        return log_oom();
                cJSON_AddNumberToObject(cl, "nodes", (double)d->nodes.n);
                cJSON_AddNumberToObject(cl, "resourceClaims", (double)d->claims.n);
                drv = cJSON_AddArrayToObject(cl, "drivers");
                for (size_t i = 0; drv && i < d->drivers.n; i++)
                        cJSON_AddItemToArray(drv, cJSON_CreateString(d->drivers.v[i]->name));
                if (o->node)
                        cJSON_AddStringToObject(cl, "node", o->node);
                else
                        cJSON_AddNullToObject(cl, "node");
                if (o->prometheus)
                        cJSON_AddStringToObject(cl, "prometheus", o->prometheus);
                else
                        cJSON_AddNullToObject(cl, "prometheus");
                out = cJSON_Print(root);
                if (!out)
                        return log_oom();
                puts(out);
                fflush(stdout);
                return ferror(stdout) ? -EIO : 0;
        }
        printf("drainer doctor: %zu nodes, %zu ResourceClaims, %zu DRA drivers", d->nodes.n, d->claims.n,
               d->drivers.n);
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

/* ---- the run ---- */

struct run {
        struct doctor_data data;
        struct doctor_prom_results prom;
        struct doctor_gather *gather; /* while gathering */
        bool gathering, asking;
        int gather_error, prom_error;
        char *gather_message;
};

static void on_gathered(int error, const char *message, void *userdata) {
        struct run *run = userdata;

        run->gathering = false;
        run->gather = NULL;
        run->gather_error = error;
        run->gather_message = message ? strdup(message) : NULL;
}

static void on_prom_done(int error, void *userdata) {
        struct run *run = userdata;

        run->asking = false;
        run->prom_error = error;
        /* Not every query could be sent: the report cannot be made; stop the reads. */
        if (error < 0 && run->gathering)
                doctor_gather_cancel(run->gather);
}

static int run_doctor(struct app *a, const struct doctor_opts *o, enum output_format fmt) {
        struct run run = {};
        struct doctor_report rep = {};
        const char *const *selectors =
                o->n_driver_selectors > 0 ? o->driver_selectors : claims_default_driver_selectors;
        int r;

        r = doctor_data_init(&run.data, o->node);
        if (r < 0)
                return log_oom();
        r = doctor_gather_start(a->client, a->transport, &run.data, selectors, on_gathered, &run,
                                &run.gather);
        if (r < 0) {
                r = log_error_errno(r, "Cannot read the cluster: %m");
                goto out;
        }
        run.gathering = true;
        if (o->prometheus) {
                r = doctor_prom_start(a->transport, o->prometheus, &run.prom, on_prom_done, &run);
                if (r < 0) {
                        log_error_errno(r, "--prometheus %s: cannot start a query: %m", o->prometheus);
                        doctor_gather_cancel(run.gather);
                } else
                        run.asking = true;
        }
        /* The reads go on while Prometheus answers. */
        while (run.gathering || run.asking)
                if (app_run_once(a) == 0)
                        break;
        if (r < 0)
                goto out;
        if (run.prom_error < 0) {
                r = log_error_errno(run.prom_error, "--prometheus %s: cannot start a query: %m",
                                    o->prometheus);
                goto out;
        }
        if (run.gather_error < 0) {
                if (run.gather_message)
                        r = log_error_errno(run.gather_error, "%s", run.gather_message);
                else if (run.gather_error == -ENOMEM)
                        r = log_oom();
                else
                        r = log_error_errno(run.gather_error, "Cannot check: %m");
                goto out;
        }
        r = doctor_rules_run(&run.data, o->prometheus, o->prometheus ? &run.prom : NULL, &rep);
        if (r < 0) {
                r = log_oom();
                goto out;
        }
        r = print_report(&run.data, o, &rep, fmt);
        if (r < 0)
                goto out;
        r = doctor_report_exit_code(&rep);
out:
        doctor_report_done(&rep);
        doctor_prom_results_done(&run.prom);
        free(run.gather_message);
        doctor_data_done(&run.data);
        return r;
}

int verb_doctor(int argc, char **argv, struct global_flags *g) {
        static const struct option extra[] = {
                { "node", required_argument, NULL, 'N' },
                { "prometheus", required_argument, NULL, 'P' },
                { "driver-selector", required_argument, NULL, 'D' },
                {},
        };
        struct doctor_opts o = {};
        struct app a;
        int r;

        r = verb_parse(argc, argv, g, extra, on_doctor_opt, &o);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_DONE;
        if (argc - optind != 0) {
                log_error("drainer doctor: unexpected argument \"%s\" (use --node NODE); see 'drainer "
                          "doctor --help'",
                          argv[optind]);
                return EXIT_USAGE;
        }
        /* Checked before any request; gather takes them as strings (its list calls). */
        {
                struct selector **sels;
                size_t n;

                if (driver_selectors_parse(o.driver_selectors, o.n_driver_selectors, &sels, &n) < 0)
                        return EXIT_USAGE;
                selectors_free(sels, n);
        }

        r = app_init(&a, g);
        if (r < 0) {
                app_done(&a);
                return EXIT_ERROR;
        }
        r = run_doctor(&a, &o, g->output);
        app_done(&a);
        if (r < 0)
                return app_exit_code(r);
        return r;
}
