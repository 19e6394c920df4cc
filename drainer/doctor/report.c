/* The report of `drainer doctor`: its findings (status, the guide's section,
 * subject, objects, message, fix, numbers), their order, the exit code, and the
 * two ways of printing them (a table grouped by the guide's practices, JSON).
 * Owns the findings; decides none of them (drainer/doctor/rules.c does). */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/doctor/doctor-report.h"

static const char *const doctor_status_table[_DOCTOR_STATUS_MAX] = {
        [DOCTOR_PASS] = "PASS",
        [DOCTOR_WARN] = "WARN",
        [DOCTOR_FAIL] = "FAIL",
};

DEFINE_STRING_TABLE_LOOKUP(doctor_status, enum doctor_status, _DOCTOR_STATUS_MAX, _DOCTOR_STATUS_INVALID)

#define PRACTICE_PERMISSIONS "Separate permissions to DRA related APIs"
#define PRACTICE_DRIVER      "DRA driver deployment and maintenance"
#define PRACTICE_TUNING      "Monitor and tune components for higher load, especially in high scale environments"

static const struct {
        const char *title, *practice;
} sections[_DOCTOR_SECTION_MAX] = {
        [DOCTOR_SECTION_PERMISSIONS] = { PRACTICE_PERMISSIONS, PRACTICE_PERMISSIONS },
        [DOCTOR_SECTION_DRIVER] = { PRACTICE_DRIVER, PRACTICE_DRIVER },
        [DOCTOR_SECTION_SEAMLESS_UPGRADE] = { "Use drivers with seamless upgrade if available",
                                              PRACTICE_DRIVER },
        [DOCTOR_SECTION_LIVENESS] = { "Confirm your DRA driver exposes a liveness probe and utilize it",
                                      PRACTICE_DRIVER },
        [DOCTOR_SECTION_DRAIN] = { "When draining a node, drain the DRA driver as late as possible",
                                   PRACTICE_DRIVER },
        [DOCTOR_SECTION_TUNING] = { PRACTICE_TUNING, PRACTICE_TUNING },
        [DOCTOR_SECTION_KCM_METRICS] = { "kube-controller-manager metrics", PRACTICE_TUNING },
        [DOCTOR_SECTION_SCHEDULER_METRICS] = { "kube-scheduler metrics", PRACTICE_TUNING },
        [DOCTOR_SECTION_KUBELET_METRICS] = { "kubelet metrics", PRACTICE_TUNING },
        [DOCTOR_SECTION_PLUGIN_METRICS] = { "DRA kubeletplugin operations", PRACTICE_TUNING },
};

const char *doctor_section_title(enum doctor_section s) {
        return s >= 0 && s < _DOCTOR_SECTION_MAX ? sections[s].title : NULL;
}

const char *doctor_section_practice(enum doctor_section s) {
        return s >= 0 && s < _DOCTOR_SECTION_MAX ? sections[s].practice : NULL;
}

/* ---- the report ---- */

static void finding_free(struct doctor_finding *f) {
        if (!f)
                return;
        free(f->check);
        free(f->subject);
        for (size_t i = 0; i < f->n_objects; i++)
                free(f->objects[i]);
        free(f->objects);
        free(f->message);
        free(f->fix);
        cJSON_Delete(f->details);
        free(f);
}

struct doctor_finding *doctor_report_add(struct doctor_report *r, enum doctor_section section,
                                         enum doctor_status status, const char *check, const char *subject,
                                         const char *fmt, ...) {
        struct doctor_finding *f;
        va_list ap;
        int k;

        assert(section >= 0 && section < _DOCTOR_SECTION_MAX);
        assert(status >= 0 && status < _DOCTOR_STATUS_MAX);
        if (r->n >= DOCTOR_FINDINGS_MAX)
                return NULL;
        if (r->n == r->alloc) {
                size_t n = r->alloc ? r->alloc * 2 : 32;
                struct doctor_finding **p = realloc(r->items, n * sizeof(*p));

                if (!p)
                        return NULL;
                r->items = p;
                r->alloc = n;
        }
        f = calloc(1, sizeof(*f));
        if (!f)
                return NULL;
        f->section = section;
        f->status = status;
        f->seq = r->n;
        f->check = strdup(check);
        f->subject = strdup(strempty(subject));
        va_start(ap, fmt);
        k = vasprintf(&f->message, fmt, ap);
        va_end(ap);
        if (k < 0)
                f->message = NULL;
        if (!f->check || !f->subject || !f->message) {
                finding_free(f);
                return NULL;
        }
        r->items[r->n++] = f;
        return f;
}

int doctor_finding_add_object(struct doctor_finding *f, const char *fmt, ...) {
        char **p, *s;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        /* The same object named twice says nothing more. */
        for (size_t i = 0; i < f->n_objects; i++)
                if (streq(f->objects[i], s)) {
                        free(s);
                        return 0;
                }
        p = realloc(f->objects, (f->n_objects + 1) * sizeof(*p));
        if (!p) {
                free(s);
                return -ENOMEM;
        }
        f->objects = p;
        f->objects[f->n_objects++] = s;
        return 0;
}

int doctor_finding_set_fix(struct doctor_finding *f, const char *fmt, ...) {
        char *s;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        free(f->fix);
        f->fix = s;
        return 0;
}

int doctor_finding_add_detail(struct doctor_finding *f, const char *key, double value) {
        if (!f->details && !(f->details = cJSON_CreateObject()))
                return -ENOMEM;
        cJSON_DeleteItemFromObject(f->details, key);
        /* JSON has no NaN or Infinity: an infinite quantile is written as null. */
        if (!isfinite(value))
                return cJSON_AddNullToObject(f->details, key) ? 0 : -ENOMEM;
        return cJSON_AddNumberToObject(f->details, key, value) ? 0 : -ENOMEM;
}

void doctor_report_done(struct doctor_report *r) {
        for (size_t i = 0; i < r->n; i++)
                finding_free(r->items[i]);
        free(r->items);
        *r = (struct doctor_report){};
}

static int cmp_finding(const void *a, const void *b) {
        const struct doctor_finding *x = *(const struct doctor_finding *const *)a,
                                    *y = *(const struct doctor_finding *const *)b;

        if (x->section != y->section)
                return x->section < y->section ? -1 : 1;
        if (x->status != y->status)
                return x->status > y->status ? -1 : 1; /* FAIL first */
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void doctor_report_sort(struct doctor_report *r) {
        if (r->n > 1)
                qsort(r->items, r->n, sizeof(*r->items), cmp_finding);
}

size_t doctor_report_count(const struct doctor_report *r, enum doctor_status s) {
        size_t n = 0;

        for (size_t i = 0; i < r->n; i++)
                n += r->items[i]->status == s;
        return n;
}

int doctor_report_exit_code(const struct doctor_report *r) {
        return doctor_report_count(r, DOCTOR_FAIL) > 0 ? DOCTOR_EXIT_FAIL
               : r->no_dra                             ? DOCTOR_EXIT_NO_DRA
                                                       : 0;
}

/* In text, a long list of objects is cut here (JSON has them all). */
#define TEXT_OBJECTS_MAX 12

int doctor_report_print_text(const struct doctor_report *r, FILE *f) {
        const char *practice = NULL;
        int w_check = 5, w_subject = 7, indent;
        enum doctor_section section = _DOCTOR_SECTION_INVALID;

        for (size_t i = 0; i < r->n; i++) {
                w_check = MAX(w_check, (int)strlen(r->items[i]->check));
                w_subject = MAX(w_subject, (int)strlen(r->items[i]->subject));
        }
        w_subject = MIN(w_subject, 40);
        indent = 2 + 7 + w_check + 1 + w_subject + 1;
        for (size_t i = 0; i < r->n; i++) {
                const struct doctor_finding *x = r->items[i];
                const char *p = doctor_section_practice(x->section);
                size_t shown = x->n_objects > TEXT_OBJECTS_MAX ? TEXT_OBJECTS_MAX - 1 : x->n_objects;

                if (!streq_ptr(p, practice)) {
                        fprintf(f, "%s%s\n  %-6s %-*s %-*s %s\n", practice ? "\n" : "", p, "STATUS", w_check,
                                "CHECK", w_subject, "SUBJECT", "FINDING");
                        practice = p;
                }
                if (x->section != section) {
                        /* The page's subsection, when the finding belongs to one. */
                        if (!streq(doctor_section_title(x->section), p))
                                fprintf(f, "  -- %s\n", doctor_section_title(x->section));
                        section = x->section;
                }
                fprintf(f, "  %-6s %-*s %-*s ", doctor_status_to_string(x->status), w_check, x->check,
                        w_subject, x->subject);
                if ((int)strlen(x->subject) > w_subject)
                        fprintf(f, "\n%*s", indent, "");
                fprintf(f, "%s\n", x->message);
                for (size_t j = 0; j < shown; j++)
                        fprintf(f, "%*s%s %s\n", indent, "", j == 0 ? "objects:" : "        ",
                                x->objects[j]);
                if (shown < x->n_objects)
                        fprintf(f, "%*s         ... and %zu more (-o json lists all)\n", indent, "",
                                x->n_objects - shown);
                if (x->fix)
                        fprintf(f, "%*sfix: %s\n", indent, "", x->fix);
        }
        fflush(f);
        return ferror(f) ? -EIO : 0;
}

cJSON *doctor_report_to_json(const struct doctor_report *r) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        cJSON *sum, *arr;

        if (!root)
                return NULL;
        sum = cJSON_AddObjectToObject(root, "summary");
        if (!sum)
                return NULL;
        cJSON_AddNumberToObject(sum, "pass", (double)doctor_report_count(r, DOCTOR_PASS));
        cJSON_AddNumberToObject(sum, "warn", (double)doctor_report_count(r, DOCTOR_WARN));
        cJSON_AddNumberToObject(sum, "fail", (double)doctor_report_count(r, DOCTOR_FAIL));
        cJSON_AddNumberToObject(root, "exitCode", doctor_report_exit_code(r));
        arr = cJSON_AddArrayToObject(root, "findings");
        if (!arr)
                return NULL;
        for (size_t i = 0; i < r->n; i++) {
                const struct doctor_finding *x = r->items[i];
                cJSON *o = cJSON_CreateObject(), *objs;

                if (!o)
                        return NULL;
                cJSON_AddItemToArray(arr, o);
                cJSON_AddStringToObject(o, "practice", doctor_section_practice(x->section));
                cJSON_AddStringToObject(o, "section", doctor_section_title(x->section));
                cJSON_AddStringToObject(o, "check", x->check);
                cJSON_AddStringToObject(o, "status", doctor_status_to_string(x->status));
                cJSON_AddStringToObject(o, "subject", x->subject);
                objs = cJSON_AddArrayToObject(o, "objects");
                for (size_t j = 0; objs && j < x->n_objects; j++)
                        cJSON_AddItemToArray(objs, cJSON_CreateString(x->objects[j]));
                cJSON_AddStringToObject(o, "message", x->message);
                if (x->fix)
                        cJSON_AddStringToObject(o, "fix", x->fix);
                else
                        cJSON_AddNullToObject(o, "fix");
                if (x->details)
                        cJSON_AddItemToObject(o, "details", cJSON_Duplicate(x->details, true));
        }
        /* cJSON's adders fail silently: check the tree once at the end. */
        if (cJSON_GetArraySize(arr) != (int)r->n)
                return NULL;
        return TAKE_PTR(root);
}
