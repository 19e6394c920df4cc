/* Tests of the gRPC health probe: --driver-health parsing, the gRPC framing and
 * protobuf messages as pure functions, the probe against a scripted transport,
 * the real transport's unix socket and trailer plumbing against libmicrohttpd
 * on a unix socket (HTTP/1.1 chunked trailers), local refused/timeout cases,
 * and, with DRAINER_TEST_HEALTH_ADDR=HOST:PORT (e.g. 127.3.1.1:51515, a
 * grpc.health.v1 server with service "liveness" SERVING), real h2c probes.
 * DRAINER_TEST_HEALTH_UNIX=PATH adds a probe over that unix socket (same
 * server behaviour expected). Every real-loop test ends with uv_loop_close() == 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <microhttpd.h>
#include <uv.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/dra/health.h"
#include "drainer/kube/transport.h"

/* ---- parsing ---- */

static void parse_ok(const char *s, int port, const char *path, const char *service) {
        struct health_target t = { .port = -1 };
        char *err = NULL;

        assert_int_equal(health_target_parse(s, &t, &err), 0);
        assert_null(err);
        assert_int_equal(t.port, port);
        if (path)
                assert_string_equal(t.unix_path, path);
        else
                assert_null(t.unix_path);
        assert_string_equal(t.service, service);
        health_target_done(&t);
        assert_null(t.service);
        assert_null(t.unix_path);
        health_target_done(&t); /* twice is harmless */
}

static void parse_bad(const char *s, const char *want_in_error) {
        struct health_target t = { .port = -7 };
        char *err = NULL;

        assert_int_equal(health_target_parse(s, &t, &err), -EINVAL);
        assert_non_null(err);
        assert_null(strchr(err, '\n'));
        if (want_in_error && !strstr(err, want_in_error))
                fail_msg("error for \"%s\" is \"%s\", lacks \"%s\"", strna(s), err, want_in_error);
        /* Written only on success. */
        assert_int_equal(t.port, -7);
        assert_null(t.service);
        free(err);
        /* ret_error may be NULL. */
        assert_int_equal(health_target_parse(s, &t, NULL), -EINVAL);
}

static void test_parse(void **state) {
        char longpath[160], longsvc[300], maxsvc[HEALTH_SERVICE_MAX + 8], s[400];

        parse_ok("51515", 51515, NULL, "liveness");
        parse_ok("1", 1, NULL, "liveness");
        parse_ok("65535", 65535, NULL, "liveness");
        parse_ok("8080/grpc.health.v1.Health", 8080, NULL, "grpc.health.v1.Health");
        parse_ok("8080/a/b", 8080, NULL, "a/b");
        parse_ok("8080/", 8080, NULL, ""); /* the server as a whole */
        parse_ok("unix:/run/dra/health.sock", 0, "/run/dra/health.sock", "liveness");
        parse_ok("unix:/run/dra/health.sock#plugin", 0, "/run/dra/health.sock", "plugin");
        parse_ok("unix:/run/dra/health.sock#", 0, "/run/dra/health.sock", "");
        parse_ok("unix:/run/a#b.sock#liveness", 0, "/run/a#b.sock", "liveness");

        memset(maxsvc, 'x', HEALTH_SERVICE_MAX);
        maxsvc[HEALTH_SERVICE_MAX] = 0;
        snprintf(s, sizeof(s), "1/%s", maxsvc);
        parse_ok(s, 1, NULL, maxsvc);

        parse_bad(NULL, "empty");
        parse_bad("", "empty");
        parse_bad("0", "out of range");
        parse_bad("65536", "out of range");
        parse_bad("99999", "out of range");
        parse_bad("123456", "invalid port");
        parse_bad("abc", "invalid port \"abc\"");
        parse_bad("80a", "invalid port");
        parse_bad("-1", "invalid port");
        parse_bad("+80", "invalid port");
        parse_bad(" 80", "invalid port");
        parse_bad("/liveness", "invalid port");
        parse_bad("80:90", "invalid port");
        parse_bad("unix:", "no socket path");
        parse_bad("unix:#liveness", "no socket path");
        parse_bad("unix:run/x.sock", "not absolute");
        parse_bad("80/bad name", "invalid service name");
        parse_bad("80/tab\there", "invalid service name \"tab?here\"");
        parse_bad("unix:/x.sock#a b", "invalid service name");
        parse_bad("unix:/x\n.sock", "line break");

        longpath[0] = '/';
        memset(longpath + 1, 'p', sizeof(longpath) - 2);
        longpath[sizeof(longpath) - 1] = 0;
        snprintf(s, sizeof(s), "unix:%s", longpath);
        parse_bad(s, "too long");

        memset(longsvc, 's', sizeof(longsvc) - 1);
        longsvc[sizeof(longsvc) - 1] = 0;
        snprintf(s, sizeof(s), "80/%s", longsvc);
        parse_bad(s, "...");
}

static void test_status_to_string(void **state) {
        assert_string_equal(health_status_to_string(HEALTH_UNKNOWN), "UNKNOWN");
        assert_string_equal(health_status_to_string(HEALTH_SERVING), "SERVING");
        assert_string_equal(health_status_to_string(HEALTH_NOT_SERVING), "NOT_SERVING");
        assert_string_equal(health_status_to_string(HEALTH_SERVICE_UNKNOWN), "SERVICE_UNKNOWN");
        assert_null(health_status_to_string((enum health_status)4));
        assert_null(health_status_to_string((enum health_status) - 1));
}

/* ---- framing ---- */

static void test_encode(void **state) {
        static const uint8_t liveness[] = {
                0, 0, 0, 0, 10, 0x0a, 8, 'l', 'i', 'v', 'e', 'n', 'e', 's', 's'
        };
        static const uint8_t empty[] = { 0, 0, 0, 0, 0 };
        uint8_t buf[HEALTH_REQUEST_MAX], small[14];
        char svc[HEALTH_SERVICE_MAX + 2];

        assert_int_equal(health_encode_request("liveness", buf, sizeof(buf)), sizeof(liveness));
        assert_memory_equal(buf, liveness, sizeof(liveness));
        assert_int_equal(health_encode_request("", buf, sizeof(buf)), sizeof(empty));
        assert_memory_equal(buf, empty, sizeof(empty));

        /* A length of 127 takes one varint byte, 128 two. */
        memset(svc, 'a', 127);
        svc[127] = 0;
        assert_int_equal(health_encode_request(svc, buf, sizeof(buf)), 5 + 1 + 1 + 127);
        assert_int_equal(buf[4], 1 + 1 + 127);
        assert_int_equal(buf[6], 127);
        svc[127] = 'a';
        svc[128] = 0;
        assert_int_equal(health_encode_request(svc, buf, sizeof(buf)), 5 + 1 + 2 + 128);
        assert_int_equal(buf[4], 1 + 2 + 128);
        assert_int_equal(buf[6], 0x80);
        assert_int_equal(buf[7], 0x01);
        assert_int_equal(buf[8], 'a');

        memset(svc, 'b', HEALTH_SERVICE_MAX);
        svc[HEALTH_SERVICE_MAX] = 0;
        assert_int_equal(health_encode_request(svc, buf, sizeof(buf)), HEALTH_REQUEST_MAX);
        /* 258 = 0x0102, big-endian */
        assert_int_equal(buf[1], 0);
        assert_int_equal(buf[2], 0);
        assert_int_equal(buf[3], (1 + 2 + HEALTH_SERVICE_MAX) >> 8);
        assert_int_equal(buf[4], (1 + 2 + HEALTH_SERVICE_MAX) & 0xff);
        assert_int_equal(buf[6], (HEALTH_SERVICE_MAX & 0x7f) | 0x80);
        assert_int_equal(buf[7], HEALTH_SERVICE_MAX >> 7);
        svc[HEALTH_SERVICE_MAX] = 'b';
        svc[HEALTH_SERVICE_MAX + 1] = 0;
        assert_int_equal(health_encode_request(svc, buf, sizeof(buf)), -EINVAL);

        assert_int_equal(health_encode_request("liveness", small, sizeof(small)), -ENOBUFS);
        assert_int_equal(health_encode_request("", small, 4), -ENOBUFS);
}

static int decode(const uint8_t *msg, size_t msg_len, enum health_status *ret) {
        uint8_t buf[64];

        assert_true(msg_len + 5 <= sizeof(buf));
        buf[0] = 0;
        buf[1] = buf[2] = buf[3] = 0;
        buf[4] = (uint8_t)msg_len;
        memcpy(buf + 5, msg, msg_len);
        return health_decode_response(buf, msg_len + 5, ret);
}

#define DECODE(want_r, want_status, ...)                                      \
        do {                                                                  \
                static const uint8_t m_[] = { __VA_ARGS__ };                  \
                enum health_status st_ = (enum health_status)77;              \
                assert_int_equal(decode(m_, sizeof(m_), &st_), (want_r));     \
                if ((want_r) == 0)                                            \
                        assert_int_equal(st_, (want_status));                 \
                else                                                          \
                        assert_int_equal(st_, 77); /* untouched on failure */ \
        } while (0)

static void test_decode(void **state) {
        static const uint8_t serving[] = { 0, 0, 0, 0, 2, 0x08, 0x01 }; /* what grpc-go sends */
        static const uint8_t empty[] = { 0, 0, 0, 0, 0 };
        enum health_status st;

        assert_int_equal(health_decode_response(serving, sizeof(serving), &st), 0);
        assert_int_equal(st, HEALTH_SERVING);
        /* status left out = its default, UNKNOWN */
        st = HEALTH_SERVING;
        assert_int_equal(health_decode_response(empty, sizeof(empty), &st), 0);
        assert_int_equal(st, HEALTH_UNKNOWN);

        DECODE(0, HEALTH_NOT_SERVING, 0x08, 0x02);
        DECODE(0, HEALTH_SERVICE_UNKNOWN, 0x08, 0x03);
        DECODE(0, HEALTH_UNKNOWN, 0x08, 0x00);
        /* Values we do not know, and a negative int32 (10-byte varint): not SERVING. */
        DECODE(0, HEALTH_UNKNOWN, 0x08, 0x07);
        DECODE(0, HEALTH_UNKNOWN, 0x08, 0x81, 0x01);
        DECODE(0, HEALTH_UNKNOWN, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
        /* A non-minimal varint is still 1. */
        DECODE(0, HEALTH_SERVING, 0x08, 0x81, 0x00);
        /* The last status wins (protobuf merge). */
        DECODE(0, HEALTH_NOT_SERVING, 0x08, 0x01, 0x08, 0x02);
        /* Unknown fields of every wire type are skipped. */
        DECODE(0, HEALTH_SERVING, 0x12, 0x03, 'a', 'b', 'c', /* 2: string */
               0x19, 1, 2, 3, 4, 5, 6, 7, 8,                 /* 3: fixed64 */
               0x25, 1, 2, 3, 4,                             /* 4: fixed32 */
               0x28, 0x96, 0x01,                             /* 5: varint */
               0x08, 0x01,                                   /* status */
               0x80, 0x01, 0x05);                            /* 16: varint, 2-byte tag */

        /* Malformed messages. */
        DECODE(-EBADMSG, 0, 0x08);             /* status value missing */
        DECODE(-EBADMSG, 0, 0x08, 0x81);       /* varint cut short */
        DECODE(-EBADMSG, 0, 0x80);             /* tag cut short */
        DECODE(-EBADMSG, 0, 0x0a, 0x01, 0x01); /* status as a string */
        DECODE(-EBADMSG, 0, 0x0d, 1, 2, 3, 4); /* status as fixed32 */
        DECODE(-EBADMSG, 0, 0x12, 0x05, 'a');  /* string cut short */
        DECODE(-EBADMSG, 0, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0x01);                       /* huge length */
        DECODE(-EBADMSG, 0, 0x19, 1, 2, 3); /* fixed64 cut short */
        DECODE(-EBADMSG, 0, 0x25, 1, 2);    /* fixed32 cut short */
        DECODE(-EBADMSG, 0, 0x1b, 0x1c);    /* group (proto2) */
        DECODE(-EBADMSG, 0, 0x0e, 0x00);    /* wire type 6 */
        DECODE(-EBADMSG, 0, 0x00, 0x01);    /* field 0 */
        DECODE(-EBADMSG, 0, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0x02); /* > 64 bits */
        DECODE(-EBADMSG, 0, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0x01); /* 11 bytes */

        /* Malformed frames. */
        {
                static const uint8_t compressed[] = { 1, 0, 0, 0, 2, 0x08, 0x01 };
                static const uint8_t too_long[] = { 0, 0, 0, 0, 3, 0x08, 0x01 };
                static const uint8_t too_short[] = { 0, 0, 0, 0, 1, 0x08, 0x01 };
                static const uint8_t huge[] = { 0, 0xff, 0xff, 0xff, 0xff, 0x08, 0x01 };
                static const uint8_t two[] = { 0, 0, 0, 0, 2, 0x08, 0x01, 0, 0, 0, 0, 2, 0x08, 0x01 };
                static const uint8_t garbage[] = "<html>nope</html>";

                st = (enum health_status)77;
                assert_int_equal(health_decode_response(compressed, sizeof(compressed), &st), -EBADMSG);
                assert_int_equal(health_decode_response(too_long, sizeof(too_long), &st), -EBADMSG);
                assert_int_equal(health_decode_response(too_short, sizeof(too_short), &st), -EBADMSG);
                assert_int_equal(health_decode_response(huge, sizeof(huge), &st), -EBADMSG);
                assert_int_equal(health_decode_response(two, sizeof(two), &st), -EBADMSG);
                assert_int_equal(health_decode_response(garbage, sizeof(garbage) - 1, &st), -EBADMSG);
                for (size_t n = 0; n < 5; n++)
                        assert_int_equal(health_decode_response(serving, n, &st), -EBADMSG);
                assert_int_equal(health_decode_response(serving, 6, &st), -EBADMSG);
                assert_int_equal(health_decode_response(NULL, 0, &st), -EBADMSG);
                assert_int_equal(st, 77);
        }
}

/* Every prefix and every single-byte corruption of a valid frame is decoded
 * or refused, never read past its end (valgrind/ASan watch this). */
static void test_decode_fuzz(void **state) {
        static const uint8_t valid[] = { 0, 0, 0, 0, 9, 0x12, 0x02, 'o', 'k', 0x08, 0x01, 0x28, 0x96, 0x01 };
        uint8_t buf[sizeof(valid)];
        enum health_status st;

        for (size_t n = 0; n <= sizeof(valid); n++) {
                uint8_t *exact = malloc(n > 0 ? n : 1); /* exact size: reads past it are caught */

                assert_non_null(exact);
                memcpy(exact, valid, n);
                assert_int_equal(health_decode_response(exact, n, &st), n == sizeof(valid) ? 0 : -EBADMSG);
                free(exact);
        }
        assert_int_equal(st, HEALTH_SERVING);
        for (size_t i = 0; i < sizeof(valid); i++)
                for (unsigned b = 0; b < 256; b++) {
                        int r;

                        memcpy(buf, valid, sizeof(buf));
                        buf[i] = (uint8_t)b;
                        r = health_decode_response(buf, sizeof(buf), &st);
                        assert_true(r == 0 || r == -EBADMSG);
                        if (r == 0)
                                assert_true(st >= HEALTH_UNKNOWN && st <= HEALTH_SERVICE_UNKNOWN);
                }
}

/* ---- the probe against a scripted transport ---- */

struct script;

struct http_call {
        struct script *s;
        http_done_fn on_done;
        void *userdata;
        bool canceled;
};

/* One call at a time: records the request, answers when the test says so. */
struct script {
        struct transport base;
        struct http_call *call; /* in flight */
        int submit_ret;         /* < 0: submit fails with it */
        bool in_call;           /* inside a probe function: done must not run */
        unsigned cancels;

        char method[16];
        char url[512];
        char *headers[8];
        size_t n_headers;
        uint8_t body[HEALTH_REQUEST_MAX];
        size_t body_len;
        bool h2c;
        char unix_socket[128];
        bool has_unix_socket;
        uint64_t timeout_usec, connect_timeout_usec;
        size_t max_body;
};

static int script_submit(struct transport *t, const struct http_request *req, http_data_fn on_data,
                         http_done_fn on_done, void *userdata, struct http_call **ret_call) {
        struct script *s = container_of(t, struct script, base);
        struct http_call *c;

        assert_null(s->call);
        assert_null(on_data);
        assert_false(req->stream);
        if (s->submit_ret < 0)
                return s->submit_ret;

        snprintf(s->method, sizeof(s->method), "%s", req->method);
        snprintf(s->url, sizeof(s->url), "%s", req->url);
        for (size_t i = 0; i < s->n_headers; i++)
                free(s->headers[i]);
        s->n_headers = 0;
        for (const char *const *h = req->headers; h && *h; h++) {
                assert_true(s->n_headers < ELEMENTSOF(s->headers));
                s->headers[s->n_headers] = strdup(*h);
                assert_non_null(s->headers[s->n_headers]);
                s->n_headers++;
        }
        assert_true(req->body_len <= sizeof(s->body));
        memcpy(s->body, req->body, req->body_len);
        s->body_len = req->body_len;
        s->h2c = req->h2c_prior_knowledge;
        s->has_unix_socket = req->unix_socket != NULL;
        snprintf(s->unix_socket, sizeof(s->unix_socket), "%s", strempty(req->unix_socket));
        s->timeout_usec = req->timeout_usec;
        s->connect_timeout_usec = req->connect_timeout_usec;
        s->max_body = req->max_body;

        c = calloc(1, sizeof(*c));
        assert_non_null(c);
        c->s = s;
        c->on_done = on_done;
        c->userdata = userdata;
        s->call = c;
        *ret_call = c;
        return 0;
}

static void script_cancel(struct transport *t, struct http_call *c) {
        struct script *s = container_of(t, struct script, base);

        assert_ptr_equal(c, s->call);
        s->cancels++;
        c->canceled = true;
}

static void script_close(struct transport *t, void (*close_cb)(struct transport *t, void *userdata),
                         void *userdata) {
        fail();
}

static void script_free(struct transport *t) {
        struct script *s = container_of(t, struct script, base);

        for (size_t i = 0; i < s->n_headers; i++)
                free(s->headers[i]);
        assert_null(s->call);
        free(s);
}

static const struct transport_ops script_ops = {
        .submit = script_submit,
        .cancel = script_cancel,
        .close = script_close,
        .free = script_free,
};

static struct script *script_new(void) {
        struct script *s = calloc(1, sizeof(*s));

        assert_non_null(s);
        s->base.ops = &script_ops;
        return s;
}

/* Completes the call in flight as the real transport would, from "the loop". */
static void script_answer(struct script *s, int error, const struct http_response *resp) {
        struct http_call *c = s->call;
        struct http_response none = {};

        assert_non_null(c);
        s->call = NULL;
        if (c->canceled)
                error = -ECANCELED;
        c->on_done(c, error, error < 0 || !resp ? &none : resp, c->userdata);
        free(c);
}

static const char *script_header(const struct script *s, const char *name) {
        size_t n = strlen(name);

        for (size_t i = 0; i < s->n_headers; i++)
                if (strncasecmp(s->headers[i], name, n) == 0 && s->headers[i][n] == ':')
                        return s->headers[i] + n + 1 + strspn(s->headers[i] + n + 1, " ");
        return NULL;
}

struct outcome {
        struct script *s; /* NULL for the real transport */
        int n;
        int error;
        enum health_status status;
        char message[1200];
        bool has_message;
};

static void on_probe(int error, enum health_status status, const char *message, void *userdata) {
        struct outcome *o = userdata;

        if (o->s)
                assert_false(o->s->in_call);
        o->n++;
        o->error = error;
        o->status = status;
        o->has_message = message != NULL;
        snprintf(o->message, sizeof(o->message), "%s", strempty(message));
}

static int start(struct script *s, const struct health_target *tg, const char *host, uint64_t timeout_usec,
                 struct outcome *o, struct health_probe **ret) {
        int r;

        *o = (struct outcome){ .s = s };
        s->in_call = true;
        r = health_probe_start(&s->base, tg, host, timeout_usec, on_probe, o, ret);
        s->in_call = false;
        assert_int_equal(o->n, 0);
        return r;
}

static const uint8_t frame_serving[] = { 0, 0, 0, 0, 2, 0x08, 0x01 };
static const uint8_t frame_not_serving[] = { 0, 0, 0, 0, 2, 0x08, 0x02 };

/* Probes 10.1.2.3:51515 "liveness" and answers with resp (or error). */
static void probe_answer(int error, const struct http_response *resp, struct outcome *o) {
        struct health_target tg = { .port = 51515, .service = (char *)"liveness" };
        struct script *s = script_new();

        assert_int_equal(start(s, &tg, "10.1.2.3", 0, o, NULL), 0);
        script_answer(s, error, resp);
        assert_int_equal(o->n, 1);
        transport_free(&s->base);
}

static void test_probe_request(void **state) {
        static const uint8_t want_body[] = {
                0, 0, 0, 0, 10, 0x0a, 8, 'l', 'i', 'v', 'e', 'n', 'e', 's', 's'
        };
        struct health_target tg = { .port = 51515, .service = (char *)"liveness" };
        struct health_target ux = { .unix_path = (char *)"/run/dra/h.sock", .service = (char *)"" };
        struct http_response ok = { .status = 200,
                                    .body = (const char *)frame_serving,
                                    .body_len = 7,
                                    .grpc_status = "0",
                                    .grpc_message = "" };
        struct script *s = script_new();
        struct health_probe *p = NULL;
        struct outcome o;

        assert_int_equal(start(s, &tg, "10.1.2.3", 3 * 1000000, &o, &p), 0);
        assert_non_null(p);
        assert_string_equal(s->method, "POST");
        assert_string_equal(s->url, "http://10.1.2.3:51515/grpc.health.v1.Health/Check");
        assert_true(s->h2c);
        assert_false(s->has_unix_socket);
        assert_string_equal(script_header(s, "content-type"), "application/grpc");
        assert_string_equal(script_header(s, "te"), "trailers");
        assert_string_equal(script_header(s, "grpc-timeout"), "3000m");
        assert_int_equal(s->body_len, sizeof(want_body));
        assert_memory_equal(s->body, want_body, sizeof(want_body));
        assert_int_equal(s->timeout_usec, 3000000);
        assert_int_equal(s->connect_timeout_usec, 3000000);
        assert_true(s->max_body > 0 && s->max_body <= 65536);
        script_answer(s, 0, &ok);
        assert_int_equal(o.n, 1);
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_SERVING);
        assert_false(o.has_message);

        /* IPv6 in brackets, a zone escaped; default timeout; ret may be NULL. */
        assert_int_equal(start(s, &tg, "fd00::1", 0, &o, NULL), 0);
        assert_string_equal(s->url, "http://[fd00::1]:51515/grpc.health.v1.Health/Check");
        assert_string_equal(script_header(s, "grpc-timeout"), "10000m");
        assert_int_equal(s->timeout_usec, HEALTH_TIMEOUT_DEFAULT_USEC);
        script_answer(s, 0, &ok);
        assert_int_equal(start(s, &tg, "fe80::1%eth0", 0, &o, NULL), 0);
        assert_string_equal(s->url, "http://[fe80::1%25eth0]:51515/grpc.health.v1.Health/Check");
        script_answer(s, 0, &ok);
        assert_int_equal(start(s, &tg, "driver.example", 200 * 1000000000ULL, &o, NULL), 0);
        assert_string_equal(s->url, "http://driver.example:51515/grpc.health.v1.Health/Check");
        assert_string_equal(script_header(s, "grpc-timeout"), "200000S");
        script_answer(s, 0, &ok);

        /* Unix: the socket, localhost in the URL, host ignored; empty service = empty message. */
        assert_int_equal(start(s, &ux, NULL, 0, &o, NULL), 0);
        assert_string_equal(s->url, "http://localhost/grpc.health.v1.Health/Check");
        assert_true(s->has_unix_socket);
        assert_string_equal(s->unix_socket, "/run/dra/h.sock");
        assert_true(s->h2c);
        assert_int_equal(s->body_len, 5);
        assert_memory_equal(s->body, "\0\0\0\0\0", 5);
        script_answer(s, 0, &ok);
        assert_int_equal(o.status, HEALTH_SERVING);

        /* Refused before any call: done never runs. */
        assert_int_equal(start(s, &tg, NULL, 0, &o, NULL), -EINVAL);
        assert_int_equal(start(s, &tg, "", 0, &o, NULL), -EINVAL);
        assert_int_equal(start(s, &tg, "10.0.0.1/x", 0, &o, NULL), -EINVAL);
        assert_int_equal(start(s, &tg, "a@b", 0, &o, NULL), -EINVAL);
        assert_int_equal(start(s, &tg, "[::1]", 0, &o, NULL), -EINVAL);
        assert_int_equal(start(s, &tg, "10.0.0.1%x", 0, &o, NULL), -EINVAL);
        assert_int_equal(start(s, &tg, "a\nb", 0, &o, NULL), -EINVAL);
        tg.port = 0;
        assert_int_equal(start(s, &tg, "10.0.0.1", 0, &o, NULL), -EINVAL);
        tg.port = 70000;
        assert_int_equal(start(s, &tg, "10.0.0.1", 0, &o, NULL), -EINVAL);
        tg.port = 51515;
        s->submit_ret = -ESHUTDOWN;
        assert_int_equal(start(s, &tg, "10.0.0.1", 0, &o, NULL), -ESHUTDOWN);
        assert_null(s->call);
        assert_int_equal(o.n, 0);

        transport_free(&s->base);
}

static void test_probe_answers(void **state) {
        struct outcome o;

        /* NOT_SERVING, and a status left out of the message. */
        probe_answer(0,
                     &(struct http_response){ .status = 200,
                                              .body = (const char *)frame_not_serving,
                                              .body_len = 7,
                                              .grpc_status = "0" },
                     &o);
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_NOT_SERVING);
        probe_answer(0,
                     &(struct http_response){
                             .status = 200, .body = "\0\0\0\0\0", .body_len = 5, .grpc_status = "0" },
                     &o);
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_UNKNOWN);

        /* What grpc-go's health server answers for a service it does not know
         * (trailers-only: status 200, no body, grpc-status 5 in the headers). */
        probe_answer(
                0,
                &(struct http_response){
                        .status = 200, .body = "", .grpc_status = "5", .grpc_message = "unknown service" },
                &o);
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_SERVICE_UNKNOWN);
        assert_string_equal(o.message, "NOT_FOUND: unknown service");

        /* Other gRPC errors: -EPROTO, the message percent-decoded, on one line. */
        probe_answer(0,
                     &(struct http_response){ .status = 200,
                                              .body = "",
                                              .grpc_status = "12",
                                              .grpc_message = "unknown service grpc.health.v1.Health" },
                     &o);
        assert_int_equal(o.error, -EPROTO);
        assert_string_equal(o.message, "UNIMPLEMENTED: unknown service grpc.health.v1.Health");
        probe_answer(0,
                     &(struct http_response){ .status = 200,
                                              .body = "",
                                              .grpc_status = "14",
                                              .grpc_message = "shutting%20down%0Anow %zz 100%" },
                     &o);
        assert_int_equal(o.error, -EPROTO);
        assert_string_equal(o.message, "UNAVAILABLE: shutting down now %zz 100%");
        probe_answer(0, &(struct http_response){ .status = 200, .body = "", .grpc_status = "99" }, &o);
        assert_int_equal(o.error, -EPROTO);
        assert_string_equal(o.message, "gRPC status 99");
        probe_answer(0, &(struct http_response){ .status = 200, .body = "", .grpc_status = "x1" }, &o);
        assert_int_equal(o.error, -EPROTO);
        assert_non_null(strstr(o.message, "malformed grpc-status"));

        /* Not gRPC at all. */
        probe_answer(0, &(struct http_response){ .status = 404, .body = "nope", .body_len = 4 }, &o);
        assert_int_equal(o.error, -EPROTO);
        assert_string_equal(o.message, "HTTP status 404");
        probe_answer(0,
                     &(struct http_response){
                             .status = 200, .body = "hello", .body_len = 5, .content_type = "text/plain" },
                     &o);
        assert_int_equal(o.error, -EPROTO);
        assert_non_null(strstr(o.message, "no grpc-status"));

        /* grpc-status 0 but a broken message. */
        probe_answer(0,
                     &(struct http_response){
                             .status = 200, .body = "\0\0\0\0\2\x08", .body_len = 6, .grpc_status = "0" },
                     &o);
        assert_int_equal(o.error, -EBADMSG);
        probe_answer(0, &(struct http_response){ .status = 200, .body = "", .grpc_status = "0" }, &o);
        assert_int_equal(o.error, -EBADMSG);

        /* Transport errors as they are, no message. */
        probe_answer(-ECONNREFUSED, NULL, &o);
        assert_int_equal(o.error, -ECONNREFUSED);
        assert_false(o.has_message);
        probe_answer(-ETIMEDOUT, NULL, &o);
        assert_int_equal(o.error, -ETIMEDOUT);
}

static void test_probe_cancel(void **state) {
        struct health_target tg = { .port = 51515, .service = (char *)"liveness" };
        struct script *s = script_new();
        struct health_probe *p;
        struct outcome o;

        assert_int_equal(start(s, &tg, "10.1.2.3", 0, &o, &p), 0);
        s->in_call = true;
        health_probe_cancel(p);
        s->in_call = false;
        assert_int_equal(s->cancels, 1);
        assert_int_equal(o.n, 0); /* later, not from inside cancel */
        script_answer(s, 0, NULL);
        assert_int_equal(o.n, 1);
        assert_int_equal(o.error, -ECANCELED);
        transport_free(&s->base);
}

/* ---- the real transport ---- */

struct fixture {
        uv_loop_t loop;
        struct transport *t;
        int closed;
        char dir[64];
};

static void run_until(struct fixture *f, const int *counter, int want) {
        while (*counter < want)
                if (uv_run(&f->loop, UV_RUN_ONCE) == 0 && *counter < want)
                        fail_msg("loop ran out of work with %d of %d", *counter, want);
}

static void on_closed(struct transport *t, void *userdata) {
        struct fixture *f = userdata;

        f->closed++;
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_int_equal(uv_loop_init(&f->loop), 0);
        assert_int_equal(transport_curl_new(&f->loop, NULL, &f->t), 0);
        strcpy(f->dir, "/tmp/drainer-test-health-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        char cmd[128];

        transport_close(f->t, on_closed, f);
        run_until(f, &f->closed, 1);
        transport_free(f->t);
        assert_int_equal(uv_loop_close(&f->loop), 0);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
        assert_int_equal(system(cmd), 0);
        free(f);
        return 0;
}

static void probe(struct fixture *f, const char *target, const char *host, uint64_t timeout_usec,
                  struct outcome *o) {
        struct health_target tg;
        char *err = NULL;

        *o = (struct outcome){};
        if (health_target_parse(target, &tg, &err) < 0)
                fail_msg("%s", err);
        assert_int_equal(health_probe_start(f->t, &tg, host, timeout_usec, on_probe, o, NULL), 0);
        health_target_done(&tg); /* the probe keeps nothing of it */
        assert_int_equal(o->n, 0);
        run_until(f, &o->n, 1);
}

/* libmicrohttpd on a unix socket: HTTP/1.1 only, but enough to see the
 * transport connect over the socket, send a binary body, and hand over
 * grpc-status / grpc-message from headers and from (chunked) trailers. */
struct upload {
        char *data;
        size_t len;
};

static ssize_t abc_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        if (pos >= 3)
                return MHD_CONTENT_READER_END_OF_STREAM;
        memcpy(buf, "abc", 3);
        return 3;
}

static enum MHD_Result on_unix_request(void *cls, struct MHD_Connection *conn, const char *url,
                                       const char *method, const char *version, const char *upload,
                                       size_t *upload_size, void **con_cls) {
        struct upload *u = *con_cls;
        struct MHD_Response *r;
        enum MHD_Result ret;

        if (!u) {
                u = calloc(1, sizeof(*u));
                *con_cls = u;
                return u ? MHD_YES : MHD_NO;
        }
        if (*upload_size > 0) {
                char *p = realloc(u->data, u->len + *upload_size);

                if (!p)
                        return MHD_NO;
                memcpy(p + u->len, upload, *upload_size);
                u->data = p;
                u->len += *upload_size;
                *upload_size = 0;
                return MHD_YES;
        }

        if (streq(url, "/trailers")) {
                /* Unknown size: chunked, so that footers can follow the body. */
                r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64, abc_reader, NULL, NULL);
                if (!r)
                        return MHD_NO;
                MHD_add_response_footer(r, "grpc-status", "0");
                MHD_add_response_footer(r, "grpc-message", "all%20good");
        } else {
                /* /echo and /headers */
                r = MHD_create_response_from_buffer(u->len, u->data, MHD_RESPMEM_MUST_COPY);
                if (!r)
                        return MHD_NO;
                MHD_add_response_header(r, "Content-Type", "application/grpc");
                MHD_add_response_header(r, "grpc-status", "5");
                MHD_add_response_header(r, "grpc-message", "unknown service");
        }
        ret = MHD_queue_response(conn, 200, r);
        MHD_destroy_response(r);
        return ret;
}

static void on_unix_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe) {
        struct upload *u = *con_cls;

        if (u) {
                free(u->data);
                free(u);
                *con_cls = NULL;
        }
}

static struct MHD_Daemon *start_unix_server(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct MHD_Daemon *d;
        int fd;

        assert_true(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 16), 0);
        d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_unix_request, NULL,
                             MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, on_unix_completed,
                             NULL, MHD_OPTION_END);
        assert_non_null(d);
        return d;
}

struct result {
        int n;
        int error;
        long status;
        char body[64];
        size_t body_len;
        char grpc_status[16], grpc_message[64];
        bool has_grpc_status, has_grpc_message;
};

static void on_http_done(struct http_call *call, int error, const struct http_response *resp,
                         void *userdata) {
        struct result *r = userdata;

        r->n++;
        r->error = error;
        r->status = resp->status;
        r->body_len = resp->body_len;
        if (resp->body) {
                assert_true(resp->body_len <= sizeof(r->body));
                memcpy(r->body, resp->body, resp->body_len);
        }
        r->has_grpc_status = resp->grpc_status != NULL;
        r->has_grpc_message = resp->grpc_message != NULL;
        snprintf(r->grpc_status, sizeof(r->grpc_status), "%s", strempty(resp->grpc_status));
        snprintf(r->grpc_message, sizeof(r->grpc_message), "%s", strempty(resp->grpc_message));
}

static void request(struct fixture *f, const struct http_request *req, struct result *r) {
        *r = (struct result){};
        assert_int_equal(transport_submit(f->t, req, NULL, on_http_done, r, NULL), 0);
        run_until(f, &r->n, 1);
}

static void test_transport_unix_and_trailers(void **state) {
        static const char bin[] = { 0, 0, 0, 0, 2, 0x08, 0x01, 0, (char)0xff };
        struct fixture *f = *state;
        struct transport_curl_stats st;
        struct MHD_Daemon *d;
        char path[128], missing[128];
        struct result r;

        snprintf(path, sizeof(path), "%s/http.sock", f->dir);
        snprintf(missing, sizeof(missing), "%s/missing.sock", f->dir);
        d = start_unix_server(path);

        /* Trailers after the body. */
        request(f,
                &(struct http_request){ .method = "GET",
                                        .url = "http://localhost/trailers",
                                        .timeout_usec = 5000000,
                                        .unix_socket = path },
                &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body_len, 3);
        assert_memory_equal(r.body, "abc", 3);
        assert_true(r.has_grpc_status);
        assert_string_equal(r.grpc_status, "0");
        assert_string_equal(r.grpc_message, "all%20good");

        /* A binary body with NUL bytes goes out whole; grpc-* from the headers. */
        request(f,
                &(struct http_request){ .method = "POST",
                                        .url = "http://localhost/echo",
                                        .headers = (const char *const[]){ "Content-Type: application/grpc",
                                                                          "TE: trailers", NULL },
                                        .body = bin,
                                        .body_len = sizeof(bin),
                                        .timeout_usec = 5000000,
                                        .unix_socket = path },
                &r);
        assert_int_equal(r.error, 0);
        assert_int_equal(r.body_len, sizeof(bin));
        assert_memory_equal(r.body, bin, sizeof(bin));
        assert_string_equal(r.grpc_status, "5");
        assert_string_equal(r.grpc_message, "unknown service");

        /* One connection over the socket for both. */
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.connections_total, 1);

        /* A TCP call to the same authority (localhost:80, where nothing listens
         * here) does not get the unix socket's connection; no grpc-* fields. */
        request(f,
                &(struct http_request){ .method = "GET",
                                        .url = "http://localhost/trailers",
                                        .timeout_usec = 5000000,
                                        .h2c_prior_knowledge = true },
                &r);
        assert_int_equal(r.error, -ECONNREFUSED);
        assert_int_equal(r.status, 0);
        assert_false(r.has_grpc_status);
        assert_false(r.has_grpc_message);

        /* No socket there. */
        request(f,
                &(struct http_request){ .method = "GET",
                                        .url = "http://localhost/x",
                                        .timeout_usec = 5000000,
                                        .unix_socket = missing },
                &r);
        assert_int_equal(r.error, -ENOENT);

        /* A path that cannot be a socket address. */
        {
                char longpath[200];

                memset(longpath, 'x', sizeof(longpath) - 1);
                longpath[0] = '/';
                longpath[sizeof(longpath) - 1] = 0;
                assert_int_equal(transport_submit(f->t,
                                                  &(struct http_request){ .method = "GET",
                                                                          .url = "http://localhost/",
                                                                          .unix_socket = longpath },
                                                  NULL, on_http_done, &r, NULL),
                                 -EINVAL);
                assert_int_equal(transport_submit(f->t,
                                                  &(struct http_request){ .method = "GET",
                                                                          .url = "http://localhost/",
                                                                          .unix_socket = "" },
                                                  NULL, on_http_done, &r, NULL),
                                 -EINVAL);
        }

        MHD_stop_daemon(d);
}

static uint16_t closed_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        close(fd);
        return ntohs(sa.sin_port);
}

static void test_probe_local_failures(void **state) {
        struct fixture *f = *state;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        char target[160];
        struct outcome o;
        int fd;

        /* Nothing listens. */
        snprintf(target, sizeof(target), "%u", closed_port());
        probe(f, target, "127.0.0.1", 5000000, &o);
        assert_int_equal(o.error, -ECONNREFUSED);

        /* Listens, never answers (the kernel completes the handshake from the backlog). */
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 4), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        snprintf(target, sizeof(target), "%u", ntohs(sa.sin_port));
        probe(f, target, "127.0.0.1", 300000, &o);
        assert_int_equal(o.error, -ETIMEDOUT);
        close(fd);

        /* No socket file. */
        snprintf(target, sizeof(target), "unix:%s/none.sock", f->dir);
        probe(f, target, NULL, 5000000, &o);
        assert_int_equal(o.error, -ENOENT);
}

/* ---- a real grpc.health.v1 server (DRAINER_TEST_HEALTH_ADDR) ---- */

/* "HOST:PORT" or "[V6]:PORT" into host and "PORT". */
static bool live_addr(char *host, size_t host_size, char *port, size_t port_size) {
        const char *a = getenv("DRAINER_TEST_HEALTH_ADDR"), *colon;

        if (!a || !*a)
                return false;
        colon = strrchr(a, ':');
        assert_non_null(colon);
        if (a[0] == '[')
                snprintf(host, host_size, "%.*s", (int)(colon - a - 2), a + 1);
        else
                snprintf(host, host_size, "%.*s", (int)(colon - a), a);
        snprintf(port, port_size, "%s", colon + 1);
        return true;
}

#define SKIP_WITHOUT_LIVE(host, port)                                                               \
        do {                                                                                        \
                if (!live_addr(host, sizeof(host), port, sizeof(port))) {                           \
                        fprintf(stderr, "# DRAINER_TEST_HEALTH_ADDR not set, live case skipped\n"); \
                        skip();                                                                     \
                }                                                                                   \
        } while (0)

static void test_live(void **state) {
        struct fixture *f = *state;
        struct transport_curl_stats st;
        char host[128], port[16], target[300];
        struct health_target tg;
        struct outcome o, many[3];

        SKIP_WITHOUT_LIVE(host, port);

        probe(f, port, host, 5000000, &o);
        fprintf(stderr, "# %s:%s/liveness: error %d, %s\n", host, port, o.error,
                o.error < 0 ? o.message : health_status_to_string(o.status));
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_SERVING);
        assert_false(o.has_message);

        /* The server as a whole. */
        snprintf(target, sizeof(target), "%s/", port);
        probe(f, target, host, 5000000, &o);
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_SERVING);

        /* grpc-go's health server answers an unknown service with NOT_FOUND
         * ("unknown service"), trailers-only. */
        snprintf(target, sizeof(target), "%s/drainer.test.no-such-service", port);
        probe(f, target, host, 5000000, &o);
        fprintf(stderr, "# %s:%s/drainer.test.no-such-service: error %d, %s (%s)\n", host, port, o.error,
                health_status_to_string(o.status), o.message);
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_SERVICE_UNKNOWN);
        assert_string_equal(o.message, "NOT_FOUND: unknown service");

        /* Concurrent probes, each on a connection of its own (see h2c_prior_knowledge
         * in transport.h): the three above and these three opened six, and all worked. */
        assert_int_equal(health_target_parse(port, &tg, NULL), 0);
        for (size_t i = 0; i < ELEMENTSOF(many); i++) {
                many[i] = (struct outcome){};
                assert_int_equal(health_probe_start(f->t, &tg, host, 5000000, on_probe, &many[i], NULL), 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(many); i++) {
                run_until(f, &many[i].n, 1);
                assert_int_equal(many[i].error, 0);
                assert_int_equal(many[i].status, HEALTH_SERVING);
        }
        health_target_done(&tg);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.connections_total, 3 + ELEMENTSOF(many));

        /* Cancelled: done later, once, with -ECANCELED. */
        {
                struct health_probe *p;

                assert_int_equal(health_target_parse(port, &tg, NULL), 0);
                o = (struct outcome){};
                assert_int_equal(health_probe_start(f->t, &tg, host, 5000000, on_probe, &o, &p), 0);
                health_probe_cancel(p);
                assert_int_equal(o.n, 0);
                health_target_done(&tg);
                run_until(f, &o.n, 1);
                assert_int_equal(o.error, -ECANCELED);
        }

        /* A closed port on the same host. */
        probe(f, "1", host, 5000000, &o);
        assert_int_equal(o.error, -ECONNREFUSED);
}

static void test_live_unix(void **state) {
        struct fixture *f = *state;
        const char *path = getenv("DRAINER_TEST_HEALTH_UNIX");
        struct transport_curl_stats st;
        char host[128], port[16], target[300];
        struct outcome o;

        if (!path || !*path) {
                fprintf(stderr, "# DRAINER_TEST_HEALTH_UNIX not set, live unix case skipped\n");
                skip();
        }
        snprintf(target, sizeof(target), "unix:%s", path);
        probe(f, target, NULL, 5000000, &o);
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_SERVING);
        snprintf(target, sizeof(target), "unix:%s#drainer.test.no-such-service", path);
        probe(f, target, NULL, 5000000, &o);
        assert_int_equal(o.error, 0);
        assert_int_equal(o.status, HEALTH_SERVICE_UNKNOWN);
        assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
        assert_int_equal(st.connections_total, 2);

        /* TCP on the same transport. */
        if (live_addr(host, sizeof(host), port, sizeof(port))) {
                probe(f, port, host, 5000000, &o);
                assert_int_equal(o.error, 0);
                assert_int_equal(o.status, HEALTH_SERVING);
                assert_int_equal(transport_curl_get_stats(f->t, &st), 0);
                assert_int_equal(st.connections_total, 3);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_status_to_string),
                cmocka_unit_test(test_encode),
                cmocka_unit_test(test_decode),
                cmocka_unit_test(test_decode_fuzz),
                cmocka_unit_test(test_probe_request),
                cmocka_unit_test(test_probe_answers),
                cmocka_unit_test(test_probe_cancel),
                cmocka_unit_test_setup_teardown(test_transport_unix_and_trailers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_probe_local_failures, setup, teardown),
                cmocka_unit_test_setup_teardown(test_live, setup, teardown),
                cmocka_unit_test_setup_teardown(test_live_unix, setup, teardown),
        };
        int r;

        /* A proxy that does not exist: probes must never go through one. */
        setenv("http_proxy", "http://127.0.0.1:9", 1);
        setenv("HTTP_PROXY", "http://127.0.0.1:9", 1);
        if (getenv("DRAINER_TEST_FILTER"))
                cmocka_set_test_filter(getenv("DRAINER_TEST_FILTER"));
        if (getenv("DRAINER_TEST_DEBUG"))
                log_set_max_level(LOG_LEVEL_DEBUG);
        if (transport_global_init() < 0)
                return 1;
        r = cmocka_run_group_tests(tests, NULL, NULL);
        transport_global_cleanup();
        return r;
}
