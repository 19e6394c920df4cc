/* Leader election over the real client, a fake clock and a scripted fake transport:
 * the Lease created when absent, a held Lease waited out for its duration from when
 * this process first saw its version (never taken while the holder renews), renewals
 * over the version written last, the tenure lost at the renew deadline (answers that
 * stop) or to another holder, the write gate that withholds every
 * other write once the deadline passed, the release on close, and the options'
 * checks. (A frozen process is the e2e proof's: the fake clock fires every timer at
 * its due time, so it cannot stop a process between them.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/leader.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define SEC   USEC_PER_SEC
#define MS    USEC_PER_MSEC
#define NS    "drainer-system"
#define LEASE "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases/drainer-leader"
#define ME    "replica-a_4f2c"

struct env {
        struct test_api *api;
        struct leader *l;
        int started, lost, lost_error, errors, closed;
        uint64_t started_at, lost_at;
};

static void on_started(struct leader *l, void *userdata) {
        struct env *e = userdata;

        assert_ptr_equal(l, e->l);
        assert_true(leader_may_write(l));
        e->started++;
        e->started_at = fake_clock_now(e->api->clock);
}

static void on_lost(struct leader *l, int error, void *userdata) {
        struct env *e = userdata;

        assert_false(leader_may_write(l));
        e->lost++;
        e->lost_error = error;
        e->lost_at = fake_clock_now(e->api->clock);
}

static void on_error(struct leader *l, int error, const char *message, void *userdata) {
        struct env *e = userdata;

        (void)l;
        (void)error;
        assert_non_null(message);
        e->errors++;
}

static void on_closed(struct leader *l, void *userdata) {
        struct env *e = userdata;

        (void)l;
        e->closed++;
}

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){
                .client = &(struct kube_client_options){ .random_seed = 5 },
        });
        assert_int_equal(
                leader_new(e->api->client, e->api->ts,
                           &(struct leader_options){ .ns = NS, .name = "drainer-leader", .identity = ME },
                           &(struct leader_callbacks){ on_started, on_lost, on_error }, e, &e->l),
                0);
        kube_client_set_write_gate(e->api->client, leader_write_gate, e->l);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        leader_close(e->l, on_closed, e);
        fake_transport_expect_json(e->api->ft, "PUT", LEASE, 200, "{}"); /* a release, if any */
        test_api_run(e->api, 1 * SEC, 100 * MS);
        assert_int_equal(e->closed, 1);
        assert_true(leader_idle(e->l));
        leader_free(e->l);
        kube_client_set_write_gate(e->api->client, NULL, NULL);
        test_api_free(e->api);
        free(e);
        return 0;
}

/* A Lease as the API server answers (malloc'd). holder NULL: none. */
static char *lease(const char *rv, const char *holder, int transitions) {
        char h[128] = "";

        if (holder)
                snprintf(h, sizeof(h), "\"holderIdentity\":\"%s\",", holder);
        return test_asprintf(
                "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{"
                "\"name\":\"drainer-leader\",\"namespace\":\"" NS "\",\"resourceVersion\":\"%s\"},"
                "\"spec\":{%s\"leaseDurationSeconds\":15,\"acquireTime\":\"2025-06-15T14:00:00.000000Z\","
                "\"renewTime\":\"2025-06-15T14:00:01.000000Z\",\"leaseTransitions\":%d}}",
                rv, h, transitions);
}

static void expect(struct env *e, const char *method, long status, char *body) {
        fake_transport_expect_json(e->api->ft, method, LEASE, status, body);
        free(body);
}

/* The body of the last request of method, or of the first with first set. */
static cJSON *body_of(struct env *e, const char *method, bool first) {
        size_t n = fake_transport_n_requests(e->api->ft);

        for (size_t k = 0; k < n; k++) {
                const struct fake_request *r = fake_transport_request(e->api->ft, first ? k : n - 1 - k);

                if (strcmp(r->method, method) == 0) {
                        cJSON *j = cJSON_Parse(r->body);

                        assert_non_null(j);
                        return j;
                }
        }
        fail_msg("no %s", method);
        return NULL;
}

static const char *str_at(const cJSON *j, const char *a, const char *b) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, a), b);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num_at(const cJSON *j, const char *a, const char *b) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, a), b);

        assert_true(cJSON_IsNumber(v));
        return v->valuedouble;
}

/* A leader over a client of its own: its requests go out on the same transport (the
 * process's client stays idle), and the client goes with the leader. */
static void test_own_client(void **state) {
        struct env *e = *state;
        struct env own = { .api = e->api };
        struct leader *l;
        char *body;

        assert_int_equal(
                leader_new_own_client(
                        fake_transport_base(e->api->ft), e->api->ts, e->api->cfg, e->api->creds, NULL,
                        &(struct leader_options){ .ns = NS, .name = "drainer-leader", .identity = ME },
                        &(struct leader_callbacks){ on_started, on_lost, on_error }, &own, &l),
                0);
        own.l = l;
        fake_transport_expect_json(e->api->ft, "GET", LEASE, 404,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"reason\":\"NotFound\",\"code\":404}");
        body = lease("10", ME, 0);
        fake_transport_expect_json(e->api->ft, "POST",
                                   "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases?", 201, body);
        free(body);
        assert_int_equal(leader_start(l), 0);
        test_api_run(e->api, 100 * MS, 10 * MS);
        assert_int_equal(own.started, 1);
        assert_true(leader_leading(l));
        assert_int_equal(kube_client_calls_in_flight(e->api->client), 0);
        leader_close(l, on_closed, &own);
        fake_transport_expect_json(e->api->ft, "PUT", LEASE, 200, "{}"); /* the release */
        test_api_run(e->api, 1 * SEC, 100 * MS);
        assert_int_equal(own.closed, 1);
        assert_true(leader_idle(l));
        leader_free(l); /* and its client */
}

static void test_identity_unique(void **state) {
        char a[64], b[64], small[8];

        leader_identity_unique("host-1", a, sizeof(a));
        leader_identity_unique("host-1", b, sizeof(b));
        assert_int_equal(strlen(a), strlen("host-1_") + 8);
        assert_memory_equal(a, "host-1_", 7);
        assert_int_equal(strspn(a + 7, "0123456789abcdef"), 8);
        assert_string_not_equal(a, b); /* random: equal once in 2^32 */
        leader_identity_unique("host-1", small, sizeof(small));
        assert_string_equal(small, "host-1_");
}

static void test_creates_when_absent(void **state) {
        struct env *e = *state;
        char *body;
        cJSON *b;

        fake_transport_expect_json(e->api->ft, "GET", LEASE, 404,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"reason\":\"NotFound\",\"code\":404}");
        body = lease("10", ME, 0);
        fake_transport_expect_json(e->api->ft, "POST",
                                   "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases?", 201, body);
        free(body);
        assert_int_equal(leader_start(e->l), 0);
        test_api_run(e->api, 100 * MS, 10 * MS);
        assert_int_equal(e->started, 1);
        assert_true(leader_leading(e->l));
        b = body_of(e, "POST", false);
        assert_string_equal(str_at(b, "spec", "holderIdentity"), ME);
        assert_int_equal((int)num_at(b, "spec", "leaseDurationSeconds"), 15);
        assert_int_equal((int)num_at(b, "spec", "leaseTransitions"), 0);
        cJSON_Delete(b);
        /* renewed every retry period over the version written last */
        expect(e, "PUT", 200, lease("11", ME, 0));
        expect(e, "PUT", 200, lease("12", ME, 0));
        test_api_run(e->api, 4 * SEC, 100 * MS);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", LEASE), 2);
        b = body_of(e, "PUT", false);
        assert_string_equal(str_at(b, "metadata", "resourceVersion"), "11");
        cJSON_Delete(b);
        assert_int_equal(e->lost, 0);
}

/* Held by another who stops renewing: taken once its version stayed the same for the
 * lease duration, counted from when this process first saw it. */
static void test_takes_expired_lease(void **state) {
        struct env *e = *state;
        uint64_t t0 = fake_clock_now(e->api->clock);
        char *held = lease("7", "replica-b_0001", 3), *ours = lease("9", ME, 4);
        cJSON *b;

        fake_transport_expect(e->api->ft, "GET", LEASE,
                              &(struct fake_reply){ .body = held, .times = FAKE_FOREVER });
        free(held);
        assert_int_equal(leader_start(e->l), 0);
        test_api_run(e->api, 14 * SEC, 100 * MS);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", NULL), 0); /* not before 15 s */
        assert_int_equal(e->started, 0);
        /* (the GET expectation answers forever: the take's PUT is matched by its method) */
        expect(e, "PUT", 200, lease("8", ME, 4));
        test_api_run(e->api, 4 * SEC, 100 * MS);
        assert_int_equal(e->started, 1);
        assert_true(e->started_at >= t0 + 15 * SEC);
        assert_true(e->started_at <= t0 + 15 * SEC + 3 * SEC); /* within a jittered retry period */
        b = body_of(e, "PUT", true);                           /* the take (a renewal followed it) */
        assert_string_equal(str_at(b, "metadata", "resourceVersion"), "7");
        assert_string_equal(str_at(b, "spec", "holderIdentity"), ME);
        assert_int_equal((int)num_at(b, "spec", "leaseTransitions"), 4);
        cJSON_Delete(b);
        fake_transport_expect(e->api->ft, "PUT", LEASE,
                              &(struct fake_reply){ .body = ours, .times = FAKE_FOREVER });
        free(ours);
}

/* A holder that renews (a new version every read) is never taken over. */
static void test_renewing_holder_kept(void **state) {
        struct env *e = *state;
        char rv[16];

        assert_int_equal(leader_start(e->l), 0);
        for (int i = 0; i < 30; i++) {
                snprintf(rv, sizeof(rv), "%d", 100 + i);
                expect(e, "GET", 200, lease(rv, "replica-b_0001", 0));
                test_api_run(e->api, 2400 * MS, 100 * MS);
        }
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", NULL), 0);
        assert_int_equal(e->started, 0);
        assert_string_equal(leader_holder(e->l), "replica-b_0001");
        /* (teardown: the close finds the last read's GET answered or pending) */
        expect(e, "GET", 200, lease("999", "replica-b_0001", 0));
}

static void lead(struct env *e) {
        expect(e, "GET", 200, lease("20", NULL, 2));
        expect(e, "PUT", 200, lease("21", ME, 3));
        assert_int_equal(leader_start(e->l), 0);
        test_api_run(e->api, 100 * MS, 10 * MS);
        assert_int_equal(e->started, 1);
}

static void on_patched(const struct kube_result *res, void *userdata) {
        int *r = userdata;

        *r = res->error;
}

/* The API server stops answering renewals: the tenure ends at the renew deadline after
 * the last renewal sent, and from then no other write leaves the process. */
static void test_deadline_ends_tenure(void **state) {
        struct env *e = *state;
        int patched = 1;

        lead(e);
        /* every renewal hangs (no answer) */
        test_api_run(e->api, 9 * SEC, 100 * MS);
        assert_int_equal(e->lost, 0);
        assert_true(leader_may_write(e->l));
        test_api_run(e->api, 1200 * MS, 100 * MS);
        assert_int_equal(e->lost, 1);
        assert_int_equal(e->lost_error, -ETIMEDOUT);
        assert_true(e->lost_at <= e->started_at + 10 * SEC);
        /* the gate: a Node patch is not sent */
        assert_int_equal(kube_patch(e->api->client, "/api/v1/nodes/node-1", KUBE_PATCH_MERGE, "{}",
                                    on_patched, &patched, NULL),
                         0);
        test_api_run(e->api, 100 * MS, 10 * MS);
        assert_int_equal(patched, -ENOLCK);
        assert_int_equal(fake_transport_count(e->api->ft, "PATCH", NULL), 0);
        /* and nothing more is tried */
        test_api_run(e->api, 10 * SEC, 500 * MS);
        /* the take and the one renewal left hanging */
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", LEASE), 2);
}

/* A renewal refused (409): the Lease is read again; another holds it: lost at once. */
static void test_conflict_then_other_holder(void **state) {
        struct env *e = *state;

        lead(e);
        fake_transport_expect_json(e->api->ft, "PUT", LEASE, 409,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"reason\":\"Conflict\",\"code\":409}");
        expect(e, "GET", 200, lease("40", "replica-b_0001", 4));
        test_api_run(e->api, 3 * SEC, 100 * MS);
        assert_int_equal(e->lost, 1);
        assert_int_equal(e->lost_error, -EBUSY);
        assert_false(leader_leading(e->l));
}

/* Close while leading: the Lease is given back (no holder, a lease of 1 s). */
static void test_close_releases(void **state) {
        struct env *e = *state;
        cJSON *b;

        lead(e);
        expect(e, "PUT", 200, lease("22", NULL, 3));
        leader_close(e->l, on_closed, e);
        test_api_run(e->api, 100 * MS, 10 * MS);
        assert_int_equal(e->closed, 1);
        b = body_of(e, "PUT", false);
        assert_null(str_at(b, "spec", "holderIdentity"));
        assert_int_equal((int)num_at(b, "spec", "leaseDurationSeconds"), 1);
        assert_string_equal(str_at(b, "metadata", "resourceVersion"), "21");
        cJSON_Delete(b);
}

/* RBAC: reported once, and the candidate keeps asking. */
static void test_forbidden_reported_once(void **state) {
        struct env *e = *state;

        fake_transport_expect(
                e->api->ft, "GET", LEASE,
                &(struct fake_reply){ .status = 403,
                                      .body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                                              "\"status\":\"Failure\",\"message\":\"leases is "
                                              "forbidden\",\"reason\":\"Forbidden\",\"code\":403}",
                                      .times = FAKE_FOREVER });
        assert_int_equal(leader_start(e->l), 0);
        test_api_run(e->api, 10 * SEC, 100 * MS);
        assert_int_equal(e->errors, 1);
        assert_true(fake_transport_count(e->api->ft, "GET", LEASE) >= 4);
        assert_int_equal(e->started, 0);
}

static void test_options_check(void **state) {
        const char *msg = NULL;

        (void)state;
        assert_int_equal(leader_options_check(
                                 &(struct leader_options){ .ns = NS, .name = "x", .identity = "a" }, &msg),
                         0);
        assert_int_equal(leader_options_check(&(struct leader_options){ .ns = NS,
                                                                        .name = "x",
                                                                        .identity = "a",
                                                                        .lease_duration_usec = 10 * SEC,
                                                                        .renew_deadline_usec = 10 * SEC },
                                              &msg),
                         -EINVAL);
        test_assert_contains(msg, "renew deadline");
        assert_int_equal(leader_options_check(&(struct leader_options){ .ns = NS,
                                                                        .name = "x",
                                                                        .identity = "a",
                                                                        .renew_deadline_usec = 2 * SEC,
                                                                        .retry_period_usec = 2 * SEC },
                                              &msg),
                         -EINVAL);
        test_assert_contains(msg, "retry period");
        assert_int_equal(
                leader_options_check(
                        &(struct leader_options){ .ns = "Bad_NS", .name = "x", .identity = "a" }, &msg),
                -EINVAL);
        assert_int_equal(leader_options_check(
                                 &(struct leader_options){ .ns = NS, .name = "a/b", .identity = "a" }, &msg),
                         -EINVAL);
        assert_int_equal(
                leader_options_check(&(struct leader_options){ .ns = NS, .name = "x", .identity = "a\"b" },
                                     &msg),
                -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_creates_when_absent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_takes_expired_lease, setup, teardown),
                cmocka_unit_test_setup_teardown(test_renewing_holder_kept, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deadline_ends_tenure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_conflict_then_other_holder, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_releases, setup, teardown),
                cmocka_unit_test_setup_teardown(test_forbidden_reported_once, setup, teardown),
                cmocka_unit_test(test_options_check),
                cmocka_unit_test_setup_teardown(test_own_client, setup, teardown),
                cmocka_unit_test(test_identity_unique),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
