/* profile: a drain profile becomes one engine's options and one plan's options the same
 * way for every controller (each field lands where the engine reads it), its copy scoped
 * to one driver, and what it owns is freed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drainer/base/macro.h"
#include "drainer/base/selector.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/profile.h"

static void test_engine_options(void **state) {
        struct drain_profile p = {
                .force = true,
                .emptydir = true,
                .disable_eviction = true,
                .grace = 7,
                .skip_wait_for_delete_usec = 5 * USEC_PER_SEC,
                .stop = &driver_stop_label,
                .stop_arg = "example.com/driver",
                .skip_driver_stop = true,
                .ignore_health = true,
                .force_uncordon = true,
                .node_conditions = true,
                .timeout_usec = 90 * USEC_PER_SEC,
                .driver_namespaces = { "dra", NULL },
                .n_driver_namespaces = 1,
        };
        struct engine_options eo;
        char *err = NULL;

        assert_int_equal(selector_parse("app=web", &p.pod_sel, &err), 0);
        drain_profile_engine_options(&p, "node-1", ENGINE_GOAL_DRAIN, &eo);
        assert_string_equal(eo.node, "node-1");
        assert_int_equal(eo.goal, ENGINE_GOAL_DRAIN);
        assert_int_equal(eo.grace_seconds, 7);
        assert_true(eo.disable_eviction);
        assert_int_equal(eo.skip_wait_for_delete_usec, 5 * USEC_PER_SEC);
        assert_true(eo.force_uncordon);
        assert_true(eo.node_conditions);
        assert_true(eo.skip_driver_stop);
        assert_null(eo.driver_health);
        assert_int_equal(eo.timeout_usec, 90 * USEC_PER_SEC);
        /* what only the caller knows stays unset */
        assert_null(eo.shared);
        assert_null(eo.units.ops);
        assert_false(eo.out_of_service);
        /* the plan */
        assert_ptr_equal(eo.plan.pod_selector, p.pod_sel);
        assert_true(eo.plan.force);
        assert_true(eo.plan.delete_emptydir_data);
        assert_ptr_equal(eo.plan.driver_stop, &driver_stop_label);
        assert_string_equal(eo.plan.driver_stop_arg, "example.com/driver");
        assert_true(eo.plan.ignore_driver_health);
        assert_int_equal(eo.plan.n_driver_namespaces, 1);
        assert_string_equal(eo.plan.driver_namespaces[0], "dra");
        assert_int_equal(eo.plan.n_drivers, 0);
        assert_int_equal(eo.plan.isolation, PLAN_ISOLATE_CORDON);
        drain_profile_done(&p);
        assert_null(p.pod_sel);
}

static void test_driver_scope(void **state) {
        struct drain_profile p = {
                .grace = -1,
                .drivers = { "gpu.example.com", "nic.example.com", NULL },
                .n_drivers = 2,
        }, one;
        struct engine_options eo;

        drain_profile_engine_options(&p, "node-2", ENGINE_GOAL_UNCORDON, &eo);
        assert_int_equal(eo.grace_seconds, -1);
        assert_int_equal(eo.plan.n_drivers, 2);
        /* a driver's drain cordons only when its devices cannot be tainted */
        assert_int_equal(eo.plan.isolation, PLAN_ISOLATE_CORDON_FALLBACK);

        drain_profile_for_driver(&p, 1, &one);
        assert_int_equal(one.n_drivers, 1);
        assert_string_equal(one.drivers[0], "nic.example.com");
        assert_null(one.drivers[1]);
        /* the original is untouched */
        assert_int_equal(p.n_drivers, 2);
        assert_string_equal(p.drivers[0], "gpu.example.com");
        drain_profile_engine_options(&one, "node-2", ENGINE_GOAL_DRAIN, &eo);
        assert_int_equal(eo.plan.n_drivers, 1);
        assert_string_equal(eo.plan.drivers[0], "nic.example.com");
}

static void test_done_twice(void **state) {
        struct drain_profile p = {};
        char *err = NULL;

        assert_int_equal(selector_parse("tier!=db", &p.pod_sel, &err), 0);
        drain_profile_done(&p);
        drain_profile_done(&p); /* idempotent: nothing freed twice */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_engine_options),
                cmocka_unit_test(test_driver_scope),
                cmocka_unit_test(test_done_twice),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
