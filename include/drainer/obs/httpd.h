/* The daemon's HTTP endpoint: GET /metrics (Prometheus text 0.0.4 of a
 * metrics registry), /healthz (200 whenever the loop runs: the handler runs on
 * it) and /readyz (200 when the owner's callback says ready, else 503 with the
 * reason). libmicrohttpd in its epoll mode without threads: its epoll fd is
 * polled by a uv_poll on the caller's loop and its timeout by a uv_timer.
 * Built for an untrusted network: a cap on connections in all and per client
 * address, an idle timeout, a deadline for each request to arrive whole, a
 * 431 for oversized headers, a 413 for a body over 64 KiB. Or, for `drainer guard
 * --listen`, an endpoint of one route whose answers come later (a long poll). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct uv_loop_s;
struct metrics;
struct timesrc;
struct httpd;

/* What `serve --metrics-addr` listens on unless told otherwise: loopback only. */
#define HTTPD_DEFAULT_ADDRESS "127.0.0.1:9464"

/* Returns true when ready; otherwise writes why (one line) into reason. Runs on the loop. */
typedef bool (*httpd_ready_fn)(void *userdata, char *reason, size_t size);

/* A request of the owner's route, answered later (httpd_request_reply()). */
struct httpd_request;
/* Called on the loop once a GET of the route's path arrived whole. The connection
 * waits, suspended (no idle timeout), until the owner answers. */
typedef void (*httpd_handler_fn)(void *userdata, struct httpd_request *req);

struct httpd_options {
        /* "HOST:PORT": "127.0.0.1:9464", "[::1]:9464", "localhost:9464", or "[::]:9464"
         * (the same as ":9464") for every address: IPv6 and IPv4 (v4-mapped, whatever
         * net.ipv6.bindv6only says), IPv4 alone where the host has no IPv6. Port 0: any
         * free port (httpd_port() tells which). */
        const char *address;
        struct metrics *metrics;  /* borrowed; NULL: metrics_default() */
        struct timesrc *ts;       /* borrowed, required: the request deadlines */
        httpd_ready_fn ready;     /* NULL: always ready */
        void *userdata;           /* for ready */
        unsigned max_connections; /* 0 = 64; more wait in the listen backlog */
        /* 0 = 16 from one client address; a connection over it ends the address's
         * oldest one that has no request in hand, else is closed at once */
        unsigned max_per_address;
        unsigned timeout_sec; /* idle connections are closed after this; 0 = 10 */
        /* A request must arrive whole (headers and body) within this from the
         * connection's start or the end of the previous request on it, else the
         * connection is closed (a client sending a byte now and then is never
         * idle); 0 = 10. */
        unsigned request_timeout_sec;
        /* An endpoint of one route instead of /metrics, /healthz and /readyz: GET of
         * handler_path (exactly; any query string is ignored) goes to handler, any other
         * path gets 404, any other method 405 (HEAD included). Both or neither. */
        const char *handler_path;
        httpd_handler_fn handler; /* gets userdata */
};

/* Splits "HOST:PORT" ("[V6]:PORT" for IPv6; HOST may be empty). *ret_host is
 * the caller's to free(). -EINVAL on anything else. */
int httpd_parse_address(const char *address, char **ret_host, uint16_t *ret_port);

/* Binds, listens and serves on loop from now on. Errors: -EINVAL (address,
 * or no ts), -EADDRINUSE, -EADDRNOTAVAIL, -EACCES (a privileged port), -EHOSTUNREACH (the
 * host name does not resolve), -EIO (libmicrohttpd refused), -ENOMEM. On error
 * nothing is left but handles that finish closing on the loop's next turn. */
int httpd_new(struct uv_loop_s *loop, const struct httpd_options *o, struct httpd **ret);
/* The port actually bound. */
uint16_t httpd_port(const struct httpd *h);
/* Requests answered so far, by any status. */
uint64_t httpd_requests(const struct httpd *h);
/* Connections open now. */
unsigned httpd_connections(const struct httpd *h);
/* idle_cb (NULL: none) runs once, from the loop, when the last open connection has
 * closed (a stop that lets its answers go out waits for it, not by polling the count);
 * never from inside this call, nor after httpd_close(). A later call replaces it. */
void httpd_notify_idle(struct httpd *h, void (*idle_cb)(void *userdata), void *userdata);
/* Connections closed so far because their request did not arrive in time. */
uint64_t httpd_cut_off(const struct httpd *h);
/* Answers a request of the route (status, one text/plain body) and forgets it: req
 * is not valid afterwards. Call it exactly once per request, before httpd_close()
 * (a request still unanswered then is dropped with its connection); never from
 * inside the handler's call (defer it to the next turn of the loop). A connection
 * the client closed meanwhile is simply closed. Returns 0 or -ENOMEM (the request
 * is then answered 500 without a body). */
int httpd_request_reply(struct httpd_request *req, unsigned status, const char *text);
/* Requests of the route waiting for their answer. */
unsigned httpd_pending(const struct httpd *h);

/* Stops serving (open connections are dropped) and frees h once its uv handles
 * are closed; close_cb (may be NULL) runs then, never from inside this call.
 * Run the loop afterwards so that uv_loop_close() returns 0. */
void httpd_close(struct httpd *h, void (*close_cb)(void *userdata), void *userdata);
