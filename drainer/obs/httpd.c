/* /metrics, /healthz and /readyz over libmicrohttpd, driven by the libuv
 * loop: MHD runs in its external epoll mode (no threads), its epoll fd is
 * watched by a uv_poll and its timeout by a uv_timer, and MHD_run() does the
 * work on the loop. Any client may connect (the DaemonSet listens on the pod
 * IP), so connections are capped in all and per address (the newest of an
 * address ends its oldest idle one), one whose client has gone is shut at
 * once, idle ones time out, and a request must arrive whole within a deadline. Owns the MHD daemon, its
 * listen socket, both handles and one record per connection; borrows the
 * metrics registry and the time source. It logs at debug level only. With a
 * handler it serves that one route instead: each GET of its path suspends its
 * connection until the owner answers (MHD's suspend/resume). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
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

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/obs/httpd.h"
#include "drainer/obs/metrics.h"

#define DEFAULT_MAX_CONNECTIONS     64
#define DEFAULT_MAX_PER_ADDRESS     16
#define DEFAULT_TIMEOUT_SEC         10
#define DEFAULT_REQUEST_TIMEOUT_SEC 10
/* Deep enough that a storm waits in the queue (MHD closes the excess of one
 * address at once) instead of in SYN retries of seconds. It must also stay
 * well above the number of handshakes a storm leaves pending: once more than
 * half the backlog is pending, Linux cuts the SYN-ACK retries of the older ones
 * to as few as 2, and a client whose last ACK was dropped on a full queue then
 * believes itself connected to a server that has forgotten it, an idle client
 * for good. listen() caps it at net.core.somaxconn (4096 by default). */
#define LISTEN_BACKLOG              1024
/* None of our endpoints takes a body; one is read and dropped up to this, then refused. */
#define BODY_MAX                    (64 * 1024)

struct httpd;

/* One accepted connection (MHD's socket context). Its deadline runs from the
 * connection's start, or the end of its previous request, until the request
 * is answered: whoever sends a request a byte at a time is cut off then. */
struct conn {
        struct httpd *h;
        int fd; /* borrowed from MHD */
        struct dtimer deadline;
        bool waiting;     /* deadline armed: no request in hand */
        bool ended;       /* shut down by us; MHD closes it on its next run */
        uint8_t addr[16]; /* the client's address (IPv4 as v4-mapped IPv6) */
        size_t body_bytes;
        struct conn *prev, *next;
};

/* A request of the handler's route, waiting for (or holding) its answer. */
struct httpd_request {
        struct httpd *h;
        struct MHD_Connection *conn; /* borrowed from MHD */
        bool answered;
        unsigned status;
        char *body; /* owned until queued */
        struct httpd_request *prev, *next;
};

struct httpd {
        uv_loop_t *loop;           /* borrowed */
        struct MHD_Daemon *daemon; /* owned; owns the listen socket */
        uv_poll_t poll;            /* MHD's epoll fd */
        uv_timer_t timer;          /* MHD's timeout */
        unsigned open_handles;
        bool closing;
        struct metrics *metrics; /* borrowed */
        struct timesrc *ts;      /* borrowed */
        struct conn *conns;      /* owned, one per open connection */
        unsigned n_conns;
        uint64_t request_timeout_usec;
        unsigned max_per_address;
        uint64_t cut_off; /* connections closed at their request deadline */
        httpd_ready_fn ready;
        void *userdata;
        uint16_t port;
        uint64_t requests;
        const char *handler_path; /* borrowed from the options */
        httpd_handler_fn handler;
        struct httpd_request *pending; /* suspended, in MHD's hands */
        unsigned n_pending;
        void (*close_cb)(void *userdata);
        void *close_userdata;
        void (*idle_cb)(void *userdata); /* once, when the last connection closes */
        void *idle_userdata;
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

/* *req_cls of a request announced but not yet whole (not one of the route's). */
static int first_call_marker;

static void kick(struct httpd *h);
static void conn_end(struct conn *c);

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

static void pending_unlink(struct httpd_request *req) {
        struct httpd *h = req->h;

        if (req->prev)
                req->prev->next = req->next;
        else
                h->pending = req->next;
        if (req->next)
                req->next->prev = req->prev;
        req->prev = req->next = NULL;
        h->n_pending--;
}

/* The handler's route: GET of its path only. The connection is suspended until
 * httpd_request_reply(); MHD then calls on_request again, which queues the answer. */
static enum MHD_Result serve_route(struct httpd *h, struct MHD_Connection *conn, const char *url,
                                   const char *method, void **req_cls) {
        struct httpd_request *req;

        if (!streq(method, MHD_HTTP_METHOD_GET))
                return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
        if (!streq(url, h->handler_path))
                return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
        req = calloc(1, sizeof(*req));
        if (!req)
                return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        req->h = h;
        req->conn = conn;
        req->next = h->pending;
        if (h->pending)
                h->pending->prev = req;
        h->pending = req;
        h->n_pending++;
        *req_cls = req;
        MHD_suspend_connection(conn);
        h->handler(h->userdata, req);
        return MHD_YES;
}

static enum MHD_Result serve_answered(struct MHD_Connection *conn, struct httpd_request *req) {
        char *body = TAKE_PTR(req->body);

        if (!req->answered)
                return MHD_NO; /* resumed by httpd_close(): drop it */
        if (!body)
                return reply_text(conn, req->status, "");
        return reply(conn, req->status, "text/plain; charset=utf-8", body, strlen(body), true);
}

int httpd_request_reply(struct httpd_request *req, unsigned status, const char *text) {
        struct httpd *h = req->h;
        int r = 0;

        if (req->answered)
                return -EALREADY;
        req->answered = true;
        req->status = status;
        if (text) {
                req->body = strdup(text);
                if (!req->body) {
                        req->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
                        r = -ENOMEM;
                }
        }
        pending_unlink(req);
        MHD_resume_connection(req->conn);
        kick(h);
        return r;
}

unsigned httpd_pending(const struct httpd *h) {
        return h->n_pending;
}

static struct conn *conn_of(struct MHD_Connection *conn) {
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return ci ? ci->socket_context : NULL;
}

static void conn_wait(struct conn *c) {
        c->waiting = true;
        dtimer_start(&c->deadline, c->h->request_timeout_usec);
}

static void conn_stop_waiting(struct conn *c) {
        c->waiting = false;
        dtimer_stop(&c->deadline);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls) {
        struct httpd *h = cls;
        struct conn *c = conn_of(conn);

        /* The first call only announces the request: answering then (before MHD knows
         * there is no body) makes it close the connection instead of keeping it alive.
         * A body (none of ours takes one) is read and dropped, up to BODY_MAX; the answer
         * comes after it. */
        if (!*req_cls) {
                *req_cls = &first_call_marker;
                if (c)
                        c->body_bytes = 0;
                return MHD_YES;
        }
        if (*req_cls != &first_call_marker)
                return serve_answered(conn, *req_cls); /* resumed: the owner answered */
        if (*upload_data_size > 0) {
                if (c && (c->body_bytes += *upload_data_size) > BODY_MAX) {
                        /* Answered before the body ends: MHD closes the connection after it. */
                        conn_stop_waiting(c);
                        h->requests++;
                        return reply_text(conn, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large\n");
                }
                *upload_data_size = 0;
                return MHD_YES;
        }
        /* The request arrived whole: the deadline is met. MHD's idle timeout still
         * closes a connection whose client stops reading the answer. */
        if (c)
                conn_stop_waiting(c);
        h->requests++;
        if (h->handler)
                return serve_route(h, conn, url, method, req_cls);
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

/* ---- connections ---- */

/* The request did not arrive whole in time: end the connection. MHD owns the
 * socket, so it is shut down, not closed; MHD reads the end of it and closes. */
static void on_conn_deadline(struct dtimer *t) {
        struct conn *c = container_of(t, struct conn, deadline);

        c->h->cut_off++;
        log_debug("httpd: a request took longer than %" PRIu64 " s, closing its connection",
                  c->h->request_timeout_usec / USEC_PER_SEC);
        conn_end(c);
}

/* Shuts a connection down (MHD owns the socket: it sees the end on its next run
 * and closes it). */
static void conn_end(struct conn *c) {
        c->ended = true;
        c->waiting = false;
        dtimer_stop(&c->deadline);
        (void)shutdown(c->fd, SHUT_RDWR);
        kick(c->h);
}

static void addr_of(const struct sockaddr *sa, uint8_t ret[16]) {
        memset(ret, 0, 16);
        if (sa && sa->sa_family == AF_INET6)
                memcpy(ret, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        else if (sa && sa->sa_family == AF_INET) {
                ret[10] = ret[11] = 0xff;
                memcpy(ret + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        }
}

/* One address may hold max_per_address connections. The one over it ends the
 * address's oldest connection that has no request in hand, else itself: whoever
 * holds an address's share with idle or half-sent connections cannot keep out
 * another client of that address (a hostNetwork pod shares the node's address
 * with the kubelet's probes), while requests being answered are never cut. */
static void enforce_share(struct httpd *h, struct conn *c) {
        struct conn *victim = NULL;
        unsigned n = 0;

        for (struct conn *o = h->conns; o; o = o->next) {
                if (o->ended || memcmp(o->addr, c->addr, 16) != 0)
                        continue;
                n++;
                if (o != c && o->waiting)
                        victim = o; /* the list runs newest first: the last match is the oldest */
        }
        if (n <= h->max_per_address)
                return;
        log_debug("httpd: an address is over its share of %u connections, ending %s", h->max_per_address,
                  victim ? "its oldest idle one" : "the new one");
        conn_end(victim ? victim : c);
}

static void conn_free(struct conn *c) {
        struct httpd *h = c->h;

        if (c->prev)
                c->prev->next = c->next;
        else
                h->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        h->n_conns--;
        dtimer_done(&c->deadline);
        free(c);
        if (h->n_conns == 0 && h->idle_cb && !h->closing) {
                void (*cb)(void *userdata) = TAKE_PTR(h->idle_cb);

                cb(h->idle_userdata);
        }
}

static void on_mhd_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe) {
        struct httpd *h = cls;
        const union MHD_ConnectionInfo *ci;
        struct conn *c;

        if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (*socket_context)
                        conn_free(*socket_context);
                *socket_context = NULL;
                return;
        }
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        c = calloc(1, sizeof(*c));
        if (!c || !ci || dtimer_init(&c->deadline, h->ts, on_conn_deadline) < 0) {
                /* Out of memory: no deadline for this one; MHD's idle timeout still applies. */
                free(c);
                *socket_context = NULL;
                return;
        }
        c->h = h;
        c->fd = ci->connect_fd;
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        addr_of(ci ? ci->client_addr : NULL, c->addr);
        c->next = h->conns;
        if (h->conns)
                h->conns->prev = c;
        h->conns = c;
        h->n_conns++;
        *socket_context = c;
        conn_wait(c);
        enforce_share(h, c);
}

/* A request ended (answered, or the connection dropped): the next one on this
 * kept-alive connection has the same deadline from now. */
static void on_mhd_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                             enum MHD_RequestTerminationCode toe) {
        struct httpd *h = cls;
        struct conn *c = conn_of(conn);

        if (c && !h->closing && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
                conn_wait(c);
        if (*req_cls && h->handler && *req_cls != &first_call_marker) {
                struct httpd_request *req = *req_cls;

                if (!req->answered)
                        pending_unlink(req);
                free(req->body);
                free(req);
        }
        *req_cls = NULL;
}

/* ---- the loop ---- */

/* Ends the connections whose client has gone while no request was in hand.
 *
 * MHD registers its sockets edge-triggered and, when a read returns less than it
 * asked for, takes the socket for drained. A half request and the client's close
 * that reach us together are one edge: MHD reads the bytes and never the end, so
 * the connection would hold its slot (and its address's share) until the idle
 * timeout, and a client that sends half a request and closes, over and over, keeps
 * every other client of its address out. So after each run, every connection
 * still waiting for its request is peeked: nothing left but the end of the stream
 * means no request can ever arrive whole on it, and it is shut down, which MHD
 * sees as an event of its own and closes. A connection with a request in hand (a
 * suspended long poll whose client half-closed, say) is left alone. At most
 * max_connections peeks per run. */
static void end_gone_connections(struct httpd *h) {
        for (struct conn *c = h->conns; c; c = c->next) {
                char byte;

                if (!c->waiting || c->ended)
                        continue;
                if (recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0)
                        continue; /* data MHD has yet to read, nothing yet, or an error MHD will see */
                conn_end(c);
        }
}

static void on_timer(uv_timer_t *t);

static unsigned current_connections(struct httpd *h) {
        const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

        return i ? i->num_connections : 0;
}

/* Lets MHD do what is ready, then re-arms the timer for what it needs next
 * (MHD_get_timeout() 0: data is buffered, run again on the next turn).
 *
 * At the connection limit (or when accept() ran out of file descriptors) MHD
 * takes its listen socket out of its epoll set, and puts it back only at the
 * start of a later MHD_run() once a connection has closed. Connections close
 * at the end of a run, and nothing may wake us afterwards (the listen socket is
 * not watched, no connection is left to time out): so whenever one closed, MHD
 * runs again on the next turn, or the endpoint would never accept again. */
static void mhd_run(struct httpd *h) {
        MHD_UNSIGNED_LONG_LONG t = 0;
        unsigned before;

        if (h->closing)
                return;
        before = current_connections(h);
        MHD_run(h->daemon);
        end_gone_connections(h);
        if (current_connections(h) < before)
                uv_timer_start(&h->timer, on_timer, 0, 0);
        else if (MHD_get_timeout(h->daemon, &t) == MHD_YES)
                uv_timer_start(&h->timer, on_timer, (uint64_t)t, 0);
        else
                uv_timer_stop(&h->timer);
}

static void kick(struct httpd *h) {
        if (!h->closing)
                uv_timer_start(&h->timer, on_timer, 0, 0);
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
        /* MHD_stop_daemon() later reports each connection closed, which frees its record. */
        for (struct conn *c = h->conns; c; c = c->next)
                conn_stop_waiting(c);
        /* MHD may not stop with connections suspended: resumed unanswered, they are
         * dropped (and their records freed) by MHD_stop_daemon(). */
        for (struct httpd_request *req = h->pending; req; req = req->next)
                MHD_resume_connection(req->conn);
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
        /* "" and "::" ("[::]:PORT") are every address: "::" with IPv4 v4-mapped
         * (IPV6_V6ONLY off, whatever net.ipv6.bindv6only says), tried first; IPv4's
         * 0.0.0.0 where the host has no IPv6. So one address works on IPv4-only,
         * IPv6-only and dual-stack pods. */
        bool any = !*host || streq(host, "::");

        snprintf(sport, sizeof(sport), "%u", port);
        if (any)
                hints.ai_family = AF_INET6;
        r = getaddrinfo(any ? NULL : host, sport, &hints, &res);
        if (r != 0 && any) {
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
                if (ai->ai_family == AF_INET6 && any)
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

        if (!o->ts || !o->handler != !o->handler_path || (o->handler_path && o->handler_path[0] != '/'))
                return -EINVAL;
        r = httpd_parse_address(o->address, &host, &port);
        if (r < 0)
                return r;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->loop = loop;
        h->ts = o->ts;
        h->request_timeout_usec =
                (o->request_timeout_sec ? o->request_timeout_sec : DEFAULT_REQUEST_TIMEOUT_SEC) *
                USEC_PER_SEC;
        h->max_per_address = o->max_per_address ? o->max_per_address : DEFAULT_MAX_PER_ADDRESS;
        h->metrics = o->metrics;
        h->ready = o->ready;
        h->userdata = o->userdata;
        h->handler = o->handler;
        h->handler_path = o->handler_path;
        r = listen_socket(host, port, &fd, &h->port);
        if (r < 0) {
                free(h);
                return r;
        }
        /* MHD_USE_EPOLL without MHD_USE_INTERNAL_POLLING_THREAD: no threads; the epoll
         * fd is ours to poll. Once started, MHD owns the listen socket (MHD_stop_daemon()
         * closes it); if it does not start, the socket is still ours. The per-address
         * share is ours (enforce_share()), so one client (a pod) cannot take every slot
         * from the kubelet's probes and Prometheus; MHD's own per-address limit, twice
         * that, only bounds the connections ended but not yet closed. A request whose
         * headers outgrow MHD's per-connection memory (32 KiB) gets a 431. */
        h->daemon = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (o->handler ? MHD_ALLOW_SUSPEND_RESUME : 0), 0, NULL,
                NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
                fd, MHD_OPTION_CONNECTION_LIMIT,
                (unsigned)(o->max_connections ? o->max_connections : DEFAULT_MAX_CONNECTIONS),
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, 2 * h->max_per_address, MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned)(o->timeout_sec ? o->timeout_sec : DEFAULT_TIMEOUT_SEC),
                MHD_OPTION_NOTIFY_CONNECTION, on_mhd_connection, h, MHD_OPTION_NOTIFY_COMPLETED,
                on_mhd_completed, h, MHD_OPTION_END);
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
        if (h->handler)
                log_debug("serving %s on %s (port %u)", h->handler_path, o->address, h->port);
        else
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

unsigned httpd_connections(const struct httpd *h) {
        return h->n_conns;
}

void httpd_notify_idle(struct httpd *h, void (*idle_cb)(void *userdata), void *userdata) {
        h->idle_cb = idle_cb;
        h->idle_userdata = userdata;
}

uint64_t httpd_cut_off(const struct httpd *h) {
        return h->cut_off;
}
