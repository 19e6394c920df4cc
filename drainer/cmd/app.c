/* The connection every verb uses: kubeconfig -> TLS settings -> libcurl
 * transport on a libuv loop -> rate-limited API client. Owns all of them and
 * closes them in order, so uv_loop_close() succeeds. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "app.h"
#include "drainer/base/log.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/runsummary.h"
#include "drainer/kube/client.h"
#include "drainer/kube/credentials.h"
#include "drainer/kube/kubeconfig.h"
#include "drainer/kube/reach.h"
#include "drainer/kube/transport.h"

struct initial_wait {
        struct credentials_wait w;
        bool ready;
};

static void on_initial_credentials(struct credentials_wait *w) {
        container_of(w, struct initial_wait, w)->ready = true;
}

/* The first credentials, before anything else runs on the loop: an exec plugin's
 * failure ends the verb at once with its message, as kubectl's does. */
static int initial_credentials(struct app *a, struct kube_credentials *ret) {
        _cleanup_free_ char *err = NULL;
        int r;

        for (;;) {
                struct initial_wait iw = {};

                err = mfree(err);
                r = credentials_get(a->creds, 0, ret, &err);
                if (r != -EAGAIN)
                        break;
                credentials_wait(a->creds, &iw.w, on_initial_credentials);
                while (!iw.ready)
                        if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                                break;
                if (!iw.ready) {
                        credentials_unwait(&iw.w);
                        return log_error_errno(EIO, "the exec plugin did not finish");
                }
        }
        if (r < 0)
                return log_error_errno(r, "%s", err ? err : "cannot get credentials");
        return 0;
}

/* -v: the adaptive rate, once per change (ratelimit.h: at most one a second up, one
 * per episode of pushback down). */
static void on_client_rate(double old_qps, double qps, bool pushback, void *userdata) {
        struct app *a = userdata;

        if (a->flags.verbose < 1)
                return;
        log_info("API client rate: %g requests/s (was %g): %s", qps, old_qps,
                 pushback ? "the API server pushed back (429 or Retry-After)"
                          : "the API server answers fast, without pushback");
}

/* The API server's reachability (kube/reach.h), as log lines. */
static void on_reach(bool reachable, const char *line, void *userdata) {
        if (reachable)
                log_info("%s", line);
        else
                log_warning("%s", line);
}

int app_init(struct app *a, const struct global_flags *flags) {
        _cleanup_free_ char *err = NULL;
        struct kube_credentials creds = {};
        struct kube_config_options o = {
                .kubeconfig = flags->kubeconfig,
                .context = flags->context,
                .kubeconfig_env = getenv("KUBECONFIG"),
                .home = getenv("HOME"),
                .service_host = getenv("KUBERNETES_SERVICE_HOST"),
                .service_port = getenv("KUBERNETES_SERVICE_PORT"),
        };
        int r;

        *a = (struct app){ .flags = *flags, .exit_code = EXIT_CONFIG };
        r = kube_config_load(&o, &a->cfg, &err);
        if (r < 0)
                return log_error_errno(r, "%s", err ? err : "cannot load the kubeconfig");
        /* Tokens and keys are in memory from here on: no core dump of this process, and no
         * ptrace or /proc/PID/mem for other processes of the same user. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                log_debug_errno(errno, "prctl(PR_SET_DUMPABLE, 0) failed, ignoring: %m");

        a->exit_code = EXIT_ERROR;
        r = uv_loop_init(&a->loop);
        if (r < 0)
                return log_error_errno(-r, "Cannot initialize the event loop: %s", uv_strerror(r));
        a->loop_ready = true;
        r = timesrc_uv_new(&a->loop, &a->ts);
        if (r < 0)
                return log_oom();
        /* Credentials first: an unreadable token, certificate or key file fails the verb now,
         * as a broken kubeconfig does (before any warning about it). Every request then takes
         * the current ones (a rotated certificate included). */
        a->exit_code = EXIT_CONFIG; /* the credentials the kubeconfig names: its to fix */
        r = credentials_new(&a->loop, a->ts, a->cfg, NULL, &a->creds, &err);
        if (r < 0)
                return log_error_errno(r, "%s", err ? err : "cannot read the credentials");

        if (a->cfg->insecure_skip_tls_verify)
                log_warning("%s: insecure-skip-tls-verify is set: the API server's certificate is "
                            "NOT verified",
                            a->cfg->source);
        if (kube_config_token_in_clear(a->cfg))
                log_warning("%s: the server %s is plain http://: the bearer token is sent unencrypted, "
                            "readable by anyone on the path",
                            a->cfg->source, a->cfg->server);

        /* A broken exec plugin fails the verb now, as kubectl's does. */
        r = initial_credentials(a, &creds);
        if (r < 0)
                return r;
        a->exit_code = EXIT_ERROR;

        struct tls_config tls = {
                .ca_pem = a->cfg->ca_pem,
                .ca_pem_len = a->cfg->ca_pem_len,
                .tls_server_name = a->cfg->tls_server_name,
                .insecure_skip_verify = a->cfg->insecure_skip_tls_verify,
        };
        r = transport_curl_new(&a->loop, &tls, &a->transport);
        if (r < 0)
                return log_error_errno(r, "Cannot set up the HTTP transport: %m");

        struct kube_client_options co = {
                /* auto starts at 20, or at its ceiling if that is lower */
                .qps = flags->qps_max > 0 && flags->qps > flags->qps_max ? flags->qps_max : flags->qps,
                .burst = flags->burst,
                /* --kube-api-qps-max alone asks for auto too */
                .adaptive = flags->qps > 0 && (flags->qps_mode == QPS_AUTO ||
                                               (flags->qps_mode == QPS_DEFAULT && flags->qps_max > 0)),
                .qps_max = flags->qps_max,
                .on_rate = on_client_rate,
                .rate_userdata = a,
                .request_timeout_usec = flags->request_timeout_usec,
                .list_chunk = flags->chunk_size,
                .impersonate_user = flags->as_user,
                .impersonate_groups = flags->as_groups,
                .n_impersonate_groups = flags->n_as_groups,
        };
        r = kube_client_new(a->transport, a->ts, a->cfg, a->creds, &co, &a->client);
        if (r == -EINVAL)
                return log_error_errno(r, "--as/--as-group: invalid value");
        if (r < 0)
                return log_oom();
        /* While the loop runs: says so when the API server has not answered for a while
         * (every verb: no wait without saying why). */
        r = kube_reach_init(&a->reach, a->client, a->ts, a->cfg->server, a->cfg->source, on_reach, a);
        if (r < 0)
                return log_oom();
        a->exit_code = EXIT_DONE;
        log_debug("Using %s (context %s), server %s", a->cfg->source, strna(a->cfg->context_name),
                  a->cfg->server);
        return 0;
}

int app_run_once(struct app *a) {
        kube_reach_poke(&a->reach);
        return uv_run(&a->loop, UV_RUN_ONCE);
}

int app_run_until(struct app *a, const bool *done) {
        while (!*done)
                if (app_run_once(a) == 0)
                        break;
        kube_reach_stop(&a->reach);
        return 0;
}

void app_quit(struct app *a, int exit_code) {
        if (a->quit)
                return;
        a->quit = true;
        a->exit_code = exit_code;
}

void app_stopped(struct app *a) {
        a->stopped = true;
}

int app_run(struct app *a) {
        app_run_until(a, &a->quit);
        if (!a->quit) {
                log_error("internal error: the verb's work ended without an exit code");
                app_quit(a, EXIT_ERROR);
        }
        return a->exit_code;
}

void app_run_until_stopped(struct app *a) {
        while (!a->stopped)
                if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                        break;
}

static void on_app_signal(uv_signal_t *h, int signum) {
        struct app *a = h->data;

        a->on_signal(a, signum, a->signal_userdata);
}

void app_signals_start(struct app *a, app_signal_fn on_signal, void *userdata) {
        a->on_signal = on_signal;
        a->signal_userdata = userdata;
        uv_signal_init(&a->loop, &a->sigint);
        uv_signal_init(&a->loop, &a->sigterm);
        a->sigint.data = a->sigterm.data = a;
        a->signals_ready = true;
        uv_signal_start(&a->sigint, on_app_signal, SIGINT);
        uv_signal_start(&a->sigterm, on_app_signal, SIGTERM);
}

void app_signals_stop(struct app *a) {
        if (!a->signals_ready)
                return;
        a->signals_ready = false;
        uv_close((uv_handle_t *)&a->sigint, NULL);
        uv_close((uv_handle_t *)&a->sigterm, NULL);
}

static void on_credentials_closed(void *userdata) {
        *(bool *)userdata = true;
}

static void on_transport_closed(struct transport *t, void *userdata) {
        bool *closed = userdata;

        *closed = true;
}

int app_done(struct app *a) {
        int r = 0;

        app_signals_stop(a);
        kube_reach_done(&a->reach);
        if (a->client) {
                kube_client_cancel_all(a->client);
                /* Let the cancelled calls deliver their callbacks. */
                while (kube_client_calls_in_flight(a->client) > 0)
                        if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                                break;
                kube_client_free(a->client);
                a->client = NULL;
        }
        if (a->transport) {
                bool closed = false;

                transport_close(a->transport, on_transport_closed, &closed);
                while (!closed)
                        if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                                break;
                transport_free(a->transport);
                a->transport = NULL;
        }
        if (a->creds) {
                bool closed = false;

                /* A plugin still running is killed with its process group. */
                credentials_close(a->creds, on_credentials_closed, &closed);
                while (!closed)
                        if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                                break;
                a->creds = NULL;
        }
        if (a->loop_ready) {
                uv_run(&a->loop, UV_RUN_DEFAULT); /* finish pending closes */
                r = uv_loop_close(&a->loop);
                if (r < 0)
                        log_debug("uv_loop_close: %s", uv_strerror(r));
                a->loop_ready = false;
        }
        timesrc_uv_free(a->ts);
        a->ts = NULL;
        a->cfg = kube_config_free(a->cfg);
        return r;
}

int app_exit_code(int r) {
        switch (r) {
        case 0:
                return EXIT_DONE;
        case -ETIMEDOUT:
                return EXIT_TIMEOUT;
        case APP_ERR_API_SILENT:
        case -ECONNREFUSED:
        case -ENXIO: /* DNS name not found */
        case -EHOSTUNREACH:
        case -ENETUNREACH:
        case -EKEYREJECTED:
        case -EPROTO:
        case -ECONNRESET:
                return EXIT_UNREACHABLE;
        case -ENOENT:
                return EXIT_NOT_FOUND;
        case -EACCES:
                return EXIT_FORBIDDEN;
        default:
                return EXIT_ERROR;
        }
}

const char *app_exit_code_to_string(int code) {
        switch (code) {
        case EXIT_DONE:
                return NULL;
        case EXIT_USAGE:
                return "usage";
        case EXIT_TIMEOUT:
                return "timeout";
        case EXIT_REFUSED:
                return "refused";
        case EXIT_UNREACHABLE:
                return "api-unreachable";
        case EXIT_NOT_FOUND:
                return "node-not-found";
        case EXIT_CONFIG:
                return "kubeconfig-invalid";
        case EXIT_FORBIDDEN:
                return "forbidden";
        case EXIT_UNSUPPORTED:
                return "unsupported";
        default:
                return code > EXIT_INTERRUPTED(0) && code < EXIT_INTERRUPTED(65) ? "interrupted" : "error";
        }
}

cJSON *app_error_summary(const char *verb, const char *node, int exit_code, const char *message) {
        /* the drain summary's head, of which this is the part that is known */
        return run_summary_error(verb, node, exit_code, app_exit_code_to_string(exit_code), message);
}
