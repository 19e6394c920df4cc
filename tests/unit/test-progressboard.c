/* progressboard: several runs' progress on one screen. On a live terminal: one block
 * of the running parts, redrawn in place (cleared by its line count), at most once per
 * redraw interval but at once on a phase change; lines that stay go above it; an
 * ended run's part leaves it. Elsewhere: a timestamped plain line per phase change or
 * new message, never the same twice. The held pods: a line when held, one when no
 * longer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/drain/progressboard.h"
#include "fakes/fake-clock.h"

#define MS (USEC_PER_MSEC)

struct screen {
        char *buf;
        size_t size;
        FILE *term;
        char *tbuf;
        size_t tsize;
        FILE *trail;
        struct fake_clock *clock;
        struct progress_board *b;
        size_t seen; /* what term_new() returned so far */
};

static void screen_new(struct screen *s, bool live, size_t n) {
        *s = (struct screen){};
        s->term = open_memstream(&s->buf, &s->size);
        s->trail = open_memstream(&s->tbuf, &s->tsize);
        assert_non_null(s->term);
        assert_non_null(s->trail);
        s->clock = fake_clock_new(1000 * USEC_PER_SEC, 1767225600LL * USEC_PER_SEC); /* 2026-01-01 */
        assert_int_equal(progress_board_new(
                                 &(const struct progress_board_options){
                                         .term = s->term,
                                         .live = live,
                                         .trail = s->trail,
                                         .trail_on_term = true,
                                         .sgr = { "", "", "", "" },
                                         .ts = fake_clock_timesrc(s->clock),
                                         .redraw_usec = 100 * MS,
                                 },
                                 n, &s->b),
                         0);
}

/* What term got since the last call. */
static char *term_new(struct screen *s) {
        char *r;

        fflush(s->term);
        r = strndup(s->buf + s->seen, s->size - s->seen);
        assert_non_null(r);
        s->seen = s->size;
        return r;
}

static void screen_free(struct screen *s) {
        progress_board_free(s->b);
        fclose(s->term);
        fclose(s->trail);
        free(s->buf);
        free(s->tbuf);
        fake_clock_free(s->clock);
}

static void test_plain_lines(void **state) {
        struct screen s;
        struct engine_progress p = { .has_phase = true,
                                     .phase = DRAIN_PHASE_CORDON,
                                     .message = "cordoning" };
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

        screen_new(&s, false, 2);
        free(term_new(&s));
        progress_board_start(s.b, 0);
        assert_int_equal(progress_board_update(s.b, 0, "node-1", &p, 0), 0);
        a = term_new(&s);
        assert_string_equal(a, "2026-01-01T00:00:00Z node-1 cordon: cordoning\n");
        assert_int_equal(progress_board_update(s.b, 0, "node-1", &p, 0), 0); /* the same: nothing */
        b = term_new(&s);
        assert_string_equal(b, "");
        p.has_phase = false;
        p.message = NULL;
        assert_int_equal(progress_board_update(s.b, 1, "node-2", &p, 0), 0);
        c = term_new(&s);
        assert_non_null(strstr(c, "2026-01-01T00:00:00Z node-2 preflight: "));
        screen_free(&s);
}

static void test_held_lines(void **state) {
        struct screen s;
        struct engine_held held = { .ns = "demo", .name = "pod-a", .reason = "budget\033[2J" };
        struct engine_progress p = {
                .has_phase = true, .phase = DRAIN_PHASE_CORDON, .message = "m", .held = &held, .n_held = 1
        };
        _cleanup_free_ char *a = NULL, *b = NULL;

        screen_new(&s, false, 1);
        free(term_new(&s));
        assert_int_equal(progress_board_update(s.b, 0, "node-1", &p, 0), 0);
        a = term_new(&s);
        /* escaped: nothing of the API server's answer drives the terminal */
        assert_non_null(strstr(a, "node-1   held: demo/pod-a: budget"));
        assert_null(strchr(a, '\033'));
        p.n_held = 0;
        p.message = "n";
        assert_int_equal(progress_board_update(s.b, 0, "node-1", &p, 0), 0);
        b = term_new(&s);
        assert_non_null(strstr(b, "node-1   no longer held: demo/pod-a\n"));
        screen_free(&s);
}

static int count(const char *s, const char *what) {
        int n = 0;

        for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
                n++;
        return n;
}

static void test_live_block(void **state) {
        struct screen s;
        struct engine_progress p = { .has_phase = true, .phase = DRAIN_PHASE_CORDON, .message = "m" };
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *f = NULL;

        screen_new(&s, true, 2);
        free(term_new(&s));
        progress_board_start(s.b, 0);
        progress_board_start(s.b, 1);
        assert_int_equal(progress_board_update(s.b, 0, "node-1", &p, 0), 0);
        a = term_new(&s);
        assert_non_null(strstr(a, "node-1"));
        assert_int_equal(count(a, "\033["), 0); /* nothing drawn before: nothing cleared */
        /* a phase is drawn at once; the same phase again within the redraw interval is
         * kept, not drawn */
        assert_int_equal(progress_board_update(s.b, 1, "node-2", &p, 0), 0);
        free(term_new(&s));
        p.message = "m2";
        assert_int_equal(progress_board_update(s.b, 1, "node-2", &p, 0), 0);
        b = term_new(&s);
        assert_string_equal(b, "");
        /* after it: both parts, the old block cleared first */
        fake_clock_advance(s.clock, 150 * MS);
        assert_int_equal(progress_board_update(s.b, 1, "node-2", &p, 0), 0);
        c = term_new(&s);
        assert_int_equal(count(c, "\033[J"), 1);
        assert_true(strstr(c, "node-1") < strstr(c, "node-2"));
        /* a line that stays goes above: cleared, the line, redrawn */
        progress_board_put(s.b, s.term, "a line\n");
        d = term_new(&s);
        assert_true(strstr(d, "\033[") < strstr(d, "a line\n"));
        assert_true(strstr(d, "a line\n") < strstr(d, "node-1"));
        /* an ended run leaves the block */
        progress_board_end(s.b, 0);
        progress_board_redraw(s.b);
        e = term_new(&s);
        assert_null(strstr(e, "node-1"));
        assert_non_null(strstr(e, "node-2"));
        /* committed: the block stays; nothing is cleared next */
        progress_board_commit(s.b);
        progress_board_put(s.b, s.term, "after\n");
        f = term_new(&s);
        assert_int_equal(count(f, "\033[J"), 0);
        screen_free(&s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plain_lines),
                cmocka_unit_test(test_held_lines),
                cmocka_unit_test(test_live_block),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
