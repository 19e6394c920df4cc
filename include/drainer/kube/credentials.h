/* The credentials of every request, from every source a kubeconfig can name, without
 * ever blocking the loop: a static token or client certificate; a token file and
 * client certificate and key files, read at the start and re-read when they rotate
 * (inode, size or mtime); an exec credential plugin run on the caller's libuv loop
 * (uv_spawn, in a process group of its own, killed as a group after its timeout),
 * its ExecCredential cached until it expires. A failed run, or an answer that is
 * already expired, is retried with backoff, never on every request; a refresh after
 * a 401 is limited process-wide. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "drainer/kube/kubeconfig.h"

/* Borrowed from the credentials: valid until the loop runs again (the next call that may
 * refresh them) or they are closed. */
struct kube_credentials {
        const char *token;           /* bearer token or NULL */
        const char *client_cert_pem; /* or NULL */
        size_t client_cert_pem_len;
        const char *client_key_pem;
        size_t client_key_pem_len;
        /* > 0; grows whenever the token, certificate or key changes. A request rejected
         * with 401 names the generation it was sent with. */
        uint64_t generation;
};

struct uv_loop_s;
struct timesrc;
struct credentials;

/* One plugin run at most this long: well under half of serve's WatchdogSec (30 s), so a
 * hung plugin can never look like a hung drainer. */
#define CREDENTIALS_EXEC_TIMEOUT_USEC (10ULL * 1000000ULL)

struct credentials_options {
        uint64_t exec_timeout_usec; /* 0 = CREDENTIALS_EXEC_TIMEOUT_USEC */
        /* After a failed run, or an answer whose expirationTimestamp is already past: the
         * plugin runs again only after this, doubling up to the cap; 0 = 1 s, 5 min. */
        uint64_t retry_base_usec, retry_cap_usec;
        /* After a 401: at most one refresh per this (process-wide), doubling while 401s
         * keep coming, back to the base after a quiet spell; 0 = 5 s, 5 min. */
        uint64_t refresh_base_usec, refresh_cap_usec;
        /* The environment the plugin inherits (before the filtering below); NULL = the
         * process's own. */
        char **environ;
};

struct credentials_stats {
        uint64_t runs;              /* plugin runs started */
        uint64_t failures;          /* runs that failed (exit status, signal, output, timeout) */
        uint64_t timeouts;          /* runs killed at the timeout */
        uint64_t expired_answers;   /* answers already expired when they arrived */
        uint64_t refreshes;         /* refreshes after a 401 that went ahead */
        uint64_t refreshes_refused; /* ... that the limiter refused */
        uint64_t last_run_usec;     /* how long the last run took (monotonic µs) */
};

struct credentials_wait;
typedef void (*credentials_ready_fn)(struct credentials_wait *w);

/* Embedded in whoever waits (container_of in the callback). */
struct credentials_wait {
        struct credentials *c; /* set while waiting */
        credentials_ready_fn fn;
        struct credentials_wait *prev, *next;
};

/* loop: where plugins run (may be NULL when cfg names no exec plugin); ts: monotonic time
 * for timeouts and backoff, the wall clock for expirationTimestamp. cfg is borrowed and
 * must outlive c. Reads the token file and the client certificate and key files now: one
 * that cannot be read, is empty, has control characters (a token) or no PEM block (a
 * certificate or key) fails with its message in *ret_error (malloc'd one line naming the
 * file, NULL if out of memory; never the contents). */
int credentials_new(struct uv_loop_s *loop, struct timesrc *ts, const struct kube_config *cfg,
                    const struct credentials_options *o, struct credentials **ret, char **ret_error);

/* Kills a plugin still running (its whole process group) and wakes every waiter (their
 * next credentials_get() fails with -ESHUTDOWN); frees c once its handles are closed,
 * then runs close_cb (may be NULL; never from inside this call). Run the loop afterwards. */
void credentials_close(struct credentials *c, void (*close_cb)(void *userdata), void *userdata);

/* The credentials to send now. rejected_generation: 0, or the generation of credentials
 * the API server just refused with 401 (then only newer ones are returned, a refresh
 * being started if the process-wide limiter allows it). Returns 0 with *ret filled
 * (borrowed: valid until the loop runs again), -EAGAIN when a plugin run is under way
 * (call credentials_wait()), or an error with *ret_error set (malloc'd one line, NULL if
 * out of memory): the plugin's failure (kept until its retry), -EACCES (a 401 and no
 * refresh possible or allowed now), -ESHUTDOWN. Never blocks. */
int credentials_get(struct credentials *c, uint64_t rejected_generation, struct kube_credentials *ret,
                    char **ret_error);

/* Whether a request refused with 401 while sent with credentials of that generation is
 * worth sending again: newer ones exist, a run is under way, or a refresh is allowed. */
bool credentials_may_refresh(struct credentials *c, uint64_t rejected_generation);

/* fn runs once, from the loop (never from inside this call), when the run under way
 * ended (or c is closed); then call credentials_get() again. */
void credentials_wait(struct credentials *c, struct credentials_wait *w, credentials_ready_fn fn);
/* Stops waiting; a no-op when w is not waiting. */
void credentials_unwait(struct credentials_wait *w);

void credentials_get_stats(const struct credentials *c, struct credentials_stats *ret);
