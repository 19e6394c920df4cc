/* Unit tests for the watch stream decoder: events split at every byte
 * offset, byte by byte, BOOKMARK, ERROR with a 410 Status, the size cap,
 * malformed lines and early stop from the callback. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/macro.h"
#include "drainer/kube/kstatus.h"
#include "drainer/kube/watchdec.h"

#define MAX_SEEN 16

struct seen {
        size_t n;
        enum watch_event_type type[MAX_SEEN];
        char name[MAX_SEEN][128];
        char rv[MAX_SEEN][32];
        int error[MAX_SEEN]; /* for ERROR events */
        size_t stop_at;      /* return -ECANCELED on this event number (1-based); 0 never */
};

static int on_event(enum watch_event_type type, const cJSON *object, void *userdata) {
        struct seen *s = userdata;
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "name"));
        const char *rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion"));

        assert_true(s->n < MAX_SEEN);
        s->type[s->n] = type;
        snprintf(s->name[s->n], sizeof s->name[0], "%s", name ? name : "");
        snprintf(s->rv[s->n], sizeof s->rv[0], "%s", rv ? rv : "");
        s->error[s->n] = type == WATCH_ERROR ? kube_status_to_errno(object, NULL, NULL) : 0;
        s->n++;
        if (s->stop_at && s->n == s->stop_at)
                return -ECANCELED;
        return 0;
}

/* Five events: a pod with multi-byte UTF-8 in an annotation (so some splits
 * fall inside a character), a modification, a bookmark, a deletion and an
 * ERROR with 410 Gone. */
static const char stream[] =
        "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
        "\"web-0\",\"namespace\":\"default\",\"resourceVersion\":\"101\",\"annotations\":{\"note\":"
        "\"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80\"}},\"spec\":{\"nodeName\":\"node-1\"}}}\n"
        "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
        "\"web-0\",\"namespace\":\"default\",\"resourceVersion\":\"102\"},\"status\":{\"phase\":"
        "\"Running\"}}}\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
        "{\"resourceVersion\":\"150\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
        "\"web-1\",\"namespace\":\"default\",\"resourceVersion\":\"151\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
        "\"status\":\"Failure\",\"message\":\"too old resource version: 101 (151)\",\"reason\":"
        "\"Expired\",\"code\":410}}\n";

static void check_stream_events(const struct seen *s) {
        assert_int_equal(s->n, 5);
        assert_int_equal(s->type[0], WATCH_ADDED);
        assert_string_equal(s->name[0], "web-0");
        assert_string_equal(s->rv[0], "101");
        assert_int_equal(s->type[1], WATCH_MODIFIED);
        assert_string_equal(s->rv[1], "102");
        assert_int_equal(s->type[2], WATCH_BOOKMARK);
        assert_string_equal(s->name[2], "");
        assert_string_equal(s->rv[2], "150");
        assert_int_equal(s->type[3], WATCH_DELETED);
        assert_string_equal(s->name[3], "web-1");
        assert_int_equal(s->type[4], WATCH_ERROR);
        assert_int_equal(s->error[4], -ESTALE);
}

/* Feeds from a heap copy of exactly n bytes, so reading past a chunk (which
 * is not NUL-terminated) shows up under valgrind/ASan. */
static int feed_exact(struct watch_decoder *d, const char *data, size_t n, struct seen *s) {
        char *copy = malloc(n ? n : 1);
        int r;

        assert_non_null(copy);
        memcpy(copy, data, n);
        r = watch_decoder_feed(d, copy, n, on_event, s);
        free(copy);
        return r;
}

static void test_type_strings(void **state) {
        for (int t = 0; t < _WATCH_EVENT_TYPE_MAX; t++)
                assert_int_equal(watch_event_type_from_string(watch_event_type_to_string(t)), t);
        assert_string_equal(watch_event_type_to_string(WATCH_BOOKMARK), "BOOKMARK");
        assert_null(watch_event_type_to_string(_WATCH_EVENT_TYPE_MAX));
        assert_null(watch_event_type_to_string(_WATCH_EVENT_TYPE_INVALID));
        assert_int_equal(watch_event_type_from_string("added"), _WATCH_EVENT_TYPE_INVALID);
        assert_int_equal(watch_event_type_from_string(NULL), _WATCH_EVENT_TYPE_INVALID);
}

static void test_whole_stream(void **state) {
        struct watch_decoder d;
        struct seen s = {};

        watch_decoder_init(&d, 0);
        assert_int_equal(feed_exact(&d, stream, sizeof stream - 1, &s), 0);
        check_stream_events(&s);
        assert_false(watch_decoder_has_partial(&d));
        assert_int_equal(d.n_events, 5);
        watch_decoder_done(&d);
}

static void test_split_every_offset(void **state) {
        size_t len = sizeof stream - 1;

        for (size_t cut = 0; cut <= len; cut++) {
                struct watch_decoder d;
                struct seen s = {};

                watch_decoder_init(&d, 4096);
                assert_int_equal(feed_exact(&d, stream, cut, &s), 0);
                assert_int_equal(feed_exact(&d, stream + cut, len - cut, &s), 0);
                check_stream_events(&s);
                assert_false(watch_decoder_has_partial(&d));
                watch_decoder_done(&d);
        }
}

static void test_split_three_ways(void **state) {
        size_t len = sizeof stream - 1;

        /* every pair of cuts on a coarser grid, plus cuts next to each '\n' */
        for (size_t a = 0; a <= len; a += 7)
                for (size_t b = a; b <= len; b += 11) {
                        struct watch_decoder d;
                        struct seen s = {};

                        watch_decoder_init(&d, 0);
                        assert_int_equal(feed_exact(&d, stream, a, &s), 0);
                        assert_int_equal(feed_exact(&d, stream + a, b - a, &s), 0);
                        assert_int_equal(feed_exact(&d, stream + b, len - b, &s), 0);
                        check_stream_events(&s);
                        watch_decoder_done(&d);
                }
}

static void test_byte_by_byte(void **state) {
        size_t len = sizeof stream - 1;
        struct watch_decoder d;
        struct seen s = {};

        watch_decoder_init(&d, 0);
        for (size_t i = 0; i < len; i++) {
                assert_int_equal(feed_exact(&d, stream + i, 1, &s), 0);
                /* nothing is delivered before its newline */
                assert_true(watch_decoder_has_partial(&d) == (stream[i] != '\n'));
        }
        check_stream_events(&s);
        watch_decoder_done(&d);
}

static void test_blank_lines_crlf(void **state) {
        static const char in[] =
                "\n\r\n  \n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\r\n"
                "\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n\n";
        struct watch_decoder d;
        struct seen s = {};

        watch_decoder_init(&d, 0);
        assert_int_equal(watch_decoder_feed(&d, in, sizeof in - 1, on_event, &s), 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.name[0], "a");
        assert_int_equal(s.type[1], WATCH_DELETED);
        /* an empty feed is fine */
        assert_int_equal(watch_decoder_feed(&d, NULL, 0, on_event, &s), 0);
        watch_decoder_done(&d);
}

static void test_error_status(void **state) {
        static const char in[] =
                "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                "\"status\":\"Failure\",\"message\":\"too old resource version: 1 "
                "(2)\",\"reason\":\"Expired\","
                "\"code\":410}}\n";
        struct watch_decoder d;
        struct seen s = {};

        watch_decoder_init(&d, 0);
        assert_int_equal(watch_decoder_feed(&d, in, sizeof in - 1, on_event, &s), 0);
        assert_int_equal(s.n, 1);
        assert_int_equal(s.type[0], WATCH_ERROR);
        assert_int_equal(s.error[0], -ESTALE);
        watch_decoder_done(&d);
}

static void test_over_cap(void **state) {
        char big[300];
        struct watch_decoder d;
        struct seen s = {};
        static const char small[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"ok\"}}}\n";
        int n;

        n = snprintf(big, sizeof big,
                     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"%0200d\"}}}\n", 7);
        assert_true(n > 200 && (size_t)n < sizeof big);

        /* whole line inside one chunk */
        watch_decoder_init(&d, 128);
        assert_int_equal(watch_decoder_feed(&d, big, (size_t)n, on_event, &s), -E2BIG);
        assert_int_equal(s.n, 0);
        /* the decoder was reset and decodes the next stream */
        assert_int_equal(watch_decoder_feed(&d, small, sizeof small - 1, on_event, &s), 0);
        assert_int_equal(s.n, 1);

        /* a partial line that outgrows the cap fails before its newline arrives */
        s = (struct seen){};
        assert_int_equal(watch_decoder_feed(&d, big, 100, on_event, &s), 0);
        assert_true(watch_decoder_has_partial(&d));
        assert_int_equal(watch_decoder_feed(&d, big + 100, 100, on_event, &s), -E2BIG);
        assert_false(watch_decoder_has_partial(&d));
        assert_int_equal(s.n, 0);

        /* a tail without newline bigger than the cap */
        assert_int_equal(watch_decoder_feed(&d, small, sizeof small - 1, on_event, &s), 0);
        assert_int_equal(watch_decoder_feed(&d, big, 200, on_event, &s), -E2BIG);
        assert_int_equal(s.n, 1);

        /* exactly at the cap is fine (the cap counts the line without '\n') */
        watch_decoder_done(&d);
        watch_decoder_init(&d, (size_t)n - 1);
        s = (struct seen){};
        assert_int_equal(watch_decoder_feed(&d, big, 10, on_event, &s), 0);
        assert_int_equal(watch_decoder_feed(&d, big + 10, (size_t)n - 10, on_event, &s), 0);
        assert_int_equal(s.n, 1);
        watch_decoder_done(&d);
}

static void expect_bad(const char *line) {
        struct watch_decoder d;
        struct seen s = {};

        watch_decoder_init(&d, 0);
        assert_int_equal(watch_decoder_feed(&d, line, strlen(line), on_event, &s), -EBADMSG);
        assert_int_equal(s.n, 0);
        assert_false(watch_decoder_has_partial(&d));
        watch_decoder_done(&d);
}

static void test_malformed(void **state) {
        expect_bad("{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}\n"); /* truncated */
        expect_bad("not json\n");
        expect_bad("{\"object\":{}}\n");                              /* no type */
        expect_bad("{\"type\":\"ADDED\"}\n");                         /* no object */
        expect_bad("{\"type\":\"ADDED\",\"object\":[]}\n");           /* object not an object */
        expect_bad("{\"type\":7,\"object\":{}}\n");                   /* type not a string */
        expect_bad("{\"type\":\"RESYNC\",\"object\":{}}\n");          /* unknown type */
        expect_bad("{\"type\":\"ADDED\",\"object\":{}} {\"x\":1}\n"); /* two values on a line */
        expect_bad("[\"ADDED\"]\n");
        expect_bad("\"ADDED\"\n");

        /* the bad line is the second: the first was already delivered */
        {
                static const char in[] = "{\"type\":\"ADDED\",\"object\":{}}\n{oops}\n"
                                         "{\"type\":\"ADDED\",\"object\":{}}\n";
                struct watch_decoder d;
                struct seen s = {};

                watch_decoder_init(&d, 0);
                assert_int_equal(watch_decoder_feed(&d, in, sizeof in - 1, on_event, &s), -EBADMSG);
                assert_int_equal(s.n, 1);
                watch_decoder_done(&d);
        }
        /* malformed line completed from the carry-over buffer */
        {
                static const char in[] = "{\"type\":\"ADDED\",\"obj";
                static const char in2[] = "ect\":{}\n";
                struct watch_decoder d;
                struct seen s = {};

                watch_decoder_init(&d, 0);
                assert_int_equal(watch_decoder_feed(&d, in, sizeof in - 1, on_event, &s), 0);
                assert_int_equal(watch_decoder_feed(&d, in2, sizeof in2 - 1, on_event, &s), -EBADMSG);
                assert_false(watch_decoder_has_partial(&d));
                watch_decoder_done(&d);
        }
}

static void test_callback_stops(void **state) {
        struct watch_decoder d;
        struct seen s = { .stop_at = 2 };

        watch_decoder_init(&d, 0);
        assert_int_equal(watch_decoder_feed(&d, stream, sizeof stream - 1, on_event, &s), -ECANCELED);
        assert_int_equal(s.n, 2);
        assert_false(watch_decoder_has_partial(&d));

        /* stop while finishing a carried-over line */
        s = (struct seen){ .stop_at = 1 };
        assert_int_equal(watch_decoder_feed(&d, stream, 10, on_event, &s), 0);
        assert_int_equal(watch_decoder_feed(&d, stream + 10, sizeof stream - 11, on_event, &s), -ECANCELED);
        assert_int_equal(s.n, 1);
        watch_decoder_done(&d);
}

static void test_big_event_grows_and_shrinks(void **state) {
        /* one 1 MiB event split in 16 KiB chunks, then small ones */
        size_t pad = 1024 * 1024, len;
        char *big, *p;
        struct watch_decoder d;
        struct seen s = {};

        big = malloc(pad + 128);
        assert_non_null(big);
        p = big +
            sprintf(big, "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"huge\"},\"data\":\"");
        memset(p, 'x', pad);
        p += pad;
        p += sprintf(p, "\"}}\n");
        len = (size_t)(p - big);

        watch_decoder_init(&d, 2 * 1024 * 1024);
        for (size_t off = 0; off < len; off += 16384)
                assert_int_equal(
                        watch_decoder_feed(&d, big + off, MIN((size_t)16384, len - off), on_event, &s), 0);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.name[0], "huge");
        /* the large carry-over buffer is released once the event is done */
        assert_null(d.buf.data);
        assert_int_equal(feed_exact(&d, stream, sizeof stream - 1, &s), 0);
        assert_int_equal(s.n, 6);
        watch_decoder_done(&d);
        free(big);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_type_strings),
                cmocka_unit_test(test_whole_stream),
                cmocka_unit_test(test_split_every_offset),
                cmocka_unit_test(test_split_three_ways),
                cmocka_unit_test(test_byte_by_byte),
                cmocka_unit_test(test_blank_lines_crlf),
                cmocka_unit_test(test_error_status),
                cmocka_unit_test(test_over_cap),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_callback_stops),
                cmocka_unit_test(test_big_event_grows_and_shrinks),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
