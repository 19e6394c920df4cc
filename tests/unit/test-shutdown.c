/* The drain for a shutdown (ctl/shutdown.c) on a fake clock, with a stand-in for
 * logind's delay lock and for the Nodes (its ops table), never sleeping: a shutdown
 * asks for the drain of this node, recording the boot, and lets the shutdown go on
 * once the node is drained, or two seconds before logind's delay runs out; a
 * cancelled shutdown stops the deadline; a node unknown or a patch refused lets go at
 * once; after a reboot, a drain another boot asked for is undone, once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/shutdown.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "fakes/fake-clock.h"
#include "fakes/test-env.h"

#define SEC USEC_PER_SEC

struct env {
        struct fake_clock *clock;
        struct shutdown_drain *s;
        /* the lock */
        void (*shutdown)(bool active, void *userdata);
        void (*result)(int error, const char *message, void *userdata);
        void *lock_userdata;
        int inhibit_error;
        uint64_t delay_max;
        bool holds;
        unsigned releases;
        /* the Nodes */
        struct kv ann[2];
        struct node_rec node;
        bool node_known;
        int patch_error;
        unsigned patches;
        char last_patch[512];
        char notes[4096];
};

static int fake_inhibit(void *bus, void (*shutdown)(bool, void *), void (*result)(int, const char *, void *),
                        void *userdata) {
        struct env *e = bus;

        if (e->inhibit_error)
                return e->inhibit_error;
        e->shutdown = shutdown;
        e->result = result;
        e->lock_userdata = userdata;
        return 0;
}

static int fake_delay_max(void *bus, uint64_t *ret) {
        struct env *e = bus;

        if (!e->delay_max)
                return -ENODATA;
        *ret = e->delay_max;
        return 0;
}

static bool fake_holds(void *bus) {
        return ((struct env *)bus)->holds;
}

static void fake_release(void *bus) {
        struct env *e = bus;

        e->holds = false;
        e->releases++;
}

static const struct node_rec *fake_node(void *nodes, const char *name) {
        struct env *e = nodes;

        return e->node_known && streq(name, e->node.name) ? &e->node : NULL;
}

static int fake_patch(void *nodes, const char *name, char *body) {
        struct env *e = nodes;

        assert_string_equal(name, "node-1");
        assert_non_null(body);
        snprintf(e->last_patch, sizeof(e->last_patch), "%s", body);
        free(body);
        if (e->patch_error)
                return e->patch_error;
        e->patches++;
        e->patch_error = -EBUSY; /* in flight until the test says otherwise */
        return 0;
}

static const struct shutdown_ops ops = {
        .inhibit = fake_inhibit,
        .delay_max = fake_delay_max,
        .holds = fake_holds,
        .release = fake_release,
        .node = fake_node,
        .patch = fake_patch,
};

static void on_note(struct shutdown_drain *s, enum log_level level, int error, const char *line,
                    void *userdata) {
        struct env *e = userdata;
        size_t len = strlen(e->notes);

        snprintf(e->notes + len, sizeof(e->notes) - len, "%s\n", line);
}

static const struct shutdown_handlers handlers = { .on_note = on_note };

static int setup(void **state) {
        struct env *e = calloc(1, sizeof(*e));

        assert_non_null(e);
        e->clock = fake_clock_new(TEST_API_T0, TEST_API_REALTIME);
        e->node = (struct node_rec){ .name = "node-1", .annotations = e->ann };
        e->node_known = true;
        e->holds = true;
        assert_int_equal(shutdown_drain_new(fake_clock_timesrc(e->clock), "node-1", "boot-b", &ops, e, e,
                                            &handlers, e, &e->s),
                         0);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;

        shutdown_drain_stop(e->s);
        assert_int_equal(fake_clock_armed(e->clock), 0);
        shutdown_drain_free(e->s);
        fake_clock_free(e->clock);
        free(e);
        return 0;
}

static void set_state(struct env *e, const char *phase, const char *boot) {
        size_t n = 0;

        if (phase)
                e->ann[n++] = (struct kv){ DRAINER_ANN_STATE, phase };
        if (boot)
                e->ann[n++] = (struct kv){ DRAINER_ANN_SHUTDOWN_BOOT, boot };
        e->node.n_annotations = n;
        shutdown_drain_node_changed(e->s, &e->node);
}

/* A shutdown: the drain asked for with this boot; held until the node is drained. */
static void test_shutdown_drains_then_lets_go(void **state) {
        struct env *e = *state;

        e->delay_max = 60 * SEC;
        assert_int_equal(shutdown_drain_start(e->s), 0);
        e->result(0, NULL, e->lock_userdata);
        test_assert_contains(e->notes, "holding a logind shutdown delay lock");
        set_state(e, NULL, NULL); /* before a shutdown: nothing */
        assert_int_equal(e->patches, 0);

        e->shutdown(true, e->lock_userdata);
        assert_int_equal(e->patches, 1);
        assert_string_equal(
                e->last_patch,
                "{\"metadata\":{\"annotations\":{\"drainer.io/request\":\"drain\","
                "\"drainer.io/requested-by\":\"shutdown: logind's shutdown or reboot of the node "
                "(serve --on-shutdown)\","
                "\"drainer.io/shutdown-boot-id\":\"boot-b\"}}}");
        test_assert_contains(e->notes, "shutdown: draining node node-1 before it goes down");
        set_state(e, "cordon", "boot-b");
        assert_int_equal(e->releases, 0);
        set_state(e, "drained", "boot-b");
        assert_int_equal(e->releases, 1);
        test_assert_contains(e->notes, "node node-1 drained: releasing the shutdown inhibitor");
        fake_clock_advance(e->clock, 120 * SEC); /* the deadline finds no lock: nothing */
        assert_int_equal(e->releases, 1);
}

/* logind's delay runs out first: let go 2 s before it; a cancelled shutdown stops the
 * deadline. */
static void test_deadline_and_cancel(void **state) {
        struct env *e = *state;

        e->delay_max = 30 * SEC;
        assert_int_equal(shutdown_drain_start(e->s), 0);
        e->shutdown(true, e->lock_userdata);
        fake_clock_advance(e->clock, 27 * SEC);
        assert_int_equal(e->releases, 0);
        fake_clock_advance(e->clock, 1 * SEC + 1);
        assert_int_equal(e->releases, 1);
        test_assert_contains(e->notes,
                             "logind's inhibit delay is running out before node node-1 is drained");

        e->holds = true;
        e->patch_error = 0;
        e->shutdown(true, e->lock_userdata);
        e->shutdown(false, e->lock_userdata);
        test_assert_contains(e->notes, "shutdown cancelled");
        assert_int_equal(fake_clock_armed(e->clock), 0);
        fake_clock_advance(e->clock, 60 * SEC);
        assert_int_equal(e->releases, 1);
}

/* No delay known: 5 minutes; an unknown node or a refused patch lets go at once. */
static void test_lets_go_when_it_cannot_drain(void **state) {
        struct env *e = *state;

        assert_int_equal(shutdown_drain_start(e->s), 0);
        e->node_known = false;
        e->shutdown(true, e->lock_userdata);
        assert_int_equal(e->releases, 1);
        assert_int_equal(e->patches, 0);
        assert_int_equal(fake_clock_next_due(e->clock), TEST_API_T0 + 5 * 60 * SEC - 2 * SEC);

        e->holds = true;
        e->node_known = true;
        e->patch_error = -EACCES;
        e->shutdown(true, e->lock_userdata);
        assert_int_equal(e->releases, 2);
        test_assert_contains(e->notes,
                             "shutdown: cannot ask for the drain of node node-1: Permission denied");

        e->result(-EACCES, "Access denied", e->lock_userdata);
        test_assert_contains(e->notes, "logind refused the shutdown inhibitor lock: Access denied");
}

/* After the reboot: another boot's drain is undone, once (asked again only after the
 * answer); this boot's own is left alone; other nodes are ignored. */
static void test_restore_after_reboot(void **state) {
        struct env *e = *state;
        struct node_rec other = { .name = "node-2", .annotations = e->ann, .n_annotations = 1 };

        assert_int_equal(shutdown_drain_start(e->s), 0);
        set_state(e, "drained", "boot-b");
        assert_int_equal(e->patches, 0);
        e->ann[0] = (struct kv){ DRAINER_ANN_SHUTDOWN_BOOT, "boot-a" };
        shutdown_drain_node_changed(e->s, &other);
        assert_int_equal(e->patches, 0);

        set_state(e, "drained", "boot-a");
        assert_int_equal(e->patches, 1);
        assert_string_equal(e->last_patch,
                            "{\"metadata\":{\"annotations\":{\"drainer.io/request\":\"uncordon\","
                            "\"drainer.io/requested-by\":\"shutdown: the boot after a drain for shutdown "
                            "(serve --on-shutdown)\","
                            "\"drainer.io/shutdown-boot-id\":null}}}");
        test_assert_contains(e->notes, "node node-1 was drained for a shutdown (boot boot-a): restoring it");
        set_state(e, "restore-drivers", "boot-a"); /* in flight: -EBUSY, said nothing */
        assert_int_equal(e->patches, 1);
        assert_null(strstr(e->notes, "cannot ask for its restore"));
        assert_int_equal(e->releases, 0);
}

static void test_inhibit_fails(void **state) {
        struct env *e = *state;

        e->inhibit_error = -ENOTCONN;
        assert_int_equal(shutdown_drain_start(e->s), -ENOTCONN);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_shutdown_drains_then_lets_go, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deadline_and_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lets_go_when_it_cannot_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restore_after_reboot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_inhibit_fails, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
