/* The HTTP endpoint on a real libuv loop, queried by the project's own curl
 * transport on the same loop (one thread: the server's handler runs on the
 * loop the client waits on): /metrics, /healthz, /readyz, 404 and 405,
 * address parsing and bind errors, many requests on kept-alive connections,
 * closing with a connection open. Every test ends with uv_loop_close() == 0 and no file descriptor left
 * behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "drainer/httpd.h"
#include "drainer/macro.h"
#include "drainer/metrics.h"
#include "drainer/transport.h"

struct fixture {
        uv_loop_t loop;
        struct transport *t;
        struct httpd *h;
        struct metrics *m;
        bool ready;
        int ready_calls;
        int httpd_closed, transport_closed;
        int fds_before;
};

struct result {
        int done;
        int error;
        long status;
        char *body;
        char *ctype;
};

static int count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n - 1;
}

static bool ready_cb(void *userdata, char *reason, size_t size) {
        struct fixture *f = userdata;

        f->ready_calls++;
        if (!f->ready)
                snprintf(reason, size, "the node watch has not synced yet");
        return f->ready;
}

static void on_httpd_closed(void *userdata) {
        ((struct fixture *)userdata)->httpd_closed++;
}

static void on_transport_closed(struct transport *t, void *userdata) {
        ((struct fixture *)userdata)->transport_closed++;
}

static void run_until(struct fixture *f, const int *counter, int want) {
        for (int i = 0; i < 100000 && *counter < want; i++)
                if (uv_run(&f->loop, UV_RUN_ONCE) == 0)
                        break;
        assert_int_equal(*counter, want);
}

static void on_done(struct http_call *call, int error, const struct http_response *resp, void *userdata) {
        struct result *r = userdata;

        r->done++;
        r->error = error;
        r->status = resp->status;
        r->body = resp->body ? strndup(resp->body, resp->body_len) : NULL;
        r->ctype = resp->content_type ? strdup(resp->content_type) : NULL;
}

static void result_done(struct result *r) {
        free(r->body);
        free(r->ctype);
        *r = (struct result){};
}

static void submit_body(struct fixture *f, const char *method, const char *path, const char *body,
                        struct result *r) {
        char url[128];
        struct http_request req = {
                .method = method,
                .url = url,
                .body = body,
                .body_len = body ? strlen(body) : 0,
                .timeout_usec = 5 * 1000000,
                .max_body = 16 * 1024 * 1024,
        };

        snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", httpd_port(f->h), path);
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, r, NULL), 0);
}

static void submit(struct fixture *f, const char *method, const char *path, struct result *r) {
        submit_body(f, method, path, NULL, r);
}

static void request(struct fixture *f, const char *method, const char *path, struct result *r) {
        submit(f, method, path, r);
        run_until(f, &r->done, 1);
        assert_int_equal(r->error, 0);
}

static void start(struct fixture *f, const char *address, struct metrics *m) {
        struct httpd_options o = {
                .address = address,
                .metrics = m,
                .ready = ready_cb,
                .userdata = f,
        };

        assert_int_equal(httpd_new(&f->loop, &o, &f->h), 0);
        assert_true(httpd_port(f->h) > 0);
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));
        struct metric_family *c;

        assert_non_null(f);
        assert_int_equal(uv_loop_init(&f->loop), 0);
        /* After the loop: libuv keeps one pipe for the whole process from the first one on. */
        f->fds_before = count_fds();
        assert_int_equal(transport_curl_new(&f->loop, NULL, &f->t), 0);
        assert_int_equal(metrics_new(NULL, &f->m), 0);
        assert_int_equal(metrics_register(f->m,
                                          &(struct metric_desc){ .name = "test_things_total",
                                                                 .help = "Things.",
                                                                 .type = METRIC_COUNTER,
                                                                 .labels = { "kind" } },
                                          &c),
                         0);
        assert_int_equal(metrics_add(c, METRIC_LABELS("a\"b"), 3), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;

        if (f->h) {
                httpd_close(f->h, on_httpd_closed, f);
                assert_int_equal(f->httpd_closed, 0); /* never from inside httpd_close() */
                run_until(f, &f->httpd_closed, 1);
        }
        transport_close(f->t, on_transport_closed, f);
        run_until(f, &f->transport_closed, 1);
        transport_free(f->t);
        uv_run(&f->loop, UV_RUN_DEFAULT);
        /* The listen socket, MHD's epoll fd and every connection are closed (the
         * client's kept-alive ones with the transport). */
        assert_int_equal(count_fds(), f->fds_before);
        assert_int_equal(uv_loop_close(&f->loop), 0);
        metrics_free(f->m);
        free(f);
        return 0;
}

static void test_endpoints(void **state) {
        struct fixture *f = *state;
        struct result r = {};
        _cleanup_free_ char *want = NULL;

        start(f, "127.0.0.1:0", f->m);

        request(f, "GET", "/metrics", &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
        assert_int_equal(metrics_render(f->m, &want, NULL), 0);
        assert_string_equal(r.body, want);
        assert_non_null(strstr(r.body, "test_things_total{kind=\"a\\\"b\"} 3\n"));
        result_done(&r);

        /* A query string changes nothing. */
        request(f, "GET", "/metrics?x=1", &r);
        assert_int_equal(r.status, 200);
        result_done(&r);

        request(f, "GET", "/healthz", &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "ok\n");
        result_done(&r);

        f->ready = false;
        request(f, "GET", "/readyz", &r);
        assert_int_equal(r.status, 503);
        assert_string_equal(r.body, "not ready: the node watch has not synced yet\n");
        result_done(&r);
        f->ready = true;
        request(f, "GET", "/readyz", &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "ok\n");
        result_done(&r);
        assert_int_equal(f->ready_calls, 2);

        request(f, "GET", "/", &r);
        assert_int_equal(r.status, 404);
        result_done(&r);
        request(f, "GET", "/metrics/", &r);
        assert_int_equal(r.status, 404);
        result_done(&r);
        request(f, "POST", "/metrics", &r);
        assert_int_equal(r.status, 405);
        result_done(&r);
        /* A body is read and dropped; the connection stays usable. */
        submit_body(f, "POST", "/metrics", "a=1&b=2", &r);
        run_until(f, &r.done, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 405);
        result_done(&r);
        request(f, "GET", "/healthz", &r);
        assert_int_equal(r.status, 200);
        result_done(&r);
        request(f, "DELETE", "/healthz", &r);
        assert_int_equal(r.status, 405);
        result_done(&r);
        assert_int_equal(httpd_requests(f->h), 11);
}

/* Without a registry of its own it serves the default one. */
static void test_default_registry(void **state) {
        struct fixture *f = *state;
        struct result r = {};

        start(f, "127.0.0.1:0", NULL);
        request(f, "GET", "/metrics", &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "# TYPE drainer_evictions_total counter\n"));
        assert_non_null(strstr(r.body, "\nprocess_resident_memory_bytes "));
        result_done(&r);
}

/* Many requests, 16 at a time, all answered; the loop stays usable. */
static void test_many(void **state) {
        struct fixture *f = *state;
        struct result r[16] = {};
        struct transport_curl_stats st;
        int done = 0;

        start(f, "127.0.0.1:0", f->m);
        for (int round = 0; round < 25; round++) {
                for (size_t i = 0; i < ELEMENTSOF(r); i++)
                        submit(f, "GET", i % 2 ? "/metrics" : "/healthz", &r[i]);
                for (int k = 0; k < 100000; k++) {
                        done = 0;
                        for (size_t i = 0; i < ELEMENTSOF(r); i++)
                                done += r[i].done;
                        if (done == (int)ELEMENTSOF(r) || uv_run(&f->loop, UV_RUN_ONCE) == 0)
                                break;
                }
                assert_int_equal(done, ELEMENTSOF(r));
                for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                        assert_int_equal(r[i].error, 0);
                        assert_int_equal(r[i].status, 200);
                        result_done(&r[i]);
                }
        }
        assert_int_equal(httpd_requests(f->h), 25 * ELEMENTSOF(r));
        /* Connections are kept alive: a scraper does not reconnect for every scrape. */
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        print_message("%" PRIu64 " connections for %zu requests\n", st.connections_total,
                      25 * ELEMENTSOF(r));
        assert_true(st.connections_total <= 2 * ELEMENTSOF(r));
}

/* A client that connected and sent nothing does not keep the server from closing. */
static void test_close_with_open_connection(void **state) {
        struct fixture *f = *state;
        struct sockaddr_in sa = { .sin_family = AF_INET };
        struct result r = {};
        int fd;

        start(f, "127.0.0.1:0", f->m);
        sa.sin_port = htons(httpd_port(f->h));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        /* Let the server accept it while answering another request. */
        request(f, "GET", "/healthz", &r);
        result_done(&r);
        httpd_close(f->h, on_httpd_closed, f);
        f->h = NULL;
        run_until(f, &f->httpd_closed, 1);
        f->httpd_closed = 0;
        close(fd);
        /* The port is free again. */
        start(f, "127.0.0.1:0", f->m);
}

static void test_addresses(void **state) {
        struct fixture *f = *state;
        struct httpd *h2 = NULL;
        char *host = NULL, addr[64];
        uint16_t port = 0;
        int r;

        assert_int_equal(httpd_parse_address("127.0.0.1:9464", &host, &port), 0);
        assert_string_equal(host, "127.0.0.1");
        assert_int_equal(port, 9464);
        free(host);
        assert_int_equal(httpd_parse_address("[::1]:80", &host, &port), 0);
        assert_string_equal(host, "::1");
        assert_int_equal(port, 80);
        free(host);
        assert_int_equal(httpd_parse_address(":9464", &host, &port), 0);
        assert_string_equal(host, "");
        free(host);
        assert_int_equal(httpd_parse_address("localhost:0", &host, &port), 0);
        assert_string_equal(host, "localhost");
        assert_int_equal(port, 0);
        free(host);
        static const char *const bad[] = {
                "",      "9464",    "127.0.0.1", "127.0.0.1:", "127.0.0.1:x", "1.2.3.4:65536", "::1:80",
                "[::1]", "[::1]80", "[]:80",     "h:-1",       "h:+1",        "h: 1"
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(httpd_parse_address(bad[i], &host, &port), -EINVAL);
        assert_int_equal(httpd_new(&f->loop, &(struct httpd_options){ .address = "nope" }, &h2), -EINVAL);

        /* The port is taken. */
        start(f, "127.0.0.1:0", f->m);
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", httpd_port(f->h));
        assert_int_equal(httpd_new(&f->loop, &(struct httpd_options){ .address = addr }, &h2), -EADDRINUSE);
        /* An address this host does not have (TEST-NET-1); unless net.ipv4.ip_nonlocal_bind
         * lets anything bind. */
        r = httpd_new(&f->loop, &(struct httpd_options){ .address = "192.0.2.1:0" }, &h2);
        if (r == 0) {
                print_message("binding 192.0.2.1 worked (ip_nonlocal_bind?), skipping that part\n");
                httpd_close(h2, on_httpd_closed, f);
                run_until(f, &f->httpd_closed, 1);
                f->httpd_closed = 0;
        } else
                assert_int_equal(r, -EADDRNOTAVAIL);
        /* IPv6 loopback, where the host has it. */
        r = httpd_new(&f->loop, &(struct httpd_options){ .address = "[::1]:0" }, &h2);
        if (r == 0) {
                assert_true(httpd_port(h2) > 0);
                httpd_close(h2, on_httpd_closed, f);
                run_until(f, &f->httpd_closed, 1);
                f->httpd_closed = 0;
        } else
                print_message("no IPv6 loopback here (%s), skipping that part\n", strerror(-r));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_endpoints, setup, teardown),
                cmocka_unit_test_setup_teardown(test_default_registry, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_with_open_connection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_addresses, setup, teardown),
        };
        int r;

        assert_int_equal(transport_global_init(), 0);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        transport_global_cleanup();
        return r;
}
