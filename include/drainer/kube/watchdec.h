/* Incremental decoder for a Kubernetes watch stream: newline-delimited JSON
 * events {"type": ..., "object": {...}} arriving in chunks split anywhere. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "drainer/base/buf.h"

enum watch_event_type {
        WATCH_ADDED,
        WATCH_MODIFIED,
        WATCH_DELETED,
        WATCH_BOOKMARK,
        WATCH_ERROR, /* object is a metav1.Status; code 410 means relist (kube_status_to_errno) */
        _WATCH_EVENT_TYPE_MAX,
        _WATCH_EVENT_TYPE_INVALID = -EINVAL,
};

/* "ADDED", "MODIFIED", ... as on the wire; NULL for out-of-range values. */
const char *watch_event_type_to_string(enum watch_event_type t);
/* _WATCH_EVENT_TYPE_INVALID for NULL or unknown names. */
enum watch_event_type watch_event_type_from_string(const char *s);

/* Embedded in its owner. Holds only the incomplete tail of the stream. */
struct watch_decoder {
        struct buf buf;              /* a line not yet terminated by '\n'; capped at max_event */
        size_t max_event;            /* cap on one event line, in bytes */
        unsigned long long n_events; /* events delivered so far */
};

/* max_event_bytes == 0 selects BUF_CAP_API_OBJECT (buf.h). This function can't fail. */
void watch_decoder_init(struct watch_decoder *d, size_t max_event_bytes);
/* Frees the carry-over buffer. The decoder may be initialized again afterwards. */
void watch_decoder_done(struct watch_decoder *d);
/* Drops any partial event, e.g. before reusing the decoder for a new stream. */
void watch_decoder_reset(struct watch_decoder *d);
/* True if a partial event is pending (the stream ended mid-event if it closes now). */
bool watch_decoder_has_partial(const struct watch_decoder *d);

/* Called once per complete event; object is owned by the decoder and freed
 * after the callback returns. Return < 0 to stop. */
typedef int (*watch_event_fn)(enum watch_event_type type, const cJSON *object, void *userdata);

/* Feeds n bytes of the stream; calls cb for each event completed by them, in
 * order. Blank lines are skipped; a trailing '\r' is tolerated.
 *
 * Returns 0, or a negative errno: -E2BIG when one event exceeds the cap,
 * -EBADMSG for a line that is not a JSON object with a known "type" string and
 * an "object" object, -ENOMEM, or the callback's negative return value. After
 * an error the rest of this chunk and any partial event are dropped (the
 * decoder is reset), since the stream cannot be resynchronized reliably. */
int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t n, watch_event_fn cb,
                       void *userdata);
