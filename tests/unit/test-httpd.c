/* The HTTP endpoint on a real libuv loop, queried by the project's own curl
 * transport on the same loop (one thread: the server's handler runs on the
 * loop the client waits on): /metrics, /healthz, /readyz, 404 and 405,
 * address parsing and bind errors, many requests on kept-alive connections,
 * closing with a connection open; and storms of raw connections (short-lived,
 * idle, half-sent, oversized, a byte at a time) after which the endpoint still
 * answers and every storm connection was closed by the server. Every test ends
 * with uv_loop_close() == 0 and no file descriptor left behind. */
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
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/transport.h"
#include "drainer/obs/httpd.h"
#include "drainer/obs/metrics.h"

struct fixture {
        uv_loop_t loop;
        struct transport *t;
        struct httpd *h;
        struct metrics *m;
        struct timesrc *ts;
        bool ready;
        int ready_calls;
        int httpd_closed, transport_closed;
        int fds_before;
        /* the route's requests (test_route) */
        struct httpd_request *reqs[8];
        int n_reqs;
        bool reply_at_once;
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
                .ts = f->ts,
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
        assert_int_equal(timesrc_uv_new(&f->loop, &f->ts), 0);
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
        timesrc_uv_free(f->ts);
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
        /* A body over 64 KiB is refused before it ends. */
        {
                _cleanup_free_ char *big = malloc(200 * 1024 + 1);

                assert_non_null(big);
                memset(big, 'a', 200 * 1024);
                big[200 * 1024] = 0;
                submit_body(f, "POST", "/metrics", big, &r);
                run_until(f, &r.done, 1);
                /* curl may see the 413, or the connection closed while it still sends. */
                if (r.error == 0)
                        assert_int_equal(r.status, 413);
                else
                        assert_true(r.error == -ECONNRESET || r.error == -EIO);
                result_done(&r);
        }
        request(f, "GET", "/healthz", &r);
        assert_int_equal(r.status, 200);
        result_done(&r);
        assert_int_equal(httpd_requests(f->h), 13);
}

static void on_route(void *userdata, struct httpd_request *req) {
        struct fixture *f = userdata;

        if (f->reply_at_once) {
                assert_int_equal(httpd_request_reply(req, 200, "at once\n"), 0);
                return;
        }
        assert_true(f->n_reqs < (int)ELEMENTSOF(f->reqs));
        f->reqs[f->n_reqs++] = req;
}

static void start_route(struct fixture *f, unsigned timeout_sec) {
        struct httpd_options o = {
                .address = "127.0.0.1:0",
                .ts = f->ts,
                .handler_path = "/guard",
                .handler = on_route,
                .userdata = f,
                .timeout_sec = timeout_sec,
        };

        assert_int_equal(httpd_new(&f->loop, &o, &f->h), 0);
}

/* One route answered later (the guard's long poll): GET of its path waits until the
 * owner answers, past the idle timeout; several wait at once and are answered in any
 * order; other paths get 404, other methods (HEAD too) 405, not /metrics or /healthz. */
static void test_route(void **state) {
        struct fixture *f = *state;
        struct result r[3] = {}, o = {};

        start_route(f, 1);
        for (size_t i = 0; i < ELEMENTSOF(r); i++)
                submit(f, "GET", i == 1 ? "/guard?x=1" : "/guard", &r[i]);
        run_until(f, &f->n_reqs, 3);
        assert_int_equal(httpd_pending(f->h), 3);
        /* Held past the idle timeout (1 s): suspended connections do not time out. */
        {
                uint64_t end = uv_now(&f->loop) + 1500;

                while (uv_now(&f->loop) < end) {
                        uv_run(&f->loop, UV_RUN_NOWAIT);
                        usleep(10000);
                        uv_update_time(&f->loop);
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(r); i++)
                assert_int_equal(r[i].done, 0);
        assert_int_equal(httpd_request_reply(f->reqs[1], 504, "gave up\n"), 0);
        run_until(f, &r[1].done, 1);
        assert_int_equal(r[1].error, 0);
        assert_int_equal(r[1].status, 504);
        assert_string_equal(r[1].body, "gave up\n");
        assert_int_equal(r[0].done + r[2].done, 0);
        assert_int_equal(httpd_pending(f->h), 2);
        assert_int_equal(httpd_request_reply(f->reqs[0], 200, "released\n"), 0);
        assert_int_equal(httpd_request_reply(f->reqs[2], 200, NULL), 0);
        run_until(f, &r[0].done, 1);
        run_until(f, &r[2].done, 1);
        assert_int_equal(r[0].status, 200);
        assert_string_equal(r[0].body, "released\n");
        assert_int_equal(r[2].status, 200);
        assert_int_equal(httpd_pending(f->h), 0);
        for (size_t i = 0; i < ELEMENTSOF(r); i++)
                result_done(&r[i]);

        /* Answered from inside the handler's call. */
        f->reply_at_once = true;
        request(f, "GET", "/guard", &o);
        assert_int_equal(o.status, 200);
        assert_string_equal(o.body, "at once\n");
        result_done(&o);
        f->reply_at_once = false;

        request(f, "GET", "/metrics", &o);
        assert_int_equal(o.status, 404);
        result_done(&o);
        request(f, "GET", "/guard/x", &o);
        assert_int_equal(o.status, 404);
        result_done(&o);
        request(f, "HEAD", "/guard", &o);
        assert_int_equal(o.status, 405);
        result_done(&o);
        request(f, "POST", "/guard", &o);
        assert_int_equal(o.status, 405);
        result_done(&o);
        assert_int_equal(f->n_reqs, 3);
        assert_int_equal(httpd_requests(f->h), 8);

        /* One left waiting when the server closes: dropped, no descriptor left (teardown). */
        submit(f, "GET", "/guard", &o);
        run_until(f, &f->n_reqs, 4);
        httpd_close(f->h, on_httpd_closed, f);
        f->h = NULL;
        run_until(f, &f->httpd_closed, 1);
        run_until(f, &o.done, 1);
        assert_true(o.error < 0);
        result_done(&o);
}

/* A route needs both its path and its handler, and a path that starts with '/'. */
static void test_route_options(void **state) {
        struct fixture *f = *state;
        struct httpd *h = NULL;

        assert_int_equal(httpd_new(&f->loop,
                                   &(struct httpd_options){
                                           .address = "127.0.0.1:0", .ts = f->ts, .handler_path = "/guard" },
                                   &h),
                         -EINVAL);
        assert_int_equal(httpd_new(&f->loop,
                                   &(struct httpd_options){
                                           .address = "127.0.0.1:0", .ts = f->ts, .handler = on_route },
                                   &h),
                         -EINVAL);
        assert_int_equal(httpd_new(&f->loop,
                                   &(struct httpd_options){ .address = "127.0.0.1:0",
                                                            .ts = f->ts,
                                                            .handler_path = "guard",
                                                            .handler = on_route },
                                   &h),
                         -EINVAL);
        assert_null(h);
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

/* ---- connection storms ---- */

/* A non-blocking TCP connection to the server from src (a loopback address). */
static int raw_connect(struct fixture *f, const char *src) {
        struct sockaddr_in sa = { .sin_family = AF_INET }, from = { .sin_family = AF_INET };
        int fd;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(fd >= 0);
        assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
        assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0);
        sa.sin_port = htons(httpd_port(f->h));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                assert_int_equal(errno, EINPROGRESS);
        return fd;
}

/* Runs the loop until the server answered /healthz (a client with a 10 s timeout). */
static void expect_healthz(struct fixture *f, const char *what) {
        char url[128];
        struct result r = {};
        struct http_request req = {
                .method = "GET",
                .url = url,
                .timeout_usec = 10 * 1000000,
                .max_body = 4096,
        };

        snprintf(url, sizeof(url), "http://127.0.0.1:%u/healthz", httpd_port(f->h));
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, &r, NULL), 0);
        run_until(f, &r.done, 1);
        if (r.error)
                print_message("after %s: /healthz failed: %s\n", what, strerror(-r.error));
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        result_done(&r);
}

/* 400 connections that connect and close at once, in bursts of 40: the endpoint still
 * answers (MHD takes its listen socket out of the epoll set at the connection
 * limit and puts it back only in the MHD_run() after one closed). */
static void test_storm_short_lived(void **state) {
        struct fixture *f = *state;

        start(f, "127.0.0.1:0", f->m);
        for (int burst = 0; burst < 10; burst++) {
                int fds[40];

                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        fds[i] = raw_connect(f, "127.0.0.2");
                for (int k = 0; k < 20; k++)
                        uv_run(&f->loop, UV_RUN_NOWAIT);
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        close(fds[i]);
                for (int k = 0; k < 20; k++)
                        uv_run(&f->loop, UV_RUN_NOWAIT);
        }
        expect_healthz(f, "400 short-lived connections");
}

static void start_with_timeouts(struct fixture *f, unsigned idle_sec, unsigned request_sec) {
        struct httpd_options o = {
                .address = "127.0.0.1:0",
                .metrics = f->m,
                .ts = f->ts,
                .timeout_sec = idle_sec,
                .request_timeout_sec = request_sec,
        };

        assert_int_equal(httpd_new(&f->loop, &o, &f->h), 0);
}

static void start_storm(struct fixture *f) {
        struct httpd_options o = {
                .address = "127.0.0.1:0",
                .metrics = f->m,
                .ts = f->ts,
                .timeout_sec = 1,
                .request_timeout_sec = 2,
        };

        assert_int_equal(httpd_new(&f->loop, &o, &f->h), 0);
}

/* True once the server closed fd (EOF or reset); reads and drops what it sent. */
static bool closed_by_server(int fd, char *first, size_t size) {
        char buf[4096];

        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

                if (n == 0)
                        return true;
                if (n < 0)
                        return errno != EAGAIN && errno != EINTR;
                if (first && !first[0])
                        snprintf(first, size, "%.*s", (int)MIN((size_t)n, size - 1), buf);
        }
}

static void on_tick(uv_timer_t *t) {
}

static void on_handle_closed(uv_handle_t *h) {
        *(bool *)h->data = true;
}

/* Closes a handle that lives on the caller's stack, and waits until libuv is done with it. */
static void close_handle(struct fixture *f, uv_handle_t *h) {
        bool closed = false;

        h->data = &closed;
        uv_close(h, on_handle_closed);
        while (!closed)
                uv_run(&f->loop, UV_RUN_ONCE);
}

/* Runs the loop until the server closed every fd, for at most 60 s. A tick
 * wakes the loop: a client's connect may still be retried by its kernel (a
 * full accept queue drops the handshake), which wakes nothing here. */
static void expect_all_closed(struct fixture *f, int *fds, size_t n, const char *what) {
        uint64_t t0 = uv_hrtime();
        uv_timer_t tick;
        size_t left = n;

        uv_timer_init(&f->loop, &tick);
        uv_timer_start(&tick, on_tick, 100, 100);
        while (left > 0 && uv_hrtime() - t0 < 60 * UINT64_C(1000000000)) {
                left = 0;
                for (size_t i = 0; i < n; i++)
                        if (fds[i] >= 0) {
                                if (closed_by_server(fds[i], NULL, 0)) {
                                        close(fds[i]);
                                        fds[i] = -1;
                                } else
                                        left++;
                        }
                if (left > 0)
                        uv_run(&f->loop, UV_RUN_ONCE);
        }
        close_handle(f, (uv_handle_t *)&tick);
        if (left > 0)
                print_message("%s: %zu of %zu connections still open\n", what, left, n);
        assert_int_equal(left, 0);
}

static void send_all(int fd, const char *data, size_t len) {
        while (len > 0) {
                ssize_t k = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (k < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (k < 0)
                        return; /* the server refused it (per-address limit): fine */
                data += k;
                len -= (size_t)k;
        }
}

/* Wait for every non-blocking connect to finish (or fail). */
static void wait_connected(struct fixture *f, int *fds, size_t n) {
        for (size_t i = 0; i < n; i++) {
                struct pollfd p = { .fd = fds[i], .events = POLLOUT };

                for (int k = 0; k < 1000 && poll(&p, 1, 0) == 0; k++)
                        uv_run(&f->loop, UV_RUN_NOWAIT);
        }
}

enum storm {
        STORM_IDLE,      /* connect, send nothing */
        STORM_HALF_SENT, /* half a request, then nothing */
        STORM_OVERSIZED, /* a header line larger than MHD's memory limit */
};

static void storm(struct fixture *f, enum storm kind, const char *src, size_t n, const char *what) {
        _cleanup_free_ int *fds = calloc(n, sizeof(int));
        _cleanup_free_ char *big = NULL;
        uint64_t t0;

        assert_non_null(fds);
        /* In bursts of 50, the server running between them as it would. */
        for (size_t i = 0; i < n; i++) {
                fds[i] = raw_connect(f, src);
                if (i % 50 == 49)
                        for (int k = 0; k < 20; k++)
                                uv_run(&f->loop, UV_RUN_NOWAIT);
        }
        wait_connected(f, fds, n);
        if (kind == STORM_HALF_SENT)
                for (size_t i = 0; i < n; i++)
                        send_all(fds[i], "GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: ", 38);
        if (kind == STORM_OVERSIZED) {
                size_t len = 200 * 1024;

                big = malloc(len + 64);
                assert_non_null(big);
                memcpy(big, "GET /metrics HTTP/1.1\r\nX-Big: ", 31);
                memset(big + 31, 'a', len);
                memcpy(big + 31 + len, "\r\n\r\n", 5);
                for (size_t i = 0; i < n; i++)
                        send_all(fds[i], big, 31 + len + 4);
        }
        for (int k = 0; k < 50; k++)
                uv_run(&f->loop, UV_RUN_NOWAIT);
        t0 = uv_hrtime();
        if (!streq(src, "127.0.0.1")) {
                expect_healthz(f, what);
                print_message("%s: /healthz answered in %.1f ms\n", what, (double)(uv_hrtime() - t0) / 1e6);
        }
        expect_all_closed(f, fds, n, what);
        print_message("%s: all %zu closed by the server after %.1f ms\n", what, n,
                      (double)(uv_hrtime() - t0) / 1e6);
        /* From the storm's own address the probe may be refused while the storm holds
         * that address's share; once the server closed them, it is answered. */
        if (streq(src, "127.0.0.1")) {
                t0 = uv_hrtime();
                expect_healthz(f, what);
                print_message("%s: then /healthz answered in %.1f ms\n", what,
                              (double)(uv_hrtime() - t0) / 1e6);
        }
}

/* Hundreds of idle connections, from another address than the prober (another pod):
 * the endpoint answers at once (a per-address limit leaves it room), and the server
 * closes every idle one (idle timeout). */
static void test_storm_idle(void **state) {
        struct fixture *f = *state;

        start_storm(f);
        storm(f, STORM_IDLE, "127.0.0.2", 300, "300 idle connections from another address");
}

/* The same from the prober's own address (a hostNetwork pod shares the kubelet's):
 * the storm is held to that address's share, and every one of them is closed. */
static void test_storm_idle_same_address(void **state) {
        struct fixture *f = *state;

        start_storm(f);
        storm(f, STORM_IDLE, "127.0.0.1", 200, "200 idle connections from the same address");
}

static void test_storm_half_sent(void **state) {
        struct fixture *f = *state;

        start_storm(f);
        storm(f, STORM_HALF_SENT, "127.0.0.2", 300, "300 half-sent requests");
}

/* A header larger than MHD's per-connection memory: 431 and closed. */
static void test_storm_oversized(void **state) {
        struct fixture *f = *state;
        char first[64] = "";
        int fd;

        start_storm(f);
        storm(f, STORM_OVERSIZED, "127.0.0.2", 40, "40 oversized requests");
        /* One more, to see the answer. */
        fd = raw_connect(f, "127.0.0.3");
        wait_connected(f, &fd, 1);
        {
                size_t len = 100 * 1024;
                _cleanup_free_ char *big = malloc(len + 64);

                assert_non_null(big);
                memcpy(big, "GET /metrics HTTP/1.1\r\nX-Big: ", 31);
                memset(big + 31, 'a', len);
                memcpy(big + 31 + len, "\r\n\r\n", 5);
                send_all(fd, big, 31 + len + 4);
        }
        for (int k = 0; k < 100000 && !closed_by_server(fd, first, sizeof(first)); k++)
                uv_run(&f->loop, UV_RUN_ONCE);
        close(fd);
        print_message("oversized request answered: %.12s\n", first);
        assert_true(strncmp(first, "HTTP/1.1 431", 12) == 0);
}

/* A client that keeps its half-sent request alive with a byte now and then (slowloris)
 * is closed once the request has taken longer than request_timeout_sec, although it is
 * never idle for timeout_sec. */
struct dribble {
        uv_timer_t timer;
        int fds[8];
        int sent;
};

static void on_dribble(uv_timer_t *t) {
        struct dribble *d = t->data;

        for (size_t i = 0; i < ELEMENTSOF(d->fds); i++)
                if (d->fds[i] >= 0)
                        (void)send(d->fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        d->sent++;
}

static void test_slow_request(void **state) {
        struct fixture *f = *state;
        struct dribble d = {};

        /* An idle timeout (5 s) far above the dribble's 300 ms, even on a loaded machine:
         * only the request deadline (2 s) can end these. */
        start_with_timeouts(f, 5, 2);
        for (size_t i = 0; i < ELEMENTSOF(d.fds); i++)
                d.fds[i] = raw_connect(f, "127.0.0.2");
        wait_connected(f, d.fds, ELEMENTSOF(d.fds));
        for (size_t i = 0; i < ELEMENTSOF(d.fds); i++)
                send_all(d.fds[i], "GET /metrics HTTP/1.1\r\nX-A: ", 29);
        uv_timer_init(&f->loop, &d.timer);
        d.timer.data = &d;
        /* Every 300 ms, well inside the idle timeout; for at most 20 s. */
        uv_timer_start(&d.timer, on_dribble, 300, 300);
        for (size_t left = ELEMENTSOF(d.fds); left > 0 && d.sent < 66;) {
                uv_run(&f->loop, UV_RUN_ONCE);
                left = 0;
                for (size_t i = 0; i < ELEMENTSOF(d.fds); i++)
                        if (d.fds[i] >= 0) {
                                if (closed_by_server(d.fds[i], NULL, 0)) {
                                        close(d.fds[i]);
                                        d.fds[i] = -1;
                                } else
                                        left++;
                        }
        }
        close_handle(f, (uv_handle_t *)&d.timer);
        print_message("slow requests closed after %d bytes each\n", d.sent);
        for (size_t i = 0; i < ELEMENTSOF(d.fds); i++) {
                if (d.fds[i] >= 0)
                        close(d.fds[i]);
                assert_int_equal(d.fds[i], -1);
        }
        assert_int_equal(httpd_cut_off(f->h), ELEMENTSOF(d.fds));
        expect_healthz(f, "slow requests");
}

/* Runs the loop for ms milliseconds of real time. */
static void run_for(struct fixture *f, uint64_t ms) {
        uint64_t t0 = uv_hrtime();
        uv_timer_t tick;

        uv_timer_init(&f->loop, &tick);
        uv_timer_start(&tick, on_tick, 10, 10);
        while (uv_hrtime() - t0 < ms * UINT64_C(1000000))
                uv_run(&f->loop, UV_RUN_ONCE);
        close_handle(f, (uv_handle_t *)&tick);
}

/* A client that closes its connection frees its slot at once, whatever it sent:
 * from the prober's own address, 64 connections held for 0.5 s, then 40 half
 * requests each closed as soon as sent (the half request and the end of the
 * connection reach the server together). Before, MHD read the half request, took
 * the socket for drained and never saw the end: the address's share stayed taken
 * until the idle timeout (10 s), and every probe from it was turned away. Now
 * every connection is gone within a second and /healthz answers within 2 s. */
static void test_closed_half_requests(void **state) {
        struct fixture *f = *state;
        int fds[64];
        uint64_t t0;
        char url[128];
        struct result r = {};
        struct http_request req = {
                .method = "GET",
                .url = url,
                .timeout_usec = 2 * 1000000,
                .max_body = 4096,
        };

        start(f, "127.0.0.1:0", f->m);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = raw_connect(f, "127.0.0.1");
        wait_connected(f, fds, ELEMENTSOF(fds));
        run_for(f, 500);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                close(fds[i]);
        for (int i = 0; i < 40; i++) {
                int fd = raw_connect(f, "127.0.0.1");

                wait_connected(f, &fd, 1);
                send_all(fd, "GET /metrics HTTP/1.1\r\n", 23);
                close(fd);
                uv_run(&f->loop, UV_RUN_NOWAIT);
        }
        t0 = uv_hrtime();
        while (httpd_connections(f->h) > 0 && uv_hrtime() - t0 < UINT64_C(1000000000))
                run_for(f, 10);
        print_message("connections left %.1f ms after the attack: %u\n", (double)(uv_hrtime() - t0) / 1e6,
                      httpd_connections(f->h));
        assert_int_equal(httpd_connections(f->h), 0);

        snprintf(url, sizeof(url), "http://127.0.0.1:%u/healthz", httpd_port(f->h));
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, &r, NULL), 0);
        run_until(f, &r.done, 1);
        if (r.error)
                print_message("/healthz after the attack failed: %s\n", strerror(-r.error));
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        result_done(&r);
}

/* A prober shares its address with a client that holds that address's whole share
 * with idle connections (a hostNetwork pod shares the node's address with the
 * kubelet): the prober's new connection ends the address's oldest connection that
 * has no request in hand instead of being turned away, and /healthz answers within
 * 2 s. */
static void test_prober_shares_address(void **state) {
        struct fixture *f = *state;
        int fds[16];
        size_t closed = 0;
        char url[128];
        struct result r = {};
        struct http_request req = {
                .method = "GET",
                .url = url,
                .timeout_usec = 2 * 1000000,
                .max_body = 4096,
        };

        start(f, "127.0.0.1:0", f->m);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = raw_connect(f, "127.0.0.1");
        wait_connected(f, fds, ELEMENTSOF(fds));
        run_for(f, 200);
        assert_int_equal(httpd_connections(f->h), ELEMENTSOF(fds));

        snprintf(url, sizeof(url), "http://127.0.0.1:%u/healthz", httpd_port(f->h));
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, &r, NULL), 0);
        run_until(f, &r.done, 1);
        if (r.error)
                print_message("/healthz while the address holds its share failed: %s\n", strerror(-r.error));
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        result_done(&r);
        run_for(f, 100);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                if (closed_by_server(fds[i], NULL, 0))
                        closed++;
                close(fds[i]);
        }
        print_message("idle connections the prober's ended: %zu\n", closed);
        assert_true(closed >= 1);
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
        assert_int_equal(httpd_new(&f->loop, &(struct httpd_options){ .ts = f->ts, .address = "nope" }, &h2),
                         -EINVAL);

        /* The port is taken. */
        start(f, "127.0.0.1:0", f->m);
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", httpd_port(f->h));
        assert_int_equal(httpd_new(&f->loop, &(struct httpd_options){ .ts = f->ts, .address = addr }, &h2),
                         -EADDRINUSE);
        /* An address this host does not have (TEST-NET-1); unless net.ipv4.ip_nonlocal_bind
         * lets anything bind. */
        r = httpd_new(&f->loop, &(struct httpd_options){ .ts = f->ts, .address = "192.0.2.1:0" }, &h2);
        if (r == 0) {
                print_message("binding 192.0.2.1 worked (ip_nonlocal_bind?), skipping that part\n");
                httpd_close(h2, on_httpd_closed, f);
                run_until(f, &f->httpd_closed, 1);
                f->httpd_closed = 0;
        } else
                assert_int_equal(r, -EADDRNOTAVAIL);
        /* IPv6 loopback, where the host has it. */
        r = httpd_new(&f->loop, &(struct httpd_options){ .ts = f->ts, .address = "[::1]:0" }, &h2);
        if (r == 0) {
                assert_true(httpd_port(h2) > 0);
                httpd_close(h2, on_httpd_closed, f);
                run_until(f, &f->httpd_closed, 1);
                f->httpd_closed = 0;
        } else
                print_message("no IPv6 loopback here (%s), skipping that part\n", strerror(-r));
}

/* "[::]:PORT" is every address, IPv4 too: a pod's probes and Prometheus reach it on
 * IPv4-only, IPv6-only and dual-stack clusters. Dual-stack even where
 * net.ipv6.bindv6only=1 (the test run in a network namespace with it set shows that). */
static void get_from(struct fixture *f, const char *host, struct result *r) {
        char url[128];
        struct http_request req = {
                .method = "GET",
                .url = url,
                .timeout_usec = 5 * 1000000,
                .max_body = 1024 * 1024,
        };

        snprintf(url, sizeof(url), "http://%s:%u/healthz", host, httpd_port(f->h));
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, r, NULL), 0);
        run_until(f, &r->done, 1);
}

static void test_any_address(void **state) {
        struct fixture *f = *state;
        struct result r = {};
        char *host = NULL;
        uint16_t port = 0;

        assert_int_equal(httpd_parse_address("[::]:9464", &host, &port), 0);
        assert_string_equal(host, "::");
        assert_int_equal(port, 9464);
        free(host);

        start(f, "[::]:0", f->m);
        get_from(f, "127.0.0.1", &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        result_done(&r);
        get_from(f, "[::1]", &r);
        if (r.error == 0)
                assert_int_equal(r.status, 200);
        else
                print_message("no IPv6 loopback here, the IPv4 part only\n");
        result_done(&r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_endpoints, setup, teardown),
                cmocka_unit_test_setup_teardown(test_default_registry, setup, teardown),
                cmocka_unit_test_setup_teardown(test_route, setup, teardown),
                cmocka_unit_test_setup_teardown(test_route_options, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_with_open_connection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_addresses, setup, teardown),
                cmocka_unit_test_setup_teardown(test_any_address, setup, teardown),
                cmocka_unit_test_setup_teardown(test_storm_short_lived, setup, teardown),
                cmocka_unit_test_setup_teardown(test_storm_idle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_storm_idle_same_address, setup, teardown),
                cmocka_unit_test_setup_teardown(test_storm_half_sent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_storm_oversized, setup, teardown),
                cmocka_unit_test_setup_teardown(test_slow_request, setup, teardown),
                cmocka_unit_test_setup_teardown(test_closed_half_requests, setup, teardown),
                cmocka_unit_test_setup_teardown(test_prober_shares_address, setup, teardown),
        };
        int r;

        assert_int_equal(transport_global_init(), 0);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        transport_global_cleanup();
        return r;
}
