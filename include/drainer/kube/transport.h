/* HTTP transport: the only module that talks to libcurl. Requests and watches
 * to one server share one HTTP/2 connection (libcurl multi driven by libuv).
 * struct transport is an interface so the client can be tested against a
 * scripted fake (tests/unit/fakes/fake-transport.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct uv_loop_s;
struct transport;
struct http_call;

/* TLS and identity of one API server. Blobs are PEM bytes, borrowed for the
 * duration of transport_curl_new() (the transport copies what it keeps). */
struct tls_config {
        const char *ca_pem; /* NULL: system CAs */
        size_t ca_pem_len;
        const char *client_cert_pem; /* NULL: no client certificate */
        size_t client_cert_pem_len;
        const char *client_key_pem;
        size_t client_key_pem_len;
        const char *tls_server_name; /* NULL: the URL's host */
        bool insecure_skip_verify;
};

struct http_request {
        const char *method;         /* "GET", "POST", "PATCH", ... */
        const char *url;            /* absolute */
        const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
        const char *body;           /* may be NULL */
        size_t body_len;
        uint64_t timeout_usec;         /* whole call; 0 = none (watches) */
        uint64_t connect_timeout_usec; /* 0 = transport default (10 s) */
        size_t max_body; /* cap on a buffered body, exceeding it fails with -E2BIG; 0 = BUF_CAP_API_BODY */
        bool stream;     /* deliver the body through on_data as it arrives, do not buffer */
        /* Calls without timeout_usec (watches): fail with -ETIMEDOUT when the body rate stays
         * under 1 byte/s (averaged over a few seconds) this long. 0 = transport default (5 min).
         * Ignored when timeout_usec is set. */
        uint64_t idle_timeout_usec;
        /* HTTP/2 over cleartext (http:// URLs) without an Upgrade round trip, as gRPC
         * servers expect (h2c "prior knowledge"); https:// URLs negotiate HTTP/2 through
         * ALPN anyway. Each such call opens a connection of its own and closes it
         * afterwards (libcurl 7.88 fails a second call on a reused h2c connection). Such
         * calls, and unix_socket calls, never go through a proxy from the environment:
         * an HTTP forward proxy cannot carry h2c, and they go to a pod IP or a local
         * socket. */
        bool h2c_prior_knowledge;
        /* Connect to this unix socket (a path, shorter than sun_path) instead of the
         * URL's host:port; the URL's authority is still sent (e.g. http://localhost/...).
         * Connections over a socket are reused only by calls to the same socket path,
         * never by TCP calls and vice versa (libcurl keys them so). NULL: TCP. A socket
         * that does not exist fails with -ENOENT, one we may not use with -EACCES. */
        const char *unix_socket;
        /* Do not send the call again when the server went away without answering (see
         * transport_curl_new): complete it with -ECONNRESET and resp->unanswered set, so
         * that the caller sends it again through its rate limiter. */
        bool no_resend;
        /* This call's client certificate and key (PEM, both or neither; copied), instead
         * of the tls_config's: the current ones when they rotate. A connection made with
         * another certificate is never reused for this call. */
        const char *client_cert_pem;
        size_t client_cert_pem_len;
        const char *client_key_pem;
        size_t client_key_pem_len;
};

struct http_response {
        long status;      /* HTTP status; 0 if no response arrived */
        const char *body; /* buffered body (NUL-terminated), NULL when streaming */
        size_t body_len;
        uint64_t retry_after_usec; /* parsed Retry-After (seconds form), 0 if absent */
        const char *content_type;  /* may be NULL */
        /* gRPC status: the values of the grpc-status and grpc-message fields, NULL if
         * absent. gRPC sends them as HTTP/2 trailers after the body, or in the response
         * headers when the call failed before any message ("trailers-only"); both land
         * here, the last one seen winning. grpc_message is still percent-encoded as
         * gRPC sends it, and cut at 1024 bytes. */
        const char *grpc_status;
        const char *grpc_message;
        /* With no_resend: the call failed (-ECONNRESET) because the server went away
         * without a byte of answer, in a way that makes sending it again safe (a stream
         * refused by GOAWAY: any method; a dropped stream or connection: GET and HEAD). */
        bool unanswered;
};

/* Streaming body data. Returning < 0 aborts the call, which then completes with that error. */
typedef int (*http_data_fn)(struct http_call *call, const char *data, size_t n, void *userdata);

/* Runs exactly once per submitted call, never from inside transport_submit().
 * error: 0 when a response (any status) arrived; negative errno on a transport
 * failure (-ETIMEDOUT, -ECONNREFUSED, -ECONNRESET, -EIO, -E2BIG, -ECANCELED, ...).
 * The response and its body are valid only during the callback.
 * resp is never NULL; on an error its body is NULL, status is whatever arrived.
 * The real transport's errors: -ETIMEDOUT (call, connect or idle timeout),
 * -ECONNREFUSED (cannot connect), -ENOENT/-EACCES (unix_socket missing or not
 * ours to use), -ENXIO (the host name does not resolve: DNS name not found),
 * -EHOSTUNREACH/-ENETUNREACH (no route),
 * -EKEYREJECTED (server certificate not trusted or not for that name),
 * -EPROTO (other TLS handshake failure, e.g. client certificate refused; broken
 * HTTP), -EINVAL (unusable CA/client certificate/key PEM, bad URL),
 * -ECONNRESET (connection dropped, HTTP/2 stream reset), -E2BIG (max_body),
 * -EBADMSG (bad content encoding), -ENOMEM, on_data's own error, else -EIO. */
typedef void (*http_done_fn)(struct http_call *call, int error, const struct http_response *resp,
                             void *userdata);

/* A transport error (the negative errno of an http_done_fn) as the user should read it:
 * "DNS name not found ...", "connection refused", "timed out waiting for the API
 * server", the TLS failures; strerror() for the rest. Never NULL. */
const char *transport_strerror(int error);

struct transport_ops {
        /* req and everything it points to are borrowed for the duration of the call only.
         * Fails (and never runs on_done) with -EINVAL (bad request, stream without on_data),
         * -ENOMEM, or -ESHUTDOWN once close was called. May be called from any callback.
         * *ret_call stays valid until on_done returns. */
        int (*submit)(struct transport *t, const struct http_request *req, http_data_fn on_data,
                      http_done_fn on_done, void *userdata, struct http_call **ret_call);
        /* Cancels a call in flight: its done callback runs later with -ECANCELED.
         * A no-op on a call that is already cancelled or whose done is running. */
        void (*cancel)(struct transport *t, struct http_call *call);
        /* Cancels everything, releases resources; close_cb runs once all uv handles are closed.
         * Every done callback (-ECANCELED) runs before close_cb; close_cb may be NULL and never
         * runs from inside close. Call once. */
        void (*close)(struct transport *t, void (*close_cb)(struct transport *t, void *userdata),
                      void *userdata);
        /* After close_cb has run (or from inside it). */
        void (*free)(struct transport *t);
};

struct transport {
        const struct transport_ops *ops;
        uint64_t requests_total; /* calls submitted */
};

static inline int transport_submit(struct transport *t, const struct http_request *req, http_data_fn on_data,
                                   http_done_fn on_done, void *userdata, struct http_call **ret_call) {
        return t->ops->submit(t, req, on_data, on_done, userdata, ret_call);
}

static inline void transport_cancel(struct transport *t, struct http_call *call) {
        t->ops->cancel(t, call);
}

static inline void transport_close(struct transport *t,
                                   void (*close_cb)(struct transport *t, void *userdata), void *userdata) {
        t->ops->close(t, close_cb, userdata);
}

static inline void transport_free(struct transport *t) {
        if (t)
                t->ops->free(t);
}

/* The real transport: libcurl multi on the given libuv loop, HTTP/2 over TLS
 * (HTTP/1.1 fallback), one connection reused by all calls, User-Agent
 * drainer/<version>. With a CA blob only that CA is trusted (not the system
 * bundle besides), as in client-go. tls_server_name: SNI and certificate
 * verification use that name while the TCP connection goes to the URL's
 * host:port, whose authority stays in the Host header (:authority). Proxies
 * come from the environment (https_proxy, no_proxy), as in client-go.
 * tls may be NULL (system CAs). -EINVAL for a tls_server_name that is not a
 * bare host name. */
/* It sends a call again when the server went away from it without a byte of
 * response (an HTTP/2 stream refused by GOAWAY: any method; a dropped
 * connection: GET and HEAD only), up to 6 times within its timeout_usec; done
 * still runs once, with -ECONNRESET if every attempt went that way. Not with
 * no_resend: then the caller decides (resp->unanswered). The API client always sets
 * no_resend (its resends go through its token bucket); the calls that rely on these
 * resends are those made straight on the transport: doctor's Prometheus queries and
 * the gRPC health probe. */
int transport_curl_new(struct uv_loop_s *loop, const struct tls_config *tls, struct transport **ret);

/* libcurl's process-wide state: call transport_global_init() once before any
 * transport_curl_new() (main, tests) and transport_global_cleanup() at exit. */
int transport_global_init(void);
void transport_global_cleanup(void);

/* Counters of the real transport. */
struct transport_curl_stats {
        uint64_t connections_total; /* connections opened, summed CURLINFO_NUM_CONNECTS */
        uint64_t calls_completed;   /* done ran with error 0 (any HTTP status) */
        uint64_t calls_failed;      /* done ran with an error other than -ECANCELED */
        uint64_t calls_canceled;    /* done ran with -ECANCELED */
        uint64_t calls_in_flight;   /* submitted, done not yet run */
};

/* Fills *ret for a transport made by transport_curl_new(); -EINVAL for any other. */
int transport_curl_get_stats(const struct transport *t, struct transport_curl_stats *ret);
