/* Glue test: the real curl transport on a real libuv loop against
 * libmicrohttpd on 127.0.0.1 (plain HTTP; HTTPS too when libmicrohttpd has
 * TLS and the openssl tool can make certificates). Every test ends with
 * uv_loop_close() == 0. With DRAINER_TEST_H2_URL (+ DRAINER_TEST_H2_CA, a PEM
 * file, DRAINER_TEST_H2_SERVER_NAME, DRAINER_TEST_H2_WATCH_URL, a watch that
 * sends something soon, DRAINER_TEST_H2_TOKEN, a bearer token) pointing at an
 * HTTP/2 server, it also checks that concurrent calls and a watch share one
 * connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <microhttpd.h>
#include <uv.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/kube/transport.h"
#include "fakes/test-env.h"

#define BIG_LEN       ((size_t)2 << 20)
#define STREAM_CHUNKS 5

/* ---- the server ---- */

static struct MHD_Daemon *http_daemon, *https_daemon;
static uint16_t http_port, https_port;
static atomic_bool server_stopping;
static atomic_int drops_left, drop_hits; /* /drop: requests to close unanswered, requests seen */
static char *big_body;

struct tls_material {
        char *dir; /* a private folder under the build tree */
        char *ca, *other_ca, *srv_cert, *srv_key, *cl_cert, *cl_key;
        size_t ca_len, other_ca_len;
};
static struct tls_material tlsm;

struct req_state {
        char *up;
        size_t len;
};

static void sleep_unless_stopping(unsigned msec) {
        for (unsigned i = 0; i < msec / 10 && !atomic_load(&server_stopping); i++)
                usleep(10000);
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *ctype,
                             const char *body, size_t len, const char *hname, const char *hval) {
        struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
        enum MHD_Result ret;

        if (!r)
                return MHD_NO;
        if (ctype)
                MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        if (hname)
                MHD_add_response_header(r, hname, hval);
        ret = MHD_queue_response(conn, status, r);
        MHD_destroy_response(r);
        return ret;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        int *n = cls;

        if (*n >= STREAM_CHUNKS)
                return MHD_CONTENT_READER_END_OF_STREAM;
        /* Gaps between chunks so that the client sees them one by one. */
        if (*n > 0)
                sleep_unless_stopping(50);
        return snprintf(buf, max, "chunk-%d\n", (*n)++);
}

static ssize_t silent_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        sleep_unless_stopping(3000);
        return MHD_CONTENT_READER_END_OF_STREAM;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
        struct req_state *st = *con_cls;

        if (!st) {
                st = calloc(1, sizeof(*st));
                *con_cls = st;
                return st ? MHD_YES : MHD_NO;
        }
        if (*upload_size > 0) {
                char *p = realloc(st->up, st->len + *upload_size + 1);

                if (!p)
                        return MHD_NO;
                memcpy(p + st->len, upload, *upload_size);
                st->up = p;
                st->len += *upload_size;
                *upload_size = 0;
                return MHD_YES;
        }

        if (streq(url, "/drop")) {
                atomic_fetch_add(&drop_hits, 1);
                /* Closes the connection without a byte of response. */
                if (atomic_fetch_sub(&drops_left, 1) > 0)
                        return MHD_NO;
                return reply(conn, 200, "text/plain", "at last", 7, NULL, NULL);
        }
        if (streq(url, "/hello"))
                return reply(conn, 200, "text/plain; charset=utf-8", "hello, world", 12, NULL, NULL);
        if (streq(url, "/echo")) {
                const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
                char *body;
                enum MHD_Result r;

                if (asprintf(&body, "%s\n%.*s", method, (int)st->len, strempty(st->up)) < 0)
                        return MHD_NO;
                r = reply(conn, 200, ct ? ct : "application/octet-stream", body, strlen(body), NULL, NULL);
                free(body);
                return r;
        }
        if (streq(url, "/header")) {
                const char *name = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "name");
                const char *v = name ? MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name) : NULL;

                return reply(conn, v ? 200 : 404, "text/plain", strempty(v), strlen(strempty(v)), NULL,
                             NULL);
        }
        if (streq(url, "/missing")) {
                static const char s[] = "{\"kind\":\"Status\",\"code\":404}";

                return reply(conn, 404, "application/json", s, sizeof(s) - 1, NULL, NULL);
        }
        if (streq(url, "/big")) {
                struct MHD_Response *r =
                        MHD_create_response_from_buffer(BIG_LEN, big_body, MHD_RESPMEM_PERSISTENT);
                enum MHD_Result ret = MHD_queue_response(conn, 200, r);

                MHD_destroy_response(r);
                return ret;
        }
        if (streq(url, "/throttle"))
                return reply(conn, 429, "application/json", "{}", 2, "Retry-After", "7");
        if (streq(url, "/stall")) {
                sleep_unless_stopping(3000);
                return reply(conn, 200, "text/plain", "late", 4, NULL, NULL);
        }
        if (streq(url, "/stream") || streq(url, "/silent")) {
                int *n = calloc(1, sizeof(int));
                struct MHD_Response *r;
                enum MHD_Result ret;

                if (!n)
                        return MHD_NO;
                r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64,
                                                      streq(url, "/stream") ? stream_reader : silent_reader,
                                                      n, free);
                if (!r) {
                        free(n);
                        return MHD_NO;
                }
                MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
                ret = MHD_queue_response(conn, 200, r);
                MHD_destroy_response(r);
                return ret;
        }
        return reply(conn, 404, "text/plain", "no such path", 12, NULL, NULL);
}

static void on_request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                                 enum MHD_RequestTerminationCode toe) {
        struct req_state *st = *con_cls;

        if (st) {
                free(st->up);
                free(st);
        }
        *con_cls = NULL;
}

static struct MHD_Daemon *start_daemon(bool tls, uint16_t *ret_port) {
        struct sockaddr_in sa = {
                .sin_family = AF_INET,
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
        struct MHD_Daemon *d;
        const union MHD_DaemonInfo *info;

        if (tls)
                d = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, on_request, NULL,
                                     MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED,
                                     on_request_completed, NULL, MHD_OPTION_HTTPS_MEM_KEY, tlsm.srv_key,
                                     MHD_OPTION_HTTPS_MEM_CERT, tlsm.srv_cert, MHD_OPTION_END);
        else
                d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                                     MHD_OPTION_NOTIFY_COMPLETED, on_request_completed, NULL,
                                     MHD_OPTION_END);
        if (!d)
                return NULL;
        info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        *ret_port = info ? info->port : 0;
        return d;
}

static char *read_file(const char *dir, const char *name, size_t *ret_len) {
        char path[PATH_MAX];
        FILE *f;
        char *buf = NULL;
        size_t len = 0;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "re");
        if (!f)
                return NULL;
        buf = calloc(1, 64 * 1024);
        if (buf)
                len = fread(buf, 1, 64 * 1024 - 1, f);
        fclose(f);
        if (ret_len)
                *ret_len = len;
        return buf;
}

/* A CA, a server certificate it signs for DNS:drainer.test only, and an
 * unrelated CA. False when the openssl tool is missing or fails. */
static bool make_tls_material(void) {
        char cmd[2048];

        tlsm.dir = test_private_dir("transport");
        snprintf(
                cmd, sizeof(cmd),
                "(cd %s && "
                "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                "-keyout ca.key -out ca.crt -days 2 -subj /CN=drainer-test-ca && "
                "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                "-keyout other.key -out other.crt -days 2 -subj /CN=drainer-other-ca && "
                "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                "-keyout srv.key -out srv.csr -subj /CN=drainer.test && "
                "printf 'subjectAltName=DNS:drainer.test\\n' >ext && "
                "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
                "-out srv.crt -days 2 -extfile ext && "
                "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                "-keyout cl.key -out cl.csr -subj /CN=drainer-client && "
                "openssl x509 -req -in cl.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cl.crt -days 2)",
                tlsm.dir);
        if (strlen(cmd) + 32 >= sizeof(cmd))
                return false;
        strcat(cmd, " >/dev/null 2>&1");
        if (system(cmd) != 0)
                return false;
        tlsm.ca = read_file(tlsm.dir, "ca.crt", &tlsm.ca_len);
        tlsm.other_ca = read_file(tlsm.dir, "other.crt", &tlsm.other_ca_len);
        tlsm.srv_cert = read_file(tlsm.dir, "srv.crt", NULL);
        tlsm.srv_key = read_file(tlsm.dir, "srv.key", NULL);
        tlsm.cl_cert = read_file(tlsm.dir, "cl.crt", NULL);
        tlsm.cl_key = read_file(tlsm.dir, "cl.key", NULL);
        return tlsm.ca && tlsm.other_ca && tlsm.srv_cert && tlsm.srv_key && tlsm.cl_cert && tlsm.cl_key;
}

static int group_setup(void **state) {
        big_body = malloc(BIG_LEN);
        if (!big_body)
                return -1;
        memset(big_body, 'x', BIG_LEN);
        http_daemon = start_daemon(false, &http_port);
        if (!http_daemon || http_port == 0)
                return -1;
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES && make_tls_material()) {
                https_daemon = start_daemon(true, &https_port);
                if (!https_daemon)
                        fprintf(stderr, "# cannot start the HTTPS server, TLS cases skipped\n");
        } else
                fprintf(stderr, "# no TLS in libmicrohttpd or no openssl tool, TLS cases skipped\n");
        return 0;
}

static int group_teardown(void **state) {
        atomic_store(&server_stopping, true);
        if (https_daemon)
                MHD_stop_daemon(https_daemon);
        if (http_daemon)
                MHD_stop_daemon(http_daemon);
        test_private_dir_remove(tlsm.dir);
        free(tlsm.ca);
        free(tlsm.other_ca);
        free(tlsm.srv_cert);
        free(tlsm.cl_cert);
        free(tlsm.cl_key);
        free(tlsm.srv_key);
        free(big_body);
        return 0;
}

/* ---- the client side ---- */

struct fixture {
        uv_loop_t loop;
        struct transport *t;
        int closed;
        int (*before_close_check)(struct fixture *f); /* runs inside close_cb */
        void *check_userdata;
};

struct result {
        struct fixture *f;
        struct http_call *call;
        int ndone;
        int error;
        long status;
        bool body_null;
        char *body;
        size_t body_len;
        uint64_t retry_after_usec;
        char *content_type;

        int ndata;
        char *data;
        size_t data_len;
        int data_ret;           /* on_data's return value */
        bool cancel_in_data;    /* on_data cancels its own call */
        bool submit_in_data;    /* on_data submits `chained` once */
        bool close_in_done;     /* done closes the transport */
        struct result *chained; /* submitted from done (or on_data) */
        const char *chained_url;
        int chained_submit_ret;
};

static bool in_transport_call; /* done must never run from inside submit/cancel/close */

static char urlbuf[8][256];
static unsigned urlidx;

static const char *url(const char *path) {
        char *u = urlbuf[urlidx++ % ELEMENTSOF(urlbuf)];

        snprintf(u, sizeof(urlbuf[0]), "http://127.0.0.1:%u%s", http_port, path);
        return u;
}

static const char *surl(const char *path) {
        char *u = urlbuf[urlidx++ % ELEMENTSOF(urlbuf)];

        snprintf(u, sizeof(urlbuf[0]), "https://127.0.0.1:%u%s", https_port, path);
        return u;
}

static void on_done(struct http_call *call, int error, const struct http_response *resp, void *userdata);
static void on_closed(struct transport *t, void *userdata);

static int on_data(struct http_call *call, const char *data, size_t n, void *userdata);

static int do_submit(struct fixture *f, const struct http_request *req, struct result *r) {
        int ret;

        r->f = f;
        in_transport_call = true;
        ret = transport_submit(f->t, req, req->stream ? on_data : NULL, on_done, r, &r->call);
        in_transport_call = false;
        return ret;
}

static void submit_chained(struct result *r) {
        struct http_request req = { .method = "GET", .url = r->chained_url, .timeout_usec = 5000000 };

        r->chained_submit_ret = do_submit(r->f, &req, r->chained);
}

static void on_done(struct http_call *call, int error, const struct http_response *resp, void *userdata) {
        struct result *r = userdata;

        assert_false(in_transport_call);
        assert_ptr_equal(call, r->call);
        assert_non_null(resp);
        r->ndone++;
        r->error = error;
        r->status = resp->status;
        r->body_null = !resp->body;
        r->retry_after_usec = resp->retry_after_usec;
        free(r->content_type);
        r->content_type = resp->content_type ? strdup(resp->content_type) : NULL;
        if (resp->body) {
                assert_int_equal(resp->body[resp->body_len], 0);
                free(r->body);
                r->body = malloc(resp->body_len + 1);
                assert_non_null(r->body);
                memcpy(r->body, resp->body, resp->body_len + 1);
                r->body_len = resp->body_len;
        }
        if (r->chained && !r->submit_in_data)
                submit_chained(r);
        if (r->close_in_done)
                transport_close(r->f->t, on_closed, r->f);
}

static int on_data(struct http_call *call, const char *data, size_t n, void *userdata) {
        struct result *r = userdata;
        char *p;

        assert_false(in_transport_call);
        assert_int_equal(r->ndone, 0);
        r->ndata++;
        p = realloc(r->data, r->data_len + n + 1);
        assert_non_null(p);
        memcpy(p + r->data_len, data, n);
        r->data = p;
        r->data_len += n;
        r->data[r->data_len] = 0;
        if (r->cancel_in_data) {
                transport_cancel(r->f->t, call);
                transport_cancel(r->f->t, call); /* twice is harmless */
        }
        if (r->submit_in_data && r->ndata == 1)
                submit_chained(r);
        return r->data_ret;
}

static void result_done(struct result *r) {
        free(r->body);
        free(r->content_type);
        free(r->data);
        memset(r, 0, sizeof(*r));
}

/* Runs the loop until *counter reaches want; fails if the loop runs dry first. */
static void run_until(struct fixture *f, const int *counter, int want) {
        while (*counter < want)
                if (uv_run(&f->loop, UV_RUN_ONCE) == 0 && *counter < want)
                        fail_msg("loop ran out of work with %d of %d", *counter, want);
}

static void on_closed(struct transport *t, void *userdata) {
        struct fixture *f = userdata;

        assert_ptr_equal(t, f->t);
        assert_false(in_transport_call);
        if (f->before_close_check)
                assert_int_equal(f->before_close_check(f), 0);
        f->closed++;
}

static int fixture_open(struct fixture *f, const struct tls_config *tls) {
        int r;

        if (f->t) {
                transport_close(f->t, on_closed, f);
                run_until(f, &f->closed, 1);
                transport_free(f->t);
                f->t = NULL;
                f->closed = 0;
        }
        r = transport_curl_new(&f->loop, tls, &f->t);
        return r;
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_int_equal(uv_loop_init(&f->loop), 0);
        assert_int_equal(fixture_open(f, NULL), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;

        if (f->t) {
                /* Close may already have been called by the test (closed then counts). */
                if (f->closed == 0)
                        transport_close(f->t, on_closed, f);
                run_until(f, &f->closed, 1);
                assert_int_equal(f->closed, 1);
                transport_free(f->t);
        }
        /* Everything the transport put on the loop is gone. */
        assert_int_equal(uv_loop_close(&f->loop), 0);
        free(f);
        return 0;
}

static void get(struct fixture *f, const char *u, size_t max_body, struct result *r) {
        struct http_request req = {
                .method = "GET",
                .url = u,
                .timeout_usec = 5000000,
                .max_body = max_body,
        };

        assert_int_equal(do_submit(f, &req, r), 0);
        assert_int_equal(r->ndone, 0);
        run_until(f, &r->ndone, 1);
        assert_int_equal(r->ndone, 1);
}

/* ---- tests ---- */

static void test_get(void **state) {
        struct fixture *f = *state;
        struct result r = {};
        struct transport_curl_stats st;

        get(f, url("/hello"), 0, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body_len, 12);
        assert_string_equal(r.body, "hello, world");
        assert_string_equal(r.content_type, "text/plain; charset=utf-8");
        assert_int_equal(r.retry_after_usec, 0);
        assert_int_equal(f->t->requests_total, 1);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.calls_completed, 1);
        assert_int_equal(st.calls_in_flight, 0);
        result_done(&r);
}

static void test_post_echo(void **state) {
        struct fixture *f = *state;
        const char *headers[] = { "Content-Type: application/json", NULL };
        struct http_request req = {
                .method = "POST",
                .url = url("/echo"),
                .headers = headers,
                .body = "{\"a\":1}",
                .body_len = 7,
                .timeout_usec = 5000000,
        };
        struct result r = {}, p = {}, e = {};
        char body[16];

        /* The request is borrowed only during submit. */
        strcpy(body, "{\"a\":1}");
        req.body = body;
        assert_int_equal(do_submit(f, &req, &r), 0);
        memset(body, 'X', sizeof(body));
        run_until(f, &r.ndone, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "POST\n{\"a\":1}");
        assert_string_equal(r.content_type, "application/json");

        req.method = "PATCH";
        req.body = "[{\"op\":\"remove\"}]";
        req.body_len = strlen(req.body);
        assert_int_equal(do_submit(f, &req, &p), 0);
        run_until(f, &p.ndone, 1);
        assert_int_equal(p.error, 0);
        assert_string_equal(p.body, "PATCH\n[{\"op\":\"remove\"}]");

        /* POST without a body, and an empty response body is "" not NULL. */
        req.method = "POST";
        req.body = NULL;
        req.body_len = 0;
        assert_int_equal(do_submit(f, &req, &e), 0);
        run_until(f, &e.ndone, 1);
        assert_int_equal(e.error, 0);
        assert_string_equal(e.body, "POST\n");
        result_done(&r);
        result_done(&p);
        result_done(&e);
}

static void test_headers(void **state) {
        struct fixture *f = *state;
        const char *headers[] = { "X-Test: some value", NULL };
        struct http_request req = {
                .method = "GET",
                .url = url("/header?name=X-Test"),
                .headers = headers,
                .timeout_usec = 5000000,
        };
        const char *bad[] = { "X-Evil: a\r\nX-Injected: b", NULL };
        struct result r = {}, ua = {};
        struct http_call *call = NULL;

        assert_int_equal(do_submit(f, &req, &r), 0);
        run_until(f, &r.ndone, 1);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "some value");

        get(f, url("/header?name=User-Agent"), 0, &ua);
        assert_string_equal(ua.body, "drainer/" DRAINER_VERSION);

        /* Synchronous failures return the error and never run done. */
        req.headers = bad;
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, NULL, &call), -EINVAL);
        req.headers = NULL;
        req.method = "GET X";
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, NULL, &call), -EINVAL);
        req.method = "GET";
        req.stream = true;
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, NULL, &call), -EINVAL);
        assert_null(call);
        assert_int_equal(f->t->requests_total, 2);
        result_done(&r);
        result_done(&ua);
}

static void test_not_found(void **state) {
        struct fixture *f = *state;
        struct result r = {};

        get(f, url("/missing"), 0, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 404);
        assert_string_equal(r.body, "{\"kind\":\"Status\",\"code\":404}");
        assert_string_equal(r.content_type, "application/json");
        result_done(&r);
}

static void test_body_cap(void **state) {
        struct fixture *f = *state;
        struct result r = {}, ok = {}, exact = {};

        get(f, url("/big"), BIG_LEN / 2, &r);
        assert_int_equal(r.error, -E2BIG);
        assert_int_equal(r.status, 200);
        assert_null(r.body);

        get(f, url("/big"), 0, &ok);
        assert_int_equal(ok.error, 0);
        assert_int_equal(ok.body_len, BIG_LEN);
        assert_int_equal(ok.body[0], 'x');
        assert_int_equal(ok.body[BIG_LEN - 1], 'x');

        get(f, url("/big"), BIG_LEN, &exact);
        assert_int_equal(exact.error, 0);
        assert_int_equal(exact.body_len, BIG_LEN);
        result_done(&r);
        result_done(&ok);
        result_done(&exact);
}

static void test_retry_after(void **state) {
        struct fixture *f = *state;
        struct result r = {};

        get(f, url("/throttle"), 0, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 429);
        assert_int_equal(r.retry_after_usec, 7 * UINT64_C(1000000));
        result_done(&r);
}

static void test_stream(void **state) {
        struct fixture *f = *state;
        struct http_request req = { .method = "GET", .url = url("/stream"), .stream = true };
        struct result r = {}, m = {};

        assert_int_equal(do_submit(f, &req, &r), 0);
        run_until(f, &r.ndone, 1);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        assert_true(r.body_null);
        assert_true(r.ndata >= 3);
        assert_string_equal(r.data, "chunk-0\nchunk-1\nchunk-2\nchunk-3\nchunk-4\n");
        assert_string_equal(r.content_type, "application/json");

        /* Streaming delivers an error status's body through on_data too. */
        req.url = url("/missing");
        assert_int_equal(do_submit(f, &req, &m), 0);
        run_until(f, &m.ndone, 1);
        assert_int_equal(m.error, 0);
        assert_int_equal(m.status, 404);
        assert_true(m.body_null);
        assert_string_equal(m.data, "{\"kind\":\"Status\",\"code\":404}");
        result_done(&r);
        result_done(&m);
}

static void test_stream_abort(void **state) {
        struct fixture *f = *state;
        struct http_request req = { .method = "GET", .url = url("/stream"), .stream = true };
        struct result r = { .data_ret = -EBADMSG };
        struct transport_curl_stats st;

        assert_int_equal(do_submit(f, &req, &r), 0);
        run_until(f, &r.ndone, 1);
        assert_int_equal(r.error, -EBADMSG);
        assert_int_equal(r.ndata, 1);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.calls_failed, 1);
        result_done(&r);
}

static void test_timeout(void **state) {
        struct fixture *f = *state;
        struct http_request req = { .method = "GET", .url = url("/stall"), .timeout_usec = 200000 };
        struct result r = {};

        assert_int_equal(do_submit(f, &req, &r), 0);
        run_until(f, &r.ndone, 1);
        assert_int_equal(r.error, -ETIMEDOUT);
        result_done(&r);
}

static void test_idle_timeout(void **state) {
        struct fixture *f = *state;
        struct http_request req = {
                .method = "GET",
                .url = url("/silent"),
                .stream = true,
                .idle_timeout_usec = 1000000,
        };
        struct result r = {};

        /* A watch has no total timeout, but a silent peer is noticed. */
        assert_int_equal(do_submit(f, &req, &r), 0);
        run_until(f, &r.ndone, 1);
        assert_int_equal(r.error, -ETIMEDOUT);
        assert_int_equal(r.ndata, 0);
        result_done(&r);
}

static void test_refused(void **state) {
        struct fixture *f = *state;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        struct result r = {};
        char u[64];
        int fd;

        /* Bound but not listening: connecting gets RST, and nobody can take the port meanwhile. */
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        snprintf(u, sizeof(u), "http://127.0.0.1:%u/", ntohs(sa.sin_port));
        get(f, u, 0, &r);
        close(fd);
        assert_int_equal(r.error, -ECONNREFUSED);
        assert_int_equal(r.status, 0);
        result_done(&r);
}

/* A server that goes away without answering, as one that refuses an HTTP/2
 * stream with GOAWAY does (test_h2_one_connection meets that for real). */
static void test_resend_unanswered(void **state) {
        struct fixture *f = *state;
        struct http_request post = { .method = "POST", .url = url("/drop"), .body = "{}", .body_len = 2 };
        struct result r = {}, p = {}, never = {};
        struct transport_curl_stats st;

        /* A GET goes again, and done runs once. */
        atomic_store(&drop_hits, 0);
        atomic_store(&drops_left, 2);
        get(f, url("/drop"), 0, &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "at last");
        assert_string_equal(r.content_type, "text/plain");
        assert_int_equal(atomic_load(&drop_hits), 3);
        assert_int_equal(f->t->requests_total, 1);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.calls_completed, 1);
        assert_int_equal(st.calls_failed, 0);
        assert_int_equal(st.calls_in_flight, 0);
        assert_int_equal(st.connections_total, 3);

        /* A POST that may have reached the handler does not. A new transport: on
         * a reused connection libcurl itself resends whatever got no answer. */
        assert_int_equal(fixture_open(f, NULL), 0);
        atomic_store(&drop_hits, 0);
        atomic_store(&drops_left, 1);
        assert_int_equal(do_submit(f, &post, &p), 0);
        run_until(f, &p.ndone, 1);
        assert_int_equal(p.error, -ECONNRESET);
        assert_int_equal(p.status, 0);
        assert_int_equal(atomic_load(&drop_hits), 1);

        /* Nor does a GET forever: 6 resends. */
        assert_int_equal(fixture_open(f, NULL), 0);
        atomic_store(&drop_hits, 0);
        atomic_store(&drops_left, 1000);
        get(f, url("/drop"), 0, &never);
        assert_int_equal(never.error, -ECONNRESET);
        assert_int_equal(atomic_load(&drop_hits), 7);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.calls_failed, 1);
        assert_int_equal(st.connections_total, 7);
        atomic_store(&drops_left, 0);
        result_done(&r);
        result_done(&p);
        result_done(&never);
}

static void test_unresolvable(void **state) {
        struct fixture *f = *state;
        struct result r = {};

        /* RFC 6761: .invalid never resolves. */
        get(f, "http://drainer-test.invalid/", 0, &r);
        /* its own code and words, not "No route to host" */
        assert_int_equal(r.error, -ENXIO);
        assert_non_null(strstr(transport_strerror(r.error), "DNS name not found"));
        result_done(&r);
}

static void on_cancel_timer(uv_timer_t *h) {
        struct result *r = h->data;

        in_transport_call = true;
        transport_cancel(r->f->t, r->call);
        in_transport_call = false;
        uv_close((uv_handle_t *)h, NULL);
}

static void test_cancel(void **state) {
        struct fixture *f = *state;
        struct http_request req = { .method = "GET", .url = url("/stall"), .timeout_usec = 10000000 };
        struct result now = {}, later = {}, after = {};
        struct transport_curl_stats st;
        uv_timer_t timer;

        /* Before the loop even added it. */
        assert_int_equal(do_submit(f, &req, &now), 0);
        in_transport_call = true;
        transport_cancel(f->t, now.call);
        in_transport_call = false;
        assert_int_equal(now.ndone, 0);
        run_until(f, &now.ndone, 1);
        assert_int_equal(now.error, -ECANCELED);

        /* In flight. */
        assert_int_equal(do_submit(f, &req, &later), 0);
        assert_int_equal(uv_timer_init(&f->loop, &timer), 0);
        timer.data = &later;
        assert_int_equal(uv_timer_start(&timer, on_cancel_timer, 100, 0), 0);
        run_until(f, &later.ndone, 1);
        assert_int_equal(later.error, -ECANCELED);

        /* The transport still works afterwards. */
        get(f, url("/hello"), 0, &after);
        assert_int_equal(after.error, 0);
        assert_int_equal(now.ndone, 1);
        assert_int_equal(later.ndone, 1);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.calls_canceled, 2);
        assert_int_equal(st.calls_completed, 1);
        result_done(&now);
        result_done(&later);
        result_done(&after);
}

static void test_cancel_from_on_data(void **state) {
        struct fixture *f = *state;
        struct http_request req = { .method = "GET", .url = url("/stream"), .stream = true };
        struct result r = { .cancel_in_data = true };

        assert_int_equal(do_submit(f, &req, &r), 0);
        run_until(f, &r.ndone, 1);
        assert_int_equal(r.error, -ECANCELED);
        assert_int_equal(r.ndata, 1);
        result_done(&r);
}

static void test_submit_from_callbacks(void **state) {
        struct fixture *f = *state;
        struct http_request req = { .method = "GET", .url = url("/hello"), .timeout_usec = 5000000 };
        struct http_request sreq = { .method = "GET", .url = url("/stream"), .stream = true };
        struct result second = {}, first = { .chained = &second };
        struct result fourth = {}, third = { .chained = &fourth, .submit_in_data = true };

        first.chained_url = url("/throttle");
        assert_int_equal(do_submit(f, &req, &first), 0);
        run_until(f, &second.ndone, 1);
        assert_int_equal(first.error, 0);
        assert_int_equal(first.chained_submit_ret, 0);
        assert_int_equal(second.error, 0);
        assert_int_equal(second.status, 429);

        /* From inside libcurl's write callback. */
        third.chained_url = url("/hello");
        assert_int_equal(do_submit(f, &sreq, &third), 0);
        run_until(f, &third.ndone, 1);
        run_until(f, &fourth.ndone, 1);
        assert_int_equal(third.chained_submit_ret, 0);
        assert_int_equal(third.error, 0);
        assert_int_equal(fourth.error, 0);
        assert_string_equal(fourth.body, "hello, world");
        result_done(&first);
        result_done(&second);
        result_done(&third);
        result_done(&fourth);
}

static void test_reuse(void **state) {
        struct fixture *f = *state;
        struct result r[5] = {};
        struct transport_curl_stats st;

        for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                get(f, url("/hello"), 0, &r[i]);
                assert_int_equal(r[i].error, 0);
                result_done(&r[i]);
        }
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.connections_total, 1);
        assert_int_equal(st.calls_completed, 5);
        assert_int_equal(f->t->requests_total, 5);
}

static void test_concurrent(void **state) {
        struct fixture *f = *state;
        struct result r[12] = {};
        int total = 0;
        struct transport_curl_stats st;

        for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                struct http_request req = {
                        .method = "GET",
                        .url = url(i % 2 ? "/hello" : "/stream"),
                        .timeout_usec = 5000000,
                };
                assert_int_equal(do_submit(f, &req, &r[i]), 0);
        }
        while (total < (int)ELEMENTSOF(r)) {
                assert_true(uv_run(&f->loop, UV_RUN_ONCE) != 0 || total < (int)ELEMENTSOF(r));
                total = 0;
                for (size_t i = 0; i < ELEMENTSOF(r); i++)
                        total += r[i].ndone;
        }
        for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                assert_int_equal(r[i].ndone, 1);
                assert_int_equal(r[i].error, 0);
                assert_int_equal(r[i].status, 200);
                result_done(&r[i]);
        }
        /* HTTP/1.1 here: at most MAX_HOST_CONNECTIONS (8), never one per call. */
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_true(st.connections_total >= 1 && st.connections_total <= 8);
}

static struct result close_results[5];

static int check_all_done(struct fixture *f) {
        /* close_cb comes after every done callback. */
        for (size_t i = 0; i < ELEMENTSOF(close_results); i++)
                if (close_results[i].ndone != 1)
                        return -1;
        return 0;
}

static void on_close_timer(uv_timer_t *h) {
        struct fixture *f = h->data;
        struct result late = {};
        struct http_request req = { .method = "GET", .url = url("/hello") };

        /* Queued but not yet added to the multi handle when close comes. */
        assert_int_equal(do_submit(f, &req, &close_results[4]), 0);
        in_transport_call = true;
        transport_close(f->t, on_closed, f);
        in_transport_call = false;
        /* Closing: no new calls. */
        late.f = f;
        assert_int_equal(transport_submit(f->t, &req, NULL, on_done, &late, &late.call), -ESHUTDOWN);
        uv_close((uv_handle_t *)h, NULL);
}

static void test_close_in_flight(void **state) {
        struct fixture *f = *state;
        struct http_request stall = { .method = "GET", .url = url("/stall") };
        struct http_request stream = { .method = "GET", .url = url("/stream"), .stream = true };
        uv_timer_t timer;

        memset(close_results, 0, sizeof(close_results));
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(do_submit(f, &stall, &close_results[i]), 0);
        assert_int_equal(do_submit(f, &stream, &close_results[3]), 0);

        f->before_close_check = check_all_done;
        assert_int_equal(uv_timer_init(&f->loop, &timer), 0);
        timer.data = f;
        assert_int_equal(uv_timer_start(&timer, on_close_timer, 120, 0), 0);
        run_until(f, &f->closed, 1);

        for (size_t i = 0; i < ELEMENTSOF(close_results); i++) {
                assert_int_equal(close_results[i].ndone, 1);
                assert_int_equal(close_results[i].error, -ECANCELED);
                result_done(&close_results[i]);
        }
        /* teardown checks uv_loop_close() == 0 */
}

static void test_close_from_done(void **state) {
        struct fixture *f = *state;
        struct http_request req = { .method = "GET", .url = url("/stall") };
        struct result a = { .close_in_done = true }, b = {};

        assert_int_equal(do_submit(f, &req, &b), 0);
        req.url = url("/hello");
        assert_int_equal(do_submit(f, &req, &a), 0);
        run_until(f, &f->closed, 1);
        assert_int_equal(a.ndone, 1);
        assert_int_equal(a.error, 0);
        assert_int_equal(b.ndone, 1);
        assert_int_equal(b.error, -ECANCELED);
        result_done(&a);
        result_done(&b);
}

static void test_close_idle(void **state) {
        struct fixture *f = *state;

        /* Nothing in flight: close_cb still comes from the loop, not from close. */
        in_transport_call = true;
        transport_close(f->t, on_closed, f);
        in_transport_call = false;
        assert_int_equal(f->closed, 0);
        run_until(f, &f->closed, 1);
}

/* ---- TLS ---- */

#define SKIP_WITHOUT_TLS()         \
        do {                       \
                if (!https_daemon) \
                        skip();    \
        } while (0)

static void tls_get(struct fixture *f, const struct tls_config *tls, const char *path, struct result *r) {
        assert_int_equal(fixture_open(f, tls), 0);
        get(f, surl(path), 0, r);
}

static void test_tls_verified(void **state) {
        struct fixture *f = *state;
        struct tls_config tls = {
                .ca_pem = tlsm.ca,
                .ca_pem_len = tlsm.ca_len,
                .tls_server_name = "drainer.test",
        };
        struct result r = {};
        char want[64];

        SKIP_WITHOUT_TLS();
        /* The certificate names drainer.test only; the URL says 127.0.0.1. */
        tls_get(f, &tls, "/header?name=Host", &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        /* The Host header keeps the URL's authority, as client-go does. */
        snprintf(want, sizeof(want), "127.0.0.1:%u", https_port);
        assert_string_equal(r.body, want);
        result_done(&r);
}

static void test_tls_client_cert(void **state) {
        struct fixture *f = *state;
        struct tls_config tls = {
                .ca_pem = tlsm.ca,
                .ca_pem_len = tlsm.ca_len,
                .tls_server_name = "drainer.test",
                /* Any valid pair will do: the server does not ask for one. */
                .client_cert_pem = tlsm.srv_cert,
                .client_cert_pem_len = tlsm.srv_cert ? strlen(tlsm.srv_cert) : 0,
                .client_key_pem = tlsm.srv_key,
                .client_key_pem_len = tlsm.srv_key ? strlen(tlsm.srv_key) : 0,
        };
        struct result r = {}, bad = {};

        SKIP_WITHOUT_TLS();
        tls_get(f, &tls, "/hello", &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);

        tls.client_key_pem = "-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n";
        tls.client_key_pem_len = strlen(tls.client_key_pem);
        tls_get(f, &tls, "/hello", &bad);
        assert_int_equal(bad.error, -EINVAL);
        result_done(&r);
        result_done(&bad);
}

/* A request's own certificate (rotated credentials) wins over the transport's, and a
 * connection made with one certificate is never reused by a request with another:
 * libcurl matches connections on the certificate blob. */
static void get_with_cert(struct fixture *f, const char *cert, const char *key, struct result *r) {
        struct http_request req = {
                .method = "GET",
                .url = surl("/hello"),
                .timeout_usec = 5000000,
                .client_cert_pem = cert,
                .client_cert_pem_len = cert ? strlen(cert) : 0,
                .client_key_pem = key,
                .client_key_pem_len = key ? strlen(key) : 0,
        };

        assert_int_equal(do_submit(f, &req, r), 0);
        run_until(f, &r->ndone, 1);
        assert_int_equal(r->error, 0);
        assert_int_equal(r->status, 200);
        result_done(r);
}

static void test_tls_rotated_client_cert(void **state) {
        struct fixture *f = *state;
        struct tls_config tls = {
                .ca_pem = tlsm.ca,
                .ca_pem_len = tlsm.ca_len,
                .tls_server_name = "drainer.test",
        };
        struct transport_curl_stats st;
        struct result r = {};
        static const char bad_key[] = "-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n";
        struct http_request req;

        SKIP_WITHOUT_TLS();
        assert_int_equal(fixture_open(f, &tls), 0);
        get_with_cert(f, tlsm.srv_cert, tlsm.srv_key, &r);
        get_with_cert(f, tlsm.srv_cert, tlsm.srv_key, &r);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.connections_total, 1); /* same certificate: reused */
        /* Rotated: a new connection, made with the new certificate. */
        get_with_cert(f, tlsm.cl_cert, tlsm.cl_key, &r);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.connections_total, 2);
        get_with_cert(f, tlsm.cl_cert, tlsm.cl_key, &r);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.connections_total, 2);
        /* The per-request key is really used: with a broken one the new connection's
         * handshake fails. (libcurl compares the certificate, not the key: a new key always
         * comes with a new certificate.) */
        req = (struct http_request){
                .method = "GET",
                .url = surl("/hello"),
                .timeout_usec = 5000000,
                .client_cert_pem = tlsm.other_ca,
                .client_cert_pem_len = strlen(tlsm.other_ca),
                .client_key_pem = bad_key,
                .client_key_pem_len = strlen(bad_key),
        };
        assert_int_equal(do_submit(f, &req, &r), 0);
        run_until(f, &r.ndone, 1);
        assert_int_equal(r.error, -EINVAL);
        result_done(&r);
}

static void test_tls_name_mismatch(void **state) {
        struct fixture *f = *state;
        struct tls_config tls = { .ca_pem = tlsm.ca, .ca_pem_len = tlsm.ca_len };
        struct result r = {};

        SKIP_WITHOUT_TLS();
        tls_get(f, &tls, "/hello", &r);
        assert_int_equal(r.error, -EKEYREJECTED);
        assert_int_equal(r.status, 0);
        result_done(&r);
}

static void test_tls_wrong_ca(void **state) {
        struct fixture *f = *state;
        struct tls_config tls = {
                .ca_pem = tlsm.other_ca,
                .ca_pem_len = tlsm.other_ca_len,
                .tls_server_name = "drainer.test",
        };
        struct tls_config system_cas = { .tls_server_name = "drainer.test" };
        struct result r = {}, s = {};

        SKIP_WITHOUT_TLS();
        tls_get(f, &tls, "/hello", &r);
        assert_int_equal(r.error, -EKEYREJECTED);
        tls_get(f, &system_cas, "/hello", &s);
        assert_int_equal(s.error, -EKEYREJECTED);
        result_done(&r);
        result_done(&s);
}

static void test_tls_bad_ca(void **state) {
        struct fixture *f = *state;
        static const char junk[] = "not a certificate";
        struct tls_config tls = { .ca_pem = junk, .ca_pem_len = sizeof(junk) - 1 };
        struct result r = {};

        SKIP_WITHOUT_TLS();
        tls_get(f, &tls, "/hello", &r);
        assert_int_equal(r.error, -EINVAL);
        result_done(&r);
}

static void test_tls_insecure(void **state) {
        struct fixture *f = *state;
        struct tls_config tls = { .insecure_skip_verify = true };
        struct result r = {};

        SKIP_WITHOUT_TLS();
        tls_get(f, &tls, "/hello", &r);
        assert_int_equal(r.error, 0);
        assert_string_equal(r.body, "hello, world");
        result_done(&r);
}

/* ---- HTTP/2, against an external server when one is given ---- */

/* Waits for the first bytes of a watch; fails if it ends before. */
static void run_until_data(struct fixture *f, struct result *w) {
        while (w->ndata == 0) {
                if (w->ndone > 0)
                        fail_msg("the watch ended before any data: %d (HTTP %ld)", w->error, w->status);
                if (uv_run(&f->loop, UV_RUN_ONCE) == 0 && w->ndata == 0)
                        fail_msg("loop ran out of work before the watch sent anything");
        }
}

/* Concurrent calls, and a watch, all on one connection. Anonymous requests do
 * not get there with kube-apiserver: it ends the HTTP/2 connection of an
 * anonymous client with GOAWAY after each request (UnauthenticatedHTTP2DOSMitigation)
 * and refuses the streams that crossed the GOAWAY; the calls must still all
 * succeed, on as many connections as that takes. So one connection is checked
 * with DRAINER_TEST_H2_TOKEN only (a bearer token for every request). */
/* The live API server's settings (DRAINER_TEST_H2_*); false: none given. */
struct h2_live {
        const char *url, *watch_url, *audit_log;
        char *ca, *auth;
        struct tls_config tls;
};

static bool h2_live_open(struct fixture *f, struct h2_live *h) {
        const char *ca_path = getenv("DRAINER_TEST_H2_CA");
        const char *token = getenv("DRAINER_TEST_H2_TOKEN");

        *h = (struct h2_live){ .url = getenv("DRAINER_TEST_H2_URL"),
                               .watch_url = getenv("DRAINER_TEST_H2_WATCH_URL"),
                               .audit_log = getenv("DRAINER_TEST_H2_AUDIT_LOG") };
        if (!h->url)
                return false;
        if (ca_path) {
                FILE *fp = fopen(ca_path, "re");

                assert_non_null(fp);
                h->ca = calloc(1, 1 << 20);
                assert_non_null(h->ca);
                h->tls.ca_pem_len = fread(h->ca, 1, (1 << 20) - 1, fp);
                h->tls.ca_pem = h->ca;
                fclose(fp);
        }
        if (token && token[0]) {
                size_t len = strcspn(token, " \t\r\n");

                assert_true(asprintf(&h->auth, "Authorization: Bearer %.*s", (int)len, token) > 0);
        }
        h->tls.tls_server_name = getenv("DRAINER_TEST_H2_SERVER_NAME");
        h->tls.insecure_skip_verify = !ca_path;
        assert_int_equal(fixture_open(f, &h->tls), 0);
        return true;
}

static void h2_live_done(struct h2_live *h) {
        free(h->auth);
        free(h->ca);
}

static void test_h2_one_connection(void **state) {
        struct fixture *f = *state;
        struct h2_live h;
        struct result r[16] = {}, w = {};
        struct transport_curl_stats st;
        const char *headers[2] = {}, *u, *watch_url;
        int total = 0;

        if (!h2_live_open(f, &h))
                skip();
        u = h.url;
        watch_url = h.watch_url;
        headers[0] = h.auth;
        if (watch_url) {
                /* A watch first: the calls below share its connection. */
                struct http_request req = {
                        .method = "GET", .url = watch_url, .headers = headers, .stream = true
                };

                assert_int_equal(do_submit(f, &req, &w), 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                struct http_request req = {
                        .method = "GET", .url = u, .headers = headers, .timeout_usec = 10000000
                };

                assert_int_equal(do_submit(f, &req, &r[i]), 0);
        }
        while (total < (int)ELEMENTSOF(r)) {
                if (uv_run(&f->loop, UV_RUN_ONCE) == 0)
                        break;
                total = 0;
                for (size_t i = 0; i < ELEMENTSOF(r); i++)
                        total += r[i].ndone;
        }
        for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                assert_int_equal(r[i].ndone, 1);
                assert_int_equal(r[i].error, 0);
                assert_int_equal(r[i].status, 200);
                result_done(&r[i]);
        }
        if (watch_url) {
                /* Its first event may come after the calls are done. */
                run_until_data(f, &w);
                assert_int_equal(w.ndone, 0);
                transport_cancel(f->t, w.call);
                run_until(f, &w.ndone, 1);
                assert_int_equal(w.error, -ECANCELED);
                result_done(&w);
        }
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.calls_completed, ELEMENTSOF(r));
        assert_int_equal(st.calls_failed, 0);
        if (h.auth)
                assert_int_equal(st.connections_total, 1);
        else
                fprintf(stderr, "# %" PRIu64 " connection(s) for %zu anonymous calls%s\n",
                        st.connections_total, ELEMENTSOF(r) + !!watch_url,
                        st.connections_total > 1 ? "; set DRAINER_TEST_H2_TOKEN to check for one" : "");
        h2_live_done(&h);
}

/* Whether the API server's audit log has the end of the request with this Audit-ID. */
static bool audit_has_end(const char *path, const char *id) {
        FILE *fp = fopen(path, "re");
        char line[16384];
        bool found = false;

        if (!fp)
                return false;
        while (!found && fgets(line, sizeof(line), fp))
                found = strstr(line, id) && strstr(line, "\"stage\":\"ResponseComplete\"");
        fclose(fp);
        return found;
}

/* Runs the loop until the server says the request with this Audit-ID ended (10 s at most). */
static bool run_until_server_ended(struct fixture *f, const char *audit_log, const char *id) {
        for (int i = 0; i < 200; i++) {
                (void)uv_run(&f->loop, UV_RUN_NOWAIT);
                if (audit_has_end(audit_log, id))
                        return true;
                usleep(50000);
        }
        return false;
}

/* A cancelled watch ends at the API server at once, though the client sends nothing
 * more: a stream of a connection that stays (another watch on it, idle), then the
 * connection's last stream. Judged from the server's audit log. */
static void test_h2_cancel_ends_watch(void **state) {
        struct fixture *f = *state;
        struct h2_live h;
        struct result keep = {}, cut = {};
        char keep_id[64], cut_id[64], keep_hdr[80], cut_hdr[80];
        const char *keep_headers[3] = {}, *cut_headers[3] = {};

        if (!h2_live_open(f, &h))
                skip();
        if (!h.watch_url || !h.audit_log || !h.auth) {
                h2_live_done(&h);
                skip();
        }
        snprintf(keep_id, sizeof(keep_id), "drainer-test-%d-%ld-keep", (int)getpid(), (long)time(NULL));
        snprintf(cut_id, sizeof(cut_id), "drainer-test-%d-%ld-cut", (int)getpid(), (long)time(NULL));
        snprintf(keep_hdr, sizeof(keep_hdr), "Audit-ID: %s", keep_id);
        snprintf(cut_hdr, sizeof(cut_hdr), "Audit-ID: %s", cut_id);
        keep_headers[0] = cut_headers[0] = h.auth;
        keep_headers[1] = keep_hdr;
        cut_headers[1] = cut_hdr;
        assert_int_equal(do_submit(f,
                                   &(const struct http_request){ .method = "GET",
                                                                 .url = h.watch_url,
                                                                 .headers = keep_headers,
                                                                 .stream = true },
                                   &keep),
                         0);
        run_until_data(f, &keep);
        assert_int_equal(do_submit(f,
                                   &(const struct http_request){ .method = "GET",
                                                                 .url = h.watch_url,
                                                                 .headers = cut_headers,
                                                                 .stream = true },
                                   &cut),
                         0);
        run_until_data(f, &cut);

        transport_cancel(f->t, cut.call);
        run_until(f, &cut.ndone, 1);
        assert_int_equal(cut.error, -ECANCELED);
        assert_true(run_until_server_ended(f, h.audit_log, cut_id));
        assert_int_equal(keep.ndone, 0);
        assert_false(audit_has_end(h.audit_log, keep_id));

        transport_cancel(f->t, keep.call);
        run_until(f, &keep.ndone, 1);
        assert_true(run_until_server_ended(f, h.audit_log, keep_id));
        result_done(&keep);
        result_done(&cut);
        h2_live_done(&h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_get, setup, teardown),
                cmocka_unit_test_setup_teardown(test_post_echo, setup, teardown),
                cmocka_unit_test_setup_teardown(test_headers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
                cmocka_unit_test_setup_teardown(test_body_cap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_retry_after, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stream, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stream_abort, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resend_unanswered, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unresolvable, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_from_on_data, setup, teardown),
                cmocka_unit_test_setup_teardown(test_submit_from_callbacks, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reuse, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_in_flight, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_from_done, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_idle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tls_verified, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tls_client_cert, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tls_rotated_client_cert, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tls_name_mismatch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tls_wrong_ca, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tls_bad_ca, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tls_insecure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_h2_one_connection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_h2_cancel_ends_watch, setup, teardown),
        };
        int r;

        /* Talk to 127.0.0.1 directly, whatever proxy the environment names. */
        for (const char *const *v = (const char *const[]){ "http_proxy", "https_proxy", "HTTPS_PROXY",
                                                           "all_proxy", "ALL_PROXY", NULL };
             *v; v++)
                unsetenv(*v);
        if (getenv("DRAINER_TEST_FILTER"))
                cmocka_set_test_filter(getenv("DRAINER_TEST_FILTER"));
        if (getenv("DRAINER_TEST_DEBUG"))
                log_set_max_level(LOG_LEVEL_DEBUG);
        if (transport_global_init() < 0)
                return 1;
        r = cmocka_run_group_tests(tests, group_setup, group_teardown);
        transport_global_cleanup();
        return r;
}
