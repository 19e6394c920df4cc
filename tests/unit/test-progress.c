/* progress: an engine's progress as one node's block of the live view (drain/progress.c).
 * Covered: the phase and seconds, the pods left (claim holders and other pods always,
 * the other groups when some are left), the claims and driver pods, at most five pods
 * held with their reasons' control characters escaped and the rest counted, the Node
 * not Ready with and without the out-of-service taint, colours, the line count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/macro.h"
#include "drainer/drain/progress.h"

static const struct progress_sgr plain = { "", "", "", "" };

static char *render(const struct engine_progress *p, const struct progress_sgr *sgr, int *ret_lines) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        assert_non_null(f);
        *ret_lines = engine_progress_print(f, "node-1", p, 12.34, sgr);
        assert_int_equal(fclose(f), 0);
        return buf;
}

static int count_lines(const char *s) {
        int n = 0;

        for (; *s; s++)
                n += *s == '\n';
        return n;
}

static void test_preflight(void **state) {
        struct engine_progress p = { .message = "reading the node" };
        _cleanup_free_ char *t = NULL;
        int lines;

        t = render(&p, &plain, &lines);
        assert_string_equal(t, "node-1  preflight              12.3 s\n"
                               "  pods left:  claim holders 0  other pods 0\n"
                               "  claims on the node: 0   driver pods: 0   evictions accepted: 0\n"
                               "  reading the node\n");
        assert_int_equal(lines, 4);
}

static void test_held_and_not_ready(void **state) {
        struct engine_held held[7];
        struct engine_progress p = {
                .has_phase = true,
                .phase = DRAIN_PHASE_EVICT_CLAIM_HOLDERS,
                .claims_left = 2,
                .drivers_left = 1,
                .evictions_accepted = 3,
                .held = held,
                .n_held = ELEMENTSOF(held),
                .node_not_ready = true,
                .message = NULL,
        };
        const struct progress_sgr colour = { "<b>", "<c>", "<y>", "</>" };
        _cleanup_free_ char *t = NULL, *t2 = NULL;
        int lines;

        p.pods_left[EVICT_GROUP_CLAIM_HOLDERS] = 4;
        p.pods_left[EVICT_GROUP_DRIVERS] = 1;
        for (size_t i = 0; i < ELEMENTSOF(held); i++)
                held[i] = (struct engine_held){ .ns = "demo", .name = "pod", .reason = "budget\033[2J" };
        t = render(&p, &colour, &lines);
        assert_non_null(strstr(t, "<b>node-1</>  <c>evict-claim-holders </>   12.3 s\n"));
        assert_non_null(strstr(t, "  pods left:  claim holders 4  other pods 0  driver pods 1\n"));
        assert_non_null(strstr(t, "claims on the node: 2   driver pods: 1   evictions accepted: 3\n"));
        assert_non_null(strstr(t, "  <y>held</> demo/pod: budget"));
        assert_null(strstr(t, "\033")); /* the API server's reason cannot drive the terminal */
        assert_non_null(strstr(t, "  ... and 2 more held\n"));
        assert_non_null(
                strstr(t, "  <y>node not Ready</>: its kubelet cannot finish pods nor unprepare claims\n"));
        assert_non_null(strstr(t, "  n/a\n")); /* no message yet */
        assert_int_equal(lines, count_lines(t));
        assert_int_equal(lines, 3 + 5 + 1 + 1 + 1);

        p.out_of_service = true;
        p.n_held = 0;
        t2 = render(&p, &plain, &lines);
        assert_non_null(
                strstr(t2, "node not Ready: out-of-service taint on: the control plane deletes its pods\n"));
        assert_int_equal(lines, count_lines(t2));
        assert_string_equal(evict_group_label(EVICT_GROUP_NONE), "staying");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_preflight),
                cmocka_unit_test(test_held_and_not_ready),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
