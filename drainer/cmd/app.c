/* The connection every verb uses: kubeconfig -> TLS settings -> libcurl
 * transport on a libuv loop -> rate-limited API client. Owns all of them and
 * closes them in order, so uv_loop_close() succeeds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/app.h"
#include "drainer/client.h"
#include "drainer/kubeconfig.h"
#include "drainer/log.h"
#include "drainer/timesrc.h"
#include "drainer/transport.h"

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

        *a = (struct app){ .flags = *flags };
        r = kube_config_load(&o, &a->cfg, &err);
        if (r < 0)
                return log_error_errno(r, "%s", err ? err : "cannot load the kubeconfig");
        if (a->cfg->insecure_skip_tls_verify)
                log_warning("%s: insecure-skip-tls-verify is set: the API server's certificate is "
                            "NOT verified",
                            a->cfg->source);
        if (kube_config_token_in_clear(a->cfg))
                log_warning("%s: the server %s is plain http://: the bearer token is sent unencrypted, "
                            "readable by anyone on the path",
                            a->cfg->source, a->cfg->server);

        r = uv_loop_init(&a->loop);
        if (r < 0)
                return log_error_errno(-r, "Cannot initialize the event loop: %s", uv_strerror(r));
        a->loop_ready = true;
        r = timesrc_uv_new(&a->loop, &a->ts);
        if (r < 0)
                return log_oom();

        /* Credentials first: an exec plugin may hand out the client certificate. */
        r = kube_config_credentials(a->cfg, timesrc_realtime(a->ts), false, &creds, &err);
        if (r < 0)
                return log_error_errno(r, "%s", err ? err : "cannot get credentials");

        struct tls_config tls = {
                .ca_pem = a->cfg->ca_pem,
                .ca_pem_len = a->cfg->ca_pem_len,
                .client_cert_pem = creds.client_cert_pem,
                .client_cert_pem_len = creds.client_cert_pem_len,
                .client_key_pem = creds.client_key_pem,
                .client_key_pem_len = creds.client_key_pem_len,
                .tls_server_name = a->cfg->tls_server_name,
                .insecure_skip_verify = a->cfg->insecure_skip_tls_verify,
        };
        r = transport_curl_new(&a->loop, &tls, &a->transport);
        if (r < 0)
                return log_error_errno(r, "Cannot set up the HTTP transport: %m");

        struct kube_client_options co = {
                .qps = flags->qps,
                .burst = flags->burst,
        };
        r = kube_client_new(a->transport, a->ts, a->cfg, &co, &a->client);
        if (r < 0)
                return log_oom();
        log_debug("Using %s (context %s), server %s", a->cfg->source, strna(a->cfg->context_name),
                  a->cfg->server);
        return 0;
}

int app_run_until(struct app *a, const bool *done) {
        while (!*done)
                if (uv_run(&a->loop, UV_RUN_ONCE) == 0)
                        break;
        return 0;
}

static void on_transport_closed(struct transport *t, void *userdata) {
        bool *closed = userdata;

        *closed = true;
}

int app_done(struct app *a) {
        int r = 0;

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
        default:
                return EXIT_ERROR;
        }
}
