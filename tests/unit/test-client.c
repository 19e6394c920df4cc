/* kube client against a fake clock and a scripted fake transport: auth header,
 * token bucket, retries (429 Retry-After, 5xx backoff, connection errors),
 * non-retried POSTs and evictions, 401 refresh, Status mapping, pagination,
 * watch streams, cancellation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drainer/base/json.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/kubeconfig.h"
#include "drainer/kube/reach.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS     USEC_PER_MSEC
#define SEC    USEC_PER_SEC
#define MSEC   USEC_PER_MSEC
#define T0     TEST_API_T0
#define SERVER "https://api.test.example:6443"

struct env {
        char *dir;        /* private: holds the token file */
        char *token_file; /* for the user's tokenFile: token */
        struct test_api *api;
};

/* What a done callback saw. */
struct result {
        int calls;
        int error;
        long status;
        char *reason, *message, *rv;
        char *json;
        uint64_t retry_after;
        unsigned attempts;
        /* watches and lists */
        int events[_WATCH_EVENT_TYPE_MAX];
        char *names[16];
        int n_names;
        int pages;
        int page_items[8];
        int stop_after_events; /* on_event returns -EPIPE after this many, 0 = never */
};

static void result_clear(struct result *r) {
        free(r->reason);
        free(r->message);
        free(r->rv);
        free(r->json);
        for (int i = 0; i < r->n_names; i++)
                free(r->names[i]);
        *r = (struct result){};
}

static char *xstrdup0(const char *s) {
        return s ? strdup(s) : NULL;
}

static void on_done(const struct kube_result *res, void *userdata) {
        struct result *r = userdata;

        r->calls++;
        r->error = res->error;
        r->status = res->status;
        free(r->reason);
        free(r->message);
        free(r->rv);
        free(r->json);
        r->reason = xstrdup0(res->reason);
        r->message = xstrdup0(res->message);
        r->rv = xstrdup0(res->resource_version);
        r->json = res->json ? cJSON_PrintUnformatted(res->json) : NULL;
        r->retry_after = res->retry_after_usec;
        r->attempts = res->attempts;
}

static int on_event(enum watch_event_type type, const cJSON *object, void *userdata) {
        struct result *r = userdata;
        int total = 0;

        assert_true(type >= 0 && type < _WATCH_EVENT_TYPE_MAX);
        r->events[type]++;
        if (r->n_names < 16)
                r->names[r->n_names++] = xstrdup0(json_str(object, "metadata.name"));
        for (int i = 0; i < _WATCH_EVENT_TYPE_MAX; i++)
                total += r->events[i];
        if (r->stop_after_events && total >= r->stop_after_events)
                return -EPIPE;
        return 0;
}

static int on_page(const cJSON *items, void *userdata) {
        struct result *r = userdata;
        const cJSON *it;

        r->page_items[r->pages++] = cJSON_GetArraySize(items);
        cJSON_ArrayForEach(it, items) if (r->n_names < 16) r->names[r->n_names++] =
                xstrdup0(json_str(it, "metadata.name"));
        return 0;
}

static void env_client(struct env *e, const struct kube_client_options *opts) {
        test_api_client(e->api, opts);
}

/* user_yaml: the "user:" mapping of the kubeconfig. */
static struct env *env_new(const char *user_yaml) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->dir = test_private_dir("client");
        e->token_file = test_write_file(e->dir, "token", "file-token-AAAA\n");
        /* Defaults for most tests: no rate limit, quick deterministic backoff. */
        e->api = test_api_new(&(struct test_api_options){
                .server = SERVER,
                .user_yaml = user_yaml,
                .dir = e->dir,
                .client = &(struct kube_client_options){ .qps = 0, .random_seed = 7 },
        });
        return e;
}

static int setup(void **state) {
        *state = env_new("    token: secret-token-1\n");
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        test_api_free(e->api);
        free(e->token_file);
        test_private_dir_remove(e->dir);
        free(e);
        return 0;
}

static const char *status_json(char *buf, size_t size, int code, const char *reason, const char *message) {
        snprintf(buf, size,
                 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                 "\"message\":\"%s\",\"reason\":\"%s\",\"code\":%d}",
                 message, reason, code);
        return buf;
}

/* API answers and request bodies from tests/unit/fixtures/client/, read once for the
 * group, compact as the API server sends them. */
static char *node_json, *event_json, *pdb_429, *pods_page_1, *pods_page_2;

static char *compact_fixture(const char *rel) {
        cJSON *j = test_fixture_json(rel);
        char *s = cJSON_PrintUnformatted(j);

        assert_non_null(s);
        cJSON_Delete(j);
        return s;
}

static int fixtures_load(void **state) {
        node_json = compact_fixture("client/node.json");
        event_json = compact_fixture("client/event.json");
        pdb_429 = compact_fixture("client/eviction-429-pdb.json");
        pods_page_1 = compact_fixture("client/pods-page-1.json");
        pods_page_2 = compact_fixture("client/pods-page-2.json");
        return 0;
}

static int fixtures_free(void **state) {
        free(node_json);
        free(event_json);
        free(pdb_429);
        free(pods_page_1);
        free(pods_page_2);
        return 0;
}

static void test_get_ok_and_auth(void **state) {
        struct env *e = *state;
        struct result r = {};
        const struct fake_request *req;
        struct kube_client_stats st;

        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        /* Nothing is sent nor completed from inside the call. */
        assert_int_equal(fake_transport_n_requests(e->api->ft), 0);
        assert_int_equal(r.calls, 0);
        assert_int_equal(kube_client_calls_in_flight(e->api->client), 1);

        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.attempts, 1);
        assert_non_null(r.json);
        assert_non_null(strstr(r.json, "\"name\":\"node-1\""));
        assert_int_equal(kube_client_calls_in_flight(e->api->client), 0);

        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        req = fake_transport_request(e->api->ft, 0);
        assert_string_equal(req->method, "GET");
        assert_string_equal(req->url, SERVER "/api/v1/nodes/node-1");
        assert_string_equal(fake_request_header(req, "Authorization"), "Bearer secret-token-1");
        assert_string_equal(fake_request_header(req, "Accept"), "application/json");
        assert_null(fake_request_header(req, "Content-Type"));
        assert_false(req->stream);
        assert_int_equal(req->timeout_usec, 30 * SEC); /* default per-attempt timeout */

        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.requests, 1);
        assert_int_equal(st.retries, 0);
        result_clear(&r);
}

static void test_429_retry_after(void **state) {
        struct env *e = *state;
        struct result r = {};
        char body[512];

        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/node-1",
                              &(struct fake_reply){
                                      .status = 429,
                                      .headers = { "Retry-After: 3" },
                                      .body = status_json(body, sizeof(body), 429, "TooManyRequests",
                                                          "Too many requests, please try again later."),
                              });
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        assert_int_equal(r.calls, 0);

        fake_clock_advance(e->api->clock, 3 * SEC - 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        fake_clock_advance(e->api->clock, 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_int_equal(fake_transport_request(e->api->ft, 1)->at_usec -
                                 fake_transport_request(e->api->ft, 0)->at_usec,
                         3 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.attempts, 2);
        result_clear(&r);
}

/* 429 without a header but with details.retryAfterSeconds in the Status. */
static void test_429_retry_after_in_status(void **state) {
        struct env *e = *state;
        struct result r = {};

        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 429,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"reason\":\"TooManyRequests\",\"code\":429,"
                                   "\"details\":{\"retryAfterSeconds\":2}}");
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        fake_clock_advance(e->api->clock, 2 * SEC - 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        fake_clock_advance(e->api->clock, 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        result_clear(&r);
}

static void test_5xx_backoff_gives_up(void **state) {
        struct env *e = *state;
        struct result r = {};
        const uint64_t base = 100 * MS, cap = 800 * MS;
        uint64_t prev = 0, expected_max = base;
        struct kube_client_stats st;
        bool jittered = false;
        char body[512];

        env_client(e, &(struct kube_client_options){
                              .max_attempts = 7,
                              .backoff_base_usec = base,
                              .backoff_cap_usec = cap,
                              .random_seed = 12345,
                      });
        fake_transport_expect(
                e->api->ft, "GET", "/api/v1/nodes",
                &(struct fake_reply){
                        .status = 503,
                        .times = FAKE_FOREVER,
                        .body = status_json(body, sizeof(body), 503, "ServiceUnavailable",
                                            "the server is currently unable to handle the request"),
                });
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        for (int i = 0; i < 100 && r.calls == 0; i++)
                fake_clock_step(e->api->clock, 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -EIO);
        assert_int_equal(r.status, 503);
        assert_int_equal(r.attempts, 7);
        assert_string_equal(r.reason, "ServiceUnavailable");
        assert_string_equal(r.message, "the server is currently unable to handle the request");
        assert_int_equal(fake_transport_n_requests(e->api->ft), 7);

        /* Delay before attempt k+1 lies in [d/2, d] with d = min(base * 2^(k-1), cap),
         * so it never shrinks, is capped, and is not always the full d. */
        for (size_t i = 1; i < 7; i++) {
                uint64_t d = fake_transport_request(e->api->ft, i)->at_usec -
                             fake_transport_request(e->api->ft, i - 1)->at_usec;

                print_message("retry %zu after %llu ms\n", i, (unsigned long long)(d / MS));
                assert_true(d >= expected_max / 2);
                assert_true(d <= expected_max);
                if (expected_max < cap)
                        assert_true(d >= prev); /* grows until the cap */
                assert_true(d <= cap);
                jittered |= d != expected_max;
                prev = d;
                expected_max = expected_max * 2 > cap ? cap : expected_max * 2;
        }
        assert_true(jittered);
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.requests, 7);
        assert_int_equal(st.retries, 6);

        /* Nothing more happens afterwards. */
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 7);
        assert_int_equal(r.calls, 1);
        result_clear(&r);
}

static void test_connection_errors_retried(void **state) {
        struct env *e = *state;
        struct result r = {};

        fake_transport_expect_error(e->api->ft, "GET", "/api/v1/nodes", -ECONNREFUSED, 1);
        fake_transport_expect_error(e->api->ft, "GET", "/api/v1/nodes", -ETIMEDOUT, 1);
        fake_transport_expect_error(e->api->ft, "GET", "/api/v1/nodes", -ECONNRESET, 1);
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        for (int i = 0; i < 100 && r.calls == 0; i++)
                fake_clock_step(e->api->clock, 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.attempts, 4);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 4);
        result_clear(&r);

        /* And a connection error that persists ends with that error. */
        env_client(e, &(struct kube_client_options){ .max_attempts = 3, .random_seed = 1 });
        fake_transport_expect_error(e->api->ft, "GET", "/api/v1/pods", -ECONNREFUSED, FAKE_FOREVER);
        assert_int_equal(kube_get(e->api->client, "/api/v1/pods", on_done, &r, NULL), 0);
        for (int i = 0; i < 100 && r.calls == 0; i++)
                fake_clock_step(e->api->clock, 60 * SEC);
        assert_int_equal(r.error, -ECONNREFUSED);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.attempts, 3);
        assert_non_null(r.message);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/pods"), 3);
        result_clear(&r);
}

/* A host name that does not resolve is said so, in the client's last error and in the
 * call's message: not "No route to host". */
static void test_dns_failure_named(void **state) {
        struct env *e = *state;
        struct kube_client_stats st;
        struct result r = {};

        fake_transport_expect_error(e->api->ft, "GET", "/api/v1/nodes", -ENXIO, FAKE_FOREVER);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        for (int i = 0; i < 100000 && r.calls == 0; i++)
                fake_clock_step(e->api->clock, 100 * MSEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -ENXIO);
        kube_client_get_stats(e->api->client, &st);
        assert_non_null(strstr(st.last_error, "DNS name not found"));
        assert_non_null(r.message);
        assert_non_null(strstr(r.message, "DNS name not found"));
        result_clear(&r);
}

/* What the CLI says while the API server does not answer: since when every answer
 * has failed, and the last failure; a success clears it. */
static void test_failing_since(void **state) {
        struct env *e = *state;
        struct kube_client_stats st;
        struct result r = {};
        uint64_t first;
        bool saw503 = false;

        fake_transport_expect_error(e->api->ft, "GET", "/api/v1/nodes", -ECONNREFUSED, 2);
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes", 503, "{}");
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes", 200, node_json);
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.failing_since_usec, 0);
        assert_string_equal(st.last_error, "");
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        for (int i = 0; i < 1000 && fake_transport_n_requests(e->api->ft) < 2; i++)
                fake_clock_step(e->api->clock, 10 * MSEC);
        kube_client_get_stats(e->api->client, &st);
        assert_true(st.failing_since_usec > 0);
        assert_string_equal(st.last_error, "connection refused");
        first = st.failing_since_usec;
        for (int i = 0; i < 1000 && r.calls == 0; i++) {
                fake_clock_step(e->api->clock, 10 * MSEC);
                kube_client_get_stats(e->api->client, &st);
                /* still failing: since the first failure, whatever came after */
                if (st.failing_since_usec)
                        assert_int_equal(st.failing_since_usec, first);
                saw503 |= st.failing_since_usec && streq(st.last_error, "HTTP 503");
        }
        assert_true(saw503);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.failing_since_usec, 0);
        assert_true(st.last_ok_usec > st.last_error_usec);
        result_clear(&r);
}

struct reach_log {
        int down, up;
        char last[256];
};

static void on_reach_line(bool reachable, const char *line, void *userdata) {
        struct reach_log *l = userdata;

        if (reachable)
                l->up++;
        else
                l->down++;
        snprintf(l->last, sizeof(l->last), "%s", line);
}

/* Silent: never answered, or only failures for 5 s (kube_client_silent); and what
 * kube/reach says meanwhile: once failures have lasted 5 s, and once when the API
 * server answers again. */
static void test_silent_and_reach(void **state) {
        struct env *e = *state;
        struct reach_log log = {};
        struct kube_reach reach;
        struct result r = {};
        char *m = NULL;

        assert_true(kube_client_silent(e->api->client, &m));
        assert_non_null(strstr(m, "it never answered"));
        free(m);
        m = NULL;
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        for (int i = 0; i < 100 && r.calls == 0; i++)
                fake_clock_step(e->api->clock, 10 * MSEC);
        assert_int_equal(r.error, 0);
        result_clear(&r);
        assert_false(kube_client_silent(e->api->client, &m));

        assert_int_equal(kube_reach_init(&reach, e->api->client, e->api->ts, "https://api", "kc",
                                         on_reach_line, &log),
                         0);
        fake_transport_expect_error(e->api->ft, "GET", "/api/v1/nodes", -ECONNREFUSED, FAKE_FOREVER);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        for (int i = 0; i < 3000 && log.down == 0 && r.calls == 0; i++) {
                kube_reach_poke(&reach);
                fake_clock_step(e->api->clock, 100 * MSEC);
        }
        assert_int_equal(log.down, 1);
        assert_non_null(strstr(log.last, "cannot reach the API server https://api (kc) for "));
        assert_non_null(strstr(log.last, "connection refused; retrying"));
        assert_true(kube_client_silent(e->api->client, &m));
        assert_non_null(strstr(m, "timed out waiting for the API server"));
        assert_null(strstr(m, "never answered"));
        free(m);
        for (int i = 0; i < 10000 && r.calls == 0; i++) {
                kube_reach_poke(&reach);
                fake_clock_step(e->api->clock, 100 * MSEC);
        }
        assert_int_equal(r.calls, 1);
        result_clear(&r);
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        for (int i = 0; i < 100 && log.up == 0; i++) {
                kube_reach_poke(&reach);
                fake_clock_step(e->api->clock, 100 * MSEC);
        }
        assert_int_equal(log.up, 1);
        assert_string_equal(log.last, "the API server https://api answers again");
        result_clear(&r);
        kube_reach_stop(&reach);
        kube_reach_done(&reach);
}

static void test_post_not_retried(void **state) {
        struct env *e = *state;
        struct result r = {};
        const struct fake_request *req;
        char body[512];

        fake_transport_expect_json(
                e->api->ft, "POST", "/api/v1/namespaces/default/events", 503,
                status_json(body, sizeof(body), 503, "ServiceUnavailable", "etcd is down"));
        assert_int_equal(kube_create(e->api->client, "/api/v1/namespaces/default/events", event_json,
                                     on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -EIO);
        assert_int_equal(r.attempts, 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        req = fake_transport_request(e->api->ft, 0);
        assert_string_equal(req->method, "POST");
        assert_string_equal(fake_request_header(req, "Content-Type"), "application/json");
        assert_string_equal(req->body, event_json);
        assert_int_equal(req->body_len, strlen(event_json));
        result_clear(&r);

        /* Nor after a connection error: the server may have acted on it. */
        fake_transport_expect_error(e->api->ft, "POST", "/api/v1/namespaces/default/events", -ECONNRESET, 1);
        assert_int_equal(kube_create(e->api->client, "/api/v1/namespaces/default/events", event_json,
                                     on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -ECONNRESET);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        result_clear(&r);

        /* 409 AlreadyExists maps to -EEXIST. */
        fake_transport_expect_json(e->api->ft, "POST", "/api/v1/namespaces/default/events", 409,
                                   status_json(body, sizeof(body), 409, "AlreadyExists",
                                               "events \\\"node-1.drainer\\\" already exists"));
        assert_int_equal(kube_create(e->api->client, "/api/v1/namespaces/default/events", event_json,
                                     on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, -EEXIST);
        assert_string_equal(r.message, "events \"node-1.drainer\" already exists");
        result_clear(&r);
}

static void test_patch(void **state) {
        struct env *e = *state;
        struct result r = {};
        const char *patch = "{\"spec\":{\"unschedulable\":true}}";

        fake_transport_expect_json(e->api->ft, "PATCH", "/api/v1/nodes/node-1", 500, "oops");
        fake_transport_expect_json(e->api->ft, "PATCH", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_patch(e->api->client, "/api/v1/nodes/node-1", KUBE_PATCH_STRATEGIC, patch,
                                    on_done, &r, NULL),
                         0);
        for (int i = 0; i < 10 && r.calls == 0; i++)
                fake_clock_step(e->api->clock, 60 * SEC);
        assert_int_equal(r.error, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_string_equal(fake_request_header(fake_transport_request(e->api->ft, 1), "Content-Type"),
                            "application/strategic-merge-patch+json");
        assert_string_equal(fake_transport_request(e->api->ft, 1)->body, patch);
        result_clear(&r);

        assert_int_equal(kube_patch(e->api->client, "/api/v1/nodes/node-1", (enum kube_patch_type)7, patch,
                                    on_done, &r, NULL),
                         -EINVAL);
}

static void test_evict_429_handed_back(void **state) {
        struct env *e = *state;
        struct result r = {};
        const struct fake_request *req;
        cJSON *body;

        fake_transport_expect_json(e->api->ft, "POST", "/api/v1/namespaces/ml/pods/inference-0/eviction",
                                   429, pdb_429);
        assert_int_equal(kube_evict(e->api->client, "ml", "inference-0", -1, false, on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 5 * 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -EAGAIN);
        assert_int_equal(r.status, 429);
        assert_string_equal(r.reason, "TooManyRequests");
        assert_string_equal(r.message, "Cannot evict pod as it would violate the pod's disruption budget.");
        assert_int_equal(r.retry_after, 10 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1); /* not retried */

        req = fake_transport_request(e->api->ft, 0);
        assert_string_equal(fake_request_header(req, "Content-Type"), "application/json");
        body = cJSON_Parse(req->body);
        assert_non_null(body);
        assert_string_equal(json_str(body, "apiVersion"), "policy/v1");
        assert_string_equal(json_str(body, "kind"), "Eviction");
        assert_string_equal(json_str(body, "metadata.name"), "inference-0");
        assert_string_equal(json_str(body, "metadata.namespace"), "ml");
        assert_null(json_path(body, "deleteOptions"));
        cJSON_Delete(body);
        result_clear(&r);

        /* grace period and dry run */
        fake_transport_expect_json(
                e->api->ft, "POST", "/api/v1/namespaces/ml/pods/inference-0/eviction", 201,
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\",\"code\":201}");
        assert_int_equal(kube_evict(e->api->client, "ml", "inference-0", 30, true, on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, 0);
        body = cJSON_Parse(fake_transport_request(e->api->ft, 1)->body);
        assert_int_equal(json_int(body, "deleteOptions.gracePeriodSeconds", -1), 30);
        assert_string_equal(
                cJSON_GetStringValue(cJSON_GetArrayItem(json_path(body, "deleteOptions.dryRun"), 0)), "All");
        cJSON_Delete(body);
        result_clear(&r);
}

static void test_status_mapping(void **state) {
        struct env *e = *state;
        struct result r = {};
        char body[512];

        fake_transport_expect_json(
                e->api->ft, "GET", "/api/v1/namespaces/ml/pods/gone", 404,
                status_json(body, sizeof(body), 404, "NotFound", "pods \\\"gone\\\" not found"));
        assert_int_equal(kube_get(e->api->client, "/api/v1/namespaces/ml/pods/gone", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -ENOENT);
        assert_int_equal(r.status, 404);
        assert_string_equal(r.reason, "NotFound");
        assert_string_equal(r.message, "pods \"gone\" not found");
        assert_null(r.json);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        result_clear(&r);

        /* 403 Forbidden */
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes", 403,
                                   status_json(body, sizeof(body), 403, "Forbidden",
                                               "nodes is forbidden: User \\\"x\\\" cannot list resource"));
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 60 * SEC);
        assert_int_equal(r.error, -EACCES);
        assert_string_equal(r.reason, "Forbidden");
        result_clear(&r);

        /* A body that is not a Status: the HTTP code alone. */
        fake_transport_expect_json(e->api->ft, "GET", "/healthz", 404, "404 page not found\n");
        assert_int_equal(kube_get(e->api->client, "/healthz", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, -ENOENT);
        assert_null(r.reason);
        result_clear(&r);

        /* A 200 whose body is not JSON. */
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, "<html>");
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, -EBADMSG);
        result_clear(&r);
}

static void test_401_refresh_once(void **state) {
        struct env *e = *state;
        struct result r = {};
        struct stat st;
        struct timespec times[2];
        char body[512];
        int fd;

        teardown(state);
        e = env_new("    tokenFile: token\n");
        *state = e;

        status_json(body, sizeof(body), 401, "Unauthorized", "Unauthorized");
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/node-1",
                              &(struct fake_reply){ .status = 401, .body = body, .delay_usec = 1 * SEC });
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        assert_string_equal(fake_request_header(fake_transport_request(e->api->ft, 0), "Authorization"),
                            "Bearer file-token-AAAA");

        /* Rotate the token in place, same size and mtime: only a forced refresh sees it. */
        assert_int_equal(stat(e->token_file, &st), 0);
        fd = open(e->token_file, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, "file-token-BBBB\n", 16, 0), 16);
        close(fd);
        times[0] = st.st_atim;
        times[1] = st.st_mtim;
        assert_int_equal(utimensat(AT_FDCWD, e->token_file, times, 0), 0);

        fake_clock_advance(e->api->clock, 1 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_string_equal(fake_request_header(fake_transport_request(e->api->ft, 1), "Authorization"),
                            "Bearer file-token-BBBB");
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.attempts, 1); /* the 401 round does not count as an attempt */
        result_clear(&r);

        /* Another 401 while the file has not changed again: the refresh finds nothing newer,
         * so the call fails with the credentials' reason instead of resending the same
         * token. Past the process-wide limiter first (the refresh above was just now). */
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/pods", 401, body);
        assert_int_equal(kube_get(e->api->client, "/api/v1/pods", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -EACCES);
        assert_int_equal(r.status, 401);
        test_assert_contains(r.message, "their files have not changed");
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/pods"), 1);
        result_clear(&r);
}

/* --chunk-size N (kubectl's): every list of the client pages by N, whatever its own
 * page size. */
static void test_list_chunk(void **state) {
        struct env *e = *state;
        struct result r = {};
        char *v;

        env_client(e, &(struct kube_client_options){ .list_chunk = 7, .random_seed = 1 });
        fake_transport_expect_json(
                e->api->ft, "GET", "/api/v1/nodes?", 200,
                "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[]}");
        assert_int_equal(kube_list(e->api->client, "/api/v1/nodes", 500, NULL, on_page, on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, 0);
        v = fake_request_param(fake_transport_request(e->api->ft, 0), "limit");
        assert_string_equal(v, "7");
        free(v);
        result_clear(&r);
}

/* A static token cannot change: a 401 is final at once, not a resend with the same token. */
static void test_401_static_token_not_resent(void **state) {
        struct env *e = *state;
        struct result r = {};
        char body[512];

        status_json(body, sizeof(body), 401, "Unauthorized", "Unauthorized");
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/pods", 401, body);
        assert_int_equal(kube_get(e->api->client, "/api/v1/pods", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -EACCES);
        assert_int_equal(r.status, 401);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/pods"), 1);
        result_clear(&r);
}

static void test_pagination(void **state) {
        struct env *e = *state;
        struct result r = {};
        const struct fake_request *q;
        char *v;

        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/pods?", 200, pods_page_1);
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/pods?", 200, pods_page_2);
        assert_int_equal(kube_list(e->api->client, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", 2,
                                   "4000", on_page, on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.pages, 2);
        assert_int_equal(r.page_items[0], 2);
        assert_int_equal(r.page_items[1], 1);
        assert_int_equal(r.n_names, 3);
        assert_string_equal(r.names[2], "c");
        assert_string_equal(r.rv, "5000");
        assert_null(r.json);

        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        q = fake_transport_request(e->api->ft, 0);
        v = fake_request_param(q, "fieldSelector");
        assert_string_equal(v, "spec.nodeName%3Dnode-1");
        free(v);
        v = fake_request_param(q, "limit");
        assert_string_equal(v, "2");
        free(v);
        v = fake_request_param(q, "resourceVersion");
        assert_string_equal(v, "4000");
        free(v);
        assert_false(fake_request_has_param(q, "continue"));

        q = fake_transport_request(e->api->ft, 1);
        v = fake_request_param(q, "continue");
        assert_string_equal(v, "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTAwMH0%3D"); /* escaped */
        free(v);
        assert_false(fake_request_has_param(q, "resourceVersion")); /* never with continue */
        assert_true(fake_request_has_param(q, "fieldSelector"));
        v = fake_request_param(q, "limit");
        assert_string_equal(v, "2");
        free(v);
        result_clear(&r);

        /* A list without rv reads from etcd: no resourceVersion at all. */
        fake_transport_expect_json(
                e->api->ft, "GET", "/api/v1/nodes?", 200,
                "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[]}");
        assert_int_equal(kube_list(e->api->client, "/api/v1/nodes", 0, NULL, on_page, on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.pages, 1);
        q = fake_transport_request(e->api->ft, 2);
        assert_false(fake_request_has_param(q, "resourceVersion"));
        v = fake_request_param(q, "limit");
        assert_string_equal(v, "500");
        free(v);
        result_clear(&r);

        /* A list answer without items is malformed. */
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes?", 200, "{\"kind\":\"NodeList\"}");
        assert_int_equal(kube_list(e->api->client, "/api/v1/nodes", 0, NULL, on_page, on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, -EBADMSG);
        result_clear(&r);

        /* An expired continue token: 410 from the second page. */
        fake_transport_expect_json(
                e->api->ft, "GET", "/api/v1/nodes?", 200,
                "{\"metadata\":{\"resourceVersion\":\"7\",\"continue\":\"abc\"},\"items\":[]}");
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes?", 410,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"message\":\"The provided continue parameter is too old\","
                                   "\"reason\":\"Expired\",\"code\":410}");
        assert_int_equal(kube_list(e->api->client, "/api/v1/nodes", 0, NULL, on_page, on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, -ESTALE);
        assert_string_equal(r.reason, "Expired");
        result_clear(&r);
}

#define EV_ADDED_A                                                                              \
        "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{" \
        "\"name\":\"inference-0\",\"namespace\":\"ml\",\"resourceVersion\":\"5001\"}}}\n"
#define EV_BOOKMARK                                                                                \
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{" \
        "\"resourceVersion\":\"5100\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
#define EV_GONE                                                                                      \
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{}," \
        "\"status\":\"Failure\",\"message\":\"too old resource version: 5000 (6000)\","              \
        "\"reason\":\"Expired\",\"code\":410}}\n"

static void test_watch_stream(void **state) {
        struct env *e = *state;
        struct result r = {};
        const struct fake_request *q;
        struct kube_client_stats st;
        char *v;

        /* Events split at awkward places, several in one chunk. */
        fake_transport_expect(
                e->api->ft, "GET", "/api/v1/pods?",
                &(struct fake_reply){
                        .chunks = { "{\"type\":\"ADD",
                                    "ED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
                                    "\"metadata\":{\"name\":\"inference-0\",\"namespace\":\"ml\","
                                    "\"resourceVersion\":\"5001\"}}}",
                                    "\n" EV_BOOKMARK "{\"type\":\"MODI",
                                    "FIED\",\"object\":{\"metadata\":{\"name\":\"inference-0\","
                                    "\"resourceVersion\":\"5002\"}}}\r\n\n{\"type\":\"ERR",
                                    EV_GONE + 12 },
                        .chunk_interval_usec = 10 * MS,
                        .hold_open = true, /* the server would close it; our abort must */
                });
        assert_int_equal(kube_watch(e->api->client, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1",
                                    "5000", 317, on_event, on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 0);
        fake_clock_advance(e->api->clock, 10 * MS);
        /* The first object is complete, but its line is not terminated yet. */
        assert_int_equal(r.events[WATCH_ADDED], 0);
        fake_clock_advance(e->api->clock, 10 * MS);
        assert_int_equal(r.events[WATCH_ADDED], 1);
        assert_int_equal(r.events[WATCH_BOOKMARK], 1);
        assert_int_equal(r.events[WATCH_MODIFIED], 0);
        fake_clock_advance(e->api->clock, 10 * MS);
        assert_int_equal(r.events[WATCH_MODIFIED], 1);
        assert_int_equal(r.calls, 0);
        fake_clock_advance(e->api->clock, 10 * MS);
        assert_int_equal(r.events[WATCH_ADDED], 1);
        assert_int_equal(r.events[WATCH_MODIFIED], 1);
        assert_int_equal(r.events[WATCH_ERROR], 0); /* the client turns it into the result */
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -ESTALE);
        assert_int_equal(r.status, 410);
        assert_string_equal(r.reason, "Expired");
        assert_string_equal(r.message, "too old resource version: 5000 (6000)");
        assert_string_equal(r.names[0], "inference-0");
        assert_int_equal(fake_transport_in_flight(e->api->ft), 0);

        q = fake_transport_request(e->api->ft, 0);
        assert_true(q->stream);
        assert_int_equal(q->timeout_usec, 0);
        for (size_t i = 0; i < 5; i++) {
                static const char *const params[][2] = {
                        { "watch", "1" },
                        { "allowWatchBookmarks", "true" },
                        { "resourceVersion", "5000" },
                        { "timeoutSeconds", "317" },
                        { "fieldSelector", "spec.nodeName%3Dnode-1" },
                };

                v = fake_request_param(q, params[i][0]);
                assert_non_null(v);
                assert_string_equal(v, params[i][1]);
                free(v);
        }
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.watch_events, 4);
        result_clear(&r);

        /* The server closing the stream normally: done with 0. */
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes?",
                              &(struct fake_reply){ .chunks = { EV_ADDED_A, EV_BOOKMARK } });
        assert_int_equal(kube_watch(e->api->client, "/api/v1/nodes", "1", 60, on_event, on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.events[WATCH_ADDED] + r.events[WATCH_BOOKMARK], 2);
        assert_null(r.json);
        result_clear(&r);

        /* 410 before the stream starts: a Status body with the HTTP error. */
        fake_transport_expect(
                e->api->ft, "GET", "/api/v1/nodes?",
                &(struct fake_reply){
                        .status = 410,
                        .body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                                "\"status\":\"Failure\",\"message\":\"too old resource version: 1 (6000)\","
                                "\"reason\":\"Expired\",\"code\":410}",
                });
        assert_int_equal(kube_watch(e->api->client, "/api/v1/nodes", "1", 60, on_event, on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -ESTALE);
        assert_string_equal(r.message, "too old resource version: 1 (6000)");
        assert_int_equal(r.events[WATCH_ADDED], 0);
        result_clear(&r);

        /* The event handler stopping the watch: done with its error. */
        r.stop_after_events = 1;
        fake_transport_expect(
                e->api->ft, "GET", "/api/v1/nodes?",
                &(struct fake_reply){ .chunks = { EV_ADDED_A EV_BOOKMARK }, .hold_open = true });
        assert_int_equal(kube_watch(e->api->client, "/api/v1/nodes", NULL, 60, on_event, on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -EPIPE);
        assert_int_equal(r.events[WATCH_ADDED], 1);
        assert_int_equal(r.events[WATCH_BOOKMARK], 0);
        /* no resourceVersion given: the parameter is left out */
        assert_false(fake_request_has_param(fake_transport_request(e->api->ft, 3), "resourceVersion"));
        result_clear(&r);

        /* Garbage instead of events. */
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes?",
                              &(struct fake_reply){ .chunks = { "this is not json\n" } });
        assert_int_equal(kube_watch(e->api->client, "/api/v1/nodes", "1", 60, on_event, on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -EBADMSG);
        result_clear(&r);
}

/* Each attempt the client sends carries an Audit-ID of its own (a 5xx retry, a resend
 * of an unanswered call, a 429 retry), shaped like a version-4
 * UUID, unique per client: it is what tells drainer's own attempts from libcurl's
 * transparent resends (which repeat the headers) in test-faults' proxy log, and what
 * finds an attempt in the API server's audit log. */
static bool audit_id_shaped(const char *id) {
        if (!id || strlen(id) != 36)
                return false;
        for (size_t i = 0; i < 36; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;

                if (dash ? id[i] != '-' : !strchr("0123456789abcdef", id[i]))
                        return false;
        }
        return id[14] == '4' && strchr("89ab", id[19]);
}

static void test_audit_id_per_attempt(void **state) {
        struct env *e = *state;
        struct result r = {};
        char body[512], first_other[40];
        const char *ids[4];

        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 500,
                                   status_json(body, sizeof(body), 500, "InternalError", "boom"));
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/node-1",
                              &(struct fake_reply){ .error = -ECONNRESET, .unanswered = true });
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 429,
                                   status_json(body, sizeof(body), 429, "TooManyRequests", "slow down"));
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 10 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 4);
        for (size_t i = 0; i < 4; i++) {
                ids[i] = fake_request_header(fake_transport_request(e->api->ft, i), "Audit-ID");
                assert_true(audit_id_shaped(ids[i]));
                for (size_t j = 0; j < i; j++)
                        assert_string_not_equal(ids[i], ids[j]);
        }
        /* One client: one prefix, a counter after it. */
        assert_memory_equal(ids[0], ids[3], 19);
        result_clear(&r);

        /* Another client (another process) has another prefix. */
        env_client(e, &(struct kube_client_options){ .qps = 0, .random_seed = 8 });
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 5);
        snprintf(first_other, sizeof(first_other), "%s",
                 fake_request_header(fake_transport_request(e->api->ft, 4), "Audit-ID"));
        assert_true(audit_id_shaped(first_other));
        assert_memory_not_equal(first_other, ids[0], 18);
        result_clear(&r);
}

/* A call the server went away from without answering (resp->unanswered: refused
 * by GOAWAY, or a dropped GET) is sent again, even a POST, but through the token
 * bucket: never faster than the qps (the transport's own resends, which bypassed
 * it, let drainer overrun --kube-api-qps behind a proxy resetting streams), and at
 * most RESENDS_MAX times; none counts as an attempt. */
static void test_unanswered_resent_through_bucket(void **state) {
        struct env *e = *state;
        struct result r = {}, g = {};

        env_client(e, &(struct kube_client_options){ .qps = 5, .burst = 1, .random_seed = 1 });
        fake_transport_expect(e->api->ft, "POST", "/api/v1/namespaces/default/events",
                              &(struct fake_reply){ .error = -ECONNRESET, .unanswered = true, .times = 2 });
        fake_transport_expect_json(e->api->ft, "POST", "/api/v1/namespaces/default/events", 201, event_json);
        assert_int_equal(kube_create(e->api->client, "/api/v1/namespaces/default/events", event_json,
                                     on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 10 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.attempts, 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(fake_transport_request(e->api->ft, i)->at_usec, T0 + i * 200 * MS);
        result_clear(&r);

        /* Not forever: after 6 resends the error goes back to the caller. */
        fake_transport_expect(
                e->api->ft, "GET", "/api/v1/nodes/node-1",
                &(struct fake_reply){ .error = -ECONNRESET, .unanswered = true, .times = FAKE_FOREVER });
        assert_int_equal(kube_call_start(e->api->client,
                                         &(struct kube_call_params){ .method = "GET",
                                                                     .path = "/api/v1/nodes/node-1" },
                                         on_done, &g, NULL),
                         0);
        fake_clock_advance(e->api->clock, 10 * SEC);
        assert_int_equal(g.calls, 1);
        assert_int_equal(g.error, -ECONNRESET);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3 + 7);
        for (size_t i = 4; i < 10; i++)
                assert_true(fake_transport_request(e->api->ft, i)->at_usec -
                                    fake_transport_request(e->api->ft, i - 1)->at_usec >=
                            200 * MS);
        result_clear(&g);
}

static void test_token_bucket(void **state) {
        struct env *e = *state;
        struct result r[4] = {};
        struct kube_client_stats st;

        env_client(e, &(struct kube_client_options){ .qps = 5, .burst = 2, .random_seed = 1 });
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes",
                              &(struct fake_reply){ .body = node_json, .times = FAKE_FOREVER });
        for (int i = 0; i < 3; i++)
                assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r[i], NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        fake_clock_advance(e->api->clock, 200 * MS - 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        fake_clock_advance(e->api->clock, 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        assert_int_equal(fake_transport_request(e->api->ft, 2)->at_usec, T0 + 200 * MS);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(r[i].calls, 1);
                assert_int_equal(r[i].error, 0);
        }
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.throttled_usec, 200 * MS);

        /* A 4th right away waits for the next token, 200 ms later. */
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r[3], NULL), 0);
        fake_clock_advance(e->api->clock, 200 * MS);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 4);
        assert_int_equal(fake_transport_request(e->api->ft, 3)->at_usec, T0 + 400 * MS);
        for (int i = 0; i < 4; i++)
                result_clear(&r[i]);
}

/* A retry after a backoff takes its token when the backoff ends: reserving it
 * ahead, for a time that has not come yet, refilled the bucket from the future and
 * wiped out the tokens promised to calls already waiting, so later calls overran
 * the qps. With burst 1, no two requests may go out less than 1/qps apart. */
static void test_token_bucket_with_backoff(void **state) {
        struct env *e = *state;
        struct result r[5] = {};
        size_t n;

        env_client(e, &(struct kube_client_options){ .qps = 5,
                                                     .burst = 1,
                                                     .random_seed = 1,
                                                     .backoff_base_usec = 10 * SEC,
                                                     .backoff_cap_usec = 10 * SEC });
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/flaky",
                              &(struct fake_reply){ .status = 503, .body = "x", .delay_usec = 100 * MS });
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes",
                              &(struct fake_reply){ .body = node_json, .times = FAKE_FOREVER });
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/flaky", on_done, &r[0], NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        /* Three callers wait for tokens at +200, +400, +600 ms ... */
        for (int i = 1; i < 4; i++)
                assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r[i], NULL), 0);
        /* ... when the 503 arrives and the first call backs off; then one more caller. */
        fake_clock_advance(e->api->clock, 100 * MS);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r[4], NULL), 0);
        fake_clock_advance(e->api->clock, 60 * SEC);

        n = fake_transport_n_requests(e->api->ft);
        assert_int_equal(n, 6);
        for (size_t i = 1; i < n; i++) {
                uint64_t prev = fake_transport_request(e->api->ft, i - 1)->at_usec,
                         at = fake_transport_request(e->api->ft, i)->at_usec;

                print_message("request %zu at +%llu ms\n", i, (unsigned long long)((at - T0) / MS));
                assert_true(at >= prev + 200 * MS);
        }
        assert_int_equal(fake_transport_request(e->api->ft, 4)->at_usec, T0 + 800 * MS);
        for (int i = 0; i < 5; i++) {
                assert_int_equal(r[i].calls, 1);
                assert_int_equal(r[i].error, 0);
                result_clear(&r[i]);
        }
}

/* What kube-apiserver's flow control (API Priority and Fairness, max-inflight) answers. */
#define FLOW_CONTROL_429 "Too many requests, please try again later.\n"

static const struct fake_reply flow_control_429 = {
        .status = 429,
        .headers = { "Retry-After: 1", "Content-Type: text/plain; charset=utf-8",
                     "X-Kubernetes-PF-FlowSchema-UID: 2a3a4e4d-0c59-4b3c-9d2b-1f6f1f0e7a11",
                     "X-Kubernetes-PF-PriorityLevel-UID: 8e2f7c1a-4b6d-4d1e-a0f3-5c9b2e7d3f40" },
        .body = FLOW_CONTROL_429,
        .delay_usec = 10 * MS,
};

/* Ten parallel GETs refused by the server's flow control with Retry-After 1 come
 * back after it, paced at the client's rate: not at one instant although the bucket
 * had its whole burst banked. A fixed rate stays what it is. */
static void test_parallel_429_spread(void **state) {
        struct env *e = *state;
        struct result r[10] = {};
        struct fake_reply refuse = flow_control_429;
        struct kube_client_stats st;
        char path[64];

        env_client(e, &(struct kube_client_options){ .qps = 10, .burst = 20, .random_seed = 1 });
        refuse.times = 10;
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/", &refuse);
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/",
                              &(struct fake_reply){ .body = node_json, .times = FAKE_FOREVER });
        for (int i = 0; i < 10; i++) {
                snprintf(path, sizeof(path), "/api/v1/nodes/node-%d", i);
                assert_int_equal(kube_get(e->api->client, path, on_done, &r[i], NULL), 0);
        }
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 10); /* the burst */
        fake_clock_advance(e->api->clock, 60 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 20);
        for (size_t i = 10; i < 20; i++) {
                uint64_t at = fake_transport_request(e->api->ft, i)->at_usec;

                print_message("retry %zu at +%llu ms\n", i - 10, (unsigned long long)((at - T0) / MS));
                assert_true(at >= T0 + 10 * MS + 1 * SEC);
                if (i > 10)
                        assert_true(at >= fake_transport_request(e->api->ft, i - 1)->at_usec + 100 * MS);
        }
        for (int i = 0; i < 10; i++) {
                assert_int_equal(r[i].calls, 1);
                assert_int_equal(r[i].error, 0);
                assert_int_equal(r[i].attempts, 2);
                result_clear(&r[i]);
        }
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.pushbacks, 10);
        assert_true(st.qps == 10);
}

/* A request the flow control refused did nothing: it is sent again after the
 * Retry-After whatever its verb (client-go's checkWait does the same). A 429 a
 * handler wrote (a Status) is handed back as before, and a PodDisruptionBudget's
 * says nothing of the server's load. */
static void test_flow_control_429_any_verb(void **state) {
        struct env *e = *state;
        struct result r = {};
        struct kube_client_stats st;
        char body[512];

        fake_transport_expect(e->api->ft, "POST", "/api/v1/namespaces/default/events", &flow_control_429);
        fake_transport_expect_json(e->api->ft, "POST", "/api/v1/namespaces/default/events", 201, event_json);
        assert_int_equal(kube_create(e->api->client, "/api/v1/namespaces/default/events", event_json,
                                     on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 10 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.attempts, 2);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_int_equal(fake_transport_request(e->api->ft, 1)->at_usec -
                                 fake_transport_request(e->api->ft, 0)->at_usec,
                         10 * MS + 1 * SEC);
        result_clear(&r);

        fake_transport_expect(e->api->ft, "POST", "/api/v1/namespaces/ml/pods/inference-0/eviction",
                              &flow_control_429);
        fake_transport_expect_json(
                e->api->ft, "POST", "/api/v1/namespaces/ml/pods/inference-0/eviction", 201,
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Success\",\"code\":201}");
        assert_int_equal(kube_evict(e->api->client, "ml", "inference-0", -1, false, on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 10 * SEC);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.attempts, 2);
        result_clear(&r);
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.pushbacks, 2);

        /* A PDB's 429: handed back, and not the server's load. */
        fake_transport_expect_json(e->api->ft, "POST", "/api/v1/namespaces/ml/pods/inference-0/eviction",
                                   429, pdb_429);
        assert_int_equal(kube_evict(e->api->client, "ml", "inference-0", -1, false, on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 60 * SEC);
        assert_int_equal(r.error, -EAGAIN);
        assert_int_equal(r.attempts, 1);
        assert_int_equal(r.retry_after, 10 * SEC);
        result_clear(&r);
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.pushbacks, 2);

        /* A handler's 429 on a DELETE: handed back (it may have done something), but load. */
        fake_transport_expect_json(
                e->api->ft, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/d/leases/x", 429,
                status_json(body, sizeof(body), 429, "TooManyRequests", "storage is (re)initializing"));
        assert_int_equal(kube_delete(e->api->client, "/apis/coordination.k8s.io/v1/namespaces/d/leases/x",
                                     NULL, on_done, &r, NULL),
                         0);
        fake_clock_advance(e->api->clock, 60 * SEC);
        assert_int_equal(r.error, -EAGAIN);
        assert_int_equal(r.attempts, 1);
        result_clear(&r);
        kube_client_get_stats(e->api->client, &st);
        assert_int_equal(st.pushbacks, 3);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 6);
}

struct rate_log {
        int n;
        double qps[32];
        bool pushback[32];
};

static void on_rate(double old_qps, double qps, bool pushback, void *userdata) {
        struct rate_log *l = userdata;

        assert_true(old_qps != qps);
        if (l->n < 32) {
                l->qps[l->n] = qps;
                l->pushback[l->n++] = pushback;
        }
}

/* Smallest gap between consecutive requests from index from on. */
static uint64_t min_gap(struct fake_transport *ft, size_t from, size_t to) {
        uint64_t g = UINT64_MAX;

        for (size_t i = from + 1; i < to; i++)
                g = MIN(g,
                        fake_transport_request(ft, i)->at_usec - fake_transport_request(ft, i - 1)->at_usec);
        return g;
}

/* --kube-api-qps auto: from 10 requests/s, callers queued in the bucket and fast
 * answers raise the rate by 2.5 a second up to the ceiling (20); calls already
 * waiting go faster at once. Then the flow control refuses a burst of parallel
 * requests: the rate halves once (one episode), and every call waits out the
 * Retry-After. */
static void test_adaptive_rate(void **state) {
        struct env *e = *state;
        struct rate_log log = {};
        struct result r[120] = {};
        struct kube_client_stats st;
        struct fake_reply refuse = flow_control_429;
        size_t n;

        env_client(e, &(struct kube_client_options){ .qps = 10,
                                                     .burst = 1,
                                                     .adaptive = true,
                                                     .qps_max = 20,
                                                     .on_rate = on_rate,
                                                     .rate_userdata = &log,
                                                     .random_seed = 1 });
        kube_client_get_stats(e->api->client, &st);
        assert_true(st.qps == 10);
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/",
                              &(struct fake_reply){ .body = node_json, .delay_usec = 5 * MS, .times = 100 });
        for (int i = 0; i < 100; i++)
                assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r[i], NULL), 0);
        fake_clock_advance(e->api->clock, 30 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 100);
        kube_client_get_stats(e->api->client, &st);
        assert_true(st.qps == 20);
        assert_int_equal(log.n, 4);
        for (int i = 0; i < 4; i++) {
                assert_true(log.qps[i] == 10 + 2.5 * (i + 1));
                assert_false(log.pushback[i]);
        }
        /* Never faster than the rate of the moment; at the end 20 a second. */
        assert_true(min_gap(e->api->ft, 0, 100) >= 50 * MS - 1);
        assert_int_equal(fake_transport_request(e->api->ft, 99)->at_usec -
                                 fake_transport_request(e->api->ft, 98)->at_usec,
                         50 * MS);
        /* 100 requests in less than the 10 s a fixed 10/s takes. */
        assert_true(fake_transport_request(e->api->ft, 99)->at_usec - T0 < 7 * SEC);

        /* Twenty parallel requests (all sent before the first answer) are refused: one
         * cut, to 10. */
        refuse.times = 20;
        refuse.delay_usec = 1500 * MS;
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/", &refuse);
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/",
                              &(struct fake_reply){ .body = node_json, .times = FAKE_FOREVER });
        for (int i = 100; i < 120; i++)
                assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r[i], NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        n = fake_transport_n_requests(e->api->ft);
        fake_clock_advance(e->api->clock, 60 * SEC);
        for (int i = 0; i < log.n; i++)
                print_message("rate %d: %g%s\n", i, log.qps[i], log.pushback[i] ? " (pushback)" : "");
        kube_client_get_stats(e->api->client, &st);
        assert_true(st.pushbacks == 20);
        assert_int_equal(log.n, 7);
        assert_true(log.qps[4] == 10);
        assert_true(log.pushback[4]);
        for (int i = 5; i < log.n; i++)
                assert_false(log.pushback[i]); /* the other 19 refusals were the same episode */
        for (int i = 0; i < 120; i++) {
                assert_int_equal(r[i].calls, 1);
                assert_int_equal(r[i].error, 0);
                result_clear(&r[i]);
        }
        /* No retry left before the server's second was over, nor in a burst: at 10/s,
         * then 12.5 and 15 (the rate rises again in the intervals after the cut). */
        for (size_t i = n; i < fake_transport_n_requests(e->api->ft); i++)
                if (fake_transport_request(e->api->ft, i)->matched == 2) {
                        assert_true(fake_transport_request(e->api->ft, i)->at_usec >=
                                    fake_transport_request(e->api->ft, 100)->at_usec + 1500 * MS + 1 * SEC);
                        if (fake_transport_request(e->api->ft, i - 1)->matched == 2)
                                assert_true(fake_transport_request(e->api->ft, i)->at_usec >=
                                            fake_transport_request(e->api->ft, i - 1)->at_usec + SEC / 15);
                }
        assert_int_equal(fake_transport_n_requests(e->api->ft), 140);
}

static void test_cancel(void **state) {
        struct env *e = *state;
        struct result r[6] = {};
        struct kube_call *calls[6] = {};

        env_client(e, &(struct kube_client_options){ .qps = 5, .burst = 1, .random_seed = 1 });
        /* 0: in flight (slow answer); 1: waiting for a token; 2: a watch held open */
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/slow",
                              &(struct fake_reply){ .body = node_json, .delay_usec = 60 * SEC });
        fake_transport_expect(e->api->ft, "GET", "/api/v1/pods?",
                              &(struct fake_reply){ .chunks = { EV_ADDED_A }, .hold_open = true });
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/slow", on_done, &r[0], &calls[0]), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(
                kube_watch(e->api->client, "/api/v1/pods", "1", 60, on_event, on_done, &r[2], &calls[2]), 0);
        fake_clock_advance(e->api->clock, 200 * MS);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
        assert_int_equal(r[2].events[WATCH_ADDED], 1);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/waiting", on_done, &r[1], &calls[1]), 0);

        kube_call_cancel(calls[0]);
        kube_call_cancel(calls[1]);
        kube_call_cancel(calls[2]);
        kube_call_cancel(calls[0]); /* twice: no-op */
        for (int i = 0; i < 3; i++)
                assert_int_equal(r[i].calls, 0); /* never from inside cancel */
        assert_int_equal(fake_transport_cancels(e->api->ft), 2);

        fake_clock_advance(e->api->clock, 0);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(r[i].calls, 1);
                assert_int_equal(r[i].error, -ECANCELED);
        }
        assert_int_equal(kube_client_calls_in_flight(e->api->client), 0);
        assert_int_equal(fake_transport_in_flight(e->api->ft), 0);

        /* Nothing more, ever; the cancelled waiter never went out. */
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        for (int i = 0; i < 3; i++)
                assert_int_equal(r[i].calls, 1);
        assert_int_equal(fake_transport_count(e->api->ft, NULL, "/api/v1/nodes/waiting"), 0);

        /* The waiter gave its token back: the next call goes out at once, not 200 ms later. */
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/next",
                              &(struct fake_reply){ .body = node_json });
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/next", on_done, &r[3], NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r[3].calls, 1);

        /* Cancel during a backoff, and cancel_all over several states. */
        env_client(e, &(struct kube_client_options){ .random_seed = 1 });
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/flaky",
                              &(struct fake_reply){ .status = 500, .body = "" });
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/flaky", on_done, &r[4], &calls[4]), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, NULL, "/api/v1/nodes/flaky"), 1);
        assert_int_equal(r[4].calls, 0); /* backing off */
        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/slow",
                              &(struct fake_reply){ .body = node_json, .delay_usec = 60 * SEC });
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/slow", on_done, &r[5], &calls[5]), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(kube_client_calls_in_flight(e->api->client), 2);
        kube_client_cancel_all(e->api->client);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r[4].calls, 1);
        assert_int_equal(r[4].error, -ECANCELED);
        assert_int_equal(r[5].calls, 1);
        assert_int_equal(r[5].error, -ECANCELED);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(fake_transport_count(e->api->ft, NULL, "/api/v1/nodes/flaky"), 1);
        assert_int_equal(r[4].calls, 1);
        for (int i = 0; i < 6; i++)
                result_clear(&r[i]);
}

/* The done callback of the last call may free the client. */
struct free_in_done {
        struct kube_client **client;
        int calls;
};

static void on_done_free_client(const struct kube_result *res, void *userdata) {
        struct free_in_done *f = userdata;

        f->calls++;
        assert_int_equal(kube_client_calls_in_flight(*f->client), 0);
        kube_client_free(*f->client);
        *f->client = NULL;
}

static void test_free_client_in_done(void **state) {
        struct env *e = *state;
        struct free_in_done f = { .client = &e->api->client };

        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done_free_client, &f, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(f.calls, 1);
        assert_null(e->api->client);
        env_client(e, NULL); /* for teardown */
}

static int closed_calls;

static void on_transport_closed(struct transport *t, void *userdata) {
        /* Every transport-level done (-ECANCELED) ran before this. */
        assert_int_equal(fake_transport_in_flight(userdata), 0);
        closed_calls++;
}

static void test_transport_closed(void **state) {
        struct env *e = *state;
        struct result r = {};

        fake_transport_expect(e->api->ft, "GET", "/api/v1/nodes/slow",
                              &(struct fake_reply){ .body = node_json, .delay_usec = 60 * SEC });
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/slow", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        closed_calls = 0;
        transport_close(fake_transport_base(e->api->ft), on_transport_closed, e->api->ft);
        assert_int_equal(closed_calls, 0); /* nothing from inside close */
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(closed_calls, 1);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -ECANCELED);
        result_clear(&r);

        /* Calls after that fail at once (through done, later), without retries. */
        assert_int_equal(kube_get(e->api->client, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.error, -ESHUTDOWN);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
        result_clear(&r);
}

static void test_query_escape(void **state) {
        char *s = kube_query_escape("spec.nodeName=node-1,app in (a b)/~_");

        assert_string_equal(s, "spec.nodeName%3Dnode-1%2Capp%20in%20%28a%20b%29%2F~_");
        free(s);
}

/* --as / --as-group / --request-timeout: Impersonate-User and one Impersonate-Group
 * header per group on every request, the timeout per attempt; groups without a user
 * and header-breaking values are refused. */
static void test_impersonation_and_timeout(void **state) {
        struct env *e = *state;
        struct result r = {};
        const struct fake_request *req;
        size_t groups = 0;
        struct kube_client *c;
        struct kube_client *bad = NULL;

        c = test_api_client(e->api,
                            &(const struct kube_client_options){
                                    .impersonate_user = "jane",
                                    .impersonate_groups = (const char *const[]){ "ops", "system:masters" },
                                    .n_impersonate_groups = 2,
                                    .request_timeout_usec = 7 * SEC,
                                    .random_seed = 3,
                            });
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-1", 200, node_json);
        assert_int_equal(kube_get(c, "/api/v1/nodes/node-1", on_done, &r, NULL), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(r.error, 0);
        req = fake_transport_request(e->api->ft, 0);
        assert_string_equal(fake_request_header(req, "Impersonate-User"), "jane");
        for (size_t i = 0; i < req->n_headers; i++)
                if (strncmp(req->headers[i], "Impersonate-Group: ", 19) == 0) {
                        assert_string_equal(req->headers[i] + 19, groups == 0 ? "ops" : "system:masters");
                        groups++;
                }
        assert_int_equal(groups, 2);
        assert_int_equal(req->timeout_usec, 7 * SEC);
        result_clear(&r);

        assert_int_equal(
                kube_client_new(fake_transport_base(e->api->ft), e->api->ts, e->api->cfg, e->api->creds,
                                &(const struct kube_client_options){ .impersonate_groups =
                                                                             (const char *const[]){ "ops" },
                                                                     .n_impersonate_groups = 1 },
                                &bad),
                -EINVAL);
        assert_int_equal(
                kube_client_new(fake_transport_base(e->api->ft), e->api->ts, e->api->cfg, e->api->creds,
                                &(const struct kube_client_options){ .impersonate_user = "x\r\nEvil: 1" },
                                &bad),
                -EINVAL);
        assert_null(bad);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_get_ok_and_auth, setup, teardown),
                cmocka_unit_test_setup_teardown(test_impersonation_and_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_429_retry_after, setup, teardown),
                cmocka_unit_test_setup_teardown(test_429_retry_after_in_status, setup, teardown),
                cmocka_unit_test_setup_teardown(test_5xx_backoff_gives_up, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connection_errors_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dns_failure_named, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failing_since, setup, teardown),
                cmocka_unit_test_setup_teardown(test_silent_and_reach, setup, teardown),
                cmocka_unit_test_setup_teardown(test_post_not_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_patch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_evict_429_handed_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_status_mapping, setup, teardown),
                cmocka_unit_test_setup_teardown(test_401_refresh_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_401_static_token_not_resent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pagination, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_stream, setup, teardown),
                cmocka_unit_test_setup_teardown(test_token_bucket, setup, teardown),
                cmocka_unit_test_setup_teardown(test_audit_id_per_attempt, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unanswered_resent_through_bucket, setup, teardown),
                cmocka_unit_test_setup_teardown(test_token_bucket_with_backoff, setup, teardown),
                cmocka_unit_test_setup_teardown(test_parallel_429_spread, setup, teardown),
                cmocka_unit_test_setup_teardown(test_flow_control_429_any_verb, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adaptive_rate, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_client_in_done, setup, teardown),
                cmocka_unit_test_setup_teardown(test_transport_closed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_chunk, setup, teardown),
                cmocka_unit_test(test_query_escape),
        };

        return cmocka_run_group_tests(tests, fixtures_load, fixtures_free);
}
