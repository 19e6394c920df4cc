/* HTTP transport: libcurl's multi interface driven by the libuv loop (the
 * pattern of curl's docs/examples/multi-uv.c), HTTP/2 over TLS with every call
 * to the server multiplexed on one connection. Owns the multi handle, its
 * timer, one uv_poll per socket curl watches, and every call in flight. The
 * only file that includes curl/curl.h; never runs a done callback from inside
 * submit, cancel or close: completions come from the loop. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include <curl/curl.h>
#include <uv.h>

#include "drainer/base/buf.h"
#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/kube/transport.h"

#define CONNECT_TIMEOUT_MS_DEFAULT 10000L
#define IDLE_TIMEOUT_SEC_DEFAULT   300L
/* HTTP/2 multiplexes everything on one connection; curl opens a second one only
 * when the first runs out of streams. The limit matters on an HTTP/1.1
 * fallback, where each watch holds a connection of its own. */
#define MAX_HOST_CONNECTIONS       8L
#define KEEPALIVE_IDLE_SEC         30L
#define KEEPALIVE_INTERVAL_SEC     15L
#define CONTENT_TYPE_MAX           256
#define PATH_LOG_MAX               256
#define RETRY_AFTER_MAX_SEC        UINT64_C(86400)
#define GRPC_STATUS_MAX            16
#define GRPC_MESSAGE_MAX           1024
/* Our own resends of a request the server never answered (a stream refused by
 * GOAWAY), on top of the up to 5 libcurl makes itself. Go's HTTP/2 transport
 * (client-go) resends such a request up to 6 times. */
#define RESENDS_MAX                6U

/* Intrusive circular list with a sentinel, as in the Linux kernel. */
struct link {
        struct link *next, *prev;
};

static void link_init(struct link *l) {
        l->next = l->prev = l;
}

static bool link_empty(const struct link *head) {
        return head->next == head;
}

static void link_add_tail(struct link *head, struct link *l) {
        l->prev = head->prev;
        l->next = head;
        head->prev->next = l;
        head->prev = l;
}

static void link_del(struct link *l) {
        l->prev->next = l->next;
        l->next->prev = l->prev;
        link_init(l);
}

struct curl_transport;

/* One socket curl asked us to watch. */
struct sock {
        uv_poll_t poll; /* initialized iff poll_ok */
        curl_socket_t fd;
        struct curl_transport *t; /* borrowed */
        struct link link;         /* in t->socks until its poll handle is closed */
        bool poll_ok;             /* uv_poll_init_socket() succeeded */
        bool failed;              /* uv_poll failed: curl must hear CURL_CSELECT_ERR */
};

enum body_mode {
        BODY_UNDECIDED,
        BODY_STREAM,
        BODY_BUFFER,
};

struct http_call {
        struct curl_transport *t;      /* borrowed */
        CURL *easy;                    /* owned */
        struct curl_slist *headers;    /* owned; may hold a token, wiped before freeing */
        struct curl_slist *connect_to; /* owned */
        /* This call's client certificate and key (the current ones, which rotate), owned;
         * data NULL: the transport's. The key is wiped before it is freed. */
        struct curl_blob cert, key;
        struct link link_calls;   /* in t->calls until done runs */
        struct link link_pending; /* in t->pending while an add or a cancel is queued */

        http_data_fn on_data;
        http_done_fn on_done;
        void *userdata;

        bool stream;
        bool added;      /* in the multi handle */
        bool canceled;   /* done will run with -ECANCELED from the defer handler */
        bool completing; /* done is running: cancel is a no-op */
        enum body_mode mode;
        int error; /* set by our callbacks: on_data's error, -E2BIG, -ENOMEM */

        struct buf body; /* buffered mode; capped at max_body */

        uint64_t retry_after_usec;
        char *content_type; /* owned */
        char *grpc_status;  /* owned; grpc-status header or trailer */
        char *grpc_message; /* owned; grpc-message header or trailer */
        bool unix_socket;   /* connects to a unix socket, not TCP */
        bool no_resend;     /* the caller resends unanswered calls itself */
        bool unanswered;    /* failed without an answer, and may be sent again */

        /* Attempts before this one, which the server never answered (call_resend). */
        unsigned resends;
        uint64_t timeout_usec;     /* the whole call's, over all attempts; 0 = none */
        uint64_t earlier_usec;     /* time the earlier attempts took */
        uint64_t earlier_connects; /* connections the earlier attempts opened */

        char method[16];
        char *path; /* owned, for the debug log only */
        char errbuf[CURL_ERROR_SIZE];
};

struct curl_transport {
        struct transport base;
        uv_loop_t *loop;     /* borrowed */
        CURLM *multi;        /* owned; NULL once torn down */
        uv_timer_t timer;    /* curl's timeout */
        uv_idle_t defer;     /* queued adds and cancellations, teardown */
        struct link calls;   /* every call whose done has not run */
        struct link pending; /* calls to add to the multi or to cancel, in order */
        struct link socks;   /* sockets whose poll handle is not closed yet */
        bool socks_failed;   /* some sock has failed set */
        int broken;          /* < 0: the multi handle failed; calls fail with this */

        struct curl_blob ca, cert, key; /* owned copies; data NULL when not set */
        char *server_name;              /* owned; NULL: the URL's host */
        bool insecure;

        bool closing, torn_down;
        unsigned handles_open; /* uv handles whose close callback has not run */
        void (*close_cb)(struct transport *t, void *userdata);
        void *close_userdata;

        struct transport_curl_stats stats;
};

static const struct transport_ops curl_ops;

int transport_global_init(void) {
        const curl_version_info_data *v;

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -EIO;
        v = curl_version_info(CURLVERSION_NOW);
        if (!(v->features & CURL_VERSION_HTTP2))
                log_debug("libcurl %s has no HTTP/2: every call will use HTTP/1.1", v->version);
        return 0;
}

void transport_global_cleanup(void) {
        curl_global_cleanup();
}

/* Maps a CURLcode of a finished call to a negative errno, once, here.
 * call_error: what our own callbacks recorded (on_data's error, -E2BIG);
 * os_errno: CURLINFO_OS_ERRNO. */
static int curlcode_to_errno(CURLcode cc, int call_error, long os_errno) {
        switch (cc) {
        case CURLE_OK:
                return 0;
        case CURLE_WRITE_ERROR:
        case CURLE_ABORTED_BY_CALLBACK:
                /* We made it fail: on_data's error, -E2BIG or -ENOMEM. */
                return call_error < 0 ? call_error : -EIO;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_COULDNT_CONNECT:
                if (os_errno == EHOSTUNREACH || os_errno == ENETUNREACH)
                        return -(int)os_errno;
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                /* Its own code: a name that does not resolve is not a route that is missing. */
                return -ENXIO;
        case CURLE_PEER_FAILED_VERIFICATION:
                /* The server's certificate is not signed by our CA or does not name it. */
                return -EKEYREJECTED;
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CACERT_BADFILE:
                /* Our own TLS material (CA, client certificate or key) is unusable. */
                return -EINVAL;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_ENGINE_SETFAILED:
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_SHUTDOWN_FAILED:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
        case CURLE_SSL_CLIENTCERT:
        case CURLE_WEIRD_SERVER_REPLY:
        case CURLE_HTTP2:
        case CURLE_UNSUPPORTED_PROTOCOL:
                /* TLS handshake failed (e.g. the server refused our client
                 * certificate) or the server does not speak HTTP as we expect. */
                return -EPROTO;
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2_STREAM:
                /* Connection dropped, or the stream was reset (e.g. GOAWAY). */
                return -ECONNRESET;
        case CURLE_BAD_CONTENT_ENCODING:
                return -EBADMSG;
        case CURLE_FILESIZE_EXCEEDED:
                return -E2BIG;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_URL_MALFORMAT:
        case CURLE_BAD_FUNCTION_ARGUMENT:
        case CURLE_UNKNOWN_OPTION:
                return -EINVAL;
        default:
                return -EIO;
        }
}

const char *transport_strerror(int error) {
        switch (error) {
        case -ENXIO:
                return "DNS name not found (the host name does not resolve)";
        case -ECONNREFUSED:
                return "connection refused";
        case -EHOSTUNREACH:
        case -ENETUNREACH:
                return "no route to host";
        case -ETIMEDOUT:
                return "timed out waiting for the API server";
        case -EKEYREJECTED:
                return "TLS: the server's certificate is not trusted (not signed by the kubeconfig's "
                       "certificate-authority, or not issued for this server name)";
        case -EPROTO:
                return "TLS handshake or HTTP protocol error";
        case -ECONNRESET:
                return "connection reset";
        default:
                return strerror(-error);
        }
}

static int mcode_to_errno(CURLMcode mc) {
        switch (mc) {
        case CURLM_OK:
                return 0;
        case CURLM_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLM_BAD_HANDLE:
        case CURLM_BAD_EASY_HANDLE:
        case CURLM_ADDED_ALREADY:
        case CURLM_BAD_SOCKET:
        case CURLM_UNKNOWN_OPTION:
        case CURLM_BAD_FUNCTION_ARGUMENT:
                return -EINVAL;
        default:
                return -EIO;
        }
}

static void check_multi_info(struct curl_transport *t);
static void on_defer(uv_idle_t *h);

/* Runs on_defer from the loop soon (an active idle handle makes the loop poll without blocking). */
static void defer_kick(struct curl_transport *t) {
        if (!t->torn_down)
                (void)uv_idle_start(&t->defer, on_defer);
}

/* ---- calls ---- */

static int blob_copy(struct curl_blob *b, const char *data, size_t len) {
        if (!data)
                return 0;
        b->data = malloc(len > 0 ? len : 1);
        if (!b->data)
                return -ENOMEM;
        memcpy(b->data, data, len);
        b->len = len;
        /* Ours until the transport (or the call) is freed, after its easy handles. */
        b->flags = CURL_BLOB_NOCOPY;
        return 0;
}

static void slist_wipe_free(struct curl_slist *l) {
        for (struct curl_slist *i = l; i; i = i->next)
                explicit_bzero(i->data, strlen(i->data));
        curl_slist_free_all(l);
}

static void call_free(struct http_call *c) {
        if (!c)
                return;
        if (c->easy)
                curl_easy_cleanup(c->easy);
        slist_wipe_free(c->headers);
        free(c->cert.data);
        if (c->key.data)
                explicit_bzero(c->key.data, c->key.len);
        free(c->key.data);
        curl_slist_free_all(c->connect_to);
        buf_done(&c->body);
        free(c->content_type);
        free(c->grpc_status);
        free(c->grpc_message);
        free(c->path);
        free(c);
}

static void pending_push(struct curl_transport *t, struct http_call *c) {
        if (link_empty(&c->link_pending))
                link_add_tail(&t->pending, &c->link_pending);
        defer_kick(t);
}

/* The TCP connection a call went over: its local and remote ports (0: none yet). */
static void call_ports(struct http_call *c, long *ret_local, long *ret_remote) {
        *ret_local = *ret_remote = 0;
        (void)curl_easy_getinfo(c->easy, CURLINFO_LOCAL_PORT, ret_local);
        (void)curl_easy_getinfo(c->easy, CURLINFO_PRIMARY_PORT, ret_remote);
}

/* A call cut short (cancelled, timed out) has its HTTP/2 stream reset with RST_STREAM, which libcurl 7.88
 * queues and sends only with the next frame of that connection: until the client
 * sends anything else there, the API server keeps serving the watch (an idle daemon
 * may send nothing for minutes). Receiving on another stream of the same connection,
 * paused and resumed at once, sends the queued frames now. (A cancelled stream that
 * was its connection's last closes the connection instead: CURLOPT_FORBID_REUSE.) */
static void flush_stream_reset(struct curl_transport *t, struct http_call *cut) {
        long local, remote;

        call_ports(cut, &local, &remote);
        if (local <= 0 || cut->unix_socket)
                return;
        for (struct link *l = t->calls.next; l != &t->calls; l = l->next) {
                struct http_call *o = container_of(l, struct http_call, link_calls);
                long ol, orr;

                if (o == cut || !o->added || o->canceled || o->completing)
                        continue;
                call_ports(o, &ol, &orr);
                if (ol != local || orr != remote)
                        continue;
                (void)curl_easy_pause(o->easy, CURLPAUSE_RECV);
                (void)curl_easy_pause(o->easy, CURLPAUSE_CONT);
                return;
        }
}

/* Runs the done callback once and frees the call. Never called from inside a
 * libcurl callback (it removes the easy handle) nor from submit/cancel/close. */
static void call_complete(struct http_call *c, int error) {
        struct curl_transport *t = c->t;
        curl_off_t total_us = 0;
        long status = 0, connects = 0, version = 0;

        link_del(&c->link_calls);
        link_del(&c->link_pending);

        (void)curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        (void)curl_easy_getinfo(c->easy, CURLINFO_TOTAL_TIME_T, &total_us);
        (void)curl_easy_getinfo(c->easy, CURLINFO_NUM_CONNECTS, &connects);
        (void)curl_easy_getinfo(c->easy, CURLINFO_HTTP_VERSION, &version);
        if (c->added) {
                CURLMcode mc;

                /* Cut short, and the last stream of its connection: the connection goes too. */
                if (error < 0)
                        (void)curl_easy_setopt(c->easy, CURLOPT_FORBID_REUSE, 1L);
                mc = curl_multi_remove_handle(t->multi, c->easy);
                if (mc != CURLM_OK)
                        log_debug("curl_multi_remove_handle() failed: %s, ignoring",
                                  curl_multi_strerror(mc));
                c->added = false;
                if (error < 0)
                        flush_stream_reset(t, c);
        }

        total_us = MAX(total_us, (curl_off_t)0) + (curl_off_t)MIN(c->earlier_usec, (uint64_t)INT64_MAX / 2);
        t->stats.connections_total += (connects > 0 ? (uint64_t)connects : 0) + c->earlier_connects;
        t->stats.calls_in_flight--;
        if (error == 0)
                t->stats.calls_completed++;
        else if (error == -ECANCELED)
                t->stats.calls_canceled++;
        else
                t->stats.calls_failed++;

        /* Never headers: they carry tokens. */
        if (error == 0)
                log_debug("HTTP %s %s: %ld in %.1f ms (%s)", c->method, c->path, status,
                          (double)total_us / 1000.0,
                          version == CURL_HTTP_VERSION_2_0   ? "HTTP/2"
                          : version == CURL_HTTP_VERSION_1_1 ? "HTTP/1.1"
                                                             : "HTTP/1.0");
        else
                log_debug_errno(error, "HTTP %s %s: failed after %.1f ms: %m%s%s%s", c->method, c->path,
                                (double)total_us / 1000.0, c->errbuf[0] ? " (" : "", c->errbuf,
                                c->errbuf[0] ? ")" : "");

        struct http_response resp = {
                .status = status,
                .retry_after_usec = c->retry_after_usec,
                .content_type = c->content_type,
                .grpc_status = c->grpc_status,
                .grpc_message = c->grpc_message,
                .unanswered = error == -ECONNRESET && c->unanswered,
        };
        if (error == 0 && c->mode != BODY_STREAM) {
                resp.body = c->body.data ? c->body.data : "";
                resp.body_len = c->body.len;
        }

        c->completing = true;
        c->on_done(c, error, &resp, c->userdata);
        call_free(c);
}

/* Cancels without running anything now: the defer handler delivers -ECANCELED. */
static void call_cancel(struct http_call *c) {
        if (c->canceled || c->completing)
                return;
        c->canceled = true;
        pending_push(c->t, c);
}

/* Replaces *dst with the value from v to end (its leading blanks skipped), cut at max bytes. */
static int header_value_dup(const char *v, const char *end, size_t max, char **dst) {
        char *p;

        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        p = strndup(v, MIN((size_t)(end - v), max));
        if (!p)
                return -ENOMEM;
        free(*dst);
        *dst = p;
        return 0;
}

static size_t on_curl_header(char *buf, size_t size, size_t n, void *userdata) {
        struct http_call *c = userdata;
        size_t len = size * n;
        const char *v, *end = buf + len;
        int r = 0;

        if (c->canceled)
                return 0;

        /* A new status line (after 1xx or an HTTP/2 pseudo-header line) starts a new response. */
        if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
                c->retry_after_usec = 0;
                c->content_type = mfree(c->content_type);
                c->grpc_status = mfree(c->grpc_status);
                c->grpc_message = mfree(c->grpc_message);
                return len;
        }

        while (end > buf && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
                end--;

        if (len > 12 && strncasecmp(buf, "Retry-After:", 12) == 0) {
                uint64_t sec = 0;

                for (v = buf + 12; v < end && (*v == ' ' || *v == '\t'); v++)
                        ;
                /* Only the delta-seconds form; an HTTP-date leaves 0. */
                if (v == end)
                        return len;
                for (const char *p = v; p < end; p++) {
                        if (!isdigit((unsigned char)*p))
                                return len;
                        sec = MIN(sec * 10 + (uint64_t)(*p - '0'), RETRY_AFTER_MAX_SEC);
                }
                c->retry_after_usec = sec * UINT64_C(1000000);
        } else if (len > 13 && strncasecmp(buf, "Content-Type:", 13) == 0) {
                for (v = buf + 13; v < end && (*v == ' ' || *v == '\t'); v++)
                        ;
                free(c->content_type);
                c->content_type = strndup(v, MIN((size_t)(end - v), (size_t)CONTENT_TYPE_MAX));
                if (!c->content_type) {
                        c->error = -ENOMEM;
                        return 0;
                }
        } else if (len > 12 && strncasecmp(buf, "grpc-status:", 12) == 0) {
                /* gRPC's trailers come through here too, after the body (libcurl
                 * delivers HTTP/2 trailers and HTTP/1.1 chunked trailers to the
                 * header callback). */
                r = header_value_dup(buf + 12, end, GRPC_STATUS_MAX, &c->grpc_status);
        } else if (len > 13 && strncasecmp(buf, "grpc-message:", 13) == 0)
                r = header_value_dup(buf + 13, end, GRPC_MESSAGE_MAX, &c->grpc_message);
        if (r < 0) {
                c->error = r;
                return 0;
        }
        return len;
}

static size_t on_curl_write(char *data, size_t size, size_t n, void *userdata) {
        struct http_call *c = userdata;
        size_t len = size * n;
        int r;

        if (c->canceled)
                return 0;

        if (c->mode == BODY_UNDECIDED) {
                curl_off_t cl = -1;

                if (c->stream) {
                        c->mode = BODY_STREAM;
                } else {
                        c->mode = BODY_BUFFER;
                        (void)curl_easy_getinfo(c->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
                        /* Content-Length counts encoded bytes: only a hint for the first allocation. */
                        if (cl > 0 && (uint64_t)cl <= c->body.cap && buf_reserve(&c->body, (size_t)cl) < 0) {
                                c->error = -ENOMEM;
                                return 0;
                        }
                }
        }

        if (c->mode == BODY_STREAM) {
                r = c->on_data(c, data, len, c->userdata);

                if (r < 0) {
                        c->error = r;
                        return 0;
                }
                /* on_data may have cancelled this call or closed the transport. */
                return c->canceled ? 0 : len;
        }

        r = buf_append(&c->body, data, len);
        if (r < 0) {
                c->error = r; /* -E2BIG over max_body, -ENOMEM */
                return 0;
        }
        return len;
}

static bool header_ok(const char *h) {
        /* No header injection through CR/LF; the name needs its colon (or ';' for an empty value). */
        return !strpbrk(h, "\r\n") && strpbrk(h, ":;");
}

static char *url_path(const char *url) {
        const char *p = strstr(url, "://");

        p = p ? strchr(p + 3, '/') : NULL;
        if (!p)
                return strdup("/");
        return strndup(p, MIN(strcspn(p, "?#"), (size_t)PATH_LOG_MAX));
}

/* tls_server_name: libcurl 7.88 has no option to send another SNI and verify
 * the certificate against another name than the URL's host. So, like
 * client-go's TLSClientConfig.ServerName, we get the same effect by putting
 * tls_server_name in the URL (SNI and verification use it), connecting to
 * the real host:port with CURLOPT_CONNECT_TO, and keeping the real authority
 * in the Host header (:authority in HTTP/2). */
static void curl_freep(char **p) {
        curl_free(*p);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(CURLU *, curl_url_cleanup);

/* Sets *ret_url and *ret_host_header to NULL when the URL names tls_server_name already. */
static int apply_server_name(struct curl_transport *t, struct http_call *c, const char *url, char **ret_url,
                             char **ret_host_header) {
        _cleanup_(curl_url_cleanupp) CURLU *u = curl_url();
        _cleanup_(curl_freep) char *host = NULL, *port = NULL, *explicit_port = NULL, *new_url = NULL;
        _cleanup_(freep) char *connect_to = NULL, *host_header = NULL, *url_copy = NULL;
        struct curl_slist *l;

        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
                return -EINVAL;
        if (strcasecmp(host, t->server_name) == 0) {
                *ret_url = *ret_host_header = NULL;
                return 0;
        }
        (void)curl_url_get(u, CURLUPART_PORT, &explicit_port, 0);
        if (curl_url_set(u, CURLUPART_HOST, t->server_name, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_URL, &new_url, 0) != CURLUE_OK)
                return -EINVAL;
        /* host keeps its brackets if it is an IPv6 literal, as both formats want. */
        if (asprintf(&connect_to, "%s:%s:%s:%s", t->server_name, port, host, port) < 0) {
                connect_to = NULL; /* undefined after a failure */
                return -ENOMEM;
        }
        if (asprintf(&host_header, "Host: %s%s%s", host, explicit_port ? ":" : "", strempty(explicit_port)) <
            0) {
                host_header = NULL;
                return -ENOMEM;
        }
        url_copy = strdup(new_url);
        if (!url_copy)
                return -ENOMEM;
        l = curl_slist_append(c->connect_to, connect_to);
        if (!l)
                return -ENOMEM;
        c->connect_to = l;
        *ret_url = TAKE_PTR(url_copy);
        *ret_host_header = TAKE_PTR(host_header);
        return 0;
}

static uint64_t usec_to_msec_up(uint64_t usec) {
        return (usec + 999) / 1000;
}

static int call_setup(struct curl_transport *t, struct http_call *c, const struct http_request *req) {
        CURL *e = c->easy;
        CURLcode cc = CURLE_OK;
        _cleanup_(freep) char *url = NULL;
        _cleanup_(freep) char *host_header = NULL;
        int r;

#define SET(opt, val)                                       \
        do {                                                \
                if (cc == CURLE_OK)                         \
                        cc = curl_easy_setopt(e, opt, val); \
        } while (0)

        /* tls_server_name is about TLS: a cleartext call (a gRPC health probe of a
         * pod) goes where its URL says. */
        if (t->server_name && strncasecmp(req->url, "https://", 8) == 0) {
                r = apply_server_name(t, c, req->url, &url, &host_header);
                if (r < 0)
                        return r;
        }

        for (const char *const *h = req->headers; h && *h; h++) {
                struct curl_slist *l;

                if (!header_ok(*h))
                        return -EINVAL;
                l = curl_slist_append(c->headers, *h);
                if (!l)
                        return -ENOMEM;
                c->headers = l;
        }
        /* No "Expect: 100-continue" round trip before request bodies. */
        for (const char *extra[] = { "Expect:", host_header, NULL }, **h = extra; *h; h++) {
                struct curl_slist *l = curl_slist_append(c->headers, *h);

                if (!l)
                        return -ENOMEM;
                c->headers = l;
        }

        SET(CURLOPT_URL, url ? url : req->url);
        SET(CURLOPT_PRIVATE, c);
        SET(CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
        SET(CURLOPT_PROTOCOLS_STR, "http,https");
#else
        SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
        SET(CURLOPT_ERRORBUFFER, c->errbuf);
        SET(CURLOPT_HTTP_VERSION, req->h2c_prior_knowledge ? (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                                                           : (long)CURL_HTTP_VERSION_2TLS);
        /* Wait for the connection being set up rather than open another: with
         * HTTP/2 all concurrent calls then share it. Over TLS, ALPN tells after
         * the handshake whether it can multiplex; cleartext is HTTP/1.1 only,
         * and there curl would wait for the first call's whole response. */
        if (strncasecmp(url ? url : req->url, "https://", 8) == 0)
                SET(CURLOPT_PIPEWAIT, 1L);
        if (req->h2c_prior_knowledge) {
                /* A connection of its own, closed afterwards, as kubelet's gRPC
                 * probes do. libcurl before 8.0.0 cannot reuse an h2c connection:
                 * the second call on it fails with CURLE_HTTP2 ("Error in the
                 * HTTP2 framing layer", curl/curl#10634, fixed by #10643). */
                SET(CURLOPT_FRESH_CONNECT, 1L);
                SET(CURLOPT_FORBID_REUSE, 1L);
        }
        if (req->unix_socket)
                SET(CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
        if (req->unix_socket || req->h2c_prior_knowledge)
                SET(CURLOPT_NOPROXY, "*");
        SET(CURLOPT_USERAGENT, "drainer/" DRAINER_VERSION);
        SET(CURLOPT_ACCEPT_ENCODING, "gzip");
        SET(CURLOPT_HTTPHEADER, c->headers);
        if (c->connect_to)
                SET(CURLOPT_CONNECT_TO, c->connect_to);
        SET(CURLOPT_WRITEFUNCTION, on_curl_write);
        SET(CURLOPT_WRITEDATA, c);
        SET(CURLOPT_HEADERFUNCTION, on_curl_header);
        SET(CURLOPT_HEADERDATA, c);

        SET(CURLOPT_CONNECTTIMEOUT_MS,
            req->connect_timeout_usec > 0
                    ? (long)MIN(usec_to_msec_up(req->connect_timeout_usec), (uint64_t)LONG_MAX)
                    : CONNECT_TIMEOUT_MS_DEFAULT);
        if (req->timeout_usec > 0)
                SET(CURLOPT_TIMEOUT_MS, (long)MIN(usec_to_msec_up(req->timeout_usec), (uint64_t)LONG_MAX));
        else {
                /* No end (a watch): notice a peer that went silent. */
                uint64_t idle_sec = (req->idle_timeout_usec + 999999) / 1000000;

                SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
                SET(CURLOPT_LOW_SPEED_TIME, req->idle_timeout_usec > 0
                                                    ? (long)MIN(idle_sec, (uint64_t)LONG_MAX)
                                                    : IDLE_TIMEOUT_SEC_DEFAULT);
        }
        SET(CURLOPT_TCP_KEEPALIVE, 1L);
        SET(CURLOPT_TCP_KEEPIDLE, KEEPALIVE_IDLE_SEC);
        SET(CURLOPT_TCP_KEEPINTVL, KEEPALIVE_INTERVAL_SEC);

        SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
        if (t->insecure) {
                SET(CURLOPT_SSL_VERIFYPEER, 0L);
                SET(CURLOPT_SSL_VERIFYHOST, 0L);
        } else {
                SET(CURLOPT_SSL_VERIFYPEER, 1L);
                SET(CURLOPT_SSL_VERIFYHOST, 2L);
        }
        if (t->ca.data) {
                /* Trust this CA only, as client-go does, not the system bundle besides. */
                SET(CURLOPT_CAINFO_BLOB, &t->ca);
                SET(CURLOPT_CAINFO, (char *)NULL);
                SET(CURLOPT_CAPATH, (char *)NULL);
        }
        /* The request's own certificate and key (rotated credentials), else the
         * transport's. libcurl keys its connections on the certificate (its
         * ssl_primary_config holds the cert blob; Curl_ssl_config_matches compares it,
         * TLS session ids likewise), so a call with a new certificate never reuses a
         * connection made with the old one: it opens a new one. The key stays ours
         * (CURL_BLOB_NOCOPY) until the call is freed, then it is wiped. */
        if (req->client_cert_pem && req->client_key_pem) {
                if (blob_copy(&c->cert, req->client_cert_pem, req->client_cert_pem_len) < 0 ||
                    blob_copy(&c->key, req->client_key_pem, req->client_key_pem_len) < 0)
                        return -ENOMEM;
        }
        if (c->cert.data || t->cert.data) {
                SET(CURLOPT_SSLCERT_BLOB, c->cert.data ? &c->cert : &t->cert);
                SET(CURLOPT_SSLCERTTYPE, "PEM");
        }
        if (c->key.data || t->key.data) {
                SET(CURLOPT_SSLKEY_BLOB, c->key.data ? &c->key : &t->key);
                SET(CURLOPT_SSLKEYTYPE, "PEM");
        }

        if (strcasecmp(req->method, "GET") == 0) {
                SET(CURLOPT_HTTPGET, 1L);
        } else if (strcasecmp(req->method, "HEAD") == 0) {
                SET(CURLOPT_NOBODY, 1L);
        } else {
                if (strcasecmp(req->method, "POST") != 0)
                        SET(CURLOPT_CUSTOMREQUEST, req->method);
                if (req->body || strcasecmp(req->method, "POST") == 0) {
                        /* Copied: the request is borrowed only during submit. */
                        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
                        SET(CURLOPT_COPYPOSTFIELDS, req->body ? req->body : "");
                }
        }
#undef SET

        if (cc != CURLE_OK)
                return log_debug_errno(curlcode_to_errno(cc, 0, 0), "Cannot set up HTTP %s %s: %s",
                                       c->method, c->path, curl_easy_strerror(cc));
        return 0;
}

static int curl_submit(struct transport *tt, const struct http_request *req, http_data_fn on_data,
                       http_done_fn on_done, void *userdata, struct http_call **ret_call) {
        struct curl_transport *t = container_of(tt, struct curl_transport, base);
        struct http_call *c;
        int r;

        assert(req && req->method && req->url && on_done);

        if (t->closing)
                return -ESHUTDOWN;
        if (t->broken < 0)
                return t->broken;
        if (req->stream && !on_data)
                return -EINVAL;
        if (strlen(req->method) >= sizeof(c->method) || strpbrk(req->method, " \r\n"))
                return -EINVAL;
        /* libcurl would fail only once the call runs, with a vague error. */
        if (req->unix_socket && (!req->unix_socket[0] ||
                                 strlen(req->unix_socket) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)))
                return -EINVAL;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->t = t;
        link_init(&c->link_calls);
        link_init(&c->link_pending);
        c->on_data = on_data;
        c->on_done = on_done;
        c->userdata = userdata;
        c->stream = req->stream;
        c->unix_socket = req->unix_socket != NULL;
        c->no_resend = req->no_resend;
        c->timeout_usec = req->timeout_usec;
        buf_init(&c->body, req->max_body > 0 ? MIN(req->max_body, SIZE_MAX - 1) : BUF_CAP_API_BODY, false);
        strcpy(c->method, req->method);
        c->path = url_path(req->url);
        c->easy = curl_easy_init();
        if (!c->path || !c->easy) {
                call_free(c);
                return -ENOMEM;
        }

        r = call_setup(t, c, req);
        if (r < 0) {
                call_free(c);
                return r;
        }

        /* Added to the multi handle from the loop: curl refuses it from inside
         * its own callbacks (on_data may submit), and done can then never run
         * from inside this function. */
        link_add_tail(&t->calls, &c->link_calls);
        pending_push(t, c);
        t->base.requests_total++;
        t->stats.calls_in_flight++;
        if (ret_call)
                *ret_call = c;
        return 0;
}

static void curl_cancel(struct transport *tt, struct http_call *c) {
        if (c)
                call_cancel(c);
}

/* ---- libcurl multi on libuv ---- */

static void socket_action(struct curl_transport *t, curl_socket_t fd, int flags) {
        int running;
        CURLMcode mc;

        if (!t->multi)
                return;
        mc = curl_multi_socket_action(t->multi, fd, flags, &running);
        if (mc != CURLM_OK) {
                log_debug("curl_multi_socket_action() failed: %s", curl_multi_strerror(mc));
                if (mc != CURLM_BAD_SOCKET && t->broken == 0) {
                        /* The multi handle is unusable: fail every call, refuse new ones. */
                        t->broken = mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
                        defer_kick(t);
                }
        }
        /* Always, also after a timeout: transfers may have finished. */
        check_multi_info(t);
}

/* Whether a failed call ended because its HTTP/2 stream or its connection went
 * away before a single byte of the response arrived, so that it may go again.
 *
 * A server that sends GOAWAY handles the streams up to the last-stream-id in it
 * and refuses those above, which crossed the GOAWAY on the wire; RFC 9113 8.7:
 * those were not processed and may be resent on a new connection, whatever the
 * method. kube-apiserver sends GOAWAY after every anonymous request over HTTP/2
 * (UnauthenticatedHTTP2DOSMitigation), after a 401, with --goaway-chance, and
 * when it shuts down. libcurl 7.88 resends refused streams itself, but not
 * always: when the refusal and the end of the session arrive in one read, the
 * transfer fails with CURLE_HTTP2 (and no message); and after 5 resends it
 * gives up with CURLE_SEND_ERROR or CURLE_RECV_ERROR.
 *
 * So: CURLE_HTTP2 with no response at all, any method. A reset stream or a
 * dropped connection (CURLE_HTTP2_STREAM, CURLE_SEND_ERROR, CURLE_RECV_ERROR,
 * CURLE_GOT_NOTHING) may have reached the handler: GET and HEAD only. Errors
 * our own callbacks caused never count. */
static bool unanswered(struct http_call *c, CURLcode cc) {
        long status = 0, header_size = 0;

        if (c->error < 0 || c->mode != BODY_UNDECIDED)
                return false;
        (void)curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        (void)curl_easy_getinfo(c->easy, CURLINFO_HEADER_SIZE, &header_size);
        if (status != 0 || header_size != 0)
                return false;
        switch (cc) {
        case CURLE_HTTP2:
                return true;
        case CURLE_HTTP2_STREAM:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
                return strcasecmp(c->method, "GET") == 0 || strcasecmp(c->method, "HEAD") == 0;
        default:
                return false;
        }
}

/* Takes an unanswered call (see unanswered()) out of the multi handle and
 * queues it for another attempt, if RESENDS_MAX and its timeout allow. False:
 * it has to fail. Runs from check_multi_info, never inside a libcurl callback;
 * the defer handler adds it back, so no done callback runs from here. */
static bool call_resend(struct http_call *c, CURLcode cc) {
        struct curl_transport *t = c->t;
        curl_off_t attempt_us = 0;
        long connects = 0;
        uint64_t left_ms = 0;
        CURLMcode mc;

        if (c->resends >= RESENDS_MAX || t->closing || t->broken < 0) {
                log_debug("HTTP %s %s: the server went away without answering (%s) after %u resends",
                          c->method, c->path, curl_easy_strerror(cc), c->resends);
                return false;
        }
        (void)curl_easy_getinfo(c->easy, CURLINFO_TOTAL_TIME_T, &attempt_us);
        if (c->timeout_usec > 0) {
                /* The timeout covers the whole call, not each attempt. */
                uint64_t spent = c->earlier_usec + (attempt_us > 0 ? (uint64_t)attempt_us : 0);

                if (spent >= c->timeout_usec) {
                        log_debug("HTTP %s %s: the server went away without answering (%s), no time left "
                                  "to resend",
                                  c->method, c->path, curl_easy_strerror(cc));
                        return false;
                }
                left_ms = usec_to_msec_up(c->timeout_usec - spent);
        }

        mc = curl_multi_remove_handle(t->multi, c->easy);
        if (mc != CURLM_OK) {
                log_debug("curl_multi_remove_handle() failed: %s", curl_multi_strerror(mc));
                return false;
        }
        c->added = false;
        if (left_ms > 0 && curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS,
                                            (long)MIN(left_ms, (uint64_t)LONG_MAX)) != CURLE_OK)
                return false;

        /* The next attempt starts its counters from zero. */
        (void)curl_easy_getinfo(c->easy, CURLINFO_NUM_CONNECTS, &connects);
        c->earlier_usec += attempt_us > 0 ? (uint64_t)attempt_us : 0;
        c->earlier_connects += connects > 0 ? (uint64_t)connects : 0;
        c->resends++;
        c->retry_after_usec = 0;
        c->content_type = mfree(c->content_type);
        c->grpc_status = mfree(c->grpc_status);
        c->grpc_message = mfree(c->grpc_message);
        c->errbuf[0] = 0;
        log_debug("HTTP %s %s: the server went away without answering (%s), resending (%u of %u)", c->method,
                  c->path, curl_easy_strerror(cc), c->resends, RESENDS_MAX);
        pending_push(t, c);
        return true;
}

static void check_multi_info(struct curl_transport *t) {
        CURLMsg *msg;
        int left;

        while (t->multi && (msg = curl_multi_info_read(t->multi, &left))) {
                struct http_call *c = NULL;
                CURLcode result;
                long os_errno = 0;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                /* msg is invalid once the handle is removed. */
                result = msg->data.result;
                (void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
                assert(c);
                if (c->canceled)
                        continue; /* its -ECANCELED is queued */
                if (unanswered(c, result)) {
                        /* With no_resend the caller sends it again, through its rate limiter. */
                        if (!c->no_resend && call_resend(c, result))
                                continue;
                        c->unanswered = c->no_resend;
                        /* The server went away under it: not a TLS or an HTTP error. */
                        call_complete(c, -ECONNRESET);
                        continue;
                }
                (void)curl_easy_getinfo(c->easy, CURLINFO_OS_ERRNO, &os_errno);
                /* A unix socket that is not there (the driver is not running) or
                 * not ours to use says more than "connection refused". */
                if (c->unix_socket && result == CURLE_COULDNT_CONNECT &&
                    (os_errno == ENOENT || os_errno == EACCES))
                        call_complete(c, -(int)os_errno);
                else
                        call_complete(c, curlcode_to_errno(result, c->error, os_errno));
        }
}

static void on_timer(uv_timer_t *h) {
        struct curl_transport *t = container_of(h, struct curl_transport, timer);

        socket_action(t, CURL_SOCKET_TIMEOUT, 0);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
        struct curl_transport *t = userp;
        int r;

        if (timeout_ms < 0) {
                (void)uv_timer_stop(&t->timer);
                return 0;
        }
        /* 0 means "as soon as possible", but not from inside this callback:
         * a 0 ms libuv timer fires on the next loop iteration. */
        r = uv_timer_start(&t->timer, on_timer, (uint64_t)timeout_ms, 0);
        if (r < 0)
                log_debug("uv_timer_start() failed: %s, ignoring", uv_strerror(r));
        return 0;
}

static void on_sock_closed(uv_handle_t *h);

static void sock_close(struct sock *s) {
        link_del(&s->link);
        if (s->poll_ok)
                uv_close((uv_handle_t *)&s->poll, on_sock_closed);
        else
                free(s);
}

static void on_sock_poll(uv_poll_t *h, int status, int events) {
        struct sock *s = container_of(h, struct sock, poll);
        int flags = 0;

        if (status < 0) {
                log_debug("Polling socket %d failed: %s", (int)s->fd, uv_strerror(status));
                flags = CURL_CSELECT_ERR;
        } else {
                if (events & UV_READABLE)
                        flags |= CURL_CSELECT_IN;
                if (events & UV_WRITABLE)
                        flags |= CURL_CSELECT_OUT;
        }
        /* s may be closed inside: do not touch it afterwards. */
        socket_action(s->t, s->fd, flags);
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int action, void *userp, void *socketp) {
        struct curl_transport *t = userp;
        struct sock *s = socketp;
        int events = 0, r;

        if (action == CURL_POLL_REMOVE) {
                /* curl forgets its pointer to s right after this returns. */
                if (s)
                        sock_close(s);
                return 0;
        }

        if (!s) {
                s = calloc(1, sizeof(*s));
                if (!s) {
                        /* Returning -1 makes curl give up the whole multi handle. */
                        log_debug("Out of memory tracking socket %d", (int)fd);
                        return -1;
                }
                s->fd = fd;
                s->t = t;
                link_add_tail(&t->socks, &s->link);
                r = uv_poll_init_socket(t->loop, &s->poll, fd);
                if (r < 0)
                        log_debug("uv_poll_init_socket(%d) failed: %s", (int)fd, uv_strerror(r));
                else {
                        s->poll_ok = true;
                        t->handles_open++;
                }
                (void)curl_multi_assign(t->multi, fd, s);
        }

        if (action & CURL_POLL_IN)
                events |= UV_READABLE;
        if (action & CURL_POLL_OUT)
                events |= UV_WRITABLE;

        r = s->poll_ok ? uv_poll_start(&s->poll, events, on_sock_poll) : -EBADF;
        if (r < 0) {
                /* Tell curl from the loop (not from inside its callback) that the
                 * socket is unusable: its transfers then fail instead of hanging. */
                log_debug("Cannot poll socket %d: %s", (int)fd, uv_strerror(r));
                s->failed = true;
                t->socks_failed = true;
                defer_kick(t);
        } else
                s->failed = false;
        return 0;
}

/* ---- shutdown ---- */

static void maybe_closed(struct curl_transport *t) {
        void (*cb)(struct transport * t, void *userdata);

        if (!t->torn_down || t->handles_open > 0)
                return;
        cb = TAKE_PTR(t->close_cb);
        /* The callback may free t: touch nothing afterwards. */
        if (cb)
                cb(&t->base, t->close_userdata);
}

static void on_sock_closed(uv_handle_t *h) {
        struct sock *s = container_of((uv_poll_t *)h, struct sock, poll);
        struct curl_transport *t = s->t;

        free(s);
        t->handles_open--;
        maybe_closed(t);
}

static void on_handle_closed(uv_handle_t *h) {
        struct curl_transport *t = h->data;

        t->handles_open--;
        maybe_closed(t);
}

/* curl_multi_cleanup -> close its sockets' polls -> close timer and idle;
 * the close callbacks then run close_cb. */
static void teardown(struct curl_transport *t) {
        assert(link_empty(&t->calls));

        t->torn_down = true;
        /* May call on_curl_socket(REMOVE) and on_curl_timer for the last time. */
        curl_multi_cleanup(t->multi);
        t->multi = NULL;
        while (!link_empty(&t->socks))
                sock_close(container_of(t->socks.next, struct sock, link));
        uv_close((uv_handle_t *)&t->timer, on_handle_closed);
        uv_close((uv_handle_t *)&t->defer, on_handle_closed);
}

/* Adds submitted calls to the multi handle, delivers cancellations, reports
 * failed sockets to curl, and tears down a closing transport. */
static void on_defer(uv_idle_t *h) {
        struct curl_transport *t = container_of(h, struct curl_transport, defer);

        if (t->broken < 0)
                for (struct link *l = t->calls.next; l != &t->calls; l = l->next) {
                        struct http_call *c = container_of(l, struct http_call, link_calls);

                        if (!c->canceled && !c->completing && link_empty(&c->link_pending))
                                link_add_tail(&t->pending, &c->link_pending);
                }

        /* Done callbacks may submit, cancel or close: take one at a time. */
        while (!link_empty(&t->pending)) {
                struct http_call *c = container_of(t->pending.next, struct http_call, link_pending);
                CURLMcode mc;

                link_del(&c->link_pending);
                if (c->canceled) {
                        call_complete(c, -ECANCELED);
                        continue;
                }
                if (t->broken < 0) {
                        call_complete(c, t->broken);
                        continue;
                }
                if (c->added)
                        continue;
                mc = curl_multi_add_handle(t->multi, c->easy);
                if (mc != CURLM_OK) {
                        call_complete(c, mcode_to_errno(mc));
                        continue;
                }
                c->added = true;
        }

        if (t->socks_failed && t->multi) {
                t->socks_failed = false;
                for (struct link *l = t->socks.next, *n; l != &t->socks; l = n) {
                        struct sock *s = container_of(l, struct sock, link);

                        n = l->next;
                        if (!s->failed)
                                continue;
                        s->failed = false;
                        /* May close s (and the next one): restart the scan afterwards. */
                        socket_action(t, s->fd, CURL_CSELECT_ERR);
                        t->socks_failed = true;
                        break;
                }
                if (t->socks_failed)
                        return; /* run again on the next iteration */
        }

        if (t->closing && !t->torn_down && link_empty(&t->calls)) {
                teardown(t);
                return;
        }
        if (link_empty(&t->pending))
                (void)uv_idle_stop(&t->defer);
}

static void curl_close(struct transport *tt, void (*close_cb)(struct transport *t, void *userdata),
                       void *userdata) {
        struct curl_transport *t = container_of(tt, struct curl_transport, base);

        assert(!t->closing);
        t->closing = true;
        t->close_cb = close_cb;
        t->close_userdata = userdata;
        for (struct link *l = t->calls.next; l != &t->calls; l = l->next)
                call_cancel(container_of(l, struct http_call, link_calls));
        defer_kick(t);
}

static void transport_curl_destroy(struct curl_transport *t) {
        if (!t)
                return;
        if (t->multi)
                curl_multi_cleanup(t->multi);
        free(t->ca.data);
        free(t->cert.data);
        if (t->key.data)
                explicit_bzero(t->key.data, t->key.len);
        free(t->key.data);
        free(t->server_name);
        free(t);
}

static void curl_free_transport(struct transport *tt) {
        struct curl_transport *t = container_of(tt, struct curl_transport, base);

        /* Only after close_cb: the loop still references our handles until then. */
        assert(t->torn_down && t->handles_open == 0);
        transport_curl_destroy(t);
}

static const struct transport_ops curl_ops = {
        .submit = curl_submit,
        .cancel = curl_cancel,
        .close = curl_close,
        .free = curl_free_transport,
};

DEFINE_TRIVIAL_CLEANUP_FUNC(struct curl_transport *, transport_curl_destroy);

int transport_curl_new(struct uv_loop_s *loop, const struct tls_config *tls, struct transport **ret) {
        _cleanup_(transport_curl_destroyp) struct curl_transport *t = NULL;
        CURLMcode mc = CURLM_OK;

        assert(loop && ret);

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->base.ops = &curl_ops;
        t->loop = loop;
        link_init(&t->calls);
        link_init(&t->pending);
        link_init(&t->socks);

        if (tls) {
                if (blob_copy(&t->ca, tls->ca_pem, tls->ca_pem_len) < 0 ||
                    blob_copy(&t->cert, tls->client_cert_pem, tls->client_cert_pem_len) < 0 ||
                    blob_copy(&t->key, tls->client_key_pem, tls->client_key_pem_len) < 0)
                        return -ENOMEM;
                if (tls->tls_server_name && tls->tls_server_name[0]) {
                        if (strpbrk(tls->tls_server_name, ":/[]@ \r\n"))
                                return -EINVAL;
                        t->server_name = strdup(tls->tls_server_name);
                        if (!t->server_name)
                                return -ENOMEM;
                }
                t->insecure = tls->insecure_skip_verify;
                if (t->insecure)
                        log_debug("TLS certificate verification is off");
        }

        t->multi = curl_multi_init();
        if (!t->multi)
                return -ENOMEM;
#define MSET(opt, val)                                              \
        do {                                                        \
                if (mc == CURLM_OK)                                 \
                        mc = curl_multi_setopt(t->multi, opt, val); \
        } while (0)
        MSET(CURLMOPT_SOCKETFUNCTION, on_curl_socket);
        MSET(CURLMOPT_SOCKETDATA, t);
        MSET(CURLMOPT_TIMERFUNCTION, on_curl_timer);
        MSET(CURLMOPT_TIMERDATA, t);
        MSET(CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
        MSET(CURLMOPT_MAX_HOST_CONNECTIONS, MAX_HOST_CONNECTIONS);
#undef MSET
        if (mc != CURLM_OK)
                return log_debug_errno(mcode_to_errno(mc), "Cannot set up the curl multi handle: %s",
                                       curl_multi_strerror(mc));

        /* Last: these cannot fail, and from here on the loop references t. */
        (void)uv_timer_init(loop, &t->timer);
        t->timer.data = t;
        (void)uv_idle_init(loop, &t->defer);
        t->defer.data = t;
        t->handles_open = 2;

        *ret = &TAKE_PTR(t)->base;
        return 0;
}

int transport_curl_get_stats(const struct transport *tt, struct transport_curl_stats *ret) {
        const struct curl_transport *t;

        assert(ret);
        if (!tt || tt->ops != &curl_ops)
                return -EINVAL;
        t = container_of(tt, const struct curl_transport, base);
        *ret = t->stats;
        return 0;
}
