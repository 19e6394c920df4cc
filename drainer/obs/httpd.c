/* /metrics, /healthz and /readyz over libmicrohttpd, driven by the libuv
 * loop: MHD runs in its external epoll mode (no threads), its epoll fd is
 * watched by a uv_poll and its timeout by a uv_timer, and MHD_run() does the
 * work on the loop. Owns the MHD daemon, its listen socket and both handles;
 * borrows the metrics registry. It logs at debug level only. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>
#include <uv.h>

#include "drainer/httpd.h"
#include "drainer/log.h"
#include "drainer/macro.h"
#include "drainer/metrics.h"

#define DEFAULT_MAX_CONNECTIONS 32
#define DEFAULT_TIMEOUT_SEC     10
#define LISTEN_BACKLOG          64

struct httpd {
        uv_loop_t *loop;           /* borrowed */
        struct MHD_Daemon *daemon; /* owned; owns the listen socket */
        uv_poll_t poll;            /* MHD's epoll fd */
        uv_timer_t timer;          /* MHD's timeout */
        unsigned open_handles;
        bool closing;
        struct metrics *metrics; /* borrowed */
        httpd_ready_fn ready;
        void *userdata;
        uint16_t port;
        uint64_t requests;
        void (*close_cb)(void *userdata);
        void *close_userdata;
};

int httpd_parse_address(const char *address, char **ret_host, uint16_t *ret_port) {
        const char *colon, *host = address, *host_end;
        char *end;
        unsigned long port;

        if (!address)
                return -EINVAL;
        if (address[0] == '[') {
                host = address + 1;
                host_end = strchr(host, ']');
                if (!host_end || host_end[1] != ':' || host_end == host)
                        return -EINVAL;
                colon = host_end + 1;
        } else {
                colon = strrchr(address, ':');
                if (!colon || memchr(address, ':', (size_t)(colon - address)))
                        return -EINVAL; /* no port, or an IPv6 address without brackets */
                host_end = colon;
        }
        if (!colon[1])
                return -EINVAL;
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (errno || *end || port > 65535 || colon[1] == '-' || colon[1] == '+' || colon[1] == ' ')
                return -EINVAL;
        *ret_host = strndup(host, (size_t)(host_end - host));
        if (!*ret_host)
                return -ENOMEM;
        *ret_port = (uint16_t)port;
        return 0;
}

/* ---- requests ---- */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *ctype, char *body,
                             size_t len, bool owned) {
        struct MHD_Response *r;
        enum MHD_Result ret;

        r = owned ? MHD_create_response_from_buffer_with_free_callback(len, body, free)
                  : MHD_create_response_from_buffer(len, body, MHD_RESPMEM_PERSISTENT);
        if (!r) {
                if (owned)
                        free(body);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        ret = MHD_queue_response(conn, status, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *text) {
        return reply(conn, status, "text/plain; charset=utf-8", (char *)text, strlen(text), false);
}

static enum MHD_Result serve_metrics(struct httpd *h, struct MHD_Connection *conn) {
        struct metrics *m = h->metrics ? h->metrics : metrics_default();
        char *text = NULL;
        size_t len = 0;
        int r;

        if (!m)
                return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        r = metrics_render(m, &text, &len);
        if (r < 0) {
                log_debug("rendering /metrics failed: %s", strerror(-r));
                return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render the metrics\n");
        }
        return reply(conn, MHD_HTTP_OK, METRICS_CONTENT_TYPE, text, len, true);
}

static enum MHD_Result serve_readyz(struct httpd *h, struct MHD_Connection *conn) {
        char reason[256] = "", *body = NULL;
        int n;

        if (!h->ready || h->ready(h->userdata, reason, sizeof(reason)))
                return reply_text(conn, MHD_HTTP_OK, "ok\n");
        reason[sizeof(reason) - 1] = 0;
        n = asprintf(&body, "not ready: %s\n", reason[0] ? reason : "unknown");
        if (n < 0)
                return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "not ready\n");
        return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", body, (size_t)n, true);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls) {
        struct httpd *h = cls;
        static int first_call_marker;

        /* The first call only announces the request: answering then (before MHD knows
         * there is no body) makes it close the connection instead of keeping it alive.
         * A body (none of ours takes one) is read and dropped; the answer comes after it. */
        if (!*req_cls) {
                *req_cls = &first_call_marker;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                *upload_data_size = 0;
                return MHD_YES;
        }
        h->requests++;
        if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD))
                return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
        if (streq(url, "/metrics"))
                return serve_metrics(h, conn);
        /* The loop is alive: this handler runs on it. */
        if (streq(url, "/healthz") || streq(url, "/livez"))
                return reply_text(conn, MHD_HTTP_OK, "ok\n");
        if (streq(url, "/readyz"))
                return serve_readyz(h, conn);
        return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics, /healthz or /readyz\n");
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char line[512];

        vsnprintf(line, sizeof(line), fmt, ap);
        line[strcspn(line, "\n")] = 0;
        log_debug("libmicrohttpd: %s", line);
}

/* ---- the loop ---- */

static void on_timer(uv_timer_t *t);

/* Lets MHD do what is ready, then re-arms the timer for what it needs next
 * (MHD_get_timeout() 0: data is buffered, run again on the next turn). */
static void mhd_run(struct httpd *h) {
        MHD_UNSIGNED_LONG_LONG t = 0;

        if (h->closing)
                return;
        MHD_run(h->daemon);
        if (MHD_get_timeout(h->daemon, &t) == MHD_YES)
                uv_timer_start(&h->timer, on_timer, (uint64_t)t, 0);
        else
                uv_timer_stop(&h->timer);
}

static void on_timer(uv_timer_t *t) {
        mhd_run(t->data);
}

/* The epoll fd is readable when one of MHD's sockets is. On a poll error, run MHD
 * anyway: it finds out which socket failed. */
static void on_poll(uv_poll_t *p, int status, int events) {
        mhd_run(p->data);
}

static void on_closed(uv_handle_t *handle) {
        struct httpd *h = handle->data;

        if (--h->open_handles > 0)
                return;
        /* Both handles are gone from the loop: MHD may now close the epoll fd and the sockets. */
        if (h->daemon)
                MHD_stop_daemon(h->daemon);
        if (h->close_cb)
                h->close_cb(h->close_userdata);
        free(h);
}

void httpd_close(struct httpd *h, void (*close_cb)(void *userdata), void *userdata) {
        if (!h)
                return;
        h->closing = true;
        h->close_cb = close_cb;
        h->close_userdata = userdata;
        uv_poll_stop(&h->poll);
        uv_timer_stop(&h->timer);
        uv_close((uv_handle_t *)&h->poll, on_closed);
        uv_close((uv_handle_t *)&h->timer, on_closed);
}

/* ---- setup ---- */

static int listen_socket(const char *host, uint16_t port, int *ret_fd, uint16_t *ret_port) {
        struct addrinfo hints = {
                .ai_socktype = SOCK_STREAM,
                .ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_ADDRCONFIG,
        };
        struct addrinfo *res = NULL;
        char sport[8];
        int r, fd = -1, err = -EADDRNOTAVAIL;

        snprintf(sport, sizeof(sport), "%u", port);
        if (!*host)
                hints.ai_family = AF_INET6; /* every address: "::" with v4-mapped, tried first */
        r = getaddrinfo(*host ? host : NULL, sport, &hints, &res);
        if (r != 0 && !*host) {
                hints.ai_family = AF_UNSPEC;
                r = getaddrinfo(NULL, sport, &hints, &res);
        }
        if (r != 0)
                return r == EAI_MEMORY ? -ENOMEM : r == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                int one = 1, zero = 0;

                fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
                if (fd < 0) {
                        err = -errno;
                        continue;
                }
                (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (ai->ai_family == AF_INET6 && !*host)
                        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, LISTEN_BACKLOG) == 0)
                        break;
                err = -errno;
                close(fd);
                fd = -1;
        }
        freeaddrinfo(res);
        if (fd < 0)
                return err;
        {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);

                if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
                        err = -errno;
                        close(fd);
                        return err;
                }
                *ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                           : ((struct sockaddr_in *)&ss)->sin_port);
        }
        *ret_fd = fd;
        return 0;
}

int httpd_new(struct uv_loop_s *loop, const struct httpd_options *o, struct httpd **ret) {
        _cleanup_free_ char *host = NULL;
        const union MHD_DaemonInfo *info;
        struct httpd *h;
        uint16_t port = 0;
        int fd = -1, r;

        r = httpd_parse_address(o->address, &host, &port);
        if (r < 0)
                return r;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->loop = loop;
        h->metrics = o->metrics;
        h->ready = o->ready;
        h->userdata = o->userdata;
        r = listen_socket(host, port, &fd, &h->port);
        if (r < 0) {
                free(h);
                return r;
        }
        /* MHD_USE_EPOLL without MHD_USE_INTERNAL_POLLING_THREAD: no threads; the epoll
         * fd is ours to poll. Once started, MHD owns the listen socket (MHD_stop_daemon()
         * closes it); if it does not start, the socket is still ours. */
        h->daemon = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
                on_mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                (unsigned)(o->max_connections ? o->max_connections : DEFAULT_MAX_CONNECTIONS),
                MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned)(o->timeout_sec ? o->timeout_sec : DEFAULT_TIMEOUT_SEC), MHD_OPTION_END);
        if (!h->daemon) {
                close(fd);
                free(h);
                return -EIO;
        }
        info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info || info->epoll_fd < 0) {
                MHD_stop_daemon(h->daemon);
                free(h);
                return -EIO;
        }
        r = uv_poll_init(loop, &h->poll, info->epoll_fd);
        if (r < 0) {
                MHD_stop_daemon(h->daemon);
                free(h);
                return r;
        }
        h->poll.data = h;
        uv_timer_init(loop, &h->timer);
        h->timer.data = h;
        h->open_handles = 2;
        r = uv_poll_start(&h->poll, UV_READABLE, on_poll);
        if (r < 0) {
                httpd_close(h, NULL, NULL);
                return r;
        }
        /* Whatever MHD wants to do first (nothing, usually) happens on the next turn. */
        uv_timer_start(&h->timer, on_timer, 0, 0);
        log_debug("serving /metrics, /healthz and /readyz on %s (port %u)", o->address, h->port);
        *ret = h;
        return 0;
}

uint16_t httpd_port(const struct httpd *h) {
        return h->port;
}

uint64_t httpd_requests(const struct httpd *h) {
        return h->requests;
}
