/* The guide's Prometheus queries of `drainer doctor`, asked all at once
 * through the transport (GET URL/api/v1/query?query=...), and their answers
 * parsed into numbers. Owns the calls in flight until the last one answers;
 * judges nothing (drainer/doctor/rules.c does) and never talks to the API server. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/doctor/doctor-prom.h"
#include "drainer/kube/client.h"
#include "drainer/kube/transport.h"

#define PROM_TIMEOUT_USEC (UINT64_C(15) * 1000000)
#define PROM_MAX_BODY     (8u << 20)

static bool sample_value(const cJSON *pair, double *ret) {
        const cJSON *v = cJSON_GetArrayItem(pair, 1);
        char *end;
        double d;

        if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2 || !cJSON_IsString(v))
                return false;
        /* Prometheus writes numbers as strings: "0.5", "NaN", "+Inf", "-Inf". */
        d = strtod(v->valuestring, &end);
        if (end == v->valuestring || *end)
                return false;
        *ret = d;
        return true;
}

int doctor_prom_parse(const char *body, size_t len, struct doctor_metric *ret, char **ret_error) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_ParseWithLength(body, len);
        const char *status, *type;
        const cJSON *result, *item;
        struct doctor_metric m = {};

        if (ret_error)
                *ret_error = NULL;
        if (!cJSON_IsObject(root))
                return -EBADMSG;
        status = json_str(root, "status");
        if (streq_ptr(status, "error")) {
                if (ret_error && asprintf(ret_error, "%s: %s", strna(json_str(root, "errorType")),
                                          strna(json_str(root, "error"))) < 0)
                        *ret_error = NULL;
                return -EPROTO;
        }
        if (!streq_ptr(status, "success"))
                return -EBADMSG;
        type = json_str(root, "data.resultType");
        result = json_path(root, "data.result");
        if (streq_ptr(type, "scalar")) {
                double d;

                if (!sample_value(result, &d))
                        return -EBADMSG;
                if (!isnan(d))
                        m = (struct doctor_metric){ .have = true, .value = d };
        } else if (streq_ptr(type, "vector")) {
                if (!cJSON_IsArray(result))
                        return -EBADMSG;
                cJSON_ArrayForEach(item, result) {
                        double d;

                        if (!sample_value(json_path(item, "value"), &d))
                                return -EBADMSG;
                        if (isnan(d))
                                continue;
                        if (!m.have || d > m.value)
                                m = (struct doctor_metric){ .have = true, .value = d };
                }
        } else
                return -EBADMSG;
        *ret = m;
        return 0;
}

void doctor_prom_results_done(struct doctor_prom_results *m) {
        free(m->error_kcm);
        free(m->error_scheduler);
        free(m->error_kubelet);
        free(m->error_plugin);
        *m = (struct doctor_prom_results){};
}

struct doctor_prom {
        struct transport *transport;   /* borrowed */
        char *url;                     /* the base, without trailing slashes */
        struct doctor_prom_results *m; /* borrowed */
        unsigned pending;
        bool depth_fallback;
        int error;
        doctor_prom_done_fn done;
        void *userdata;
};

struct prom_query {
        struct doctor_prom *p;
        const char *query;
        struct doctor_metric *out;
        char **error; /* the group's first error */
};

static void prom_set_error(struct prom_query *q, const char *fmt, ...) _printf_(2, 3);
static void prom_set_error(struct prom_query *q, const char *fmt, ...) {
        va_list ap;
        char *s;

        if (*q->error)
                return;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) >= 0)
                *q->error = s;
        va_end(ap);
}

static void prom_unref(struct doctor_prom *p) {
        if (--p->pending > 0)
                return;
        p->done(p->error, p->userdata);
        free(p->url);
        free(p);
}

static int prom_query_start(struct doctor_prom *p, const char *query, struct doctor_metric *out,
                            char **error);

static void on_prom_done(struct http_call *call, int error, const struct http_response *resp,
                         void *userdata) {
        struct prom_query *q = userdata;
        struct doctor_prom *p = q->p;
        _cleanup_free_ char *perr = NULL;
        int r;

        if (error < 0)
                prom_set_error(q, "cannot query it: %s", strerror(-error));
        else {
                r = doctor_prom_parse(resp->body, resp->body_len, q->out, &perr);
                if (r == -EPROTO)
                        prom_set_error(q, "query refused (HTTP %ld): %s", resp->status, strna(perr));
                else if (r < 0 || resp->status != 200)
                        prom_set_error(q, "unexpected answer (HTTP %ld, %s)", resp->status,
                                       r < 0 ? "not a Prometheus query result" : "status success");
                /* The guide's depth query carries kube-prometheus-stack's endpoint label: ask
                 * without it when nothing has it. */
                else if (streq(q->query, DOCTOR_Q_WQ_DEPTH) && !q->out->have && !p->depth_fallback) {
                        p->depth_fallback = true;
                        p->m->depth_query = DOCTOR_Q_WQ_DEPTH_ANY;
                        if (prom_query_start(p, DOCTOR_Q_WQ_DEPTH_ANY, q->out, q->error) < 0)
                                prom_set_error(q, "cannot start a query");
                }
        }
        free(q);
        prom_unref(p);
}

static int prom_query_start(struct doctor_prom *p, const char *query, struct doctor_metric *out,
                            char **error) {
        _cleanup_free_ char *eq = kube_query_escape(query), *url = NULL;
        static const char *const headers[] = { "Accept: application/json", NULL };
        struct prom_query *q;
        int r;

        if (!eq || asprintf(&url, "%s/api/v1/query?query=%s", p->url, eq) < 0)
                return -ENOMEM;
        q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *q = (struct prom_query){ .p = p, .query = query, .out = out, .error = error };
        r = transport_submit(p->transport,
                             &(struct http_request){
                                     .method = "GET",
                                     .url = url,
                                     .headers = headers,
                                     .timeout_usec = PROM_TIMEOUT_USEC,
                                     .max_body = PROM_MAX_BODY,
                             },
                             NULL, on_prom_done, q, NULL);
        if (r < 0) {
                free(q);
                return r;
        }
        p->pending++;
        return 0;
}

int doctor_prom_start(struct transport *t, const char *url, struct doctor_prom_results *m,
                      doctor_prom_done_fn done, void *userdata) {
        const struct {
                const char *q;
                struct doctor_metric *out;
                char **err;
        } qs[] = {
                { DOCTOR_Q_WQ_ADDS, &m->wq_adds, &m->error_kcm },
                { DOCTOR_Q_WQ_DEPTH, &m->wq_depth, &m->error_kcm },
                { DOCTOR_Q_WQ_WORK, &m->wq_work, &m->error_kcm },
                { DOCTOR_Q_SCHED_SLI, &m->sched_sli, &m->error_scheduler },
                { DOCTOR_Q_SCHED_ALG, &m->sched_alg, &m->error_scheduler },
                { DOCTOR_Q_KUBELET_PREPARE, &m->kubelet_prepare, &m->error_kubelet },
                { DOCTOR_Q_KUBELET_UNPREPARE, &m->kubelet_unprepare, &m->error_kubelet },
                { DOCTOR_Q_PLUGIN_PREPARE, &m->plugin_prepare, &m->error_plugin },
                { DOCTOR_Q_PLUGIN_UNPREPARE, &m->plugin_unprepare, &m->error_plugin },
        };
        struct doctor_prom *p;
        size_t n = strlen(url);

        while (n > 0 && url[n - 1] == '/')
                n--;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (struct doctor_prom){ .transport = t, .m = m, .done = done, .userdata = userdata };
        p->url = strndup(url, n);
        if (!p->url) {
                free(p);
                return -ENOMEM;
        }
        m->depth_query = DOCTOR_Q_WQ_DEPTH;
        /* Held while sending, so that no answer can end the call before the last query is sent. */
        p->pending = 1;
        for (size_t i = 0; i < ELEMENTSOF(qs); i++) {
                int r = prom_query_start(p, qs[i].q, qs[i].out, qs[i].err);

                if (r < 0) {
                        p->error = r;
                        break;
                }
        }
        if (p->pending == 1) {
                /* Nothing was sent: fail without running done. */
                int r = p->error;

                assert(r < 0);

                free(p->url);
                free(p);
                return r;
        }
        p->pending--; /* the answers are still to come: done runs from the last one */
        return 0;
}
