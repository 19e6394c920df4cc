/* -o json|yaml|name and --color: the document printers (YAML by libyaml's emitter,
 * never by hand) and the terminal checks every verb asks before it draws. Owns the
 * two process-wide settings the global flags set. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "output.h"

static enum output_doc doc = OUTPUT_DOC_JSON;
static enum output_color color = OUTPUT_COLOR_AUTO;

static const char *const doc_names[_OUTPUT_DOC_MAX] = {
        [OUTPUT_DOC_JSON] = "json",
        [OUTPUT_DOC_YAML] = "yaml",
        [OUTPUT_DOC_NAME] = "name",
};

static const char *const color_names[_OUTPUT_COLOR_MAX] = {
        [OUTPUT_COLOR_AUTO] = "auto",
        [OUTPUT_COLOR_ALWAYS] = "always",
        [OUTPUT_COLOR_NEVER] = "never",
};

enum output_doc output_doc_from_string(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(doc_names); i++)
                if (streq(s, doc_names[i]))
                        return (enum output_doc)i;
        return _OUTPUT_DOC_INVALID;
}

enum output_color output_color_from_string(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(color_names); i++)
                if (streq(s, color_names[i]))
                        return (enum output_color)i;
        return _OUTPUT_COLOR_INVALID;
}

void output_set_doc(enum output_doc d) {
        doc = d;
}

void output_set_color(enum output_color c) {
        color = c;
}

bool output_live(int fd) {
        const char *term = getenv("TERM");

        if (color != OUTPUT_COLOR_AUTO)
                return color == OUTPUT_COLOR_ALWAYS;
        return isatty(fd) && term && *term && !streq(term, "dumb");
}

bool output_color(int fd) {
        const char *no_color = getenv("NO_COLOR");

        if (color == OUTPUT_COLOR_AUTO && no_color && *no_color)
                return false;
        return output_live(fd);
}

const char *output_sgr(int fd, const char *sgr) {
        return output_color(fd) ? sgr : "";
}

/* ---- YAML ---- */

/* Whether a plain scalar s would read back as something other than a string (a
 * bool, a null, a number in YAML 1.1 or 1.2): such strings are quoted. */
static bool plain_is_ambiguous(const char *s) {
        static const char *const words[] = {
                "",      "~",    "null", "Null",  "NULL",  "true",  "True",  "TRUE", "false", "False",
                "FALSE", "yes",  "Yes",  "YES",   "no",    "No",    "NO",    "on",   "On",    "ON",
                "off",   "Off",  "OFF",  "y",     "Y",     "n",     "N",     ".nan", ".NaN",  ".NAN",
                ".inf",  ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf",
        };
        char *end;

        for (size_t i = 0; i < ELEMENTSOF(words); i++)
                if (streq(s, words[i]))
                        return true;
        /* numbers, YAML 1.1's timestamps (2026-12-05T10:47:52Z) and sexagesimals (1:20):
         * every string that opens as a number is quoted */
        if (strchr("0123456789", s[0]) || (strchr("+-.", s[0]) && s[1] && strchr("0123456789.", s[1])))
                return true;
        (void)strtod(s, &end);
        return end != s && *end == 0;
}

static int emit(yaml_emitter_t *e, yaml_event_t *ev) {
        if (!yaml_emitter_emit(e, ev))
                return log_error_errno(EIO, "-o yaml: %s", e->problem ? e->problem : "cannot write YAML");
        return 0;
}

static int emit_scalar(yaml_emitter_t *e, const char *v, bool is_string) {
        yaml_event_t ev;
        bool ambiguous = is_string && plain_is_ambiguous(v);

        if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)strlen(v), !ambiguous, 1,
                                          YAML_ANY_SCALAR_STYLE))
                return log_oom();
        return emit(e, &ev);
}

static int emit_node(yaml_emitter_t *e, const cJSON *j, unsigned depth) {
        yaml_event_t ev;
        int r;

        if (depth > 64)
                return log_error_errno(E2BIG, "-o yaml: the document is nested too deep");
        if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
                bool obj = cJSON_IsObject(j);

                if (!(obj ? yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE)
                          : yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                                 YAML_BLOCK_SEQUENCE_STYLE)))
                        return log_oom();
                r = emit(e, &ev);
                if (r < 0)
                        return r;
                for (const cJSON *c = j->child; c; c = c->next) {
                        if (obj) {
                                r = emit_scalar(e, c->string ? c->string : "", true);
                                if (r < 0)
                                        return r;
                        }
                        r = emit_node(e, c, depth + 1);
                        if (r < 0)
                                return r;
                }
                if (!(obj ? yaml_mapping_end_event_initialize(&ev)
                          : yaml_sequence_end_event_initialize(&ev)))
                        return log_oom();
                return emit(e, &ev);
        }
        if (cJSON_IsString(j))
                return emit_scalar(e, j->valuestring ? j->valuestring : "", true);
        if (cJSON_IsBool(j))
                return emit_scalar(e, cJSON_IsTrue(j) ? "true" : "false", false);
        if (cJSON_IsNumber(j)) {
                char num[64];
                double d = j->valuedouble;

                if (isnan(d) || isinf(d))
                        return emit_scalar(e, "null", false); /* as cJSON prints them */
                /* as cJSON prints it: the shortest of 15 or 17 digits that reads back */
                if (d == trunc(d) && fabs(d) < 1e15)
                        snprintf(num, sizeof(num), "%.0f", d);
                else {
                        snprintf(num, sizeof(num), "%1.15g", d);
                        if (strtod(num, NULL) != d)
                                snprintf(num, sizeof(num), "%1.17g", d);
                }
                return emit_scalar(e, num, false);
        }
        return emit_scalar(e, "null", false);
}

static int print_yaml(const cJSON *j, bool explicit_start) {
        yaml_emitter_t e;
        yaml_event_t ev;
        int r = 0;

        if (!yaml_emitter_initialize(&e))
                return log_oom();
        yaml_emitter_set_output_file(&e, stdout);
        yaml_emitter_set_unicode(&e, 1);
        yaml_emitter_set_width(&e, -1);
        if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING))
                r = log_oom();
        else
                r = emit(&e, &ev);
        if (r >= 0 && !yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, !explicit_start))
                r = log_oom();
        else if (r >= 0)
                r = emit(&e, &ev);
        if (r >= 0)
                r = emit_node(&e, j, 0);
        if (r >= 0 && !yaml_document_end_event_initialize(&ev, 1))
                r = log_oom();
        else if (r >= 0)
                r = emit(&e, &ev);
        if (r >= 0 && !yaml_stream_end_event_initialize(&ev))
                r = log_oom();
        else if (r >= 0)
                r = emit(&e, &ev);
        if (r >= 0 && !yaml_emitter_flush(&e))
                r = log_error_errno(EIO, "-o yaml: cannot write to stdout");
        yaml_emitter_delete(&e);
        return r;
}

/* ---- name ---- */

static void print_name(const cJSON *o) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "node");

        if (cJSON_IsObject(n))
                n = cJSON_GetObjectItemCaseSensitive(n, "name");
        if (cJSON_IsString(n) && n->valuestring)
                printf("node/%s\n", n->valuestring);
}

/* A List (items) or a rollout (nodes): node/NAME per node; else the document's own. */
static void print_names(const cJSON *j) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
        const char *last = NULL;

        if (!cJSON_IsArray(items)) /* rollout's summary */
                items = cJSON_GetObjectItemCaseSensitive(j, "nodes");
        if (!cJSON_IsArray(items)) {
                print_name(j);
                return;
        }
        for (const cJSON *i = items->child; i; i = i->next) {
                const cJSON *n = cJSON_GetObjectItemCaseSensitive(i, "node");

                /* one line per node, also when the list has one item per driver of it */
                if (cJSON_IsString(n) && last && streq(last, n->valuestring))
                        continue;
                print_name(i);
                last = cJSON_IsString(n) ? n->valuestring : NULL;
        }
}

int output_print(const cJSON *j, bool compact) {
        _cleanup_free_ char *out = NULL;

        if (!j)
                return log_oom();
        switch (doc) {
        case OUTPUT_DOC_YAML:
                return print_yaml(j, compact);
        case OUTPUT_DOC_NAME:
                print_names(j);
                fflush(stdout);
                return 0;
        default:
                out = compact ? cJSON_PrintUnformatted(j) : cJSON_Print(j);
                if (!out)
                        return log_oom();
                puts(out);
                fflush(stdout);
                return 0;
        }
}
