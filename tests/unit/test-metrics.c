/* The metrics registry: registration rules, counters, gauges and histograms
 * with labels, caps, removal, the text exposition format 0.0.4 (exact output,
 * escaping, numbers; `promtool check metrics` when it is installed), the JSON
 * form, process metrics, the default registry, and the hooks in the API client
 * and the informer (over a fake clock and the scripted fake transport). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "drainer/base/json.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/kobserver.h"
#include "drainer/kube/kubeconfig.h"
#include "drainer/obs/metrics.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC
#define T0  TEST_API_T0

static struct metrics *new_registry(size_t max_series) {
        struct metrics *m = NULL;

        assert_int_equal(metrics_new(&(struct metrics_options){ .max_series = max_series }, &m), 0);
        return m;
}

static char *render(struct metrics *m) {
        char *text = NULL;
        size_t len = 0;

        assert_int_equal(metrics_render(m, &text, &len), 0);
        assert_non_null(text);
        assert_int_equal(strlen(text), len);
        return text;
}

static void test_register_rules(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(0);
        struct metric_family *f = NULL, *g = NULL;
        static const double bad_order[] = { 1, 0.5 };
        static const double good[] = { 0.5, 1 };

#define REG(...) metrics_register(m, &(struct metric_desc){ __VA_ARGS__ }, NULL)
        assert_int_equal(REG(.name = "x_total", .help = "h", .type = METRIC_COUNTER), 0);
        /* counters end in _total; names and labels follow the Prometheus rules */
        assert_int_equal(REG(.name = "x_count_things", .type = METRIC_COUNTER), -EINVAL);
        assert_int_equal(REG(.name = "9lives", .type = METRIC_GAUGE), -EINVAL);
        assert_int_equal(REG(.name = "a-b", .type = METRIC_GAUGE), -EINVAL);
        assert_int_equal(REG(.name = "", .type = METRIC_GAUGE), -EINVAL);
        assert_int_equal(REG(.name = "ns:sub_gauge", .type = METRIC_GAUGE), 0);
        assert_int_equal(REG(.name = "g1", .type = METRIC_GAUGE, .labels = { "a:b" }), -EINVAL);
        assert_int_equal(REG(.name = "g2", .type = METRIC_GAUGE, .labels = { "__reserved" }), -EINVAL);
        assert_int_equal(REG(.name = "g3", .type = METRIC_GAUGE, .labels = { "a", "a" }), -EINVAL);
        assert_int_equal(REG(.name = "g4", .type = METRIC_GAUGE, .labels = { "a", "b", "c", "d" }), 0);
        assert_int_equal(REG(.name = "g5", .type = (enum metric_type)7), -EINVAL);
        /* histograms: "le" is theirs, buckets increase, names do not end like their series */
        assert_int_equal(REG(.name = "h1", .type = METRIC_HISTOGRAM, .labels = { "le" }), -EINVAL);
        assert_int_equal(REG(.name = "h2", .type = METRIC_HISTOGRAM, .buckets = bad_order, .n_buckets = 2),
                         -EINVAL);
        assert_int_equal(REG(.name = "h3_count", .type = METRIC_HISTOGRAM), -EINVAL);
        assert_int_equal(REG(.name = "h4", .type = METRIC_HISTOGRAM, .buckets = good, .n_buckets = 0),
                         -EINVAL);
        assert_int_equal(REG(.name = "h5", .type = METRIC_HISTOGRAM, .buckets = good, .n_buckets = 2), 0);
        /* The same description twice is the same family; a different one under the name is refused. */
        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "same_total",
                                                                 .type = METRIC_COUNTER,
                                                                 .labels = { "a" } },
                                          &f),
                         0);
        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "same_total",
                                                                 .type = METRIC_COUNTER,
                                                                 .labels = { "a" } },
                                          &g),
                         0);
        assert_ptr_equal(f, g);
        assert_ptr_equal(metrics_find(m, "same_total"), f);
        assert_int_equal(REG(.name = "same_total", .type = METRIC_COUNTER, .labels = { "b" }), -EEXIST);
        assert_int_equal(REG(.name = "h5", .type = METRIC_HISTOGRAM), -EEXIST); /* other buckets */
        assert_null(metrics_find(m, "nope"));
#undef REG
        assert_string_equal(metric_type_to_string(METRIC_HISTOGRAM), "histogram");
        assert_int_equal(metric_type_from_string("gauge"), METRIC_GAUGE);
        assert_int_equal(metric_type_from_string("summary"), -EINVAL);
}

static void test_max_families(void **state) {
        struct metrics *m = NULL;
        char name[32];

        assert_int_equal(metrics_new(&(struct metrics_options){ .max_families = 3 }, &m), 0);
        for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof(name), "g%d", i);
                assert_int_equal(
                        metrics_register(m, &(struct metric_desc){ .name = name, .type = METRIC_GAUGE },
                                         NULL),
                        0);
        }
        assert_int_equal(
                metrics_register(m, &(struct metric_desc){ .name = "one_more", .type = METRIC_GAUGE }, NULL),
                -ENOSPC);
        metrics_free(m);
}

static void test_counter_gauge(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(0);
        struct metric_family *c, *g;
        char long_value[METRICS_MAX_LABEL_VALUE + 2];
        double v;

        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "req_total",
                                                                 .type = METRIC_COUNTER,
                                                                 .labels = { "verb", "code" } },
                                          &c),
                         0);
        assert_int_equal(
                metrics_register(m, &(struct metric_desc){ .name = "temp", .type = METRIC_GAUGE }, &g), 0);

        assert_int_equal(metrics_add(c, METRIC_LABELS("get", "200"), 1), 0);
        assert_int_equal(metrics_add(c, METRIC_LABELS("get", "200"), 2.5), 0);
        assert_int_equal(metrics_add(c, METRIC_LABELS("get", "404"), 1), 0);
        assert_int_equal(metrics_get(c, METRIC_LABELS("get", "200"), &v), 0);
        assert_true(v == 3.5);
        assert_int_equal(metrics_get(c, METRIC_LABELS("get", "500"), &v), -ENOENT);
        /* Counters never go down; label counts must match; NaN is refused. */
        assert_int_equal(metrics_add(c, METRIC_LABELS("get", "200"), -1), -EINVAL);
        assert_int_equal(metrics_add(c, METRIC_LABELS("get"), 1), -EINVAL);
        assert_int_equal(metrics_add(c, METRIC_LABELS("get", "200", "x"), 1), -EINVAL);
        assert_int_equal(metrics_add(c, NULL, 1), -EINVAL);
        assert_int_equal(metrics_add(c, METRIC_LABELS("get", "200"), NAN), -EINVAL);
        assert_int_equal(metrics_observe(c, METRIC_LABELS("get", "200"), 1), -EINVAL);
        memset(long_value, 'x', sizeof(long_value) - 1);
        long_value[sizeof(long_value) - 1] = 0;
        assert_int_equal(metrics_add(c, METRIC_LABELS("get", long_value), 1), -E2BIG);
        /* A NULL family (out of memory in metrics_family()) is ignored. */
        assert_int_equal(metrics_add(NULL, NULL, 1), -EINVAL);
        assert_int_equal(metrics_set(NULL, NULL, 1), -EINVAL);
        assert_int_equal(metrics_observe(NULL, NULL, 1), -EINVAL);

        assert_int_equal(metrics_set(g, NULL, 5), 0);
        assert_int_equal(metrics_add(g, NULL, -7), 0);
        assert_int_equal(metrics_get(g, NULL, &v), 0);
        assert_true(v == -2);
        assert_int_equal(metrics_set(g, METRIC_LABELS("x"), 1), -EINVAL);
        assert_int_equal(metrics_series(m), 3);
}

static void test_histogram(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(0);
        static const double b[] = { 0.125, 1 };
        struct metric_family *h;
        unsigned long long count = 0;
        double sum = 0, v;

        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "lat_seconds",
                                                                 .type = METRIC_HISTOGRAM,
                                                                 .labels = { "op" },
                                                                 .buckets = b,
                                                                 .n_buckets = 2 },
                                          &h),
                         0);
        assert_int_equal(metrics_observe(h, METRIC_LABELS("get"), 0.0625), 0);
        assert_int_equal(metrics_observe(h, METRIC_LABELS("get"), 0.125), 0); /* le is inclusive */
        assert_int_equal(metrics_observe(h, METRIC_LABELS("get"), 0.5), 0);
        assert_int_equal(metrics_observe(h, METRIC_LABELS("get"), 7), 0);
        assert_int_equal(metrics_observe(h, METRIC_LABELS("get"), NAN), -EINVAL);
        assert_int_equal(metrics_add(h, METRIC_LABELS("get"), 1), -EINVAL);
        assert_int_equal(metrics_get(h, METRIC_LABELS("get"), &v), -EINVAL);
        assert_int_equal(metrics_get_histogram(h, METRIC_LABELS("get"), &count, &sum), 0);
        assert_int_equal(count, 4);
        assert_true(sum == 7.6875);
        assert_int_equal(metrics_get_histogram(h, METRIC_LABELS("put"), &count, &sum), -ENOENT);
}

/* The exact text: HELP and TYPE per family, also without series; escaping of
 * help (backslash, newline) and label values (also double quotes); cumulative
 * buckets, +Inf, _sum, _count. */
static void test_render_exact(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(0);
        static const double b[] = { 0.125, 1 };
        struct metric_family *c, *g, *h, *e;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(
                metrics_register(m,
                                 &(struct metric_desc){ .name = "t_requests_total",
                                                        .help = "Requests.\nSecond \\ line \"quoted\"",
                                                        .type = METRIC_COUNTER,
                                                        .labels = { "code", "path" } },
                                 &c),
                0);
        assert_int_equal(
                metrics_register(
                        m, &(struct metric_desc){ .name = "t_temp", .help = "Temp.", .type = METRIC_GAUGE },
                        &g),
                0);
        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "t_lat_seconds",
                                                                 .help = "Lat.",
                                                                 .type = METRIC_HISTOGRAM,
                                                                 .labels = { "op" },
                                                                 .buckets = b,
                                                                 .n_buckets = 2 },
                                          &h),
                         0);
        assert_int_equal(
                metrics_register(
                        m,
                        &(struct metric_desc){ .name = "t_empty", .type = METRIC_GAUGE, .labels = { "x" } },
                        &e),
                0);
        metrics_add(c, METRIC_LABELS("200", "/a"), 1);
        metrics_add(c, METRIC_LABELS("200", "/a"), 2);
        metrics_add(c, METRIC_LABELS("500", "q\"x\\y\nz"), 1);
        metrics_set(g, NULL, -1.5);
        metrics_observe(h, METRIC_LABELS("get"), 0.0625);
        metrics_observe(h, METRIC_LABELS("get"), 0.125);
        metrics_observe(h, METRIC_LABELS("get"), 0.5);
        metrics_observe(h, METRIC_LABELS("get"), 7);
        text = render(m);
        assert_string_equal(text, "# HELP t_requests_total Requests.\\nSecond \\\\ line \"quoted\"\n"
                                  "# TYPE t_requests_total counter\n"
                                  "t_requests_total{code=\"200\",path=\"/a\"} 3\n"
                                  "t_requests_total{code=\"500\",path=\"q\\\"x\\\\y\\nz\"} 1\n"
                                  "# HELP t_temp Temp.\n"
                                  "# TYPE t_temp gauge\n"
                                  "t_temp -1.5\n"
                                  "# HELP t_lat_seconds Lat.\n"
                                  "# TYPE t_lat_seconds histogram\n"
                                  "t_lat_seconds_bucket{op=\"get\",le=\"0.125\"} 2\n"
                                  "t_lat_seconds_bucket{op=\"get\",le=\"1\"} 3\n"
                                  "t_lat_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"
                                  "t_lat_seconds_sum{op=\"get\"} 7.6875\n"
                                  "t_lat_seconds_count{op=\"get\"} 4\n"
                                  "# HELP t_empty \n"
                                  "# TYPE t_empty gauge\n");
}

static void test_numbers(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(0);
        struct metric_family *g, *h;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(
                metrics_register(
                        m, &(struct metric_desc){ .name = "n", .type = METRIC_GAUGE, .labels = { "k" } },
                        &g),
                0);
        assert_int_equal(
                metrics_register(m, &(struct metric_desc){ .name = "hd", .type = METRIC_HISTOGRAM }, &h), 0);
        metrics_set(g, METRIC_LABELS("tenth"), 0.1);
        metrics_set(g, METRIC_LABELS("third"), 1.0 / 3);
        metrics_set(g, METRIC_LABELS("small"), 1e-7);
        metrics_set(g, METRIC_LABELS("big"), 123456789012.0);
        metrics_set(g, METRIC_LABELS("nan"), NAN);
        metrics_set(g, METRIC_LABELS("inf"), INFINITY);
        metrics_set(g, METRIC_LABELS("-inf"), -INFINITY);
        metrics_set(g, METRIC_LABELS("zero"), 0);
        metrics_observe(h, NULL, 3);
        text = render(m);
        assert_non_null(strstr(text, "n{k=\"tenth\"} 0.1\n"));
        assert_non_null(strstr(text, "n{k=\"third\"} 0.33333333333333331\n")); /* reads back exactly */
        assert_non_null(strstr(text, "n{k=\"small\"} 1e-07\n"));
        assert_non_null(strstr(text, "n{k=\"big\"} 123456789012\n"));
        assert_non_null(strstr(text, "n{k=\"nan\"} NaN\n"));
        assert_non_null(strstr(text, "n{k=\"inf\"} +Inf\n"));
        assert_non_null(strstr(text, "n{k=\"-inf\"} -Inf\n"));
        assert_non_null(strstr(text, "n{k=\"zero\"} 0\n"));
        /* Prometheus' default buckets, and a histogram without labels. */
        assert_non_null(strstr(text, "hd_bucket{le=\"0.005\"} 0\n"));
        assert_non_null(strstr(text, "hd_bucket{le=\"2.5\"} 0\n"));
        assert_non_null(strstr(text, "hd_bucket{le=\"5\"} 1\n"));
        assert_non_null(strstr(text, "hd_bucket{le=\"+Inf\"} 1\n"));
        assert_non_null(strstr(text, "hd_sum 3\n"));
        assert_non_null(strstr(text, "hd_count 1\n"));
}

/* Past max_series a new series is dropped (and counted); existing ones still move;
 * removing one makes room. */
static void test_series_cap(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(3);
        struct metric_family *g;
        double v;

        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "per_node",
                                                                 .type = METRIC_GAUGE,
                                                                 .labels = { "node" } },
                                          &g),
                         0);
        assert_int_equal(metrics_set(g, METRIC_LABELS("a"), 1), 0);
        assert_int_equal(metrics_set(g, METRIC_LABELS("b"), 1), 0);
        assert_int_equal(metrics_set(g, METRIC_LABELS("c"), 1), 0);
        assert_int_equal(metrics_set(g, METRIC_LABELS("d"), 1), -ENOSPC);
        assert_int_equal(metrics_set(g, METRIC_LABELS("e"), 1), -ENOSPC);
        assert_int_equal(metrics_dropped(m), 2);
        assert_int_equal(metrics_set(g, METRIC_LABELS("a"), 5), 0);
        assert_int_equal(metrics_get(g, METRIC_LABELS("a"), &v), 0);
        assert_true(v == 5);
        assert_int_equal(metrics_remove(g, METRIC_LABELS("b")), 0);
        assert_int_equal(metrics_remove(g, METRIC_LABELS("b")), -ENOENT);
        assert_int_equal(metrics_set(g, METRIC_LABELS("d"), 1), 0);
        assert_int_equal(metrics_series(m), 3);
}

static void test_remove_label(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(0);
        struct metric_family *phase, *claims, *other;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "phase",
                                                                 .type = METRIC_GAUGE,
                                                                 .labels = { "node", "phase" } },
                                          &phase),
                         0);
        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "claims",
                                                                 .type = METRIC_GAUGE,
                                                                 .labels = { "node" } },
                                          &claims),
                         0);
        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "other_total",
                                                                 .type = METRIC_COUNTER,
                                                                 .labels = { "result" } },
                                          &other),
                         0);
        metrics_set(phase, METRIC_LABELS("n1", "cordon"), 1);
        metrics_set(phase, METRIC_LABELS("n1", "drained"), 1);
        metrics_set(phase, METRIC_LABELS("n2", "cordon"), 1);
        metrics_set(claims, METRIC_LABELS("n1"), 3);
        metrics_set(claims, METRIC_LABELS("n2"), 0);
        metrics_add(other, METRIC_LABELS("n1"), 1); /* a "result" label: untouched */
        assert_int_equal(metrics_remove_where(phase, "phase", "cordon"), 2);
        assert_int_equal(metrics_remove_where(phase, "nope", "cordon"), 0);
        metrics_set(phase, METRIC_LABELS("n2", "cordon"), 1);
        assert_int_equal(metrics_remove_label(m, "node", "n1"), 2);
        text = render(m);
        assert_null(strstr(text, "node=\"n1\""));
        assert_non_null(strstr(text, "phase{node=\"n2\",phase=\"cordon\"} 1\n"));
        assert_non_null(strstr(text, "claims{node=\"n2\"} 0\n"));
        assert_non_null(strstr(text, "other_total{result=\"n1\"} 1\n"));
}

static void test_json(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(0);
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        static const double b[] = { 1, 10 };
        struct metric_family *c, *h;
        const cJSON *s, *bk;

        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "ev_total",
                                                                 .type = METRIC_COUNTER,
                                                                 .labels = { "result" } },
                                          &c),
                         0);
        assert_int_equal(metrics_register(m,
                                          &(struct metric_desc){ .name = "d_seconds",
                                                                 .type = METRIC_HISTOGRAM,
                                                                 .labels = { "phase" },
                                                                 .buckets = b,
                                                                 .n_buckets = 2 },
                                          &h),
                         0);
        assert_int_equal(
                metrics_register(m, &(struct metric_desc){ .name = "unused", .type = METRIC_GAUGE }, NULL),
                0);
        metrics_add(c, METRIC_LABELS("accepted"), 12);
        metrics_observe(h, METRIC_LABELS("cordon"), 0.5);
        metrics_observe(h, METRIC_LABELS("cordon"), 5);
        metrics_observe(h, METRIC_LABELS("cordon"), 50);
        j = metrics_to_json(m);
        assert_non_null(j);
        assert_string_equal(json_str(j, "ev_total.type"), "counter");
        s = cJSON_GetArrayItem(json_path(j, "ev_total.series"), 0);
        assert_string_equal(json_str(s, "labels.result"), "accepted");
        assert_int_equal(json_int(s, "value", -1), 12);
        assert_null(json_path(j, "unused")); /* no series: left out */
        s = cJSON_GetArrayItem(json_path(j, "d_seconds.series"), 0);
        assert_string_equal(json_str(j, "d_seconds.type"), "histogram");
        assert_string_equal(json_str(s, "labels.phase"), "cordon");
        assert_int_equal(json_int(s, "count", -1), 3);
        assert_int_equal(json_int(s, "sum", -1), 55);
        assert_int_equal(cJSON_GetArraySize(json_path(s, "buckets")), 2);
        bk = cJSON_GetArrayItem(json_path(s, "buckets"), 1);
        assert_int_equal(json_int(bk, "le", -1), 10);
        assert_int_equal(json_int(bk, "count", -1), 2); /* cumulative */
}

static double sample(const char *text, const char *name) {
        char pat[128];
        const char *p;

        snprintf(pat, sizeof(pat), "\n%s ", name);
        p = strstr(text, pat);
        assert_non_null(p);
        return strtod(p + strlen(pat), NULL);
}

static void test_process(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = new_registry(0);
        _cleanup_free_ char *text = NULL;
        double start, now = (double)time(NULL);
        volatile double x = 0;

        assert_int_equal(metrics_add_process(m), 0);
        assert_int_equal(metrics_add_process(m), 0); /* once is enough */
        for (int i = 0; i < 3000000; i++)
                x += i; /* some CPU time */
        text = render(m);
        assert_true(sample(text, "process_resident_memory_bytes") > 100 * 1024);
        assert_true(sample(text, "process_virtual_memory_bytes") >=
                    sample(text, "process_resident_memory_bytes"));
        assert_true(sample(text, "process_cpu_seconds_total") >= 0);
        assert_true(sample(text, "process_open_fds") >= 3);
        assert_true(sample(text, "process_max_fds") >= sample(text, "process_open_fds"));
        start = sample(text, "process_start_time_seconds");
        assert_true(start <= now + 2 && start > now - 3600);
        assert_non_null(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
}

static void test_default_registry(void **state) {
        struct metrics *m = metrics_default();
        _cleanup_free_ char *text = NULL;
        double v = -1;

        assert_non_null(m);
        assert_ptr_equal(metrics_default(), m);
        for (int i = 0; i < _DRAINER_METRIC_MAX; i++) {
                assert_non_null(metrics_family(i));
                assert_ptr_equal(metrics_find(m, drainer_metric_name(i)), metrics_family(i));
                assert_int_equal(strncmp(drainer_metric_name(i), "drainer_", 8), 0);
        }
        assert_null(metrics_family(_DRAINER_METRIC_MAX));
        assert_null(drainer_metric_name(-1));
        assert_int_equal(
                metrics_get(metrics_family(DRAINER_METRIC_EVICTIONS), METRIC_LABELS("pdb_blocked"), &v), 0);
        assert_true(v >= 0);
        text = render(m);
        assert_non_null(strstr(text, "drainer_evictions_total{result=\"accepted\"} "));
        assert_non_null(strstr(text, "drainer_evictions_total{result=\"gone\"} "));
        assert_non_null(strstr(text, "drainer_drains_total{goal=\"drain\",result=\"timeout\"} "));
        assert_non_null(strstr(text, "drainer_build_info{version=\"" DRAINER_VERSION "\"} 1\n"));
        assert_non_null(strstr(text, "\nprocess_resident_memory_bytes "));
        assert_non_null(strstr(text, "# TYPE drainer_phase_duration_seconds histogram\n"));
        assert_non_null(strstr(text, "\ndrainer_metrics_dropped_total 0\n"));
}

/* ---- hooks: the API client and the informer record into the default registry ---- */

struct env {
        struct test_api *api;
        int done;
        int last_error;
};

static void env_setup(struct env *e, double qps, int burst) {
        e->api = test_api_new(&(struct test_api_options){
                .user_yaml = "    token: metrics-token\n",
                .client =
                        &(struct kube_client_options){
                                .qps = qps, .burst = burst, .random_seed = 5, .max_attempts = 1 },
        });
}

static void env_teardown(struct env *e) {
        test_api_free(e->api);
}

static void on_done(const struct kube_result *res, void *userdata) {
        struct env *e = userdata;

        e->done++;
        e->last_error = res->error;
}

static double counter(enum drainer_metric id, const char *const *values) {
        double v = 0;

        (void)metrics_get(metrics_family(id), values, &v);
        return v;
}

static unsigned long long hist_count(enum drainer_metric id, const char *const *values, double *ret_sum) {
        unsigned long long n = 0;
        double sum = 0;

        (void)metrics_get_histogram(metrics_family(id), values, &n, &sum);
        if (ret_sum)
                *ret_sum = sum;
        return n;
}

static void test_client_hooks(void **state) {
        struct env e = {};
        double get200 = counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("get", "200"));
        double get404 = counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("get", "404"));
        double create_err = counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("create", "<error>"));
        double patch503 = counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("patch", "503"));
        double sum0, sum1, wait0, wait1;
        unsigned long long n_get = hist_count(DRAINER_METRIC_API_DURATION, METRIC_LABELS("get"), &sum0);
        unsigned long long n_wait =
                hist_count(DRAINER_METRIC_API_RATELIMIT_WAIT, METRIC_LABELS("get"), &wait0);
        struct kube_client_stats cs;

        /* 1 request/s, burst 1: the second GET waits a second for its token. */
        env_setup(&e, 1, 1);
        fake_transport_expect(e.api->ft, "GET", "/api/v1/nodes/a",
                              &(struct fake_reply){ .body = "{}", .delay_usec = 250 * MS });
        fake_transport_expect_json(e.api->ft, "GET", "/api/v1/nodes/b", 404,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"reason\":\"NotFound\",\"code\":404}");
        assert_int_equal(kube_get(e.api->client, "/api/v1/nodes/a", on_done, &e, NULL), 0);
        assert_int_equal(kube_get(e.api->client, "/api/v1/nodes/b", on_done, &e, NULL), 0);
        fake_clock_advance(e.api->clock, 2 * SEC);
        assert_int_equal(e.done, 2);
        kube_client_get_stats(e.api->client, &cs);
        assert_true(cs.last_ok_usec > 0 && cs.last_error_usec == 0);

        fake_transport_expect_error(e.api->ft, "POST", "/api/v1/namespaces/default/events", -ECONNREFUSED,
                                    1);
        assert_int_equal(
                kube_create(e.api->client, "/api/v1/namespaces/default/events", "{}", on_done, &e, NULL), 0);
        fake_clock_advance(e.api->clock, 2 * SEC);
        assert_int_equal(e.done, 3);
        assert_int_equal(e.last_error, -ECONNREFUSED);
        kube_client_get_stats(e.api->client, &cs);
        assert_true(cs.last_error_usec > cs.last_ok_usec); /* /readyz would say 503 now */

        fake_transport_expect_json(e.api->ft, "PATCH", "/api/v1/nodes/a", 503, "{}");
        assert_int_equal(
                kube_patch(e.api->client, "/api/v1/nodes/a", KUBE_PATCH_MERGE, "{}", on_done, &e, NULL), 0);
        fake_clock_advance(e.api->clock, 2 * SEC);
        assert_int_equal(e.done, 4);
        fake_transport_expect_json(e.api->ft, "GET", "/api/v1/nodes/a", 200, "{}");
        assert_int_equal(kube_get(e.api->client, "/api/v1/nodes/a", on_done, &e, NULL), 0);
        fake_clock_advance(e.api->clock, 2 * SEC);
        assert_int_equal(e.done, 5);
        kube_client_get_stats(e.api->client, &cs);
        assert_true(cs.last_ok_usec > cs.last_error_usec); /* answered again */

        assert_true(counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("get", "200")) == get200 + 2);
        assert_true(counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("get", "404")) == get404 + 1);
        assert_true(counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("create", "<error>")) ==
                    create_err + 1);
        assert_true(counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("patch", "503")) == patch503 + 1);
        /* Latency on the fake clock: 0.25 s for the first GET, 0 for the others. */
        assert_int_equal(hist_count(DRAINER_METRIC_API_DURATION, METRIC_LABELS("get"), &sum1), n_get + 3);
        assert_true(fabs(sum1 - sum0 - 0.25) < 1e-9);
        /* The token bucket: the second GET waited 1 s; later ones found a token. */
        assert_int_equal(hist_count(DRAINER_METRIC_API_RATELIMIT_WAIT, METRIC_LABELS("get"), &wait1),
                         n_wait + 3);
        assert_true(fabs(wait1 - wait0 - 1.0) < 1e-6);
        env_teardown(&e);
}

/* The client's rate (a gauge, set at start and at each change) and the server's
 * pushback (by verb and code; a PodDisruptionBudget's 429 is none). */
static void test_client_rate_and_pushback(void **state) {
        struct env e = {};
        double get429 = counter(DRAINER_METRIC_API_PUSHBACKS, METRIC_LABELS("get", "429"));
        double create429 = counter(DRAINER_METRIC_API_PUSHBACKS, METRIC_LABELS("create", "429"));
        double qps = -1;

        e.api = test_api_new(&(struct test_api_options){
                .user_yaml = "    token: metrics-token\n",
                .client = &(struct kube_client_options){ .qps = 8,
                                                         .burst = 1,
                                                         .adaptive = true,
                                                         .random_seed = 5,
                                                         .max_attempts = 2 },
        });
        assert_int_equal(metrics_get(metrics_family(DRAINER_METRIC_API_CLIENT_QPS), NULL, &qps), 0);
        assert_true(qps == 8);
        fake_transport_expect(
                e.api->ft, "GET", "/api/v1/nodes/a",
                &(struct fake_reply){ .status = 429,
                                      .headers = { "Retry-After: 1" },
                                      .body = "Too many requests, please try again later.\n" });
        fake_transport_expect_json(e.api->ft, "GET", "/api/v1/nodes/a", 200, "{}");
        assert_int_equal(kube_get(e.api->client, "/api/v1/nodes/a", on_done, &e, NULL), 0);
        fake_clock_advance(e.api->clock, 5 * SEC);
        assert_int_equal(e.done, 1);
        assert_int_equal(metrics_get(metrics_family(DRAINER_METRIC_API_CLIENT_QPS), NULL, &qps), 0);
        assert_true(qps == 5); /* halved, to the floor (client-go's 5) */
        assert_true(counter(DRAINER_METRIC_API_PUSHBACKS, METRIC_LABELS("get", "429")) == get429 + 1);

        fake_transport_expect_json(e.api->ft, "POST", "/api/v1/namespaces/ml/pods/p/eviction", 429,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"reason\":\"TooManyRequests\",\"code\":429,\"details\":{\"causes\":"
                                   "[{\"reason\":\"DisruptionBudget\"}]}}");
        assert_int_equal(kube_evict(e.api->client, "ml", "p", -1, false, on_done, &e, NULL), 0);
        fake_clock_advance(e.api->clock, 5 * SEC);
        assert_int_equal(e.done, 2);
        assert_true(counter(DRAINER_METRIC_API_PUSHBACKS, METRIC_LABELS("create", "429")) == create429);
        env_teardown(&e);
}

static void on_inf_error(struct informer *inf, int error, const char *message, void *userdata) {
}

#define PODS  "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
#define WATCH PODS "&watch=1"

static void test_informer_hooks(void **state) {
        static const struct informer_handlers h = { .on_error = on_inf_error };
        struct env e = {};
        struct informer *inf = NULL;
        double added = counter(DRAINER_METRIC_WATCH_EVENTS, METRIC_LABELS("pods", "ADDED"));
        double bookmarks = counter(DRAINER_METRIC_WATCH_EVENTS, METRIC_LABELS("pods", "BOOKMARK"));
        double expired = counter(DRAINER_METRIC_WATCH_RESTARTS, METRIC_LABELS("pods", "expired"));
        double closed = counter(DRAINER_METRIC_WATCH_RESTARTS, METRIC_LABELS("pods", "closed"));
        double errors = counter(DRAINER_METRIC_WATCH_RESTARTS, METRIC_LABELS("pods", "error"));
        double lists = counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("list", "200"));
        const char *pod =
                "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
                "{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"u1\",\"resourceVersion\":\"11\"},"
                "\"spec\":{\"nodeName\":\"node-1\"},\"status\":{\"phase\":\"Running\"}}}\n";
        const char *bookmark = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
                               "\"metadata\":{\"resourceVersion\":\"12\"}}}\n";
        const char *gone = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                           "\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}}\n";
        const char *list =
                "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"10\"},"
                "\"items\":[]}";

        env_setup(&e, 0, 0);
        assert_int_equal(informer_new(e.api->client, e.api->ts,
                                      &(struct informer_options){ .kind = INFORMER_PODS,
                                                                  .field_selector = "spec.nodeName=node-1" },
                                      &h, &e, &inf),
                         0);
        fake_transport_expect_json(e.api->ft, "GET", PODS "&limit=", 200, list);
        fake_transport_expect(e.api->ft, "GET", WATCH, &(struct fake_reply){ .hold_open = true });
        assert_int_equal(informer_start(inf), 0);
        fake_clock_advance(e.api->clock, 10 * MS);
        assert_true(informer_synced(inf));
        assert_int_equal(fake_transport_push(e.api->ft, WATCH, pod), 1);
        assert_int_equal(fake_transport_push(e.api->ft, WATCH, bookmark), 1);
        /* 410 in the stream: relist, then watch again. */
        fake_transport_expect_json(e.api->ft, "GET", PODS "&limit=", 200, list);
        fake_transport_expect(e.api->ft, "GET", WATCH, &(struct fake_reply){ .hold_open = true });
        assert_int_equal(fake_transport_push(e.api->ft, WATCH, gone), 1);
        fake_clock_advance(e.api->clock, 10 * MS);
        /* The server ends the watch after a while: resumed at once. */
        fake_clock_advance(e.api->clock, 5 * SEC);
        fake_transport_expect(e.api->ft, "GET", WATCH, &(struct fake_reply){ .hold_open = true });
        assert_int_equal(fake_transport_end_streams(e.api->ft, WATCH, 0), 1);
        fake_clock_advance(e.api->clock, 10 * MS);
        /* A broken connection: an error, retried with backoff. */
        assert_int_equal(fake_transport_end_streams(e.api->ft, WATCH, -ECONNRESET), 1);
        fake_clock_advance(e.api->clock, 10 * MS);

        assert_true(counter(DRAINER_METRIC_WATCH_EVENTS, METRIC_LABELS("pods", "ADDED")) == added + 1);
        assert_true(counter(DRAINER_METRIC_WATCH_EVENTS, METRIC_LABELS("pods", "BOOKMARK")) ==
                    bookmarks + 1);
        assert_true(counter(DRAINER_METRIC_WATCH_RESTARTS, METRIC_LABELS("pods", "expired")) == expired + 1);
        assert_true(counter(DRAINER_METRIC_WATCH_RESTARTS, METRIC_LABELS("pods", "closed")) == closed + 1);
        assert_true(counter(DRAINER_METRIC_WATCH_RESTARTS, METRIC_LABELS("pods", "error")) == errors + 1);
        assert_true(counter(DRAINER_METRIC_API_REQUESTS, METRIC_LABELS("list", "200")) == lists + 2);

        informer_stop(inf);
        for (int i = 0; i < 10 && !informer_idle(inf); i++)
                fake_clock_advance(e.api->clock, 0);
        assert_true(informer_idle(inf));
        informer_free(inf);
        env_teardown(&e);
}

/* The default registry with every kind of series in it, plus escaping, passes
 * `promtool check metrics` (Debian's prometheus package), when installed. */
static void test_promtool(void **state) {
        struct metrics *m = metrics_default();
        _cleanup_free_ char *text = NULL;
        char *dir, *path, cmd[PATH_MAX + 64];
        int status;

        if (system("command -v promtool >/dev/null 2>&1") != 0) {
                print_message("promtool not installed (Debian: prometheus): skipped\n");
                skip();
        }
        metrics_set(metrics_family(DRAINER_METRIC_PHASE), METRIC_LABELS("node \"x\"\\\n", "", "cordon"), 1);
        metrics_observe(metrics_family(DRAINER_METRIC_PHASE_DURATION), METRIC_LABELS("cordon"), 0.3);
        metrics_observe(metrics_family(DRAINER_METRIC_DRAIN_DURATION), METRIC_LABELS("drain", "done"), 42);
        metrics_set(metrics_family(DRAINER_METRIC_DRIVER_HEALTHY),
                    METRIC_LABELS("n1", "dra-system/dra-driver"), 1);
        text = render(m);
        metrics_remove_label(m, "node", "node \"x\"\\\n");
        metrics_remove_label(m, "node", "n1");
        dir = test_private_dir("metrics");
        path = test_write_file(dir, "metrics.txt", text);
        snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s'", path);
        status = system(cmd);
        free(path);
        test_private_dir_remove(dir);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_register_rules),
                cmocka_unit_test(test_max_families),
                cmocka_unit_test(test_counter_gauge),
                cmocka_unit_test(test_histogram),
                cmocka_unit_test(test_render_exact),
                cmocka_unit_test(test_numbers),
                cmocka_unit_test(test_series_cap),
                cmocka_unit_test(test_remove_label),
                cmocka_unit_test(test_json),
                cmocka_unit_test(test_process),
                cmocka_unit_test(test_default_registry),
                cmocka_unit_test(test_client_hooks),
                cmocka_unit_test(test_client_rate_and_pushback),
                cmocka_unit_test(test_informer_hooks),
                cmocka_unit_test(test_promtool),
        };

        /* as cmd/ does: requests and watches reach the registry through the observer */
        kube_observer_set(&metrics_kube_observer);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
