/* A scripted fake of struct transport (include/drainer/transport.h) for unit
 * tests. The test queues expectations (method + path prefix -> reply); each
 * submitted request is recorded and matched against them, first queued first.
 * Replies are delivered from timers of the given time source (so advancing a
 * fake clock delivers them) or by fake_transport_deliver(), never from inside
 * submit. Cancel delivers -ECANCELED the same way, later. transport_close()
 * cancels every call and runs close_cb from a timer after their done callbacks;
 * later submits fail with -ESHUTDOWN, as do streams without on_data with -EINVAL. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/kube/transport.h"

struct timesrc;
struct fake_transport;

#define FAKE_MAX_CHUNKS  32
#define FAKE_MAX_HEADERS 8
#define FAKE_FOREVER     0xFFFFFFFFu

struct fake_reply {
        int error;        /* a transport error (-ECONNREFUSED, ...) instead of a response */
        long status;      /* HTTP status; 0 means 200 */
        const char *body; /* buffered body; for streaming calls delivered as one chunk first */
        const char *headers[FAKE_MAX_HEADERS]; /* "Retry-After: 3", "Content-Type: ..." */
        const char *chunks[FAKE_MAX_CHUNKS];   /* streaming calls: on_data pieces, in order */
        uint64_t delay_usec;                   /* latency before the reply starts */
        uint64_t chunk_interval_usec;          /* 0: all chunks at once; else one chunk per interval */
        bool hold_open;  /* streaming: after the chunks, stay open until pushed/ended/cancelled */
        unsigned times;  /* how many requests this answers: 0 = 1, FAKE_FOREVER = unlimited */
        bool unanswered; /* with error -ECONNRESET: resp->unanswered (the server went away unanswering) */
};

/* One recorded request. Strings are copies, valid until fake_transport_free(). */
struct fake_request {
        char *method;
        char *url;
        const char *path; /* url without scheme://host[:port], points into url */
        char **headers;   /* "Name: value" lines */
        size_t n_headers;
        char *body; /* NUL-terminated copy, or NULL */
        size_t body_len;
        bool stream;
        uint64_t timeout_usec;
        uint64_t at_usec; /* timesrc_now() at submit */
        int matched;      /* index of the expectation it matched, -1 if none (yet) */
};

/* ts is borrowed: the fake clock's time source, or the real one. NULL on OOM. */
struct fake_transport *fake_transport_new(struct timesrc *ts);
struct transport *fake_transport_base(struct fake_transport *f);
struct fake_transport *fake_transport_from_base(struct transport *t);
/* Also reachable as transport_free(). Asserts that no call is in flight. NULL ok. */
void fake_transport_free(struct fake_transport *f);

/* Queues an expectation (strings and the reply are copied). method NULL or path
 * prefix NULL match anything. Requests already waiting unmatched are matched at
 * once (their delivery is still later). Returns the expectation's index. */
int fake_transport_expect(struct fake_transport *f, const char *method, const char *path_prefix,
                          const struct fake_reply *reply);
/* Shorthands. */
int fake_transport_expect_json(struct fake_transport *f, const char *method, const char *path_prefix,
                               long status, const char *body);
int fake_transport_expect_error(struct fake_transport *f, const char *method, const char *path_prefix,
                                int error, unsigned times);

/* Delivers, right now, every reply whose delay has passed and every pending
 * cancellation (looping until nothing is left to do). Returns how many calls completed. */
size_t fake_transport_deliver(struct fake_transport *f);

/* Open streams (hold_open, chunks done): feeds a chunk to each whose path starts
 * with path_prefix (NULL: all), synchronously. Returns how many streams got it. */
size_t fake_transport_push(struct fake_transport *f, const char *path_prefix, const char *chunk);
/* Ends those open streams, synchronously: error 0 = the server closed it normally
 * (with the reply's status). Returns how many ended. */
size_t fake_transport_end_streams(struct fake_transport *f, const char *path_prefix, int error);

/* Records. */
size_t fake_transport_n_requests(const struct fake_transport *f);
const struct fake_request *fake_transport_request(const struct fake_transport *f, size_t i);
/* Counts of recorded requests (method NULL = any) whose path starts with the prefix. */
size_t fake_transport_count(const struct fake_transport *f, const char *method, const char *path_prefix);
/* Value of a request header ("Authorization" -> "Bearer x"), case-insensitive name; NULL if absent. */
const char *fake_request_header(const struct fake_request *r, const char *name);
/* Raw (still percent-encoded) value of a query parameter, malloc'd; NULL if absent. */
char *fake_request_param(const struct fake_request *r, const char *name);
bool fake_request_has_param(const struct fake_request *r, const char *name);

size_t fake_transport_in_flight(const struct fake_transport *f); /* submitted, not completed */
size_t fake_transport_unmatched(const struct fake_transport *f); /* in flight, no expectation */
size_t fake_transport_open_streams(const struct fake_transport *f);
/* Expectations with answers left (FAKE_FOREVER ones count as 1). */
size_t fake_transport_expectations_left(const struct fake_transport *f);
uint64_t fake_transport_cancels(const struct fake_transport *f);
