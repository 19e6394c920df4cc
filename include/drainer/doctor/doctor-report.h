/* The report of `drainer doctor`: findings, each PASS, WARN or FAIL under a
 * section of the upstream page "Good practices for Dynamic Resource Allocation
 * as a Cluster Admin", in the page's order, printed as a table or JSON. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "drainer/base/macro.h"

/* Exit code of `drainer doctor` when at least one finding is FAIL (0 otherwise;
 * WARNs do not change it). 1 and 2 keep their meaning (error, bad usage). */
#define DOCTOR_EXIT_FAIL   5
/* No FAIL, but the cluster serves no DRA API: nothing DRA to audit. */
#define DOCTOR_EXIT_NO_DRA 6

enum doctor_status {
        DOCTOR_PASS,
        DOCTOR_WARN,
        DOCTOR_FAIL,
        _DOCTOR_STATUS_MAX,
        _DOCTOR_STATUS_INVALID = -EINVAL,
};

/* "PASS", "WARN", "FAIL" */
const char *doctor_status_to_string(enum doctor_status s);
enum doctor_status doctor_status_from_string(const char *s);

/* The sections of the upstream page, in its order. Each belongs to one of the
 * page's three practices (its "##" headings); see doctor_section_practice(). */
enum doctor_section {
        DOCTOR_SECTION_PERMISSIONS,      /* Separate permissions to DRA related APIs */
        DOCTOR_SECTION_DRIVER,           /* DRA driver deployment and maintenance */
        DOCTOR_SECTION_SEAMLESS_UPGRADE, /* Use drivers with seamless upgrade if available */
        DOCTOR_SECTION_LIVENESS,    /* Confirm your DRA driver exposes a liveness probe and utilize it */
        DOCTOR_SECTION_DRAIN,       /* When draining a node, drain the DRA driver as late as possible */
        DOCTOR_SECTION_TUNING,      /* Monitor and tune components for higher load, ... */
        DOCTOR_SECTION_KCM_METRICS, /* kube-controller-manager metrics */
        DOCTOR_SECTION_SCHEDULER_METRICS, /* kube-scheduler metrics */
        DOCTOR_SECTION_KUBELET_METRICS,   /* kubelet metrics */
        DOCTOR_SECTION_PLUGIN_METRICS,    /* DRA kubeletplugin operations */
        _DOCTOR_SECTION_MAX,
        _DOCTOR_SECTION_INVALID = -EINVAL,
};

/* The section's heading on the upstream page, and the heading of the practice
 * ("##") it belongs to (for a practice's own section both are the same). */
const char *doctor_section_title(enum doctor_section s);
const char *doctor_section_practice(enum doctor_section s);

/* One finding: what was checked (a stable id such as "dra-api-writers"), about
 * what (a subject such as "User alice" or "driver gpu.example.com"), the
 * objects concerned ("ClusterRoleBinding x", "DaemonSet ns/name", "Node n"),
 * what was found and, unless it passed, what to change. */
struct doctor_finding {
        enum doctor_section section;
        enum doctor_status status;
        char *check;
        char *subject;
        char **objects;
        size_t n_objects;
        char *message;
        char *fix;      /* NULL when nothing is to change */
        cJSON *details; /* optional numbers behind the finding (metrics, counts); owned */
        size_t seq;     /* insertion order, for a stable sort */
};

#define DOCTOR_FINDINGS_MAX 100000

struct doctor_report {
        struct doctor_finding **items;
        size_t n, alloc;
        bool no_dra; /* the cluster serves no DRA API (the dra-api finding) */
};

/* Adds a finding with a message; returns it (owned by the report) or NULL when
 * out of memory or over DOCTOR_FINDINGS_MAX. */
struct doctor_finding *doctor_report_add(struct doctor_report *r, enum doctor_section section,
                                         enum doctor_status status, const char *check, const char *subject,
                                         const char *fmt, ...) _printf_(6, 7);
int doctor_finding_add_object(struct doctor_finding *f, const char *fmt, ...) _printf_(2, 3);
int doctor_finding_set_fix(struct doctor_finding *f, const char *fmt, ...) _printf_(2, 3);
/* Adds a number to details (created on first use). */
int doctor_finding_add_detail(struct doctor_finding *f, const char *key, double value);
void doctor_report_done(struct doctor_report *r);

/* Orders the findings by section (the page's order), then FAIL, WARN, PASS,
 * then as added. This function can't fail. */
void doctor_report_sort(struct doctor_report *r);
size_t doctor_report_count(const struct doctor_report *r, enum doctor_status s);
/* DOCTOR_EXIT_FAIL if a finding is FAIL, else DOCTOR_EXIT_NO_DRA if the cluster
 * serves no DRA API, else 0. */
int doctor_report_exit_code(const struct doctor_report *r);
/* The table, grouped by practice; 0 or -EIO. */
int doctor_report_print_text(const struct doctor_report *r, FILE *f);
/* {summary: {pass, warn, fail}, exitCode, findings: [{practice, section, check,
 * status, subject, objects, message, fix, details}]}; NULL when out of memory. */
cJSON *doctor_report_to_json(const struct doctor_report *r);
