/* Watch stream decoder: splits a byte stream into '\n'-terminated JSON events,
 * parses each with cJSON and hands (type, object) to a callback. Lines that
 * lie whole inside a chunk are parsed in place; only a line split across
 * chunks is copied into the carry-over buffer, which never exceeds the cap.
 * Knows nothing about resources or HTTP. */
#include <assert.h>
#include <string.h>

#include "drainer/base/log.h"
#include "drainer/kube/watchdec.h"

static const char *const watch_event_type_table[_WATCH_EVENT_TYPE_MAX] = {
        [WATCH_ADDED] = "ADDED",       [WATCH_MODIFIED] = "MODIFIED", [WATCH_DELETED] = "DELETED",
        [WATCH_BOOKMARK] = "BOOKMARK", [WATCH_ERROR] = "ERROR",
};

DEFINE_STRING_TABLE_LOOKUP(watch_event_type, enum watch_event_type, _WATCH_EVENT_TYPE_MAX,
                           _WATCH_EVENT_TYPE_INVALID)

void watch_decoder_init(struct watch_decoder *d, size_t max_event_bytes) {
        assert(d);
        *d = (struct watch_decoder){
                .max_event = max_event_bytes > 0 ? max_event_bytes : BUF_CAP_API_OBJECT,
        };
        buf_init(&d->buf, d->max_event, false);
}

void watch_decoder_done(struct watch_decoder *d) {
        if (!d)
                return;
        buf_done(&d->buf);
}

/* A buffer grown by one huge event is not kept around for the quiet stream
 * that usually follows. */
#define KEEP_BUFFER_MAX (256u * 1024u)

void watch_decoder_reset(struct watch_decoder *d) {
        assert(d);
        buf_clear(&d->buf, KEEP_BUFFER_MAX);
}

bool watch_decoder_has_partial(const struct watch_decoder *d) {
        return d && d->buf.len > 0;
}

static bool is_json_space(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Parses one complete line (without its '\n') and calls cb. The line need not
 * be NUL-terminated. */
static int decode_line(struct watch_decoder *d, const char *line, size_t len, watch_event_fn cb,
                       void *userdata) {
        const char *end = NULL;
        cJSON *root, *type, *object;
        enum watch_event_type t;
        int r;

        while (len > 0 && is_json_space(line[len - 1]))
                len--;
        while (len > 0 && is_json_space(*line)) {
                line++;
                len--;
        }
        if (len == 0)
                return 0; /* blank line: keep-alive or a stray separator */

        root = cJSON_ParseWithLengthOpts(line, len, &end, false);
        if (!root)
                return log_debug_errno(EBADMSG, "Watch event is not valid JSON (near byte %zd of %zu).",
                                       cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - line : (ssize_t)-1, len);
        if (end != line + len) {
                cJSON_Delete(root);
                return log_debug_errno(EBADMSG, "Trailing data after watch event (byte %zd of %zu).",
                                       end ? end - line : (ssize_t)-1, len);
        }

        type = cJSON_GetObjectItemCaseSensitive(root, "type");
        object = cJSON_GetObjectItemCaseSensitive(root, "object");
        if (!cJSON_IsObject(root) || !cJSON_IsString(type) || !cJSON_IsObject(object)) {
                cJSON_Delete(root);
                return log_debug_errno(EBADMSG, "Watch event lacks a \"type\" string or an \"object\".");
        }
        t = watch_event_type_from_string(type->valuestring);
        if (t < 0) {
                log_debug("Unknown watch event type \"%s\".", type->valuestring);
                cJSON_Delete(root);
                return -EBADMSG;
        }

        d->n_events++;
        r = cb(t, object, userdata);
        cJSON_Delete(root);
        return r < 0 ? r : 0;
}

static int fail(struct watch_decoder *d, int r) {
        watch_decoder_reset(d);
        return r;
}

int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t n, watch_event_fn cb,
                       void *userdata) {
        const char *p = data, *end;
        int r;

        assert(d);
        assert(cb);
        assert(data || n == 0);

        if (n == 0)
                return 0;
        end = data + n; /* not before: NULL + 0 is undefined in C */

        if (d->buf.len > 0) {
                /* Finish the line carried over from earlier chunks. */
                const char *nl = memchr(p, '\n', n);
                size_t take = nl ? (size_t)(nl - p) : n;

                r = buf_append(&d->buf, p, take);
                if (r == -E2BIG)
                        return fail(d,
                                    log_debug_errno(E2BIG, "Watch event exceeds %zu bytes.", d->max_event));
                if (r < 0)
                        return fail(d, r);
                if (!nl)
                        return 0;

                r = decode_line(d, d->buf.data, d->buf.len, cb, userdata);
                watch_decoder_reset(d);
                if (r < 0)
                        return fail(d, r);
                p = nl + 1;
        }

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

                if (len > d->max_event)
                        return fail(d,
                                    log_debug_errno(E2BIG, "Watch event exceeds %zu bytes.", d->max_event));
                if (!nl) {
                        /* Incomplete tail: keep it for the next chunk. */
                        r = buf_append(&d->buf, p, len);
                        if (r < 0)
                                return fail(d, r);
                        break;
                }

                /* Whole line inside the chunk: parse it where it lies. */
                r = decode_line(d, p, len, cb, userdata);
                if (r < 0)
                        return fail(d, r);
                p = nl + 1;
        }

        return 0;
}
