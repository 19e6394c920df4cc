/* Label selector parser and matcher, following apimachinery pkg/labels
 * (selector.go: Lexer, Parser, NewRequirement validation, Requirement.Matches).
 * A selector owns copies of its keys and values; it borrows nothing and
 * never touches the network or logs above debug level. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "drainer/base/buf.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/text.h"

enum op {
        OP_EXISTS,
        OP_NOT_EXISTS,
        OP_EQUALS, /* "=" and "==": one value */
        OP_NOT_EQUALS,
        OP_IN,
        OP_NOT_IN,
        OP_GT,
        OP_LT,
};

struct requirement {
        char *key;
        enum op op;
        char **values; /* sorted, unique */
        size_t n_values, a_values;
        int64_t number; /* OP_GT / OP_LT */
};

struct selector {
        struct requirement *reqs;
        size_t n, a_reqs;
};

/* ---- syntax of keys and values (k8s.io/apimachinery/pkg/util/validation) ---- */

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most 63 characters */
static bool is_qualified_name_part(const char *s, size_t n) {
        if (n == 0 || n > 63)
                return false;
        if (!is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 1; i + 1 < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

static bool is_dns_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* DNS-1123 subdomain: labels [a-z0-9]([-a-z0-9]*[a-z0-9])? joined by '.', at most 253 */
static bool is_dns1123_subdomain(const char *s, size_t n) {
        size_t start = 0;

        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i <= n; i++) {
                if (i < n && s[i] != '.')
                        continue;
                /* label s[start..i) */
                if (i == start || !is_dns_lower_alnum(s[start]) || !is_dns_lower_alnum(s[i - 1]))
                        return false;
                for (size_t j = start; j < i; j++)
                        if (!is_dns_lower_alnum(s[j]) && s[j] != '-')
                                return false;
                start = i + 1;
        }
        return true;
}

bool label_key_is_valid(const char *k) {
        const char *slash;

        if (!k)
                return false;
        slash = strchr(k, '/');
        if (!slash)
                return is_qualified_name_part(k, strlen(k));
        if (strchr(slash + 1, '/'))
                return false;
        return is_dns1123_subdomain(k, (size_t)(slash - k)) &&
               is_qualified_name_part(slash + 1, strlen(slash + 1));
}

bool dns1123_label_is_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > 63 || !is_dns_lower_alnum(s[0]) || !is_dns_lower_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_dns_lower_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

bool label_value_is_valid(const char *v) {
        size_t n;

        if (!v)
                return false;
        n = strlen(v);
        return n == 0 || is_qualified_name_part(v, n);
}

/* strconv.ParseInt(s, 10, 64) */
static bool parse_int64(const char *s, int64_t *ret) {
        bool neg = false;
        uint64_t v = 0;

        if (*s == '+' || *s == '-')
                neg = *s++ == '-';
        if (!*s)
                return false;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return false;
                if (v > (UINT64_MAX - 9) / 10)
                        return false;
                v = v * 10 + (uint64_t)(*s - '0');
        }
        if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
                return false;
        *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
        return true;
}

/* ---- lexer (labels.Lexer) ---- */

enum token {
        TOK_ERROR,
        TOK_EOS,
        TOK_CLOSED_PAR,
        TOK_COMMA,
        TOK_NOT, /* "!": DoesNotExist */
        TOK_DOUBLE_EQUALS,
        TOK_EQUALS,
        TOK_GT,
        TOK_IDENTIFIER,
        TOK_IN,
        TOK_LT,
        TOK_NOT_EQUALS,
        TOK_NOTIN,
        TOK_OPEN_PAR,
};

struct lexeme {
        enum token tok;
        const char *lit;
        size_t len;
        size_t offset; /* of lit in the input */
};

struct parser {
        const char *s;
        size_t max_parts; /* requirements or values: each takes at least one byte of s */
        size_t pos;
        char *error; /* first error, owned */
        bool oom;
};

static bool is_ws(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_special(char c) {
        return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

/* Reads the next lexeme at *pos. In value context the keywords "in" and
 * "notin" are plain identifiers, as in labels.Parser.lookahead(Values). */
static struct lexeme lex_at(const char *s, size_t *pos, bool values) {
        struct lexeme l = {};
        size_t p = *pos;

        while (is_ws(s[p]))
                p++;
        l.lit = s + p;
        l.offset = p;

        if (!s[p]) {
                l.tok = TOK_EOS;
        } else if (is_special(s[p])) {
                char c = s[p++];

                l.len = 1;
                switch (c) {
                case '(':
                        l.tok = TOK_OPEN_PAR;
                        break;
                case ')':
                        l.tok = TOK_CLOSED_PAR;
                        break;
                case ',':
                        l.tok = TOK_COMMA;
                        break;
                case '>':
                        l.tok = TOK_GT;
                        break;
                case '<':
                        l.tok = TOK_LT;
                        break;
                case '=':
                case '!':
                        /* longest match: "==" and "!=" */
                        if (s[p] == '=') {
                                p++;
                                l.len = 2;
                                l.tok = c == '=' ? TOK_DOUBLE_EQUALS : TOK_NOT_EQUALS;
                        } else
                                l.tok = c == '=' ? TOK_EQUALS : TOK_NOT;
                        break;
                }
        } else {
                while (s[p] && !is_ws(s[p]) && !is_special(s[p]))
                        p++;
                l.len = (size_t)(p - l.offset);
                l.tok = TOK_IDENTIFIER;
                if (!values) {
                        if (l.len == 2 && memcmp(l.lit, "in", 2) == 0)
                                l.tok = TOK_IN;
                        else if (l.len == 5 && memcmp(l.lit, "notin", 5) == 0)
                                l.tok = TOK_NOTIN;
                }
        }

        *pos = p;
        return l;
}

static struct lexeme peek(struct parser *ps, bool values) {
        size_t p = ps->pos;
        return lex_at(ps->s, &p, values);
}

static struct lexeme consume(struct parser *ps, bool values) {
        return lex_at(ps->s, &ps->pos, values);
}

_printf_(3, 4) static int parse_error(struct parser *ps, size_t offset, const char *fmt, ...) {
        char *msg = NULL, *full = NULL;
        va_list ap;

        if (ps->error)
                return -EINVAL;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (!msg || asprintf(&full, "invalid selector \"%s\" at offset %zu: %s", ps->s, offset, msg) < 0) {
                free(msg);
                ps->oom = true;
                return -ENOMEM;
        }
        free(msg);
        /* One line, whatever the input holds: control characters become '?' (one
         * byte for one, so the offset still points at the right place). */
        text_one_line(full);
        ps->error = full;
        return -EINVAL;
}

static const char *lit_or_end(const struct lexeme *l, char *buf, size_t bufsz) {
        if (l->tok == TOK_EOS)
                return "end of string";
        snprintf(buf, bufsz, "%.*s", (int)MIN(l->len, bufsz - 1), l->lit);
        return buf;
}

/* ---- requirements ---- */

static void requirement_done(struct requirement *r) {
        free(r->key);
        for (size_t i = 0; i < r->n_values; i++)
                free(r->values[i]);
        free(r->values);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_value(struct parser *ps, struct requirement *r, const char *lit, size_t len) {
        char *s;
        int k;

        k = buf_grow_array(&r->values, &r->a_values, r->n_values + 1, sizeof(char *), ps->max_parts);
        if (k < 0)
                return k;
        s = strndup(lit, len);
        if (!s)
                return -ENOMEM;
        r->values[r->n_values++] = s;
        return 0;
}

static void sort_unique_values(struct requirement *r) {
        size_t j = 0;

        if (r->n_values < 2)
                return;
        qsort(r->values, r->n_values, sizeof(char *), cmp_str);
        for (size_t i = 1; i < r->n_values; i++) {
                if (streq(r->values[i], r->values[j]))
                        free(r->values[i]);
                else
                        r->values[++j] = r->values[i];
        }
        r->n_values = j + 1;
}

/* "(" values ")" for in/notin; mirrors labels.Parser.parseValues and
 * parseIdentifiersList, including their treatment of empty entries ("()" is
 * {""}, "(a,)" is {a, ""}, while "(a,,)" is an error). */
static int parse_set(struct parser *ps, struct requirement *r) {
        char b[64];
        struct lexeme l;
        int k;

        l = consume(ps, true);
        if (l.tok != TOK_OPEN_PAR)
                return parse_error(ps, l.offset, "found '%s', expected: '('", lit_or_end(&l, b, sizeof b));

        l = peek(ps, true);
        if (l.tok == TOK_CLOSED_PAR) {
                consume(ps, true);
                return add_value(ps, r, "", 0);
        }
        if (l.tok != TOK_IDENTIFIER && l.tok != TOK_COMMA)
                return parse_error(ps, l.offset, "found '%s', expected: ',', ')' or identifier",
                                   lit_or_end(&l, b, sizeof b));

        for (bool done = false; !done;) {
                l = consume(ps, true);
                if (l.tok == TOK_IDENTIFIER) {
                        k = add_value(ps, r, l.lit, l.len);
                        if (k < 0)
                                return k;
                        l = peek(ps, true);
                        if (l.tok == TOK_CLOSED_PAR)
                                done = true;
                        else if (l.tok != TOK_COMMA)
                                return parse_error(ps, l.offset, "found '%s', expected: ',' or ')'",
                                                   lit_or_end(&l, b, sizeof b));
                } else if (l.tok == TOK_COMMA) {
                        if (r->n_values == 0) {
                                k = add_value(ps, r, "", 0); /* "(," */
                                if (k < 0)
                                        return k;
                        }
                        l = peek(ps, true);
                        if (l.tok == TOK_CLOSED_PAR) {
                                k = add_value(ps, r, "", 0); /* ",)" */
                                if (k < 0)
                                        return k;
                                done = true;
                        } else if (l.tok == TOK_COMMA) {
                                consume(ps, true);
                                k = add_value(ps, r, "", 0); /* ",," */
                                if (k < 0)
                                        return k;
                        }
                } else
                        return parse_error(ps, l.offset, "found '%s', expected: ',', or identifier",
                                           lit_or_end(&l, b, sizeof b));
        }

        l = consume(ps, true);
        if (l.tok != TOK_CLOSED_PAR)
                return parse_error(ps, l.offset, "found '%s', expected: ')'", lit_or_end(&l, b, sizeof b));
        return 0;
}

static int parse_requirement(struct parser *ps, struct requirement *r) {
        char b[64];
        struct lexeme l, key;
        int k;

        l = consume(ps, false);
        if (l.tok == TOK_NOT) {
                r->op = OP_NOT_EXISTS;
                l = consume(ps, false);
        } else
                r->op = OP_EXISTS;
        if (l.tok != TOK_IDENTIFIER)
                return parse_error(ps, l.offset, "found '%s', expected: identifier",
                                   lit_or_end(&l, b, sizeof b));
        key = l;
        r->key = strndup(key.lit, key.len);
        if (!r->key)
                return -ENOMEM;
        if (!label_key_is_valid(r->key))
                return parse_error(ps, key.offset,
                                   "invalid label key \"%s\": a qualified name is an optional DNS subdomain "
                                   "prefix and '/', then 1-63 alphanumeric characters, '-', '_' or '.', "
                                   "starting and ending with an alphanumeric character",
                                   r->key);

        l = peek(ps, true);
        if (l.tok == TOK_EOS || l.tok == TOK_COMMA || r->op == OP_NOT_EXISTS)
                return 0; /* "k" or "!k"; anything after "!k" fails in the caller */

        l = consume(ps, false);
        switch (l.tok) {
        case TOK_IN:
        case TOK_NOTIN:
                r->op = l.tok == TOK_IN ? OP_IN : OP_NOT_IN;
                k = parse_set(ps, r);
                if (k < 0)
                        return k;
                sort_unique_values(r);
                break;
        case TOK_EQUALS:
        case TOK_DOUBLE_EQUALS:
        case TOK_NOT_EQUALS:
        case TOK_GT:
        case TOK_LT:
                r->op = l.tok == TOK_NOT_EQUALS ? OP_NOT_EQUALS
                        : l.tok == TOK_GT       ? OP_GT
                        : l.tok == TOK_LT       ? OP_LT
                                                : OP_EQUALS;
                l = peek(ps, true);
                if (l.tok == TOK_EOS || l.tok == TOK_COMMA)
                        k = add_value(ps, r, "", 0); /* "k=" selects the empty value */
                else if (l.tok == TOK_IDENTIFIER) {
                        consume(ps, true);
                        k = add_value(ps, r, l.lit, l.len);
                } else
                        return parse_error(ps, l.offset, "found '%s', expected: identifier",
                                           lit_or_end(&l, b, sizeof b));
                if (k < 0)
                        return k;
                if ((r->op == OP_GT || r->op == OP_LT) && !parse_int64(r->values[0], &r->number))
                        return parse_error(ps, l.offset,
                                           "for '>' and '<' the value must be an integer, not \"%s\"",
                                           r->values[0]);
                break;
        default:
                return parse_error(ps, l.offset, "found '%s', expected: in, notin, =, ==, !=, gt, lt",
                                   lit_or_end(&l, b, sizeof b));
        }

        for (size_t i = 0; i < r->n_values; i++)
                if (!label_value_is_valid(r->values[i]))
                        return parse_error(ps, l.offset,
                                           "invalid label value \"%s\" for key \"%s\": at most 63 "
                                           "alphanumeric characters, '-', '_' or '.', starting and "
                                           "ending with an alphanumeric character",
                                           r->values[i], r->key);
        return 0;
}

const char *kv_get(const struct kv *kv, size_t n, const char *key) {
        assert(kv || n == 0);
        assert(key);

        for (size_t i = 0; i < n; i++)
                if (streq(kv[i].key, key))
                        return kv[i].value;
        return NULL;
}

void selector_free(struct selector *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n; i++)
                requirement_done(&s->reqs[i]);
        free(s->reqs);
        free(s);
}

static int parse_all(struct parser *ps, struct selector *sel) {
        char b[64];
        struct lexeme l;
        int k;

        l = peek(ps, false);
        if (l.tok == TOK_EOS)
                return 0;

        for (;;) {
                if (l.tok != TOK_IDENTIFIER && l.tok != TOK_NOT)
                        return parse_error(
                                ps, l.offset,
                                sel->n == 0 ? "found '%s', expected: !, identifier, or 'end of string'"
                                            : "found '%s', expected: identifier after ','",
                                lit_or_end(&l, b, sizeof b));

                k = buf_grow_array(&sel->reqs, &sel->a_reqs, sel->n + 1, sizeof(struct requirement),
                                   ps->max_parts);
                if (k < 0)
                        return k;
                sel->reqs[sel->n] = (struct requirement){};
                k = parse_requirement(ps, &sel->reqs[sel->n++]);
                if (k < 0)
                        return k;

                l = consume(ps, false);
                if (l.tok == TOK_EOS)
                        return 0;
                if (l.tok != TOK_COMMA)
                        return parse_error(ps, l.offset, "found '%s', expected: ',' or 'end of string'",
                                           lit_or_end(&l, b, sizeof b));
                l = peek(ps, false);
        }
}

int selector_parse(const char *s, struct selector **ret, char **ret_error) {
        _cleanup_(selector_freep) struct selector *sel = NULL;
        struct parser ps = { .s = s, .max_parts = strlen(s) + 1 };
        int r;

        assert(s);
        assert(ret);

        sel = calloc(1, sizeof(*sel));
        if (!sel)
                return -ENOMEM;

        r = parse_all(&ps, sel);
        if (r < 0) {
                if (ps.oom || r == -ENOMEM) {
                        free(ps.error);
                        return -ENOMEM;
                }
                log_debug("%s", strna(ps.error));
                if (ret_error)
                        *ret_error = ps.error;
                else
                        free(ps.error);
                return -EINVAL;
        }

        *ret = TAKE_PTR(sel);
        return 0;
}

static bool has_value(const struct requirement *r, const char *v) {
        /* values are sorted and few: a linear scan beats bsearch here */
        for (size_t i = 0; i < r->n_values; i++)
                if (streq(r->values[i], v))
                        return true;
        return false;
}

static bool requirement_matches(const struct requirement *r, const struct kv *labels, size_t n) {
        const char *v = kv_get(labels, n, r->key);
        int64_t x;

        switch (r->op) {
        case OP_EXISTS:
                return v;
        case OP_NOT_EXISTS:
                return !v;
        case OP_EQUALS:
        case OP_IN:
                return v && has_value(r, v);
        case OP_NOT_EQUALS:
        case OP_NOT_IN:
                return !v || !has_value(r, v);
        case OP_GT:
        case OP_LT:
                if (!v || !parse_int64(v, &x))
                        return false;
                return r->op == OP_GT ? x > r->number : x < r->number;
        }
        return false;
}

bool selector_matches(const struct selector *s, const struct kv *labels, size_t n) {
        if (!s)
                return false;
        for (size_t i = 0; i < s->n; i++)
                if (!requirement_matches(&s->reqs[i], labels, n))
                        return false;
        return true;
}

bool selector_is_empty(const struct selector *s) {
        return !s || s->n == 0;
}

size_t selector_n_requirements(const struct selector *s) {
        return s ? s->n : 0;
}

static int cmp_req_by_key(const void *a, const void *b) {
        const struct requirement *x = *(const struct requirement *const *)a;
        const struct requirement *y = *(const struct requirement *const *)b;
        int c = strcmp(x->key, y->key);

        if (c != 0)
                return c;
        return x < y ? -1 : x > y; /* stable */
}

int selector_to_string(const struct selector *s, char **ret) {
        _cleanup_(freep) const struct requirement **order = NULL;
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        assert(ret);

        if (s && s->n > 0) {
                order = calloc(s->n, sizeof(*order));
                if (!order)
                        return -ENOMEM;
                for (size_t i = 0; i < s->n; i++)
                        order[i] = &s->reqs[i];
                qsort(order, s->n, sizeof(*order), cmp_req_by_key);
        }

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; s && i < s->n; i++) {
                const struct requirement *r = order[i];

                if (i > 0)
                        fputc(',', f);
                switch (r->op) {
                case OP_EXISTS:
                        fputs(r->key, f);
                        break;
                case OP_NOT_EXISTS:
                        fprintf(f, "!%s", r->key);
                        break;
                case OP_EQUALS:
                        fprintf(f, "%s=%s", r->key, r->values[0]);
                        break;
                case OP_NOT_EQUALS:
                        fprintf(f, "%s!=%s", r->key, r->values[0]);
                        break;
                case OP_GT:
                        fprintf(f, "%s>%s", r->key, r->values[0]);
                        break;
                case OP_LT:
                        fprintf(f, "%s<%s", r->key, r->values[0]);
                        break;
                case OP_IN:
                case OP_NOT_IN:
                        fprintf(f, "%s %s (", r->key, r->op == OP_IN ? "in" : "notin");
                        for (size_t j = 0; j < r->n_values; j++)
                                fprintf(f, "%s%s", j > 0 ? "," : "", r->values[j]);
                        fputc(')', f);
                        break;
                }
        }
        if (ferror(f) | (fclose(f) != 0)) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}

void selectors_free(struct selector **v, size_t n) {
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                selector_free(v[i]);
        free(v);
}

int selectors_parse_strv(const char *const *strv, struct selector ***ret, size_t *ret_n, char **ret_error) {
        struct selector **v;
        size_t n = 0;
        int r;

        assert(strv);
        assert(ret);
        assert(ret_n);

        while (strv[n])
                n++;
        v = calloc(MAX(n, (size_t)1), sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = selector_parse(strv[i], &v[i], ret_error);
                if (r < 0) {
                        selectors_free(v, i);
                        return r;
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
