/* informer over the real client, a fake clock and a scripted fake transport:
 * paginated list then watch, events into the cache, bookmarks, 410 relist with
 * its diff, normal watch ends, reconnect backoff without busy loops, stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/kubeconfig.h"
#include "drainer/kube/objects.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC
#define T0  TEST_API_T0

/* What the informer asks for, with fieldSelector=spec.nodeName=node-1. */
#define PODS  "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
#define LIST  PODS "&limit="
#define WATCH PODS "&watch=1"

struct log {
        char entries[64]
                    [96]; /* "add ml/a 10", "update ml/a 10->12", "delete ml/b 11", "synced", "error -111" */
        int n;
};

struct env {
        struct test_api *api;
        struct informer *inf;
        struct log log;
        int synced, errors, last_error;
        uint64_t error_at[64];
};

static void logf_(struct env *e, const char *fmt, ...) _printf_(2, 3);
static void logf_(struct env *e, const char *fmt, ...) {
        va_list ap;

        assert_true(e->log.n < 64);
        va_start(ap, fmt);
        vsnprintf(e->log.entries[e->log.n++], sizeof(e->log.entries[0]), fmt, ap);
        va_end(ap);
}

static void on_add(struct informer *inf, const void *rec, void *userdata) {
        const struct pod_rec *p = rec;

        logf_(userdata, "add %s/%s %s", p->ns, p->name, p->resource_version);
}

static void on_update(struct informer *inf, const void *old_rec, const void *rec, void *userdata) {
        const struct pod_rec *o = old_rec, *p = rec;

        assert_string_equal(o->name, p->name);
        logf_(userdata, "update %s/%s %s->%s", p->ns, p->name, o->resource_version, p->resource_version);
}

static void on_delete(struct informer *inf, const void *rec, void *userdata) {
        const struct pod_rec *p = rec;

        logf_(userdata, "delete %s/%s %s", p->ns, p->name, p->resource_version);
}

static void on_synced(struct informer *inf, void *userdata) {
        struct env *e = userdata;

        e->synced++;
        logf_(e, "synced");
}

static void on_error(struct informer *inf, int error, const char *message, void *userdata) {
        struct env *e = userdata;

        if (e->errors < 64)
                e->error_at[e->errors] = fake_clock_now(e->api->clock);
        e->errors++;
        e->last_error = error;
}

static const struct informer_handlers handlers = {
        .on_add = on_add,
        .on_update = on_update,
        .on_delete = on_delete,
        .on_synced = on_synced,
        .on_error = on_error,
};

/* Asserts the log holds exactly these entries, in any order, and clears it. */
static void expect_log(struct env *e, const char *const *want, int n) {
        bool used[64] = {};

        for (int i = 0; i < e->log.n; i++)
                print_message("  log: %s\n", e->log.entries[i]);
        assert_int_equal(e->log.n, n);
        for (int i = 0; i < n; i++) {
                int j;

                for (j = 0; j < e->log.n; j++)
                        if (!used[j] && strcmp(e->log.entries[j], want[i]) == 0)
                                break;
                if (j == e->log.n)
                        fail_msg("missing log entry \"%s\"", want[i]);
                used[j] = true;
        }
        e->log.n = 0;
}
#define EXPECT_LOG(e, ...)                                    \
        expect_log((e), (const char *const[]){ __VA_ARGS__ }, \
                   (int)(sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *)))

/* A Pod as the API server returns it (trimmed of managedFields). */
static char *pod_json(const char *name, const char *rv, const char *phase) {
        char *s;

        assert_true(
                asprintf(&s,
                         "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
                         "\"generateName\":\"web-7c9f8d6b5-\",\"namespace\":\"ml\",\"uid\":\"0d6f3a2e-%s\","
                         "\"resourceVersion\":\"%s\",\"creationTimestamp\":\"2025-09-02T10:00:00Z\","
                         "\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"7c9f8d6b5\"},"
                         "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
                         "\"name\":\"web-7c9f8d6b5\",\"uid\":\"6a1b\",\"controller\":true,"
                         "\"blockOwnerDeletion\":true}]},\"spec\":{\"nodeName\":\"node-1\","
                         "\"containers\":[{\"name\":\"web\",\"image\":\"nginx:1.27\",\"ports\":[{"
                         "\"containerPort\":80,\"protocol\":\"TCP\"}]}],\"restartPolicy\":\"Always\","
                         "\"terminationGracePeriodSeconds\":30,\"tolerations\":[{\"key\":"
                         "\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":"
                         "\"NoExecute\",\"tolerationSeconds\":300}]},\"status\":{\"phase\":\"%s\","
                         "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],\"podIP\":"
                         "\"10.244.1.7\"}}",
                         name, name, rv, phase) >= 0);
        return s;
}

/* A PodList page: items is a NULL-terminated list of malloc'd pod JSON, freed here. */
static char *list_json(const char *rv, const char *cont, char **items) {
        size_t len = 256;
        char *s;

        for (char **i = items; *i; i++)
                len += strlen(*i) + 1;
        s = malloc(len);
        assert_non_null(s);
        snprintf(s, len,
                 "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"%s\"%s%s%"
                 "s},"
                 "\"items\":[",
                 rv, cont ? ",\"continue\":\"" : "", cont ? cont : "", cont ? "\"" : "");
        for (char **i = items; *i; i++) {
                if (i != items)
                        strcat(s, ",");
                strcat(s, *i);
                free(*i);
        }
        strcat(s, "]}");
        return s;
}

static char *event_json(const char *type, char *object) {
        char *s;

        assert_true(asprintf(&s, "{\"type\":\"%s\",\"object\":%s}\n", type, object) >= 0);
        free(object);
        return s;
}

static char *read_fixture(const char *name) {
        char rel[256];

        snprintf(rel, sizeof(rel), "api/%s", name);
        return test_fixture(rel, NULL);
}

static void expect_list(struct env *e, const char *rv, const char *cont, char **items) {
        char *body = list_json(rv, cont, items);

        fake_transport_expect_json(e->api->ft, "GET", LIST, 200, body);
        free(body);
}

/* An open watch stream that sends nothing until the test pushes. */
static void expect_watch_open(struct env *e) {
        fake_transport_expect(e->api->ft, "GET", WATCH, &(struct fake_reply){ .hold_open = true });
}

static void push_event(struct env *e, const char *type, char *object) {
        char *ev = event_json(type, object);

        assert_int_equal(fake_transport_push(e->api->ft, WATCH, ev), 1);
        free(ev);
}

static const struct fake_request *last_request(struct env *e) {
        return fake_transport_request(e->api->ft, fake_transport_n_requests(e->api->ft) - 1);
}

static char *param(const struct fake_request *r, const char *name) {
        static char buf[256];
        char *v = fake_request_param(r, name);

        if (!v)
                return NULL;
        snprintf(buf, sizeof(buf), "%s", v);
        free(v);
        return buf;
}

static void env_informer(struct env *e, const struct informer_options *o) {
        assert_int_equal(informer_new(e->api->client, e->api->ts, o, &handlers, e, &e->inf), 0);
}

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){ .user_yaml = "    token: informer-token\n" });
        env_informer(e, &(struct informer_options){
                                .kind = INFORMER_PODS,
                                .field_selector = "spec.nodeName=node-1",
                                .page_limit = 2,
                                .list_from_cache = true,
                        });
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->inf) {
                informer_stop(e->inf);
                for (int i = 0; i < 10 && !informer_idle(e->inf); i++)
                        fake_clock_advance(e->api->clock, 0);
                assert_true(informer_idle(e->inf));
                informer_free(e->inf);
        }
        test_api_free(e->api);
        free(e);
        return 0;
}

static size_t cache_bytes_by_hand(struct env *e) {
        size_t i = 0, sum = 0;
        const void *rec;

        while (informer_iterate(e->inf, &i, &rec))
                sum += pod_rec_size(rec);
        return sum;
}

/* Lists ml/a, ml/b (page 1) and ml/c (page 2) at rv 100 and opens the watch. */
static void initial_sync(struct env *e) {
        expect_list(e, "100", "eyJydiI6MTAwLCJzdGFydCI6ImIifQ==",
                    (char *[]){ pod_json("a", "10", "Running"), pod_json("b", "11", "Running"), NULL });
        expect_list(e, "100", NULL, (char *[]){ pod_json("c", "12", "Pending"), NULL });
        expect_watch_open(e);
        assert_int_equal(informer_start(e->inf), 0);
        assert_int_equal(informer_start(e->inf), -EBUSY);
        assert_false(informer_synced(e->inf));
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_synced(e->inf));
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
}

static void test_list_pages_then_watch(void **state) {
        struct env *e = *state;
        const struct fake_request *q;
        const struct pod_rec *p;
        struct informer_stats st;
        size_t i = 0, n = 0;
        const void *rec;

        initial_sync(e);
        EXPECT_LOG(e, "add ml/a 10", "add ml/b 11", "add ml/c 12", "synced");
        assert_int_equal(e->synced, 1);
        assert_int_equal(informer_size(e->inf), 3);
        assert_string_equal(informer_resource_version(e->inf), "100");
        p = informer_get(e->inf, "ml/c");
        assert_non_null(p);
        assert_string_equal(p->name, "c");
        assert_int_equal(p->phase, POD_PENDING);
        assert_null(informer_get(e->inf, "c"));
        while (informer_iterate(e->inf, &i, &rec))
                n++;
        assert_int_equal(n, 3);
        assert_int_equal(informer_cache_bytes(e->inf), cache_bytes_by_hand(e));

        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        /* page 1 from the watch cache */
        q = fake_transport_request(e->api->ft, 0);
        assert_string_equal(param(q, "resourceVersion"), "0");
        assert_string_equal(param(q, "limit"), "2");
        /* page 2 follows continue, without resourceVersion */
        q = fake_transport_request(e->api->ft, 1);
        assert_string_equal(param(q, "continue"), "eyJydiI6MTAwLCJzdGFydCI6ImIifQ%3D%3D");
        assert_null(param(q, "resourceVersion"));
        /* the watch resumes from the list's resourceVersion, with bookmarks */
        q = fake_transport_request(e->api->ft, 2);
        assert_string_equal(param(q, "watch"), "1");
        assert_string_equal(param(q, "resourceVersion"), "100");
        assert_string_equal(param(q, "allowWatchBookmarks"), "true");
        assert_string_equal(param(q, "fieldSelector"), "spec.nodeName%3Dnode-1");
        assert_true(q->stream);
        assert_string_equal(fake_request_header(q, "Authorization"), "Bearer informer-token");

        informer_get_stats(e->inf, &st);
        assert_int_equal(st.lists, 1);
        assert_int_equal(st.watches, 1);
        assert_int_equal(st.errors, 0);
}

static void test_watch_events_and_bookmark(void **state) {
        struct env *e = *state;
        const struct pod_rec *p;
        size_t bytes;

        initial_sync(e);
        e->log.n = 0;
        bytes = informer_cache_bytes(e->inf);

        push_event(e, "ADDED", pod_json("d", "101", "Pending"));
        push_event(e, "MODIFIED", pod_json("a", "102", "Succeeded"));
        push_event(e, "DELETED", pod_json("b", "103", "Running"));
        fake_clock_advance(e->api->clock, 0);
        EXPECT_LOG(e, "add ml/d 101", "update ml/a 10->102", "delete ml/b 11");
        assert_int_equal(informer_size(e->inf), 3);
        assert_null(informer_get(e->inf, "ml/b"));
        p = informer_get(e->inf, "ml/a");
        assert_int_equal(p->phase, POD_SUCCEEDED);
        assert_string_equal(informer_resource_version(e->inf), "103");
        assert_int_equal(informer_cache_bytes(e->inf), cache_bytes_by_hand(e));
        assert_true(informer_cache_bytes(e->inf) != bytes);

        /* Deleting something unknown changes nothing. */
        push_event(e, "DELETED", pod_json("zz", "104", "Running"));
        assert_int_equal(e->log.n, 0);

        /* A bookmark only moves the resourceVersion. */
        assert_int_equal(fake_transport_push(
                                 e->api->ft, WATCH,
                                 "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
                                 "\"metadata\":{\"resourceVersion\":\"150\",\"creationTimestamp\":null},"
                                 "\"spec\":{\"containers\":null},\"status\":{}}}\n"),
                         1);
        assert_int_equal(e->log.n, 0);
        assert_int_equal(informer_size(e->inf), 3);
        assert_string_equal(informer_resource_version(e->inf), "150");

        /* The server ends the watch (its timeoutSeconds): rewatch at once from 150. */
        expect_watch_open(e);
        fake_clock_advance(e->api->clock, 5 * 60 * SEC);
        assert_int_equal(fake_transport_end_streams(e->api->ft, WATCH, 0), 1);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
        assert_string_equal(param(last_request(e), "resourceVersion"), "150");
        assert_int_equal(last_request(e)->at_usec, fake_clock_now(e->api->clock));
        assert_int_equal(e->errors, 0);
        assert_int_equal(e->synced, 1); /* no relist */
        assert_int_equal(fake_transport_count(e->api->ft, "GET", LIST), 2);
}

static void test_watch_410_relists(void **state) {
        struct env *e = *state;
        struct informer_stats st;
        char *fixture = read_fixture("pod-claim-name.json");
        const struct fake_request *q;

        initial_sync(e);
        e->log.n = 0;
        push_event(e, "MODIFIED", pod_json("a", "120", "Running"));
        EXPECT_LOG(e, "update ml/a 10->120");

        /* The relist (from etcd, not the cache): a unchanged, b gone, c updated, e new
         * (and the fixture pod when there is one). */
        expect_list(e, "6000", NULL,
                    (char *[]){ pod_json("a", "120", "Running"), pod_json("c", "5990", "Running"),
                                pod_json("e", "5995", "Pending"), fixture ? fixture : NULL, NULL });
        expect_watch_open(e);
        assert_int_equal(fake_transport_push(
                                 e->api->ft, WATCH,
                                 "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                                 "\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource "
                                 "version: 120 (5000)\",\"reason\":\"Expired\",\"code\":410}}\n"),
                         1);
        fake_clock_advance(e->api->clock, 0);
        if (fixture)
                EXPECT_LOG(e, "delete ml/b 11", "update ml/c 12->5990", "add ml/e 5995",
                           "add ml/inference-0 48301", "synced");
        else
                EXPECT_LOG(e, "delete ml/b 11", "update ml/c 12->5990", "add ml/e 5995", "synced");
        assert_int_equal(e->synced, 2);
        assert_int_equal(e->errors, 0); /* a 410 is routine, not an error */
        assert_int_equal(informer_size(e->inf), fixture ? 4 : 3);
        assert_string_equal(informer_resource_version(e->inf), "6000");

        q = fake_transport_request(e->api->ft, 3);
        assert_non_null(strstr(q->path, "limit="));
        assert_null(param(q, "resourceVersion")); /* from etcd */
        assert_null(param(q, "continue"));
        assert_string_equal(param(last_request(e), "resourceVersion"), "6000");
        assert_true(last_request(e)->stream);
        informer_get_stats(e->inf, &st);
        assert_int_equal(st.relists_410, 1);
        assert_int_equal(st.lists, 2);
        assert_int_equal(st.watches, 2);

        /* A watch refused with HTTP 410 up front (not an ERROR event) relists the same way. */
        fake_transport_expect_json(
                e->api->ft, "GET", WATCH, 410,
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                "\"message\":\"too old resource version: 6000 "
                "(6500)\",\"reason\":\"Expired\",\"code\":410}");
        expect_list(e, "7000", NULL, (char *[]){ pod_json("a", "120", "Running"), NULL });
        expect_watch_open(e);
        e->log.n = 0;
        fake_clock_advance(e->api->clock, 7 * 60 * SEC);
        assert_int_equal(fake_transport_end_streams(e->api->ft, WATCH, 0), 1); /* the server's timeout */
        fake_clock_advance(e->api->clock, 0);
        if (fixture)
                EXPECT_LOG(e, "delete ml/c 5990", "delete ml/e 5995", "delete ml/inference-0 48301",
                           "synced");
        else
                EXPECT_LOG(e, "delete ml/c 5990", "delete ml/e 5995", "synced");
        informer_get_stats(e->inf, &st);
        assert_int_equal(st.relists_410, 2);
        assert_int_equal(st.lists, 3);
        assert_int_equal(st.watches, 4);
        assert_int_equal(e->errors, 0);
        assert_null(param(fake_transport_request(e->api->ft, fake_transport_n_requests(e->api->ft) - 2),
                          "resourceVersion"));
        assert_string_equal(param(last_request(e), "resourceVersion"), "7000");
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
}

static void test_watch_ends_at_once_backs_off(void **state) {
        struct env *e = *state;
        size_t before;

        initial_sync(e);
        /* A proxy that closes every watch at once with nothing in it. */
        fake_transport_expect(e->api->ft, "GET", WATCH, &(struct fake_reply){ .times = FAKE_FOREVER });
        assert_int_equal(fake_transport_end_streams(e->api->ft, WATCH, 0), 1);
        before = fake_transport_count(e->api->ft, "GET", WATCH);
        fake_clock_advance(e->api->clock, 5 * 60 * SEC);
        print_message("watches in 5 min: %zu\n", fake_transport_count(e->api->ft, "GET", WATCH) - before);
        assert_true(fake_transport_count(e->api->ft, "GET", WATCH) - before <= 30);
        assert_true(fake_transport_count(e->api->ft, "GET", WATCH) - before >= 5);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", LIST), 2);
}

static void test_connection_refused_backoff(void **state) {
        struct env *e = *state;
        struct informer_stats st;
        size_t n;

        /* The client does not retry by itself here: the informer's backoff is what is measured. */
        informer_free(e->inf);
        test_api_client(e->api, &(struct kube_client_options){ .max_attempts = 1, .random_seed = 3 });
        env_informer(e, &(struct informer_options){ .kind = INFORMER_PODS,
                                                    .field_selector = "spec.nodeName=node-1" });

        fake_transport_expect_error(e->api->ft, NULL, "/api/v1/pods", -ECONNREFUSED, FAKE_FOREVER);
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 5 * 60 * SEC);
        n = fake_transport_n_requests(e->api->ft);
        print_message("requests in 5 min: %zu\n", n);
        assert_true(n >= 8);  /* it keeps trying ... */
        assert_true(n <= 40); /* ... but never spins */
        assert_int_equal(e->last_error, -ECONNREFUSED);
        assert_true(e->errors >= 8);
        assert_false(informer_synced(e->inf));

        /* Gaps grow (jittered within [d/2, d]) up to the 30 s cap. */
        for (int i = 1; i < e->errors && i < 64; i++) {
                uint64_t gap = e->error_at[i] - e->error_at[i - 1];
                uint64_t d = SEC << (i - 1 < 5 ? i - 1 : 5);

                if (d > 30 * SEC)
                        d = 30 * SEC;
                if (i < 8)
                        print_message("gap %d: %llu ms (max %llu)\n", i, (unsigned long long)(gap / MS),
                                      (unsigned long long)(d / MS));
                assert_true(gap >= d / 2);
                assert_true(gap <= d);
        }

        /* The server comes back: the next attempt lists and watches. */
        expect_list(e, "42", NULL, (char *[]){ pod_json("a", "40", "Running"), NULL });
        expect_watch_open(e);
        fake_clock_advance(e->api->clock, 31 * SEC);
        assert_true(informer_synced(e->inf));
        assert_int_equal(informer_size(e->inf), 1);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
        assert_null(param(fake_transport_request(e->api->ft, fake_transport_n_requests(e->api->ft) - 2),
                          "resourceVersion"));
        informer_get_stats(e->inf, &st);
        assert_int_equal(st.errors, (uint64_t)e->errors);

        /* Now the watch connection breaks and stays refused: retried as a watch from the
         * same resourceVersion, with backoff, and no relist. */
        n = fake_transport_count(e->api->ft, "GET",
                                 "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&limit=");
        assert_int_equal(fake_transport_end_streams(e->api->ft, WATCH, -ECONNRESET), 1);
        /* The successful list reset the backoff: the first retry comes within 1 s. */
        n = fake_transport_count(e->api->ft, "GET", WATCH);
        fake_clock_advance(e->api->clock, 1 * SEC);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", WATCH), n + 1);
        n = fake_transport_count(e->api->ft, "GET",
                                 "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&limit=");
        fake_clock_advance(e->api->clock, 5 * 60 * SEC);
        assert_int_equal(fake_transport_count(e->api->ft, "GET",
                                              "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&limit="),
                         n);
        assert_string_equal(param(last_request(e), "resourceVersion"), "42");
        assert_true(fake_transport_count(e->api->ft, "GET", WATCH) <= 25);
}

/* A watch answered 429 with a Retry-After (header, or only in the Status body of the
 * stream) is not opened again before that time, although the informer's own backoff
 * (0.5-1 s after one failure) would come sooner. */
static void test_watch_429_honours_retry_after(void **state) {
        static const char status_429[] =
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":"
                "\"TooManyRequests\",\"code\":429,\"details\":{\"retryAfterSeconds\":4}}";
        struct env *e = *state;
        uint64_t t429;
        size_t n;

        initial_sync(e);
        fake_transport_expect(
                e->api->ft, "GET", WATCH,
                &(struct fake_reply){ .status = 429, .body = status_429, .headers = { "Retry-After: 3" } });
        assert_int_equal(fake_transport_end_streams(e->api->ft, WATCH, -ECONNRESET), 1);
        /* The first re-watch comes within the informer's first backoff (<= 1 s) and gets the 429. */
        n = fake_transport_count(e->api->ft, "GET", WATCH);
        fake_clock_advance(e->api->clock, 1 * SEC);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", WATCH), n + 1);
        n++;
        /* The header says 3 s: nothing before, although the backoff after two failures is at most 2 s. */
        t429 = last_request(e)->at_usec;
        fake_transport_expect(e->api->ft, "GET", WATCH,
                              &(struct fake_reply){ .status = 429, .body = status_429 });
        fake_clock_advance(e->api->clock, t429 + 3 * SEC - 1 * MS - timesrc_now(e->api->ts));
        assert_int_equal(fake_transport_count(e->api->ft, "GET", WATCH), n);
        fake_clock_advance(e->api->clock, 1 * MS);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", WATCH), n + 1);
        n++;
        /* No header: details.retryAfterSeconds (4) of the Status in the stream; the backoff
         * after three failures would be 2-4 s. */
        t429 = last_request(e)->at_usec;
        expect_watch_open(e);
        fake_clock_advance(e->api->clock, t429 + 4 * SEC - 1 * MS - timesrc_now(e->api->ts));
        assert_int_equal(fake_transport_count(e->api->ft, "GET", WATCH), n);
        fake_clock_advance(e->api->clock, 1 * MS);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", WATCH), n + 1);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", LIST), 2);
}

static void test_stop_and_free(void **state) {
        struct env *e = *state;
        size_t n;

        /* Stop with a watch open: idle once the cancel has been delivered. */
        initial_sync(e);
        informer_stop(e->inf);
        assert_false(informer_idle(e->inf));
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_idle(e->inf));
        assert_int_equal(fake_transport_in_flight(e->api->ft), 0);
        assert_int_equal(kube_client_calls_in_flight(e->api->client), 0);
        /* Nothing restarts by itself. */
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);

        /* It can start again: it relists (from etcd, having a resourceVersion) then watches. */
        e->log.n = 0;
        expect_list(e, "300", NULL, (char *[]){ pod_json("a", "10", "Running"), NULL });
        expect_watch_open(e);
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        EXPECT_LOG(e, "delete ml/b 11", "delete ml/c 12", "synced");
        assert_null(param(fake_transport_request(e->api->ft, 3), "resourceVersion"));
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);

        /* Stop while listing (slow answer) and while backing off. */
        informer_stop(e->inf);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_idle(e->inf));
        fake_transport_expect(e->api->ft, "GET", LIST,
                              &(struct fake_reply){ .body = "{}", .delay_usec = 10 * SEC });
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 1 * SEC);
        informer_stop(e->inf);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_idle(e->inf));

        fake_transport_expect_error(e->api->ft, "GET", LIST, -ECONNREFUSED, FAKE_FOREVER);
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 100 * SEC); /* retrying by now */
        assert_true(e->errors > 0);
        informer_stop(e->inf);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_idle(e->inf));
        n = fake_transport_n_requests(e->api->ft);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), n);
        informer_free(e->inf); /* teardown checks that no timer is left behind */
        e->inf = NULL;
}

static void test_cap_on_objects(void **state) {
        struct env *e = *state;

        informer_free(e->inf);
        env_informer(e, &(struct informer_options){ .kind = INFORMER_PODS,
                                                    .field_selector = "spec.nodeName=node-1",
                                                    .max_objects = 2 });
        expect_list(e, "100", NULL,
                    (char *[]){ pod_json("a", "10", "Running"), pod_json("b", "11", "Running"),
                                pod_json("c", "12", "Running"), NULL });
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_false(informer_synced(e->inf));
        assert_int_equal(e->last_error, -ENOSPC);
        assert_int_equal(informer_size(e->inf), 0);
}

/* once: one (paginated) list, synced, no watch; a failed one is reported, not retried. */
static void test_once_lists_and_never_watches(void **state) {
        struct env *e = *state;

        informer_free(e->inf);
        env_informer(e, &(struct informer_options){ .kind = INFORMER_PODS,
                                                    .field_selector = "spec.nodeName=node-1",
                                                    .page_limit = 2,
                                                    .once = true });
        expect_list(e, "100", "eyJydiI6MTAwLCJzdGFydCI6ImIifQ==",
                    (char *[]){ pod_json("a", "10", "Running"), pod_json("b", "11", "Running"), NULL });
        expect_list(e, "100", NULL, (char *[]){ pod_json("c", "12", "Pending"), NULL });
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_synced(e->inf));
        assert_int_equal(informer_size(e->inf), 3);
        fake_clock_advance(e->api->clock, 60 * SEC);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", WATCH), 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_true(informer_idle(e->inf));

        informer_free(e->inf);
        e->synced = e->errors = 0;
        env_informer(e, &(struct informer_options){ .kind = INFORMER_PODS,
                                                    .field_selector = "spec.nodeName=node-1",
                                                    .once = true });
        fake_transport_expect_json(e->api->ft, "GET", LIST, 403,
                                   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\","
                                   "\"code\":403}");
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        fake_clock_advance(e->api->clock, 60 * SEC);
        assert_false(informer_synced(e->inf));
        assert_int_equal(e->errors, 1);
        assert_int_equal(e->last_error, -EACCES);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
}

/* PodDisruptionBudgets, and a group/version path of the caller's (DRA API versions). */
static void test_pdbs_and_api_prefix(void **state) {
        struct env *e = *state;
        const struct pdb_rec *b;

        informer_free(e->inf);
        env_informer(e, &(struct informer_options){ .kind = INFORMER_PDBS, .once = true });
        fake_transport_expect_json(
                e->api->ft, "GET", "/apis/policy/v1/poddisruptionbudgets?limit=", 200,
                "{\"kind\":\"PodDisruptionBudgetList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[{"
                "\"metadata\":{\"name\":\"web\",\"namespace\":\"demo\",\"resourceVersion\":\"6\"},\"spec\":{"
                "\"selector\":{\"matchLabels\":{\"app\":\"web\"}}},\"status\":{\"disruptionsAllowed\":1}}]"
                "}");
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        b = informer_get(e->inf, "demo/web");
        assert_non_null(b);
        assert_int_equal(b->disruptions_allowed, 1);
        assert_string_equal(informer_kind_to_string(INFORMER_PDBS), "poddisruptionbudgets");

        informer_free(e->inf);
        env_informer(e, &(struct informer_options){ .kind = INFORMER_CLAIMS,
                                                    .api_prefix = "/apis/resource.k8s.io/v1beta2",
                                                    .once = true });
        fake_transport_expect_json(
                e->api->ft, "GET", "/apis/resource.k8s.io/v1beta2/resourceclaims?limit=", 200,
                "{\"kind\":\"ResourceClaimList\",\"metadata\":{\"resourceVersion\":\"7\"},"
                "\"items\":[]}");
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_synced(e->inf));
}

/* ---- discovery of the DRA API by the list (api_prefixes) ---- */

#define DRA_V1      "/apis/resource.k8s.io/v1/resourceclaims"
#define DRA_V1BETA2 "/apis/resource.k8s.io/v1beta2/resourceclaims"
#define DRA_V1BETA1 "/apis/resource.k8s.io/v1beta1/resourceclaims"
#define NOT_FOUND                                                                                     \
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"the server " \
        "could not find the requested resource\",\"reason\":\"NotFound\",\"code\":404}"

static const char *const dra_prefixes[] = {
        "/apis/resource.k8s.io/v1",
        "/apis/resource.k8s.io/v1beta2",
        "/apis/resource.k8s.io/v1beta1",
        NULL,
};

static void claims_synced(struct informer *inf, void *userdata) {
        ((struct env *)userdata)->synced++;
}

static const struct informer_handlers claim_handlers = {
        .on_synced = claims_synced,
        .on_error = on_error,
};

/* A ResourceClaimList of the claim fixture at rv (the fixture's JSON is the same in every version). */
static char *claim_list(const char *rv) {
        _cleanup_free_ char *claim = read_fixture("claim-reserved.json");
        char *s;

        assert_true(asprintf(&s,
                             "{\"kind\":\"ResourceClaimList\",\"metadata\":{\"resourceVersion\":\"%s\"},"
                             "\"items\":[%s]}",
                             rv, claim) >= 0);
        return s;
}

static void claims_informer(struct env *e, bool once) {
        if (e->inf) {
                /* Stopped, and freed once its cancelled call has ended. */
                informer_stop(e->inf);
                for (int i = 0; i < 10 && !informer_idle(e->inf); i++)
                        fake_clock_advance(e->api->clock, 0);
                assert_true(informer_idle(e->inf));
                informer_free(e->inf);
        }
        e->inf = NULL;
        assert_int_equal(informer_new(e->api->client, e->api->ts,
                                      &(struct informer_options){ .kind = INFORMER_CLAIMS,
                                                                  .api_prefixes = dra_prefixes,
                                                                  .once = once },
                                      &claim_handlers, e, &e->inf),
                         0);
        e->synced = 0;
        e->errors = 0;
}

static void expect_404(struct env *e, const char *path, unsigned times) {
        fake_transport_expect(e->api->ft, "GET", path,
                              &(struct fake_reply){ .status = 404,
                                                    .body = NOT_FOUND,
                                                    .headers = { "Content-Type: application/json" },
                                                    .times = times });
}

static void test_dra_v1_served(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *body = claim_list("50");

        claims_informer(e, false);
        fake_transport_expect_json(e->api->ft, "GET", DRA_V1 "?limit=", 200, body);
        fake_transport_expect(e->api->ft, "GET", DRA_V1 "?watch=1",
                              &(struct fake_reply){ .hold_open = true });
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_synced(e->inf));
        assert_int_equal(e->synced, 1);
        assert_int_equal(e->errors, 0);
        assert_int_equal(informer_size(e->inf), 1);
        assert_string_equal(informer_api_prefix(e->inf), "/apis/resource.k8s.io/v1");
        /* One list, one watch: a v1 cluster pays nothing for the discovery. */
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
}

static void test_dra_only_v1beta1(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *body = claim_list("51");

        claims_informer(e, false);
        expect_404(e, DRA_V1 "?", 1);
        expect_404(e, DRA_V1BETA2 "?", 1);
        fake_transport_expect_json(e->api->ft, "GET", DRA_V1BETA1 "?limit=", 200, body);
        fake_transport_expect(e->api->ft, "GET", DRA_V1BETA1 "?watch=1",
                              &(struct fake_reply){ .hold_open = true });
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_synced(e->inf));
        assert_int_equal(e->synced, 1);
        assert_int_equal(e->errors, 0); /* a version not served is no error */
        assert_int_equal(informer_size(e->inf), 1);
        assert_string_equal(informer_api_prefix(e->inf), "/apis/resource.k8s.io/v1beta1");
        assert_int_equal(fake_transport_count(e->api->ft, "GET", DRA_V1BETA1 "?watch=1"), 1);
        assert_int_equal(fake_transport_unmatched(e->api->ft), 0);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
}

static void test_dra_none(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *body = claim_list("60");

        claims_informer(e, false);
        expect_404(e, "/apis/resource.k8s.io/", 6);
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        /* Not served: synced and empty, said once, no error, nothing open. */
        assert_true(informer_synced(e->inf));
        assert_int_equal(e->synced, 1);
        assert_int_equal(e->errors, 0);
        assert_int_equal(informer_size(e->inf), 0);
        assert_null(informer_api_prefix(e->inf));
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 0);
        /* It looks again a minute later, quietly. */
        fake_clock_advance(e->api->clock, 59 * USEC_PER_SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        fake_clock_advance(e->api->clock, 2 * USEC_PER_SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 6);
        assert_int_equal(e->synced, 1);
        assert_int_equal(e->errors, 0);
        /* DRA turned on meanwhile (v1beta2): found at the next look. */
        fake_transport_expect_json(e->api->ft, "GET", DRA_V1 "?limit=", 404, NOT_FOUND);
        fake_transport_expect_json(e->api->ft, "GET", DRA_V1BETA2 "?limit=", 200, body);
        fake_transport_expect(e->api->ft, "GET", DRA_V1BETA2 "?watch=1",
                              &(struct fake_reply){ .hold_open = true });
        fake_clock_advance(e->api->clock, 61 * USEC_PER_SEC);
        assert_string_equal(informer_api_prefix(e->inf), "/apis/resource.k8s.io/v1beta2");
        assert_int_equal(informer_size(e->inf), 1);
        assert_int_equal(e->synced, 2);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);

        /* A snapshot (once) that finds nothing is synced, empty, and stops. */
        claims_informer(e, true);
        expect_404(e, "/apis/resource.k8s.io/", 3);
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_synced(e->inf));
        assert_null(informer_api_prefix(e->inf));
        assert_int_equal(e->synced, 1);
        assert_int_equal(e->errors, 0);
        fake_clock_advance(e->api->clock, 120 * USEC_PER_SEC);
        assert_int_equal(fake_transport_expectations_left(e->api->ft), 0);
}

static void test_dra_404_mid_run(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *body = claim_list("70"), *body2 = claim_list("90");
        size_t before;

        claims_informer(e, false);
        fake_transport_expect_json(e->api->ft, "GET", DRA_V1 "?limit=", 200, body);
        fake_transport_expect(e->api->ft, "GET", DRA_V1 "?watch=1",
                              &(struct fake_reply){ .hold_open = true });
        assert_int_equal(informer_start(e->inf), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_string_equal(informer_api_prefix(e->inf), "/apis/resource.k8s.io/v1");
        /* The API server restarts serving v1beta2 only: the watch ends, the next one is
         * answered 404, and the informer finds v1beta2 by listing again. */
        before = fake_transport_n_requests(e->api->ft);
        expect_404(e, DRA_V1 "?", 2);
        fake_transport_expect_json(e->api->ft, "GET", DRA_V1BETA2 "?limit=", 200, body2);
        fake_transport_expect(e->api->ft, "GET", DRA_V1BETA2 "?watch=1",
                              &(struct fake_reply){ .hold_open = true });
        fake_clock_advance(e->api->clock, 10 * USEC_PER_SEC);
        assert_int_equal(fake_transport_end_streams(e->api->ft, DRA_V1 "?watch=1", 0), 1);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft),
                         before + 4); /* watch, list v1, list v1beta2, watch */
        assert_string_equal(informer_api_prefix(e->inf), "/apis/resource.k8s.io/v1beta2");
        assert_int_equal(informer_size(e->inf), 1);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
        assert_int_equal(e->errors, 0);
        assert_int_equal(e->synced, 2);
}

static void test_kind_names(void **state) {
        assert_string_equal(informer_kind_to_string(INFORMER_PODS), "pods");
        assert_string_equal(informer_kind_to_string(INFORMER_CLAIMS), "resourceclaims");
        assert_null(informer_kind_to_string(_INFORMER_KIND_MAX));
        assert_null(informer_kind_to_string(_INFORMER_KIND_INVALID));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_list_pages_then_watch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_events_and_bookmark, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_410_relists, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_ends_at_once_backs_off, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connection_refused_backoff, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_429_honours_retry_after, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_and_free, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cap_on_objects, setup, teardown),
                cmocka_unit_test_setup_teardown(test_once_lists_and_never_watches, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pdbs_and_api_prefix, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dra_v1_served, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dra_only_v1beta1, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dra_none, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dra_404_mid_run, setup, teardown),
                cmocka_unit_test(test_kind_names),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
