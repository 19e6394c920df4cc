/* heldlog: a pod held by a budget is reported once when it becomes held and once when
 * it no longer is, never at the progress updates in between. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "drainer/drain/heldlog.h"

struct seen {
        char lines[16][128];
        size_t n;
};

static void on_change(bool held, const char *ns, const char *name, const char *reason, void *userdata) {
        struct seen *s = userdata;

        assert_true(s->n < 16);
        if (held)
                snprintf(s->lines[s->n++], sizeof(s->lines[0]), "held %s/%s: %s", ns, name, reason);
        else
                snprintf(s->lines[s->n++], sizeof(s->lines[0]), "no longer held %s/%s", ns, name);
}

static const struct engine_held web_a = { .ns = "demo",
                                          .name = "web-a",
                                          .reason = "Cannot evict pod as it would violate the pod's "
                                                    "disruption budget." },
                                web_b = { .ns = "demo", .name = "web-b", .reason = "disruption budget web" },
                                other_ns = { .ns = "demo2",
                                             .name = "web-a",
                                             .reason = "namespace demo2 is being deleted",
                                             .ns_terminating = true };

static void test_held_once_across_progress(void **state) {
        struct held_log l = {};
        struct seen s = {};

        /* six progress updates a second with the same pod held: one line */
        for (int i = 0; i < 6; i++)
                assert_int_equal(held_log_update(&l, (struct engine_held[]){ web_a }, 1, on_change, &s), 0);
        assert_int_equal(s.n, 1);
        assert_string_equal(
                s.lines[0],
                "held demo/web-a: Cannot evict pod as it would violate the pod's disruption budget.");
        /* a second one joins: only it is reported */
        for (int i = 0; i < 3; i++)
                assert_int_equal(
                        held_log_update(&l, (struct engine_held[]){ web_b, web_a }, 2, on_change, &s), 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.lines[1], "held demo/web-b: disruption budget web");
        /* web-a released (its eviction accepted): once */
        for (int i = 0; i < 3; i++)
                assert_int_equal(held_log_update(&l, (struct engine_held[]){ web_b }, 1, on_change, &s), 0);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.lines[2], "no longer held demo/web-a");
        /* the same name in another namespace is another pod */
        assert_int_equal(held_log_update(&l, (struct engine_held[]){ web_b, other_ns }, 2, on_change, &s),
                         0);
        assert_int_equal(s.n, 4);
        assert_string_equal(s.lines[3], "held demo2/web-a: namespace demo2 is being deleted");
        /* none held: both released, once */
        assert_int_equal(held_log_update(&l, NULL, 0, on_change, &s), 0);
        assert_int_equal(held_log_update(&l, NULL, 0, on_change, &s), 0);
        assert_int_equal(s.n, 6);
        assert_string_equal(s.lines[4], "no longer held demo/web-b");
        assert_string_equal(s.lines[5], "no longer held demo2/web-a");
        /* held again later: reported again */
        assert_int_equal(held_log_update(&l, (struct engine_held[]){ web_a }, 1, on_change, &s), 0);
        assert_int_equal(s.n, 7);
        held_log_clear(&l);
        assert_int_equal(l.n, 0);
}

static void test_clear_reports_nothing(void **state) {
        struct held_log l = {};
        struct seen s = {};

        assert_int_equal(held_log_update(&l, (struct engine_held[]){ web_a, web_b }, 2, on_change, &s), 0);
        assert_int_equal(s.n, 2);
        held_log_clear(&l);
        assert_int_equal(held_log_update(&l, NULL, 0, on_change, &s), 0);
        assert_int_equal(s.n, 2);
        held_log_clear(&l);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_held_once_across_progress),
                cmocka_unit_test(test_clear_reports_nothing),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
