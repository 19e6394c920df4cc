/* -o json|yaml|name and --color: the document printers (YAML by base/yamlemit.c)
 * and the terminal checks every verb asks before it draws. Owns the two
 * process-wide settings the global flags set. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/yamlemit.h"
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

static int print_yaml(const cJSON *j, bool explicit_start) {
        _cleanup_free_ char *err = NULL;
        int r;

        r = json_to_yaml(j, stdout, explicit_start, &err);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                return log_error_errno(r, "-o yaml: %s", strna(err));
        return 0;
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
