/* The guard server (ctl/guardserver.c): its endpoint on a real libuv loop, asked by
 * raw loopback sockets, its runs on the real client over a scripted fake transport
 * and a fake clock, never sleeping: a request is answered from the node view, the
 * view is shared by the request that follows; a stop answers a request held open
 * 503 with counts and ends as soon as the last connection closed (no need for the
 * linger second), or at the linger deadline when a client keeps its connection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "drainer/base/timesrc.h"
#include "drainer/ctl/guard.h"
#include "drainer/ctl/guardserver.h"
#include "fakes/fake-apiserver.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"
#include "fakes/test-env.h"

#define MS  USEC_PER_MSEC
#define SEC USEC_PER_SEC

#define NODES  FAKE_API_NODES
#define PODS   FAKE_API_PODS
#define CLAIMS FAKE_API_CLAIMS
#define SLICES FAKE_API_SLICES

struct env {
        uv_loop_t loop;
        struct test_api *api;
        struct guard_config cfg;
        struct guard_server *s;
        unsigned stopped;
        char notes[8192];
};

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        assert_int_equal(uv_loop_init(&e->loop), 0);
        e->api = test_api_new(NULL);
        e->cfg = (struct guard_config){ .node = "node-1", .grace_seconds = -1 };
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        guard_server_free(e->s);
        uv_run(&e->loop, UV_RUN_NOWAIT);
        assert_int_equal(uv_loop_close(&e->loop), 0);
        test_api_free(e->api);
        free(e);
        return 0;
}

static void on_note(struct guard_server *s, enum log_level level, int error, const char *line,
                    void *userdata) {
        struct env *e = userdata;
        size_t len = strlen(e->notes);

        snprintf(e->notes + len, sizeof(e->notes) - len, "%s\n", line);
}

static void on_stopped(struct guard_server *s, void *userdata) {
        ((struct env *)userdata)->stopped++;
}

static const struct guard_server_handlers handlers = { .on_note = on_note, .on_stopped = on_stopped };

/* One turn: the sockets (the loop, without blocking), the API answers, 1 ms of fake time. */
static void turn(struct env *e) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        test_api_run(e->api, MS, MS);
}

static void start(struct env *e) {
        assert_int_equal(guard_server_new(&e->loop, e->api->client, e->api->ts, &e->cfg, "127.0.0.1:0",
                                          &handlers, e, &e->s),
                         0);
        assert_true(guard_server_port(e->s) > 0);
}

static int connect_to(struct env *e) {
        struct sockaddr_in sa = { .sin_family = AF_INET };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        assert_true(fd >= 0);
        sa.sin_port = htons(guard_server_port(e->s));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                assert_int_equal(errno, EINPROGRESS);
        return fd;
}

/* Sends GET /guard on a new connection (the loop turning until it is out). */
static int ask(struct env *e) {
        static const char req[] = "GET /guard HTTP/1.1\r\nHost: guard\r\nConnection: close\r\n\r\n";
        int fd = connect_to(e);
        size_t off = 0;

        for (int i = 0; i < 1000 && off < sizeof(req) - 1; i++) {
                ssize_t n = send(fd, req + off, sizeof(req) - 1 - off, MSG_NOSIGNAL);

                if (n > 0)
                        off += (size_t)n;
                else
                        turn(e);
        }
        assert_int_equal(off, sizeof(req) - 1);
        return fd;
}

/* Reads what arrived on fd (up to EOF: true) during at most turns turns. */
static bool read_answer(struct env *e, int fd, char *buf, size_t size, int turns) {
        size_t len = strlen(buf);

        for (int i = 0; i < turns; i++) {
                ssize_t n = recv(fd, buf + len, size - 1 - len, MSG_DONTWAIT);

                if (n == 0)
                        return true;
                if (n > 0) {
                        len += (size_t)n;
                        buf[len] = 0;
                        continue;
                }
                assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
                turn(e);
        }
        return false;
}

static char *node_json(bool cordoned) {
        return test_asprintf("{\"metadata\":{\"name\":\"node-1\",\"uid\":\"" FAKE_API_NODE_UID
                             "\",\"resourceVersion\":\"90\"},\"spec\":{\"unschedulable\":%s},"
                             "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
                             cordoned ? "true" : "false");
}

static void expect_node(struct env *e, bool cordoned) {
        fake_api_expect_list_and_watch(
                e->api->ft, NODES,
                NODES "&limit=", fake_api_list_strv("NodeList", (char *[]){ node_json(cordoned), NULL }));
}

/* A claim allocated on node-1, reserved for its holder. */
static void expect_held(struct env *e) {
        char *pod = fake_api_pod(&(const struct fake_pod){
                .name = "holder",
                .spec = "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gpu-claim\"}]",
                .ready = "True",
        });
        char *claim = fake_api_claim(&(const struct fake_claim){
                .name = "gpu-claim",
                .driver = "gpu.example.com",
                .allocated = true,
                .reserved_name = "holder",
                .reserved_uid = "uid-holder",
        });

        fake_api_expect_list_and_watch(
                e->api->ft, PODS, PODS "&limit=", fake_api_list_strv("PodList", (char *[]){ pod, NULL }));
        fake_api_expect_list_and_watch(e->api->ft, CLAIMS, CLAIMS "?limit=",
                                       fake_api_list_strv("ResourceClaimList", (char *[]){ claim, NULL }));
        fake_api_expect_list_and_watch(e->api->ft, SLICES, SLICES "&limit=",
                                       fake_api_list_strv("ResourceSliceList", (char *[]){ NULL }));
}

/* Stops the server and turns until on_stopped (at most max_usec of fake time). */
static uint64_t stop_and_wait(struct env *e, const char *why, uint64_t max_usec) {
        uint64_t t0 = timesrc_now(e->api->ts);

        guard_server_stop(e->s, why);
        for (uint64_t t = 0; t < max_usec && !e->stopped; t += MS)
                turn(e);
        assert_int_equal(e->stopped, 1);
        return timesrc_now(e->api->ts) - t0;
}

/* A node not being drained: 200 from the view; the next request reads the same view
 * (no second list of the Node). */
static void test_answered_from_view(void **state) {
        struct env *e = *state;
        char buf[4096] = "";
        size_t lists;
        int fd;

        expect_node(e, false);
        start(e);
        fd = ask(e);
        assert_true(read_answer(e, fd, buf, sizeof(buf), 2000));
        close(fd);
        test_assert_contains(buf, "HTTP/1.1 200");
        test_assert_contains(buf, "is not being drained");
        test_assert_contains(e->notes, "guarding the DRA driver on node \"node-1\"");
        lists = fake_transport_count(e->api->ft, "GET", NODES "&limit=");
        assert_int_equal(lists, 1);

        buf[0] = 0;
        fd = ask(e);
        assert_true(read_answer(e, fd, buf, sizeof(buf), 2000));
        close(fd);
        test_assert_contains(buf, "HTTP/1.1 200");
        assert_int_equal(fake_transport_count(e->api->ft, "GET", NODES "&limit="), lists);
        assert_int_equal(guard_server_pending(e->s), 0);

        /* nothing open: the stop ends at once, the view and the endpoint closed */
        assert_true(stop_and_wait(e, "signal 15", 100 * MS) < 50 * MS);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 0);
}

/* A request held (a claim on a draining node) when the server stops: answered 503
 * with counts; the stop ends once its connection closed, well before the linger
 * second. */
static void test_stop_with_request_open(void **state) {
        struct env *e = *state;
        char buf[4096] = "";
        uint64_t took;
        int fd;

        expect_node(e, true);
        expect_held(e);
        start(e);
        fd = ask(e);
        assert_false(read_answer(e, fd, buf, sizeof(buf), 200));
        assert_int_equal(guard_server_pending(e->s), 1);
        test_assert_contains(e->notes, "waiting: 1 ResourceClaim on the node");

        guard_server_stop(e->s, "signal 15");
        assert_true(read_answer(e, fd, buf, sizeof(buf), 200));
        close(fd);
        test_assert_contains(buf, "HTTP/1.1 503");
        test_assert_contains(buf, "the guard is stopping (signal 15): still held: 1 ResourceClaim on the "
                                  "node; 1 claim-holding pod");
        assert_null(strstr(buf, "gpu-claim"));
        took = stop_and_wait(e, "signal 15", 2 * SEC);
        assert_true(took < 500 * MS);
        assert_int_equal(fake_transport_open_streams(e->api->ft), 0);
}

/* A client that keeps a connection open without asking: the stop waits for it the
 * linger second, no more; a request after the stop began gets 503. */
static void test_stop_lingers_for_open_connection(void **state) {
        struct env *e = *state;
        uint64_t t0, took;
        int idle;

        start(e);
        idle = connect_to(e);
        for (int i = 0; i < 100; i++)
                turn(e);
        t0 = timesrc_now(e->api->ts);
        guard_server_stop(e->s, "signal 15");
        guard_server_stop(e->s, "again"); /* nothing the second time */
        for (int i = 0; i < 5000 && !e->stopped; i++)
                turn(e);
        took = timesrc_now(e->api->ts) - t0;
        assert_int_equal(e->stopped, 1);
        assert_true(took >= 1 * SEC);
        assert_true(took < 1 * SEC + 100 * MS);
        close(idle);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_answered_from_view, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_with_request_open, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_lingers_for_open_connection, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
