/* Fuzzes the watch-stream decoder (watchdec.h), and kstatus.h on ERROR events. The input is a stream; it is
 * fed twice: whole, in one chunk, and in chunks whose lengths come from a
 * PRNG seeded with a hash of the input (each chunk its own exact-size heap
 * copy, so a read past a chunk is caught). Both must deliver the same events,
 * in order, up to the first error, and fail with the same error. The split run
 * goes on feeding after an error, as a caller that resets would. */
#include <errno.h>

#include <cjson/cJSON.h>

#include "drainer/kube/kstatus.h"
#include "drainer/kube/watchdec.h"
#include "fuzz-common.h"

#define MAX_TRACE 256

struct trace {
        uint64_t ev[MAX_TRACE]; /* hash of type + printed object */
        size_t n;
        size_t stop_at; /* the callback returns -ECANCELED on this event (1-based); 0 never */
        size_t calls;
        bool stopped;
};

static int on_event(enum watch_event_type type, const cJSON *object, void *userdata) {
        struct trace *t = userdata;
        char *s;

        fuzz_check(type >= 0 && type < _WATCH_EVENT_TYPE_MAX, "event type %d out of range", (int)type);
        fuzz_check(watch_event_type_to_string(type), "no name for event type %d", (int)type);
        fuzz_check(cJSON_IsObject(object), "event object is not an object");
        fuzz_check(!t->stopped, "callback called again after it returned an error in the same chunk");

        /* What the informer does with an ERROR event: its object is a metav1.Status. */
        if (type == WATCH_ERROR) {
                char *reason = NULL, *message = NULL;
                int r = kube_status_to_errno(object, &reason, &message);

                fuzz_check(r <= 0, "kube_status_to_errno returned %d", r);
                (void)kube_status_retry_after_seconds(object);
                free(reason);
                free(message);
        }

        s = cJSON_PrintUnformatted(object);
        if (t->n < MAX_TRACE) {
                uint64_t h = fuzz_hash((const uint8_t *)s, s ? strlen(s) : 0);
                t->ev[t->n] = h ^ ((uint64_t)type << 56);
        }
        t->n++;
        free(s);
        if (++t->calls == t->stop_at) {
                t->stopped = true;
                return -ECANCELED;
        }
        return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_setup_logging();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct watch_decoder whole, split;
        struct trace tw = {}, ts = {};
        uint64_t seed = fuzz_hash(data, size) | 1, rnd = seed;
        size_t max_event = 0, off = 0, stop_at;
        int rw, rs = 0, first_rs = 0;
        size_t n_before_err = 0;

        /* Most runs with the default cap, some with a small one to reach -E2BIG. */
        if ((seed >> 8) % 4 == 0)
                max_event = 1 + (seed >> 16) % 2048;
        stop_at = (seed >> 32) % 8 == 0 ? 1 + (seed >> 40) % 16 : 0;
        tw.stop_at = ts.stop_at = stop_at;

        watch_decoder_init(&whole, max_event);
        watch_decoder_init(&split, max_event);

        {
                char *copy = size ? malloc(size) : NULL;

                if (size) {
                        memcpy(copy, data, size);
                }
                rw = watch_decoder_feed(&whole, copy, size, on_event, &tw);
                free(copy);
        }
        fuzz_check(rw == 0 || rw == -E2BIG || rw == -EBADMSG || rw == -ENOMEM || rw == -ECANCELED,
                   "feed returned %d", rw);
        if (rw < 0)
                fuzz_check(!watch_decoder_has_partial(&whole), "partial event kept after error %d", rw);

        while (off < size) {
                uint64_t r = fuzz_next(&rnd);
                size_t len;
                char *chunk;

                /* Mostly short chunks (splits inside tokens and escapes), some long ones. */
                switch (r % 4) {
                case 0:
                        len = 1;
                        break;
                case 1:
                case 2:
                        len = 1 + (r >> 8) % 64;
                        break;
                default:
                        len = 1 + (r >> 8) % 8192;
                        break;
                }
                len = MIN(len, size - off);
                chunk = malloc(len);
                memcpy(chunk, data + off, len);
                ts.stopped = false;
                rs = watch_decoder_feed(&split, chunk, len, on_event, &ts);
                free(chunk);
                fuzz_check(rs == 0 || rs == -E2BIG || rs == -EBADMSG || rs == -ENOMEM || rs == -ECANCELED,
                           "feed returned %d", rs);
                if (rs < 0) {
                        fuzz_check(!watch_decoder_has_partial(&split), "partial event kept after error %d",
                                   rs);
                        if (first_rs == 0) {
                                first_rs = rs;
                                n_before_err = ts.n;
                        }
                }
                off += len;
                /* an empty feed is a no-op */
                fuzz_check(watch_decoder_feed(&split, "", 0, on_event, &ts) == 0, "empty feed failed");
        }
        if (first_rs == 0)
                n_before_err = ts.n;

        /* Same events, same first error. (Without an error the whole run must
         * not have kept a different partial tail either.) */
        fuzz_check(rw == first_rs, "whole feed returned %d, split feed first returned %d", rw, first_rs);
        fuzz_check(tw.n == n_before_err,
                   "whole feed delivered %zu events, split feed %zu before its first error", tw.n,
                   n_before_err);
        for (size_t i = 0; i < MIN(tw.n, (size_t)MAX_TRACE); i++)
                fuzz_check(tw.ev[i] == ts.ev[i], "event %zu differs between whole and split feeds", i);
        if (rw == 0 && first_rs == 0)
                fuzz_check(watch_decoder_has_partial(&whole) == watch_decoder_has_partial(&split),
                           "partial tail differs");
        fuzz_check(whole.n_events == tw.n, "n_events %llu, delivered %zu", whole.n_events, tw.n);

        /* Reuse after reset, as the informer does for a new stream. */
        watch_decoder_reset(&split);
        fuzz_check(!watch_decoder_has_partial(&split), "partial event after reset");
        ts.stop_at = 0;
        ts.stopped = false;
        {
                static const char bookmark[] = "{\"type\":\"BOOKMARK\",\"object\":{}}\n";
                size_t before = ts.n;
                int r;

                r = watch_decoder_feed(&split, bookmark, sizeof(bookmark) - 1, on_event, &ts);
                if (max_event == 0 || max_event >= sizeof(bookmark) - 2) /* the line without its newline */
                        fuzz_check(r == 0 && ts.n == before + 1, "decoder not usable after reset: %d", r);
                else
                        fuzz_check(r == -E2BIG, "an event over the cap gave %d", r);
        }

        watch_decoder_done(&whole);
        watch_decoder_done(&split);
        return 0;
}
