/* gRPC health probe of a DRA driver: one grpc.health.v1.Health/Check call over
 * h2c (TCP to the pod, or a unix socket) through the transport, which does the
 * HTTP/2. Owns only the gRPC framing and the two-field protobuf messages, both
 * written by hand here; never talks to libcurl itself and never runs a done
 * callback from inside a call that started or cancelled the work. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "drainer/base/buf.h"
#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/dra/health.h"
#include "drainer/kube/transport.h"

#define SERVICE_DEFAULT  "liveness"
#define CHECK_PATH       "/grpc.health.v1.Health/Check"
#define MESSAGE_MAX      1024
#define ECHO_MAX         64
#define GRPC_NOT_FOUND   5
#define GRPC_TIMEOUT_MAX UINT64_C(99999999) /* grpc-timeout: at most 8 digits */
#define VARINT_MAX_BYTES 10

struct health_probe {
        struct transport *t;    /* borrowed */
        struct http_call *call; /* the transport's, until our done runs */
        health_done_fn done;
        void *userdata;
        char *what; /* owned; "10.0.0.5:51515/liveness", for the debug log */
};

/* ---- --driver-health ---- */

/* Copies s into buf for an error message: at most ECHO_MAX bytes, anything
 * unprintable as '?', so that the message stays one line. */
static const char *echo(const char *s, size_t n, char buf[static ECHO_MAX + 4]) {
        size_t i;

        for (i = 0; i < n && i < ECHO_MAX; i++)
                buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
        if (n > ECHO_MAX) {
                memcpy(buf + i, "...", 3);
                i += 3;
        }
        buf[i] = 0;
        return buf;
}

_printf_(2, 3) static int parse_error(char **ret_error, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(&m, fmt, ap) < 0)
                        m = NULL;
                va_end(ap);
                if (!m)
                        return -ENOMEM;
                *ret_error = m;
        }
        return -EINVAL;
}

static bool service_valid(const char *s) {
        if (strlen(s) > HEALTH_SERVICE_MAX)
                return false;
        for (; *s; s++)
                if (*s <= 0x20 || *s >= 0x7f)
                        return false;
        return true;
}

int health_target_parse(const char *s, struct health_target *ret, char **ret_error) {
        _cleanup_free_ char *path = NULL, *service = NULL;
        const char *svc = SERVICE_DEFAULT, *sep;
        char e[ECHO_MAX + 4];
        int port = 0;

        assert(ret);

        if (!s || !*s)
                return parse_error(ret_error, "empty value, expected PORT[/SERVICE] or unix:PATH[#SERVICE]");

        if (strncmp(s, "unix:", 5) == 0) {
                const char *p = s + 5;
                size_t n;

                /* The last '#': a path may hold one, a service name may not. */
                sep = strrchr(p, '#');
                n = sep ? (size_t)(sep - p) : strlen(p);
                if (n == 0)
                        return parse_error(ret_error, "\"%s\": no socket path after \"unix:\"",
                                           echo(s, strlen(s), e));
                if (p[0] != '/')
                        return parse_error(ret_error, "socket path \"%s\" is not absolute", echo(p, n, e));
                if (n >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
                        return parse_error(ret_error, "socket path \"%s\" is too long (at most %zu bytes)",
                                           echo(p, n, e),
                                           sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
                if (memchr(p, '\n', n) || memchr(p, '\r', n))
                        return parse_error(ret_error, "socket path \"%s\" contains a line break",
                                           echo(p, n, e));
                path = strndup(p, n);
                if (!path)
                        return -ENOMEM;
                if (sep)
                        svc = sep + 1;
        } else {
                size_t n;
                long v = 0;

                sep = strchr(s, '/');
                n = sep ? (size_t)(sep - s) : strlen(s);
                if (n == 0 || n > 5 || strspn(s, "0123456789") < n)
                        return parse_error(ret_error,
                                           "invalid port \"%s\", expected PORT[/SERVICE] (PORT 1-65535) or "
                                           "unix:PATH[#SERVICE]",
                                           echo(s, n, e));
                for (size_t i = 0; i < n; i++)
                        v = v * 10 + (s[i] - '0');
                if (v < 1 || v > 65535)
                        return parse_error(ret_error, "port %ld is out of range 1-65535", v);
                port = (int)v;
                if (sep)
                        svc = sep + 1;
        }

        if (!service_valid(svc))
                return parse_error(ret_error,
                                   "invalid service name \"%s\": at most %d printable characters, no blanks",
                                   echo(svc, strlen(svc), e), HEALTH_SERVICE_MAX);
        service = strdup(svc);
        if (!service)
                return -ENOMEM;

        *ret = (struct health_target){
                .port = port,
                .unix_path = TAKE_PTR(path),
                .service = TAKE_PTR(service),
        };
        return 0;
}

void health_target_done(struct health_target *t) {
        if (!t)
                return;
        free(t->unix_path);
        free(t->service);
        *t = (struct health_target){};
}

static const char *const status_names[] = {
        [HEALTH_UNKNOWN] = "UNKNOWN",
        [HEALTH_SERVING] = "SERVING",
        [HEALTH_NOT_SERVING] = "NOT_SERVING",
        [HEALTH_SERVICE_UNKNOWN] = "SERVICE_UNKNOWN",
};

const char *health_status_to_string(enum health_status s) {
        if ((unsigned)s >= ELEMENTSOF(status_names))
                return NULL;
        return status_names[s];
}

/* ---- gRPC framing and protobuf ---- */

static size_t varint_put(uint8_t *p, uint64_t v) {
        size_t n = 0;

        do {
                p[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                v >>= 7;
        } while (v > 0);
        return n;
}

static size_t varint_len(uint64_t v) {
        uint8_t b[VARINT_MAX_BYTES];

        return varint_put(b, v);
}

/* Reads a varint at *p (before end), advancing *p. -EBADMSG when truncated or longer than 64 bits. */
static int varint_get(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;

        for (unsigned i = 0; i < VARINT_MAX_BYTES; i++) {
                uint8_t b;

                if (*p >= end)
                        return -EBADMSG;
                b = *(*p)++;
                if (i == VARINT_MAX_BYTES - 1 && b > 1)
                        return -EBADMSG; /* bits beyond 64 */
                v |= (uint64_t)(b & 0x7f) << (7 * i);
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

static void be32_put(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

static uint32_t be32_get(const uint8_t *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int health_encode_request(const char *service, uint8_t *buf, size_t size) {
        size_t slen, msg_len, n = 5;

        assert(service && buf);

        slen = strlen(service);
        if (slen > HEALTH_SERVICE_MAX)
                return -EINVAL;
        /* proto3 leaves a field at its default ("") out of the message. */
        msg_len = slen > 0 ? 1 + varint_len(slen) + slen : 0;
        if (size < 5 + msg_len)
                return -ENOBUFS;

        buf[0] = 0; /* not compressed */
        be32_put(buf + 1, (uint32_t)msg_len);
        if (slen > 0) {
                buf[n++] = 0x0a; /* field 1, wire type 2 (length-delimited) */
                n += varint_put(buf + n, slen);
                memcpy(buf + n, service, slen);
                n += slen;
        }
        return (int)n;
}

int health_decode_response(const void *data, size_t len, enum health_status *ret) {
        const uint8_t *p = data, *end;
        uint64_t status = 0;

        assert(data || len == 0);
        assert(ret);

        /* One message: flag, length, exactly that many bytes. */
        if (len < 5 || p[0] != 0 || be32_get(p + 1) != len - 5)
                return -EBADMSG;
        end = p + len;
        p += 5;

        while (p < end) {
                uint64_t key, v;
                unsigned field, wire;
                int r;

                r = varint_get(&p, end, &key);
                if (r < 0)
                        return r;
                field = (unsigned)MIN(key >> 3, (uint64_t)UINT32_MAX);
                wire = (unsigned)(key & 7);
                if (field == 0)
                        return -EBADMSG;
                if (field == 1 && wire != 0)
                        return -EBADMSG; /* status is a varint */

                switch (wire) {
                case 0: /* varint */
                        r = varint_get(&p, end, &v);
                        if (r < 0)
                                return r;
                        if (field == 1)
                                status = v; /* the last one wins */
                        break;
                case 1: /* 64-bit */
                        if (end - p < 8)
                                return -EBADMSG;
                        p += 8;
                        break;
                case 2: /* length-delimited */
                        r = varint_get(&p, end, &v);
                        if (r < 0)
                                return r;
                        if (v > (uint64_t)(end - p))
                                return -EBADMSG;
                        p += v;
                        break;
                case 5: /* 32-bit */
                        if (end - p < 4)
                                return -EBADMSG;
                        p += 4;
                        break;
                default: /* groups (3, 4) are gone from proto3; 6 and 7 do not exist */
                        return -EBADMSG;
                }
        }

        /* An enum value from a newer server (or a negative one) is not SERVING. */
        *ret = status <= HEALTH_SERVICE_UNKNOWN ? (enum health_status)status : HEALTH_UNKNOWN;
        return 0;
}

/* ---- the probe ---- */

static const char *const grpc_codes[] = {
        "OK",        "CANCELLED",       "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
        "NOT_FOUND", "ALREADY_EXISTS",  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED",   "OUT_OF_RANGE",    "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
        "DATA_LOSS", "UNAUTHENTICATED",
};

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* grpc-message is percent-encoded (gRPC over HTTP/2, "Percent-Encoded"); decodes
 * it into buf, with control characters (a decoded line break) as spaces. A '%'
 * not followed by two hex digits stays as it is. */
static void grpc_message_decode(const char *s, char *buf, size_t size) {
        size_t n = 0;

        assert(size > 0);
        while (*s && n + 1 < size) {
                char c = *s++;

                if (c == '%' && unhex(s[0]) >= 0 && unhex(s[1]) >= 0) {
                        c = (char)(unhex(s[0]) << 4 | unhex(s[1]));
                        s += 2;
                }
                buf[n++] = (unsigned char)c < 0x20 || c == 0x7f ? ' ' : c;
        }
        buf[n] = 0;
}

/* Parses grpc-status: a decimal code. -1 when it is not one. */
static int grpc_code_parse(const char *s) {
        int v = 0;

        if (!*s || strlen(s) > 4 || strspn(s, "0123456789") != strlen(s))
                return -1;
        for (; *s; s++)
                v = v * 10 + (*s - '0');
        return v;
}

static void probe_free(struct health_probe *p) {
        if (!p)
                return;
        free(p->what);
        free(p);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct health_probe *, probe_free);

/* Turns the call's outcome into (error, status, message); message points into
 * buf or is NULL. */
static int probe_result(int error, const struct http_response *resp, enum health_status *ret_status,
                        char *buf, size_t size, const char **ret_message) {
        char m[MESSAGE_MAX];
        int code, r;

        *ret_status = HEALTH_UNKNOWN;
        *ret_message = NULL;
        if (error < 0)
                return error;

        if (resp->grpc_message)
                grpc_message_decode(resp->grpc_message, m, sizeof(m));
        else
                m[0] = 0;

        if (resp->status != 200) {
                /* gRPC servers answer 200 even for errors: not one, or a proxy in between. */
                snprintf(buf, size, "HTTP status %ld%s%s", resp->status, m[0] ? ": " : "", m);
                *ret_message = buf;
                return -EPROTO;
        }
        if (!resp->grpc_status) {
                snprintf(buf, size, "no grpc-status in the response (content type %s): not a gRPC server?",
                         strna(resp->content_type));
                *ret_message = buf;
                return -EPROTO;
        }
        code = grpc_code_parse(resp->grpc_status);
        if (code < 0) {
                snprintf(buf, size, "malformed grpc-status \"%.16s\"", resp->grpc_status);
                *ret_message = buf;
                return -EPROTO;
        }
        if (code != 0) {
                const char *name = (size_t)code < ELEMENTSOF(grpc_codes) ? grpc_codes[code] : NULL;

                if (name)
                        snprintf(buf, size, "%s%s%s", name, m[0] ? ": " : "", m);
                else
                        snprintf(buf, size, "gRPC status %d%s%s", code, m[0] ? ": " : "", m);
                *ret_message = buf;
                /* grpc.health.v1 Check: "If the requested service is unknown, the
                 * call will fail with status NOT_FOUND." An answer, not a failure. */
                if (code == GRPC_NOT_FOUND) {
                        *ret_status = HEALTH_SERVICE_UNKNOWN;
                        return 0;
                }
                return -EPROTO;
        }

        r = health_decode_response(resp->body, resp->body_len, ret_status);
        if (r < 0) {
                snprintf(buf, size, "malformed HealthCheckResponse (%zu bytes)", resp->body_len);
                *ret_message = buf;
                return r;
        }
        return 0;
}

static void on_check_done(struct http_call *call, int error, const struct http_response *resp,
                          void *userdata) {
        struct health_probe *p = userdata;
        enum health_status status;
        const char *message;
        char buf[MESSAGE_MAX + 64];
        int r;

        r = probe_result(error, resp, &status, buf, sizeof(buf), &message);
        if (r < 0 && message)
                log_debug_errno(r, "gRPC health check of %s: %s", p->what, message);
        else if (r < 0)
                log_debug_errno(r, "gRPC health check of %s: %m", p->what);
        else
                log_debug("gRPC health check of %s: %s%s%s", p->what, health_status_to_string(status),
                          message ? ", " : "", strempty(message));
        p->call = NULL;
        p->done(r, status, message, p->userdata);
        probe_free(p);
}

/* http://HOST:PORT, HOST an IPv4 address, a name, or an IPv6 address (in
 * brackets, its zone's '%' escaped). -EINVAL for anything else. */
static int tcp_url(const char *host, int port, char **ret) {
        bool v6;
        char *u;
        int r;

        if (!host || !*host || strlen(host) > 253 || strpbrk(host, "/?#@[]\\ \t\r\n\"<>`{}|^"))
                return -EINVAL;
        for (const char *c = host; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                        return -EINVAL;
        v6 = strchr(host, ':') != NULL;
        if (!v6 && strchr(host, '%'))
                return -EINVAL;
        if (v6) {
                const char *zone = strchr(host, '%');

                r = asprintf(&u, "http://[%.*s%s%s]:%d" CHECK_PATH,
                             (int)(zone ? zone - host : (long)strlen(host)), host, zone ? "%25" : "",
                             zone ? zone + 1 : "", port);
        } else
                r = asprintf(&u, "http://%s:%d" CHECK_PATH, host, port);
        if (r < 0)
                return -ENOMEM;
        *ret = u;
        return 0;
}

int health_probe_start(struct transport *t, const struct health_target *target, const char *host,
                       uint64_t timeout_usec, health_done_fn done, void *userdata,
                       struct health_probe **ret) {
        _cleanup_(probe_freep) struct health_probe *p = NULL;
        _cleanup_free_ char *url = NULL;
        const char *service;
        uint8_t body[HEALTH_REQUEST_MAX];
        char grpc_timeout[32];
        uint64_t ms;
        int n, r;

        assert(t && target && done);

        service = target->service ? target->service : SERVICE_DEFAULT;
        if (timeout_usec == 0)
                timeout_usec = HEALTH_TIMEOUT_DEFAULT_USEC;

        if (target->unix_path) {
                if (target->port != 0)
                        return -EINVAL;
                url = strdup("http://localhost" CHECK_PATH);
                if (!url)
                        return -ENOMEM;
        } else {
                if (target->port < 1 || target->port > 65535)
                        return -EINVAL;
                r = tcp_url(host, target->port, &url);
                if (r == -EINVAL)
                        return log_debug_errno(
                                r, "Cannot probe the health of \"%s\": not a host or an IP address",
                                strna(host));
                if (r < 0)
                        return r;
        }

        n = health_encode_request(service, body, sizeof(body));
        if (n < 0)
                return n;

        /* The deadline for the server too (gRPC's "TimeoutValue": at most 8 digits). */
        ms = (timeout_usec + 999) / 1000;
        if (ms <= GRPC_TIMEOUT_MAX)
                snprintf(grpc_timeout, sizeof(grpc_timeout), "grpc-timeout: %" PRIu64 "m", ms);
        else
                snprintf(grpc_timeout, sizeof(grpc_timeout), "grpc-timeout: %" PRIu64 "S",
                         MIN(ms / 1000, GRPC_TIMEOUT_MAX));

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->t = t;
        p->done = done;
        p->userdata = userdata;
        if (target->unix_path)
                r = asprintf(&p->what, "unix:%s#%s", target->unix_path, service);
        else
                r = asprintf(&p->what, "%s:%d/%s", host, target->port, service);
        if (r < 0) {
                p->what = NULL;
                return -ENOMEM;
        }

        const char *headers[] = {
                "Content-Type: application/grpc",
                /* Required by gRPC: says we understand trailers, where the status comes. */
                "TE: trailers",
                grpc_timeout,
                NULL,
        };
        struct http_request req = {
                .method = "POST",
                .url = url,
                .headers = headers,
                .body = (const char *)body,
                .body_len = (size_t)n,
                .timeout_usec = timeout_usec,
                .connect_timeout_usec = timeout_usec,
                .max_body = BUF_CAP_GRPC_HEALTH,
                .h2c_prior_knowledge = true,
                .unix_socket = target->unix_path,
        };

        r = transport_submit(t, &req, NULL, on_check_done, p, &p->call);
        if (r < 0)
                return log_debug_errno(r, "Cannot start the gRPC health check of %s: %m", p->what);

        if (ret)
                *ret = p;
        TAKE_PTR(p);
        return 0;
}

void health_probe_cancel(struct health_probe *p) {
        if (p && p->call)
                transport_cancel(p->t, p->call);
}
