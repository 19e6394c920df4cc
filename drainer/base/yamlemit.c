/* cJSON -> YAML: one document emitted event by event through libyaml's emitter,
 * never by hand, so that any string reads back as the string it was. Owns nothing
 * past the call; logs at debug level only and hands its message to the caller. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/yamlemit.h"

#define MAX_DEPTH 64

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

static int emit(yaml_emitter_t *e, yaml_event_t *ev, char **ret_error) {
        if (!yaml_emitter_emit(e, ev))
                return log_error_message(ret_error, -EIO, "yamlemit", "%s",
                                         e->problem ? e->problem : "cannot write YAML");
        return 0;
}

static int emit_scalar(yaml_emitter_t *e, const char *v, bool is_string, char **ret_error) {
        yaml_event_t ev;
        bool ambiguous = is_string && plain_is_ambiguous(v);

        if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)strlen(v), !ambiguous, 1,
                                          YAML_ANY_SCALAR_STYLE))
                return log_error_message_oom(ret_error);
        return emit(e, &ev, ret_error);
}

/* As cJSON prints a number: NaN and infinities as null, integers below 1e15 without
 * a point, else the shortest of 15 or 17 digits that reads back. */
static int emit_number(yaml_emitter_t *e, double d, char **ret_error) {
        char num[64];

        if (isnan(d) || isinf(d))
                return emit_scalar(e, "null", false, ret_error);
        if (d == trunc(d) && fabs(d) < 1e15)
                snprintf(num, sizeof(num), "%.0f", d);
        else {
                snprintf(num, sizeof(num), "%1.15g", d);
                if (strtod(num, NULL) != d)
                        snprintf(num, sizeof(num), "%1.17g", d);
        }
        return emit_scalar(e, num, false, ret_error);
}

static int emit_node(yaml_emitter_t *e, const cJSON *j, unsigned depth, char **ret_error) {
        yaml_event_t ev;
        int r;

        if (depth > MAX_DEPTH)
                return log_error_message(ret_error, -E2BIG, "yamlemit", "the document is nested too deep");
        if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
                bool obj = cJSON_IsObject(j);

                if (!(obj ? yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE)
                          : yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                                 YAML_BLOCK_SEQUENCE_STYLE)))
                        return log_error_message_oom(ret_error);
                r = emit(e, &ev, ret_error);
                if (r < 0)
                        return r;
                for (const cJSON *c = j->child; c; c = c->next) {
                        if (obj) {
                                r = emit_scalar(e, c->string ? c->string : "", true, ret_error);
                                if (r < 0)
                                        return r;
                        }
                        r = emit_node(e, c, depth + 1, ret_error);
                        if (r < 0)
                                return r;
                }
                if (!(obj ? yaml_mapping_end_event_initialize(&ev)
                          : yaml_sequence_end_event_initialize(&ev)))
                        return log_error_message_oom(ret_error);
                return emit(e, &ev, ret_error);
        }
        if (cJSON_IsString(j))
                return emit_scalar(e, j->valuestring ? j->valuestring : "", true, ret_error);
        if (cJSON_IsBool(j))
                return emit_scalar(e, cJSON_IsTrue(j) ? "true" : "false", false, ret_error);
        if (cJSON_IsNumber(j))
                return emit_number(e, j->valuedouble, ret_error);
        return emit_scalar(e, "null", false, ret_error);
}

int json_to_yaml(const cJSON *j, FILE *f, bool explicit_start, char **ret_error) {
        yaml_emitter_t e;
        yaml_event_t ev;
        int r = 0;

        if (ret_error)
                *ret_error = NULL;
        if (!yaml_emitter_initialize(&e))
                return log_error_message_oom(ret_error);
        yaml_emitter_set_output_file(&e, f);
        yaml_emitter_set_unicode(&e, 1);
        yaml_emitter_set_width(&e, -1);
        if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING))
                r = log_error_message_oom(ret_error);
        else
                r = emit(&e, &ev, ret_error);
        if (r >= 0 && !yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, !explicit_start))
                r = log_error_message_oom(ret_error);
        else if (r >= 0)
                r = emit(&e, &ev, ret_error);
        if (r >= 0)
                r = emit_node(&e, j, 0, ret_error);
        if (r >= 0 && !yaml_document_end_event_initialize(&ev, 1))
                r = log_error_message_oom(ret_error);
        else if (r >= 0)
                r = emit(&e, &ev, ret_error);
        if (r >= 0 && !yaml_stream_end_event_initialize(&ev))
                r = log_error_message_oom(ret_error);
        else if (r >= 0)
                r = emit(&e, &ev, ret_error);
        if (r >= 0 && !yaml_emitter_flush(&e))
                r = log_error_message(ret_error, -EIO, "yamlemit", "cannot write the document");
        yaml_emitter_delete(&e);
        return r;
}
