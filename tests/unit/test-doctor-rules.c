/* doctor's rules as a table (drainer/doctor/rules.c): every entry has an id, a
 * section of the guide and a check; ids are unique; each check runs on empty data
 * (nothing gathered, no driver, Prometheus without an answer) without failing, and
 * every finding it adds carries its rule's id; doctor_rules_run on that data gives
 * exactly the findings of the rules that apply, a driver's rules once per driver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "drainer/doctor/doctor-rules.h"

static void test_table_entries(void **state) {
        assert_true(doctor_rules_n > 0);
        for (size_t i = 0; i < doctor_rules_n; i++) {
                const struct doctor_rule *rule = &doctor_rules[i];

                assert_non_null(rule->id);
                assert_true(rule->id[0] != '\0');
                assert_true(rule->section >= 0 && rule->section < _DOCTOR_SECTION_MAX);
                assert_non_null(doctor_section_title(rule->section));
                assert_non_null(rule->check);
                assert_true(rule->needs != 0);
                for (size_t k = 0; k < i; k++)
                        assert_string_not_equal(doctor_rules[k].id, rule->id);
        }
}

/* Each check alone on empty data: no failure, and its findings carry its id. */
static void test_each_rule_runs_on_empty_data(void **state) {
        struct doctor_prom_results prom = {};
        struct doctor_data d;

        assert_int_equal(doctor_data_init(&d, NULL), 0);
        for (size_t i = 0; i < doctor_rules_n; i++) {
                const struct doctor_rule *rule = &doctor_rules[i];
                const struct doctor_rule_input in = {
                        .data = &d,
                        .prom_url = "http://127.0.0.1:9",
                        .prom = &prom,
                        .subject = "",
                };
                struct doctor_report rep = {};

                assert_int_equal(rule->check(&in, &rep), 0);
                for (size_t k = 0; k < rep.n; k++)
                        assert_string_equal(rep.items[k]->check, rule->id);
                doctor_report_done(&rep);
        }
        doctor_data_done(&d);
}

/* The runner: without --prometheus no metrics rule runs; with it, they do. */
static void test_run_follows_the_table(void **state) {
        struct doctor_prom_results prom = {};
        struct doctor_report plain = {}, with_prom = {};
        struct doctor_data d;
        size_t metrics_findings = 0;

        assert_int_equal(doctor_data_init(&d, NULL), 0);
        assert_int_equal(doctor_rules_run(&d, NULL, NULL, &plain), 0);
        assert_int_equal(doctor_rules_run(&d, "http://127.0.0.1:9", &prom, &with_prom), 0);
        for (size_t k = 0; k < plain.n; k++) {
                bool known = false;

                for (size_t i = 0; i < doctor_rules_n; i++)
                        if (strcmp(doctor_rules[i].id, plain.items[k]->check) == 0) {
                                assert_false(doctor_rules[i].needs & DOCTOR_RULE_NEEDS_PROMETHEUS);
                                known = true;
                        }
                assert_true(known);
        }
        for (size_t k = 0; k < with_prom.n; k++)
                for (size_t i = 0; i < doctor_rules_n; i++)
                        if (strcmp(doctor_rules[i].id, with_prom.items[k]->check) == 0 &&
                            (doctor_rules[i].needs & DOCTOR_RULE_NEEDS_PROMETHEUS))
                                metrics_findings++;
        assert_true(metrics_findings > 0);
        assert_int_equal(with_prom.n - metrics_findings, plain.n);
        /* No driver: driver-daemonset says so once. */
        {
                size_t n = 0;

                for (size_t k = 0; k < plain.n; k++)
                        n += strcmp(plain.items[k]->check, "driver-daemonset") == 0;
                assert_int_equal(n, 1);
        }
        doctor_report_done(&plain);
        doctor_report_done(&with_prom);
        doctor_data_done(&d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table_entries),
                cmocka_unit_test(test_each_rule_runs_on_empty_data),
                cmocka_unit_test(test_run_follows_the_table),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
