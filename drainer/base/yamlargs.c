/* A YAML mapping file -> "--key=value" words, each with its file and line, by
 * libyaml's event parser. Owns the words it makes; knows no flag: the caller says
 * which keys to skip and what a key without a value needs. Logs at debug level
 * only and hands its message to the caller. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/yamlargs.h"

#define fail(ret_error, r, ...) log_error_message(ret_error, r, "yamlargs", __VA_ARGS__)

static bool skipped(const char *const *skip, const char *key) {
        for (; skip && *skip; skip++)
                if (streq(*skip, key))
                        return true;
        return false;
}

/* A plain `key:` or `key: ~` (YAML's null): no value at all, unlike `key: ""`. */
static bool scalar_is_null(const yaml_event_t *ev) {
        const char *v = (const char *)ev->data.scalar.value;

        return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
               (!*v || streq(v, "~") || streq(v, "null") || streq(v, "Null") || streq(v, "NULL"));
}

void yamlargs_done(struct yamlargs *y) {
        if (!y)
                return;
        for (size_t i = 0; i < y->n; i++)
                free(y->words[i].word);
        free(y->words);
        *y = (struct yamlargs){};
}

const struct yamlargs_word *yamlargs_find(const struct yamlargs *y, const char *word) {
        for (size_t i = 0; y && word && i < y->n; i++)
                if (y->words[i].word == word)
                        return &y->words[i];
        return NULL;
}

/* One scalar of the mapping: the key when none is pending, else its value (or one
 * of its list's). */
static int on_scalar(const char *path, const char *const *skip, yamlargs_need_fn need,
                     const yaml_event_t *ev, char **key, size_t *key_line, bool in_seq, struct yamlargs *y,
                     char **ret_error) {
        const char *v = (const char *)ev->data.scalar.value;
        size_t line = ev->start_mark.line + 1;
        struct yamlargs_word *w;
        const char *needed;
        int r = 0;

        if (!*key) {
                *key = strdup(v);
                *key_line = line;
                if (!*key)
                        return log_error_message_oom(ret_error);
                if (!**key || strlen(*key) >= YAMLARGS_KEY_MAX || strpbrk(*key, "= \t"))
                        return fail(ret_error, -EINVAL, "%s:%zu: \"%s\" is not a flag name", path, line,
                                    *key);
                return 0;
        }
        if (y->n + 1 > YAMLARGS_MAX)
                return fail(ret_error, -E2BIG, "%s:%zu: %s: too many settings (at most %d)", path, line,
                            *key, YAMLARGS_MAX);
        if (skipped(skip, *key))
                ; /* another verb's flag */
        else if (scalar_is_null(ev)) {
                needed = need ? need(*key) : NULL;
                r = fail(ret_error, -EINVAL, "%s:%zu: %s: %s", path, in_seq ? line : *key_line, *key,
                         needed ? needed : "a value is needed");
        } else {
                w = &y->words[y->n];
                if (asprintf(&w->word, "--%s=%s", *key, v) < 0) {
                        w->word = NULL;
                        return log_error_message_oom(ret_error);
                }
                /* `force: false` is --force=false: the command line's --force=true still
                 * wins, and the other way round */
                w->file = path;
                w->line = line;
                snprintf(w->key, sizeof(w->key), "%s", *key);
                y->n++;
        }
        if (!in_seq)
                *key = mfree(*key);
        return r;
}

static int parse(yaml_parser_t *parser, const char *path, const char *const *skip, yamlargs_need_fn need,
                 struct yamlargs *y, char **ret_error) {
        _cleanup_free_ char *key = NULL;
        size_t key_line = 0;
        int depth = 0, r = 0;
        bool in_seq = false, done = false;
        yaml_event_t ev;

        while (!done && r == 0) {
                if (!yaml_parser_parse(parser, &ev))
                        return fail(ret_error, -EINVAL, "%s:%zu: %s", path, parser->problem_mark.line + 1,
                                    parser->problem ? parser->problem : "invalid YAML");
                switch (ev.type) {
                case YAML_MAPPING_START_EVENT:
                        if (++depth > 1)
                                r = fail(ret_error, -EINVAL,
                                         "%s:%zu: %s: nested mappings are not config keys", path,
                                         ev.start_mark.line + 1, strna(key));
                        break;
                case YAML_MAPPING_END_EVENT:
                        depth--;
                        break;
                case YAML_SEQUENCE_START_EVENT:
                        if (!key || depth != 1)
                                r = fail(ret_error, -EINVAL, "%s:%zu: a list needs a key", path,
                                         ev.start_mark.line + 1);
                        else if (in_seq)
                                r = fail(ret_error, -EINVAL, "%s:%zu: %s: a list of lists is not a value",
                                         path, ev.start_mark.line + 1, key);
                        in_seq = true;
                        break;
                case YAML_SEQUENCE_END_EVENT:
                        in_seq = false;
                        key = mfree(key);
                        break;
                case YAML_ALIAS_EVENT:
                        r = fail(ret_error, -EINVAL, "%s:%zu: %s: aliases are not config values", path,
                                 ev.start_mark.line + 1, strna(key));
                        break;
                case YAML_SCALAR_EVENT:
                        if (depth != 1)
                                r = fail(ret_error, -EINVAL,
                                         "%s:%zu: the config file must be a mapping of flag names "
                                         "(key: value)",
                                         path, ev.start_mark.line + 1);
                        else
                                r = on_scalar(path, skip, need, &ev, &key, &key_line, in_seq, y, ret_error);
                        break;
                case YAML_STREAM_END_EVENT:
                        done = true;
                        break;
                default:
                        break;
                }
                yaml_event_delete(&ev);
        }
        return r;
}

int yamlargs_load(const char *path, const char *const *skip, yamlargs_need_fn need, struct yamlargs *ret,
                  char **ret_error) {
        struct yamlargs y = {};
        yaml_parser_t parser;
        FILE *f;
        int r;

        *ret = (struct yamlargs){};
        if (ret_error)
                *ret_error = NULL;
        y.words = calloc(YAMLARGS_MAX, sizeof(*y.words));
        if (!y.words)
                return log_error_message_oom(ret_error);
        f = fopen(path, "re");
        if (!f) {
                r = -errno;
                free(y.words);
                return fail(ret_error, r, "%s: cannot read the config file: %s", path, strerror(-r));
        }
        if (!yaml_parser_initialize(&parser)) {
                fclose(f);
                free(y.words);
                return log_error_message_oom(ret_error);
        }
        yaml_parser_set_input_file(&parser, f);
        r = parse(&parser, path, skip, need, &y, ret_error);
        yaml_parser_delete(&parser);
        fclose(f);
        if (r < 0) {
                yamlargs_done(&y);
                return r;
        }
        *ret = y;
        return 0;
}
