/* slots over the real client and informer, a fake clock and a scripted fake
 * transport: create on an empty namespace, waiting for a slot another process
 * holds, taking over expired leases and leases of deleted nodes, 409 races,
 * renewals every third of the duration, release, the lease watch running only
 * while a slot is wanted, RBAC errors. Also the lease record and the
 * namespaced informer path the module relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "drainer/base/json.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/informer.h"
#include "drainer/kube/kubeconfig.h"
#include "drainer/kube/objects.h"
#include "drainer/kube/slots.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS    USEC_PER_MSEC
#define SEC   USEC_PER_SEC
#define T0    TEST_API_T0
#define REAL0 (INT64_C(1795964400) * 1000000 + 250000) /* 2026-11-29T15:00:00.25Z */

#define NS     "drainer-system"
#define LEASES "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases"
#define LIST   LEASES "?limit="
#define WATCH  LEASES "?watch=1"
#define SLOT0  LEASES "/drainer-slot-0"
#define SLOT1  LEASES "/drainer-slot-1"
#define DUR    30 /* lease duration in the tests, seconds */

#define STATUS_409_CONFLICT                                                                                 \
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"    \
        "\"Operation cannot be fulfilled on leases.coordination.k8s.io \\\"drainer-slot-0\\\": the object " \
        "has been modified; please apply your changes to the latest version and try again\","               \
        "\"reason\":\"Conflict\",\"details\":{\"name\":\"drainer-slot-0\",\"group\":"                       \
        "\"coordination.k8s.io\",\"kind\":\"leases\"},\"code\":409}"
#define STATUS_409_EXISTS                                                                                  \
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"   \
        "\"leases.coordination.k8s.io \\\"drainer-slot-0\\\" already "                                     \
        "exists\",\"reason\":\"AlreadyExists\","                                                           \
        "\"details\":{\"name\":\"drainer-slot-0\",\"group\":\"coordination.k8s.io\",\"kind\":\"leases\"}," \
        "\"code\":409}"
#define STATUS_403                                                                                          \
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"    \
        "\"leases.coordination.k8s.io is forbidden: User "                                                  \
        "\\\"system:serviceaccount:drainer-system:drainer\\\" "                                             \
        "cannot list resource \\\"leases\\\" in API group \\\"coordination.k8s.io\\\" in the namespace "    \
        "\\\"drainer-system\\\"\",\"reason\":\"Forbidden\",\"details\":{\"group\":\"coordination.k8s.io\"," \
        "\"kind\":\"leases\"},\"code\":403}"
#define STATUS_404_NODE                                                                                  \
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":" \
        "\"nodes \\\"node-9\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"node-9\","   \
        "\"kind\":\"nodes\"},\"code\":404}"

struct env {
        struct test_api *api;
        struct slots *slots;
        int changed;
        const char *gone[4]; /* nodes node_exists() calls deleted */
        int exists_calls;
        int closed;         /* slots_close()'s done calls */
        uint64_t closed_at; /* ... the last one's time */
};

static int node_exists(const char *node, void *userdata) {
        struct env *e = userdata;

        e->exists_calls++;
        for (size_t i = 0; i < ELEMENTSOF(e->gone); i++)
                if (e->gone[i] && strcmp(e->gone[i], node) == 0)
                        return 0;
        return 1;
}

static void on_changed(struct slots *s, void *userdata) {
        struct env *e = userdata;

        assert_ptr_equal(s, e->slots);
        e->changed++;
}

static int64_t real_now(struct env *e) {
        return timesrc_realtime(e->api->ts);
}

/* MicroTime as the API server writes it. */
static void micro(int64_t usec, char *buf, size_t size) {
        time_t sec = (time_t)(usec / (int64_t)SEC);
        struct tm tm;
        char s[32];

        gmtime_r(&sec, &tm);
        strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, size, "%s.%06dZ", s, (int)(usec % (int64_t)SEC));
}

/* A Lease as the API server returns it, acquired an hour before REAL0. holder NULL:
 * free (no holderIdentity). */
static char *lease_json(int slot, const char *rv, const char *holder, int64_t renew_usec, int transitions) {
        char acq[64], ren[64], h[128] = "", *s;

        micro(REAL0 - 3600 * (int64_t)SEC, acq, sizeof(acq)); /* a tenure keeps its acquireTime */
        micro(renew_usec, ren, sizeof(ren));
        if (holder)
                snprintf(h, sizeof(h), "\"holderIdentity\":\"%s\",", holder);
        assert_true(asprintf(&s,
                             "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{"
                             "\"name\":\"drainer-slot-%d\",\"namespace\":\"" NS "\",\"uid\":\"5c1e-%d\","
                             "\"resourceVersion\":\"%s\",\"creationTimestamp\":\"2026-11-29T14:00:00Z\","
                             "\"annotations\":{\"drainer.io/holder-process\":\"other\"},"
                             "\"managedFields\":[{\"manager\":\"drainer\",\"operation\":\"Update\"}]},"
                             "\"spec\":{%s\"leaseDurationSeconds\":%d,\"acquireTime\":\"%s\","
                             "\"renewTime\":\"%s\",\"leaseTransitions\":%d}}",
                             slot, slot, rv, h, DUR, acq, ren, transitions) >= 0);
        return s;
}

/* A LeaseList: items is a NULL-terminated list of malloc'd lease JSON, freed here. */
static void expect_list(struct env *e, const char *rv, char **items) {
        size_t len = 256;
        char *s;

        for (char **i = items; *i; i++)
                len += strlen(*i) + 1;
        s = malloc(len);
        assert_non_null(s);
        snprintf(s, len,
                 "{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":"
                 "{\"resourceVersion\":\"%s\"},\"items\":[",
                 rv);
        for (char **i = items; *i; i++) {
                if (i != items)
                        strcat(s, ",");
                strcat(s, *i);
                free(*i);
        }
        strcat(s, "]}");
        fake_transport_expect_json(e->api->ft, "GET", LIST, 200, s);
        free(s);
}

static void expect_watch_open(struct env *e) {
        fake_transport_expect(e->api->ft, "GET", WATCH, &(struct fake_reply){ .hold_open = true });
}

/* Expects a write (POST/PUT) answered with this lease (freed here). */
static void expect_write(struct env *e, const char *method, const char *path, long status, char *lease) {
        fake_transport_expect_json(e->api->ft, method, path, status, lease);
        free(lease);
}

static void push(struct env *e, const char *type, char *lease) {
        char *ev;

        assert_true(asprintf(&ev, "{\"type\":\"%s\",\"object\":%s}\n", type, lease) >= 0);
        free(lease);
        assert_int_equal(fake_transport_push(e->api->ft, WATCH, ev), 1);
        free(ev);
}

static const struct fake_request *last_request(struct env *e) {
        return fake_transport_request(e->api->ft, fake_transport_n_requests(e->api->ft) - 1);
}

/* The last request with this method and path prefix. */
static const struct fake_request *last(struct env *e, const char *method, const char *prefix) {
        for (size_t i = fake_transport_n_requests(e->api->ft); i > 0; i--) {
                const struct fake_request *r = fake_transport_request(e->api->ft, i - 1);

                if (strcmp(r->method, method) == 0 && strncmp(r->path, prefix, strlen(prefix)) == 0)
                        return r;
        }
        fail_msg("no %s %s", method, prefix);
        return NULL;
}

/* Parsed body of a request; the caller frees. */
static cJSON *body_of(const struct fake_request *r) {
        cJSON *j;

        assert_non_null(r->body);
        j = cJSON_Parse(r->body);
        assert_non_null(j);
        return j;
}

static void env_slots(struct env *e, unsigned max, bool with_exists) {
        assert_int_equal(slots_new(e->api->client, e->api->ts,
                                   &(struct slots_options){
                                           .ns = NS,
                                           .max = max,
                                           .lease_duration_usec = DUR * SEC,
                                           .identity = "drainer-7f9c/pid-42",
                                           .node_exists = with_exists ? node_exists : NULL,
                                   },
                                   on_changed, e, &e->slots),
                         0);
}

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->api = test_api_new(&(struct test_api_options){
                .user_yaml = "    token: slots-token\n",
                .client = &(struct kube_client_options){ .random_seed = 7 },
                .realtime = REAL0,
        });
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        if (e->slots) {
                slots_stop(e->slots);
                for (int i = 0; i < 10 && !slots_idle(e->slots); i++)
                        fake_clock_advance(e->api->clock, 0);
                assert_true(slots_idle(e->slots));
                slots_free(e->slots);
        }
        assert_int_equal(kube_client_calls_in_flight(e->api->client), 0);
        test_api_free(e->api);
        free(e);
        return 0;
}

/* Lists the given leases at rv 100 and holds the watch open; node asks first. */
static void start_with(struct env *e, const char *node, char **items) {
        expect_list(e, "100", items);
        expect_watch_open(e);
        assert_int_equal(slots_acquire(e->slots, node), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
}

/* node-1 creates drainer-slot-0 in an empty namespace (rv 101). */
static void create_slot0(struct env *e) {
        expect_write(e, "POST", LEASES, 201, lease_json(0, "101", "node-1", real_now(e), 0));
        start_with(e, "node-1", (char *[]){ NULL });
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
}

static void test_idle_sends_nothing(void **state) {
        struct env *e = *state;

        env_slots(e, 2, true);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 0);
        assert_false(slots_held(e->slots, "node-1"));
        assert_string_equal(slots_holders(e->slots), "");
        slots_release(e->slots, "node-1"); /* holds none: no-op */
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 0);
        assert_true(slots_idle(e->slots));
}

static void test_create_on_empty_namespace(void **state) {
        struct env *e = *state;
        const struct fake_request *q;
        cJSON *b;
        char want[64];
        char *v;

        env_slots(e, 2, true);
        create_slot0(e);
        assert_true(slots_held(e->slots, "node-1"));
        assert_true(e->changed >= 1);
        assert_string_equal(slots_holders(e->slots), "node-1");

        /* list (no selector, from etcd), watch, create: nothing else */
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        q = fake_transport_request(e->api->ft, 0);
        assert_string_equal(q->method, "GET");
        assert_true(strncmp(q->path, LIST, strlen(LIST)) == 0);
        assert_false(fake_request_has_param(q, "fieldSelector"));
        assert_false(fake_request_has_param(q, "resourceVersion"));
        q = fake_transport_request(e->api->ft, 1);
        assert_true(q->stream);
        v = fake_request_param(q, "resourceVersion");
        assert_string_equal(v, "100");
        free(v);

        q = last(e, "POST", LEASES);
        /* named field manager: the admission policy reads the server's clock from it */
        assert_string_equal(q->path, LEASES "?fieldManager=drainer");
        assert_string_equal(fake_request_header(q, "Content-Type"), "application/json");
        b = body_of(q);
        assert_string_equal(json_str(b, "apiVersion"), "coordination.k8s.io/v1");
        assert_string_equal(json_str(b, "kind"), "Lease");
        assert_string_equal(json_str(b, "metadata.name"), "drainer-slot-0");
        assert_string_equal(json_str(b, "metadata.namespace"), NS);
        assert_null(json_path(b, "metadata.resourceVersion"));
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                    json_path(b, "metadata.annotations"), "drainer.io/holder-process")),
                            "drainer-7f9c/pid-42");
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-1");
        assert_int_equal(json_int(b, "spec.leaseDurationSeconds", -1), DUR);
        assert_int_equal(json_int(b, "spec.leaseTransitions", -1), 0);
        micro(REAL0, want, sizeof(want));
        assert_string_equal(want, "2026-11-29T15:00:00.250000Z");
        assert_string_equal(json_str(b, "spec.renewTime"), want);
        assert_string_equal(json_str(b, "spec.acquireTime"), want);
        cJSON_Delete(b);

        /* The echo of our create changes nothing. */
        push(e, "ADDED", lease_json(0, "101", "node-1", REAL0, 0));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
}

/* Another process's node holds the only slot; ours waits until it is released. */
static void test_waits_until_released(void **state) {
        struct env *e = *state;
        const struct fake_request *q;
        cJSON *b;
        int changed;

        env_slots(e, 1, true);
        start_with(e, "node-1", (char *[]){ lease_json(0, "90", "node-9", REAL0 - 2 * SEC, 2), NULL });
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_false(slots_held(e->slots, "node-1"));
        assert_string_equal(slots_holders(e->slots), "node-9");
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);

        /* Its renewals come and go: still waiting, nothing sent. */
        fake_clock_advance(e->api->clock, 10 * SEC);
        changed = e->changed;
        push(e, "MODIFIED", lease_json(0, "91", "node-9", real_now(e), 2));
        fake_clock_advance(e->api->clock, 0);
        assert_true(e->changed > changed);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        fake_clock_advance(e->api->clock, 15 * SEC);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);

        /* Released: taken over the released version. */
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "93", "node-1", real_now(e), 3));
        push(e, "MODIFIED", lease_json(0, "92", NULL, real_now(e), 2));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
        assert_string_equal(slots_holders(e->slots), "node-1");
        q = last_request(e);
        assert_string_equal(q->method, "PUT");
        assert_string_equal(q->path, SLOT0 "?fieldManager=drainer");
        b = body_of(q);
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "92");
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-1");
        assert_int_equal(json_int(b, "spec.leaseTransitions", -1), 3);
        cJSON_Delete(b);
}

/* Two nodes of this process, one slot: the second waits for the first's release. */
static void test_second_node_waits_for_first(void **state) {
        struct env *e = *state;
        const struct fake_request *q;
        cJSON *b;

        env_slots(e, 1, true);
        create_slot0(e);
        push(e, "ADDED", lease_json(0, "101", "node-1", REAL0, 0));
        assert_int_equal(slots_acquire(e->slots, "node-2"), 0);
        fake_clock_advance(e->api->clock, 5 * SEC);
        assert_int_equal(slots_acquire(e->slots, "node-2"), 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        assert_string_equal(slots_holders(e->slots), "node-1");

        /* Release clears holderIdentity and keeps the object; node-2 takes it right after. */
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "102", NULL, real_now(e), 0));
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "103", "node-2", real_now(e), 1));
        slots_release(e->slots, "node-1");
        assert_false(slots_held(e->slots, "node-1"));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 2);
        assert_int_equal(fake_transport_count(e->api->ft, "DELETE", NULL), 0);

        q = fake_transport_request(e->api->ft, 3);
        b = body_of(q);
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "101");
        assert_null(json_path(b, "spec.holderIdentity"));
        assert_non_null(json_str(b, "spec.renewTime"));
        cJSON_Delete(b);
        q = fake_transport_request(e->api->ft, 4);
        b = body_of(q);
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "102");
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-2");
        cJSON_Delete(b);

        assert_int_equal(slots_acquire(e->slots, "node-2"), 1);
        assert_true(slots_held(e->slots, "node-2"));
        assert_false(slots_held(e->slots, "node-1"));
        /* The echoes arrive late: nothing more to do. */
        push(e, "MODIFIED", lease_json(0, "102", NULL, real_now(e), 0));
        push(e, "MODIFIED", lease_json(0, "103", "node-2", real_now(e), 1));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 5);
        assert_true(slots_held(e->slots, "node-2"));
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
}

/* A lease renewed 31 s ago (a 30 s lease) by its holder's clock: expiry is judged on our
 * own monotonic clock, from when we first saw this version, not from renewTime against
 * our wall clock. So it is taken one lease duration after we first saw it unchanged. */
static void test_expired_lease_taken_over(void **state) {
        struct env *e = *state;
        const struct fake_request *q;
        cJSON *b;

        env_slots(e, 1, true);
        start_with(e, "node-1", (char *[]){ lease_json(0, "55", "node-9", REAL0 - 31 * SEC, 3), NULL });
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_string_equal(slots_holders(e->slots), "node-9");
        fake_clock_advance(e->api->clock, 29 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);

        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "56", "node-1", real_now(e), 4));
        fake_clock_advance(e->api->clock, 2 * SEC);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
        q = last_request(e);
        assert_string_equal(q->method, "PUT");
        b = body_of(q);
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "55");
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-1");
        assert_int_equal(json_int(b, "spec.leaseTransitions", -1), 4);
        cJSON_Delete(b);
}

/* A lease that expires while we wait: one timer at its expiry, no polling. */
static void test_lease_expires_while_waiting(void **state) {
        struct env *e = *state;

        env_slots(e, 1, true);
        start_with(e, "node-1", (char *[]){ lease_json(0, "55", "node-9", REAL0 - 10 * SEC, 3), NULL });
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_string_equal(slots_holders(e->slots), "node-9");
        fake_clock_advance(e->api->clock, 29 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);

        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "56", "node-1", real_now(e), 4));
        fake_clock_advance(e->api->clock, 2 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
        /* The holder (dead) no longer counts once expired. */
        assert_string_equal(slots_holders(e->slots), "node-1");
}

/* Clock skew between nodes. A live holder whose clock runs 10 min behind ours (its
 * renewTime always "expired" by our wall clock) keeps its slot as long as it renews;
 * a holder that wrote renewTime 2099 and died holds it one lease duration, not until
 * 2099. */
static void test_clock_skew(void **state) {
        struct env *e = *state;
        char rv[16];
        cJSON *b;

        env_slots(e, 1, true);
        start_with(e, "node-1", (char *[]){ lease_json(0, "55", "node-9", REAL0 - 600 * SEC, 3), NULL });
        for (int k = 0; k < 6; k++) {
                fake_clock_advance(e->api->clock, 10 * SEC);
                snprintf(rv, sizeof(rv), "%d", 56 + k);
                push(e, "MODIFIED", lease_json(0, rv, "node-9", real_now(e) - 600 * SEC, 3));
                fake_clock_advance(e->api->clock, 0);
                assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
                assert_string_equal(slots_holders(e->slots), "node-9");
        }
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);

        /* It dies after writing renewTime 2099: taken one duration after that version. */
        push(e, "MODIFIED", lease_json(0, "70", "node-9", INT64_C(4070908800) * 1000000, 3));
        fake_clock_advance(e->api->clock, 29 * SEC);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 2);
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "71", "node-1", real_now(e), 4));
        fake_clock_advance(e->api->clock, 2 * SEC);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
        b = body_of(last(e, "PUT", SLOT0));
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "70");
        cJSON_Delete(b);
}

static void test_holder_node_gone_callback(void **state) {
        struct env *e = *state;
        cJSON *b;

        env_slots(e, 2, true);
        e->gone[0] = "node-9";
        expect_write(e, "PUT", SLOT1, 200, lease_json(1, "71", "node-1", REAL0, 1));
        start_with(e, "node-1",
                   (char *[]){ lease_json(0, "60", "node-8", REAL0, 0),
                               lease_json(1, "70", "node-9", REAL0, 0), NULL });
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
        assert_true(e->exists_calls >= 2);
        b = body_of(last(e, "PUT", SLOT1));
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "70");
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-1");
        cJSON_Delete(b);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/nodes"), 0);
}

/* Without a node_exists callback the module asks the API server, once per tenure. */
static void test_holder_node_gone_get(void **state) {
        struct env *e = *state;
        cJSON *b;

        env_slots(e, 1, false);
        fake_transport_expect_json(e->api->ft, "GET", "/api/v1/nodes/node-9", 404, STATUS_404_NODE);
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "61", "node-1", REAL0, 1));
        start_with(e, "node-1", (char *[]){ lease_json(0, "60", "node-9", REAL0, 0), NULL });
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/nodes/node-9"), 1);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
        b = body_of(last(e, "PUT", SLOT0));
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "60");
        cJSON_Delete(b);
}

static void test_holder_node_exists_get_once(void **state) {
        struct env *e = *state;

        env_slots(e, 1, false);
        fake_transport_expect_json(
                e->api->ft, "GET", "/api/v1/nodes/node-9", 200,
                "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"node-9\"}}");
        start_with(e, "node-1", (char *[]){ lease_json(0, "60", "node-9", REAL0, 0), NULL });
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/nodes/"), 1);
        /* Its renewals and our re-evaluations do not ask again. */
        for (int i = 1; i <= 2; i++) {
                char rv[8];

                fake_clock_advance(e->api->clock, 10 * SEC);
                snprintf(rv, sizeof(rv), "6%d", i);
                push(e, "MODIFIED", lease_json(0, rv, "node-9", real_now(e), 0));
                fake_clock_advance(e->api->clock, 0);
                assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        }
        assert_int_equal(fake_transport_count(e->api->ft, "GET", "/api/v1/nodes/"), 1);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", NULL), 0);
}

/* 409 on the takeover PUT: still waiting, and no retry until the informer moves. */
static void test_conflict_waits_for_next_event(void **state) {
        struct env *e = *state;
        cJSON *b;

        env_slots(e, 1, true);
        fake_transport_expect_json(e->api->ft, "PUT", SLOT0, 409, STATUS_409_CONFLICT);
        start_with(e, "node-1", (char *[]){ lease_json(0, "60", NULL, REAL0 - 100 * SEC, 5), NULL });
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 1);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        fake_clock_advance(e->api->clock, 20 * SEC);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 1);

        /* The winner shows up, then lets go: the next event brings the retry. */
        push(e, "MODIFIED", lease_json(0, "61", "node-5", real_now(e), 6));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 1);
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "63", "node-1", real_now(e), 7));
        push(e, "MODIFIED", lease_json(0, "62", NULL, real_now(e), 6));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 2);
        b = body_of(last(e, "PUT", SLOT0));
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "62");
        cJSON_Delete(b);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
}

/* AlreadyExists on create: another process created it; wait for its ADDED event. */
static void test_create_already_exists(void **state) {
        struct env *e = *state;

        env_slots(e, 1, true);
        fake_transport_expect_json(e->api->ft, "POST", LEASES, 409, STATUS_409_EXISTS);
        start_with(e, "node-1", (char *[]){ NULL });
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        fake_clock_advance(e->api->clock, 5 * SEC);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 1);
        push(e, "ADDED", lease_json(0, "80", "node-4", real_now(e), 0));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_string_equal(slots_holders(e->slots), "node-4");
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);
}

static void test_renewals_every_third(void **state) {
        struct env *e = *state;
        const char *rvs[] = { "101", "102", "103", "104", "105", "106", "107" };

        env_slots(e, 1, true);
        create_slot0(e);
        for (int i = 1; i < 7; i++)
                expect_write(e, "PUT", SLOT0, 200, lease_json(0, rvs[i], "node-1", REAL0 + i * 10 * SEC, 0));

        fake_clock_advance(e->api->clock, 10 * SEC - 1);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 0);
        fake_clock_advance(e->api->clock, 1);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 1);
        fake_clock_advance(e->api->clock, 50 * SEC);
        /* t = 10, 20, ..., 60 s */
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 6);
        for (int i = 0; i < 6; i++) {
                const struct fake_request *q = fake_transport_request(e->api->ft, 3 + (size_t)i);
                cJSON *b = body_of(q);
                char want[64];

                assert_string_equal(q->method, "PUT");
                assert_int_equal(q->at_usec, T0 + (uint64_t)(i + 1) * 10 * SEC);
                assert_string_equal(json_str(b, "metadata.resourceVersion"), rvs[i]);
                assert_string_equal(json_str(b, "spec.holderIdentity"), "node-1");
                micro(REAL0 + (i + 1) * 10 * (int64_t)SEC, want, sizeof(want));
                assert_string_equal(json_str(b, "spec.renewTime"), want);
                cJSON_Delete(b);
        }
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 9);
}

/* A renewal answered 409 (someone took it over): the slot is lost, changed() runs. */
static void test_renewal_conflict_loses_slot(void **state) {
        struct env *e = *state;
        int changed;

        env_slots(e, 1, true);
        create_slot0(e);
        push(e, "ADDED", lease_json(0, "101", "node-1", REAL0, 0));
        fake_clock_advance(e->api->clock, 0);
        fake_transport_expect_json(e->api->ft, "PUT", SLOT0, 409, STATUS_409_CONFLICT);
        changed = e->changed;
        fake_clock_advance(e->api->clock, 10 * SEC);
        assert_true(e->changed > changed);
        assert_false(slots_held(e->slots, "node-1"));
        /* The cache still says node-1 (stale): not adopted, not retried. */
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 4);
        /* The news arrives: node-3 holds it now; wait. */
        push(e, "MODIFIED", lease_json(0, "150", "node-3", real_now(e), 1));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_string_equal(slots_holders(e->slots), "node-3");
        fake_clock_advance(e->api->clock, 20 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 4);
}

/* The watch shows someone else in our slot: checked at once with a renewal; 409 = lost. */
static void test_foreign_write_verified(void **state) {
        struct env *e = *state;
        cJSON *b;

        env_slots(e, 1, true);
        create_slot0(e);
        push(e, "ADDED", lease_json(0, "101", "node-1", REAL0, 0));
        fake_clock_advance(e->api->clock, 2 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 3);

        fake_transport_expect_json(e->api->ft, "PUT", SLOT0, 409, STATUS_409_CONFLICT);
        push(e, "MODIFIED", lease_json(0, "140", "node-5", real_now(e), 1));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 1);
        b = body_of(last(e, "PUT", SLOT0));
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "101");
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-1");
        cJSON_Delete(b);
        assert_false(slots_held(e->slots, "node-1"));
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_string_equal(slots_holders(e->slots), "node-5");
        /* No renewals of a lost slot. */
        fake_clock_advance(e->api->clock, 30 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 4);
}

/* A 5xx on create is retried after a backoff; acquire says "waiting" meanwhile. */
static void test_create_5xx_retried(void **state) {
        struct env *e = *state;

        env_slots(e, 1, true);
        fake_transport_expect_json(e->api->ft, "POST", LEASES, 500, "{}");
        start_with(e, "node-1", (char *[]){ NULL });
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 1); /* creates are not resent */
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        fake_clock_advance(e->api->clock, 900 * MS);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 1);
        expect_write(e, "POST", LEASES, 201, lease_json(0, "101", "node-1", REAL0, 0));
        fake_clock_advance(e->api->clock, 100 * MS);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 2);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
}

/* A renewal answered 404: the lease was deleted; lost too. */
static void test_renewal_404_loses_slot(void **state) {
        struct env *e = *state;

        env_slots(e, 1, true);
        create_slot0(e);
        fake_transport_expect_json(e->api->ft, "PUT", SLOT0, 404,
                                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                                   "\"reason\":\"NotFound\",\"code\":404}");
        fake_clock_advance(e->api->clock, 10 * SEC);
        assert_false(slots_held(e->slots, "node-1"));
        /* The DELETED event: the slot is absent again, so it is created anew. */
        expect_write(e, "POST", LEASES, 201, lease_json(0, "120", "node-1", real_now(e), 0));
        push(e, "DELETED", lease_json(0, "119", "node-1", REAL0, 0));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 2);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
}

/* A restarted process finds its node already holding a slot: held at once, renewed at once. */
static void test_adopts_own_lease(void **state) {
        struct env *e = *state;
        cJSON *b;

        env_slots(e, 2, true);
        expect_write(e, "PUT", SLOT1, 200, lease_json(1, "78", "node-1", REAL0, 2));
        expect_list(e, "100",
                    (char *[]){ lease_json(0, "76", "node-3", REAL0 - SEC, 0),
                                lease_json(1, "77", "node-1", REAL0 - 3 * SEC, 2), NULL });
        expect_watch_open(e);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0); /* not synced yet */
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
        assert_string_equal(slots_holders(e->slots), "node-3, node-1");
        b = body_of(last(e, "PUT", SLOT1));
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "77");
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-1");
        assert_int_equal(json_int(b, "spec.leaseTransitions", -1), 2);
        cJSON_Delete(b);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", NULL), 0);
}

/* Cluster mode: several nodes of one process each take their own slot. */
static void test_cluster_mode_own_slots(void **state) {
        struct env *e = *state;
        const char *slot_of[2] = {};

        env_slots(e, 2, true);
        expect_list(e, "100", (char *[]){ NULL });
        expect_watch_open(e);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        assert_int_equal(slots_acquire(e->slots, "node-2"), 0);
        assert_int_equal(slots_acquire(e->slots, "node-3"), 0);
        fake_clock_advance(e->api->clock, 0);
        /* Two creates wait for answers, for different slots; node-3 waits. */
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 2);
        for (size_t i = 2; i < 4; i++) {
                cJSON *b = body_of(fake_transport_request(e->api->ft, i));
                const char *name = json_str(b, "metadata.name");
                int slot = strcmp(name, "drainer-slot-0") == 0 ? 0 : 1;
                const char *holder = json_str(b, "spec.holderIdentity");

                assert_string_equal(name, slot ? "drainer-slot-1" : "drainer-slot-0");
                assert_null(slot_of[slot]);
                slot_of[slot] = strcmp(holder, "node-1") == 0   ? "node-1"
                                : strcmp(holder, "node-2") == 0 ? "node-2"
                                                                : "node-3";
                expect_write(e, "POST", LEASES, 201,
                             lease_json(slot, slot ? "102" : "101", holder, REAL0, 0));
                cJSON_Delete(b);
        }
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(slots_held(e->slots, "node-1") + slots_held(e->slots, "node-2") +
                                 slots_held(e->slots, "node-3"),
                         2);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 4);
        {
                char want[64];

                snprintf(want, sizeof(want), "%s, %s", slot_of[0], slot_of[1]);
                assert_string_equal(slots_holders(e->slots), want);
        }
}

/* First asked, first served (slots_acquire_ordered): three nodes of this process ask in
 * an order unlike their ask times; one slot is free: it goes to the oldest, the others
 * are queued; when the other holder lets go, the next oldest takes it. */
static void test_ordered_oldest_first(void **state) {
        struct env *e = *state;
        cJSON *b;

        env_slots(e, 2, true);
        expect_list(e, "100", (char *[]){ lease_json(0, "90", "node-9", REAL0, 2), NULL });
        expect_watch_open(e);
        assert_int_equal(slots_acquire_ordered(e->slots, "node-c", 30), 0);
        assert_int_equal(slots_acquire_ordered(e->slots, "node-a", 10), 0);
        assert_int_equal(slots_acquire_ordered(e->slots, "node-b", 20), 0);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 0); /* nothing within the call */
        fake_clock_advance(e->api->clock, 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 1);
        b = body_of(last(e, "POST", LEASES));
        assert_string_equal(json_str(b, "metadata.name"), "drainer-slot-1");
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-a");
        cJSON_Delete(b);
        assert_false(slots_queued(e->slots, "node-a")); /* landing: not queued */
        assert_true(slots_queued(e->slots, "node-b"));
        assert_true(slots_queued(e->slots, "node-c"));

        expect_write(e, "POST", LEASES, 201, lease_json(1, "101", "node-a", REAL0, 0));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(slots_acquire_ordered(e->slots, "node-a", 10), 1);
        /* node-9 lets go: the next oldest (node-b) takes it, not node-c. */
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "92", "node-b", real_now(e), 3));
        push(e, "MODIFIED", lease_json(0, "91", NULL, real_now(e), 2));
        fake_clock_advance(e->api->clock, 0);
        fake_clock_advance(e->api->clock, 0);
        b = body_of(last(e, "PUT", SLOT0));
        assert_string_equal(json_str(b, "spec.holderIdentity"), "node-b");
        cJSON_Delete(b);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 1);
        assert_int_equal(slots_acquire_ordered(e->slots, "node-b", 20), 1);
        assert_int_equal(slots_acquire_ordered(e->slots, "node-c", 30), 0);
        assert_true(slots_queued(e->slots, "node-c"));
}

static bool keep_not_node1(const char *node, void *userdata) {
        int *calls = userdata;

        (*calls)++;
        return strcmp(node, "node-1") != 0;
}

/* Cluster mode: node-1's Node is deleted while it holds the only slot. serve no longer
 * reconciles it, so slots_release_unless() gives its slot back, and node-2, waiting,
 * takes it (before: renewed for ever, node-2 waited "held by node-1"). */
static void test_release_unless_gone_node(void **state) {
        struct env *e = *state;
        int calls = 0;
        cJSON *b;

        env_slots(e, 1, true);
        create_slot0(e);
        push(e, "ADDED", lease_json(0, "101", "node-1", REAL0, 0));
        assert_int_equal(slots_acquire(e->slots, "node-2"), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_string_equal(slots_holders(e->slots), "node-1");

        /* Node-2 still exists: nothing happens to it. */
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "102", NULL, real_now(e), 0));
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "103", "node-2", real_now(e), 1));
        slots_release_unless(e->slots, keep_not_node1, &calls);
        assert_int_equal(calls, 2);
        assert_false(slots_held(e->slots, "node-1"));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 2);
        b = body_of(fake_transport_request(e->api->ft, 3));
        assert_null(json_path(b, "spec.holderIdentity"));
        cJSON_Delete(b);
        assert_int_equal(slots_acquire(e->slots, "node-2"), 1);
        assert_string_equal(slots_holders(e->slots), "node-2");

        /* Once released, node-1 is not asked about again, and node-2 keeps its slot. */
        calls = 0;
        slots_release_unless(e->slots, keep_not_node1, &calls);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(calls, 1);
        assert_true(slots_held(e->slots, "node-2"));
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 2);
}

/* The lease informer runs only while something is wanted or held. */
static void test_informer_stops_when_nothing_wanted(void **state) {
        struct env *e = *state;
        struct kube_client_stats st;

        env_slots(e, 1, true);
        create_slot0(e);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);

        /* A waiting node that gives up keeps nothing open while node-1 holds. */
        assert_int_equal(slots_acquire(e->slots, "node-2"), 0);
        slots_release(e->slots, "node-2");
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);

        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "102", NULL, real_now(e), 0));
        slots_release(e->slots, "node-1");
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 0);
        assert_int_equal(kube_client_calls_in_flight(e->api->client), 0);
        assert_true(slots_idle(e->slots));
        assert_int_equal(fake_clock_armed(e->api->clock), 0);

        /* Idle again: no traffic at all. */
        kube_client_get_stats(e->api->client, &st);
        fake_clock_advance(e->api->clock, 10 * 60 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), st.requests);

        /* Wanted again: a fresh list and watch. */
        expect_list(e, "200", (char *[]){ lease_json(0, "102", NULL, REAL0, 0), NULL });
        expect_watch_open(e);
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "201", "node-2", real_now(e), 1));
        assert_int_equal(slots_acquire(e->slots, "node-2"), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(slots_acquire(e->slots, "node-2"), 1);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
}

/* Release while the acquire is still in flight: released once it lands. */
static void test_release_during_acquire(void **state) {
        struct env *e = *state;
        cJSON *b;

        env_slots(e, 1, true);
        expect_list(e, "100", (char *[]){ NULL });
        expect_watch_open(e);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 1); /* unanswered yet */
        slots_release(e->slots, "node-1");
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "102", NULL, real_now(e), 0));
        expect_write(e, "POST", LEASES, 201, lease_json(0, "101", "node-1", real_now(e), 0));
        fake_clock_advance(e->api->clock, 0);
        assert_false(slots_held(e->slots, "node-1"));
        b = body_of(last(e, "PUT", SLOT0));
        assert_string_equal(json_str(b, "metadata.resourceVersion"), "101");
        assert_null(json_path(b, "spec.holderIdentity"));
        cJSON_Delete(b);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 0);
}

static void test_eacces_on_list(void **state) {
        struct env *e = *state;

        env_slots(e, 1, true);
        fake_transport_expect_json(e->api->ft, "GET", LIST, 403, STATUS_403);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_true(e->changed >= 1);
        assert_int_equal(slots_acquire(e->slots, "node-1"), -EACCES);
        assert_int_equal(slots_acquire(e->slots, "node-1"), -EACCES);

        /* RBAC fixed: the informer's own retry lists, and the slot is taken. */
        expect_list(e, "100", (char *[]){ NULL });
        expect_watch_open(e);
        expect_write(e, "POST", LEASES, 201, lease_json(0, "101", "node-1", REAL0, 0));
        fake_clock_advance(e->api->clock, 2 * SEC);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
}

static void test_eacces_on_create(void **state) {
        struct env *e = *state;

        env_slots(e, 1, true);
        fake_transport_expect_json(e->api->ft, "POST", LEASES, 403, STATUS_403);
        start_with(e, "node-1", (char *[]){ NULL });
        assert_int_equal(slots_acquire(e->slots, "node-1"), -EACCES);
        assert_int_equal(slots_acquire(e->slots, "node-1"), -EACCES); /* backing off, not resent */
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 1);
        fake_transport_expect_json(e->api->ft, "POST", LEASES, 403, STATUS_403);
        fake_clock_advance(e->api->clock, 1 * SEC);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 2);
        assert_int_equal(slots_acquire(e->slots, "node-1"), -EACCES);
        /* Backoff doubles: nothing for another 1.9 s. */
        fake_clock_advance(e->api->clock, 1900 * MS);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 2);
        expect_write(e, "POST", LEASES, 201, lease_json(0, "101", "node-1", REAL0, 0));
        fake_clock_advance(e->api->clock, 100 * MS);
        assert_int_equal(fake_transport_count(e->api->ft, "POST", LEASES), 3);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 1);
}

/* Stop with calls in flight: everything cancelled, idle, freed (teardown checks). */
static void test_stop_in_flight(void **state) {
        struct env *e = *state;

        env_slots(e, 1, true);
        expect_list(e, "100", (char *[]){ NULL });
        expect_watch_open(e);
        assert_int_equal(slots_acquire(e->slots, "node-1"), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_unmatched(e->api->ft), 1); /* the POST */
        slots_stop(e->slots);
        assert_int_equal(slots_acquire(e->slots, "node-1"), -ESHUTDOWN);
        assert_false(slots_idle(e->slots));
        fake_clock_advance(e->api->clock, 0);
        assert_true(slots_idle(e->slots));
}

static void on_closed(struct slots *s, void *userdata) {
        struct env *e = userdata;

        e->closed++;
        e->closed_at = fake_clock_now(e->api->clock);
}

/* A process's end with a release in flight: slots_close() waits for its answer (the
 * slot is given back, not left to expire), then stops the watch and is done exactly
 * when that answer came. Nothing of it wakes while it waits: only the settle deadline
 * is armed, and no timer fires. */
static void test_close_waits_for_release(void **state) {
        struct env *e = *state;
        uint64_t fired, t;

        env_slots(e, 1, true);
        create_slot0(e);
        slots_release(e->slots, "node-1");
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(fake_transport_unmatched(e->api->ft), 1); /* the release's PUT */
        assert_false(slots_settled(e->slots));

        t = fake_clock_now(e->api->clock);
        slots_close(e->slots, 10 * SEC, on_closed, e);
        assert_int_equal(e->closed, 0); /* never from inside the call */
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(e->closed, 0);
        assert_int_equal(fake_clock_next_due(e->api->clock), t + 10 * SEC);
        fired = fake_clock_fired(e->api->clock);
        fake_clock_advance(e->api->clock, 2 * SEC);
        assert_int_equal(fake_clock_fired(e->api->clock), fired); /* nothing polled */
        assert_int_equal(e->closed, 0);

        /* The release answers: the watch stops, and the close is done at that moment. */
        expect_write(e, "PUT", SLOT0, 200, lease_json(0, "102", NULL, real_now(e), 0));
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(e->closed, 1);
        assert_int_equal(e->closed_at, t + 2 * SEC);
        assert_true(slots_idle(e->slots));
        assert_int_equal(fake_clock_armed(e->api->clock), 0);
        assert_int_equal(fake_transport_count(e->api->ft, "PUT", SLOT0), 1);
}

/* No answer within the settle time: stopped at the deadline (the release cancelled),
 * done once the cancelled calls ended. */
static void test_close_deadline(void **state) {
        struct env *e = *state;
        uint64_t t;

        env_slots(e, 1, true);
        create_slot0(e);
        slots_release(e->slots, "node-1");
        fake_clock_advance(e->api->clock, 0);
        t = fake_clock_now(e->api->clock);
        slots_close(e->slots, 10 * SEC, on_closed, e);
        fake_clock_advance(e->api->clock, 10 * SEC - 1);
        assert_int_equal(e->closed, 0);
        fake_clock_advance(e->api->clock, 1);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(e->closed, 1);
        assert_int_equal(e->closed_at, t + 10 * SEC);
        assert_true(slots_idle(e->slots));
}

static void test_options(void **state) {
        struct env *e = *state;
        struct slots *s;

        assert_int_equal(slots_new(e->api->client, e->api->ts, &(struct slots_options){ .ns = NS, .max = 0 },
                                   NULL, NULL, &s),
                         -EINVAL);
        assert_int_equal(
                slots_new(e->api->client, e->api->ts, &(struct slots_options){ .max = 1 }, NULL, NULL, &s),
                -EINVAL);
        assert_int_equal(slots_new(e->api->client, e->api->ts, &(struct slots_options){ .ns = NS, .max = 1 },
                                   NULL, NULL, &s),
                         0);
        assert_int_equal(slots_acquire(s, ""), -EINVAL);
        assert_true(slots_idle(s));
        slots_stop(s);
        slots_free(s);
        slots_free(NULL);
}

static void test_lease_rec(void **state) {
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        struct lease_rec *l;
        int64_t t;

        j = cJSON_Parse("{\"kind\":\"Lease\",\"metadata\":{\"name\":\"drainer-slot-3\",\"namespace\":\"d\","
                        "\"resourceVersion\":\"9\"},\"spec\":{\"holderIdentity\":\"node-1\","
                        "\"leaseDurationSeconds\":120,\"acquireTime\":\"2026-11-29T14:59:00.000001Z\","
                        "\"renewTime\":\"2026-11-29T15:00:00.123456Z\",\"leaseTransitions\":4}}");
        assert_int_equal(lease_rec_from_json(j, &l), 0);
        assert_string_equal(l->ns, "d");
        assert_string_equal(l->name, "drainer-slot-3");
        assert_string_equal(l->resource_version, "9");
        assert_string_equal(l->holder, "node-1");
        assert_int_equal(l->duration_seconds, 120);
        assert_int_equal(l->transitions, 4);
        assert_int_equal(timesrc_parse_rfc3339("2026-11-29T15:00:00Z", &t), 0);
        assert_int_equal(l->renew_time_usec, t + 123456);
        assert_int_equal(l->acquire_time_usec, t - 60 * (int64_t)SEC + 1);
        assert_true(lease_rec_size(l) >= sizeof(*l));
        lease_rec_free(l);
        cJSON_Delete(j);

        /* A released lease: no holder, no times. */
        j = cJSON_Parse(
                "{\"metadata\":{\"name\":\"x\",\"namespace\":\"d\"},\"spec\":{\"holderIdentity\":\"\","
                "\"renewTime\":\"junk\"}}");
        assert_int_equal(lease_rec_from_json(j, &l), 0);
        assert_null(l->holder);
        assert_null(l->resource_version);
        assert_int_equal(l->renew_time_usec, 0);
        assert_int_equal(l->acquire_time_usec, 0);
        assert_int_equal(l->duration_seconds, 0);
        lease_rec_free(l);
        cJSON_Delete(j);

        /* Namespaced: a lease without a namespace is malformed. */
        j = cJSON_Parse("{\"metadata\":{\"name\":\"x\"}}");
        assert_int_equal(lease_rec_from_json(j, &l), -EBADMSG);
        lease_rec_free(NULL);
        assert_int_equal(lease_rec_size(NULL), 0);
}

static void test_informer_namespace(void **state) {
        struct env *e = *state;
        struct informer *inf;

        assert_string_equal(informer_kind_to_string(INFORMER_LEASES), "leases");
        /* cluster-scoped kinds have no namespace */
        assert_int_equal(informer_new(e->api->client, e->api->ts,
                                      &(struct informer_options){ .kind = INFORMER_NODES, .namespace = "x" },
                                      NULL, NULL, &inf),
                         -EINVAL);
        assert_int_equal(informer_new(e->api->client, e->api->ts,
                                      &(struct informer_options){ .kind = INFORMER_LEASES, .namespace = "" },
                                      NULL, NULL, &inf),
                         -EINVAL);
        /* a namespaced pod informer with a selector */
        assert_int_equal(informer_new(e->api->client, e->api->ts,
                                      &(struct informer_options){ .kind = INFORMER_PODS,
                                                                  .namespace = "ml",
                                                                  .label_selector = "app=web" },
                                      NULL, NULL, &inf),
                         0);
        fake_transport_expect_json(
                e->api->ft, "GET", "/api/v1/namespaces/ml/pods?labelSelector=app%3Dweb&limit=", 200,
                "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}");
        fake_transport_expect(e->api->ft, "GET",
                              "/api/v1/namespaces/ml/pods?labelSelector=app%3Dweb&watch=1",
                              &(struct fake_reply){ .hold_open = true });
        assert_int_equal(informer_start(inf), 0);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_synced(inf));
        assert_int_equal(fake_transport_open_streams(e->api->ft), 1);
        informer_stop(inf);
        fake_clock_advance(e->api->clock, 0);
        assert_true(informer_idle(inf));
        informer_free(inf);
}

struct replace_result {
        int done, error;
        unsigned attempts;
};

static void on_replace_done(const struct kube_result *res, void *userdata) {
        struct replace_result *r = userdata;

        r->done++;
        r->error = res->error;
        r->attempts = res->attempts;
}

/* kube_replace: PUT with a JSON body, not retried. */
static void test_kube_replace(void **state) {
        struct env *e = *state;
        struct replace_result got = {};

        fake_transport_expect_json(e->api->ft, "PUT", SLOT0, 503, "{}");
        assert_int_equal(
                kube_replace(e->api->client, SLOT0, "{\"kind\":\"Lease\"}", on_replace_done, &got, NULL), 0);
        assert_int_equal(got.done, 0);
        fake_clock_advance(e->api->clock, 0);
        assert_int_equal(got.done, 1);
        assert_int_equal(got.error, -EIO);
        assert_int_equal(got.attempts, 1);
        assert_string_equal(last_request(e)->method, "PUT");
        assert_string_equal(last_request(e)->body, "{\"kind\":\"Lease\"}");
        assert_string_equal(fake_request_header(last_request(e), "Content-Type"), "application/json");
        fake_clock_advance(e->api->clock, 60 * SEC);
        assert_int_equal(fake_transport_n_requests(e->api->ft), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_idle_sends_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_on_empty_namespace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_waits_until_released, setup, teardown),
                cmocka_unit_test_setup_teardown(test_second_node_waits_for_first, setup, teardown),
                cmocka_unit_test_setup_teardown(test_expired_lease_taken_over, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lease_expires_while_waiting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_clock_skew, setup, teardown),
                cmocka_unit_test_setup_teardown(test_holder_node_gone_callback, setup, teardown),
                cmocka_unit_test_setup_teardown(test_holder_node_gone_get, setup, teardown),
                cmocka_unit_test_setup_teardown(test_holder_node_exists_get_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_conflict_waits_for_next_event, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_already_exists, setup, teardown),
                cmocka_unit_test_setup_teardown(test_renewals_every_third, setup, teardown),
                cmocka_unit_test_setup_teardown(test_renewal_conflict_loses_slot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_renewal_404_loses_slot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_foreign_write_verified, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_5xx_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopts_own_lease, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cluster_mode_own_slots, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ordered_oldest_first, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_unless_gone_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer_stops_when_nothing_wanted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_during_acquire, setup, teardown),
                cmocka_unit_test_setup_teardown(test_eacces_on_list, setup, teardown),
                cmocka_unit_test_setup_teardown(test_eacces_on_create, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_in_flight, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_waits_for_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_deadline, setup, teardown),
                cmocka_unit_test_setup_teardown(test_options, setup, teardown),
                cmocka_unit_test(test_lease_rec),
                cmocka_unit_test_setup_teardown(test_informer_namespace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kube_replace, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
