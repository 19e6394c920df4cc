/* The metrics registry and its two renderings (Prometheus text 0.0.4, JSON),
 * the process metrics read from /proc/self, and drainer's own metric
 * definitions in one table. Owns its families and series; every container is
 * capped. It keeps no clock: callers pass durations measured on their time
 * source. It must not call into the loop or any other drainer module. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "drainer/base/buf.h"
#include "drainer/base/hashmap.h"
#include "drainer/obs/metrics.h"

#define DEFAULT_MAX_FAMILIES 256
#define DEFAULT_MAX_SERIES   20000
#define MAX_COLLECTORS       8

struct series {
        char *key;                   /* the label values, length-prefixed; the index's key */
        char **values;               /* n_labels copies */
        double value;                /* counters, gauges */
        unsigned long long *buckets; /* histograms: per bucket, not cumulative; [n_buckets] is +Inf */
        unsigned long long count;
        double sum;
};

struct metric_family {
        struct metrics *reg;
        char *name, *help;
        enum metric_type type;
        char *labels[METRICS_MAX_LABELS];
        size_t n_labels;
        double *bounds;
        size_t n_bounds;
        struct hashmap *index; /* key -> struct series (borrowed from series[]) */
        struct series **series;
        size_t n_series, cap_series;
};

struct collector {
        metrics_collect_fn fn;
        void *userdata;
        void (*free_userdata)(void *p); /* when the registry owns userdata */
};

struct metrics {
        struct metric_family **families;
        size_t n_families;
        size_t max_families, max_series, n_series;
        unsigned long long dropped;
        struct collector collectors[MAX_COLLECTORS];
        size_t n_collectors;
};

static const char *const metric_type_table[_METRIC_TYPE_MAX] = {
        [METRIC_COUNTER] = "counter",
        [METRIC_GAUGE] = "gauge",
        [METRIC_HISTOGRAM] = "histogram",
};

DEFINE_STRING_TABLE_LOOKUP(metric_type, enum metric_type, _METRIC_TYPE_MAX, _METRIC_TYPE_INVALID)

/* Prometheus' default buckets (client_golang DefBuckets). */
static const double default_bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

/* ---- validation ---- */

static bool valid_name(const char *s, bool colon) {
        if (!s || !*s)
                return false;
        for (const char *p = s; *p; p++) {
                bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
                          (colon && *p == ':') || (p > s && *p >= '0' && *p <= '9');

                if (!ok)
                        return false;
        }
        return true;
}

static bool ends_with(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);

        return a >= b && streq(s + a - b, suffix);
}

static int validate(const struct metric_desc *d, size_t *ret_n_labels) {
        size_t n = 0;

        if (!d || !valid_name(d->name, true) || d->type < 0 || d->type >= _METRIC_TYPE_MAX)
                return -EINVAL;
        /* Counters carry the _total suffix in the text format 0.0.4, as client_golang writes them. */
        if (d->type == METRIC_COUNTER && !ends_with(d->name, "_total"))
                return -EINVAL;
        /* A histogram's own series use these suffixes: a name ending in one would be ambiguous. */
        if (d->type == METRIC_HISTOGRAM &&
            (ends_with(d->name, "_bucket") || ends_with(d->name, "_sum") || ends_with(d->name, "_count")))
                return -EINVAL;
        if (d->help && (strlen(d->help) > METRICS_MAX_HELP))
                return -EINVAL;
        for (; n <= METRICS_MAX_LABELS && d->labels[n]; n++) {
                const char *l = d->labels[n];

                if (n == METRICS_MAX_LABELS || !valid_name(l, false) || strncmp(l, "__", 2) == 0 ||
                    (d->type == METRIC_HISTOGRAM && streq(l, "le")))
                        return -EINVAL;
                for (size_t k = 0; k < n; k++)
                        if (streq(d->labels[k], l))
                                return -EINVAL;
        }
        if (d->type == METRIC_HISTOGRAM && d->buckets) {
                if (d->n_buckets == 0 || d->n_buckets > METRICS_MAX_BUCKETS)
                        return -EINVAL;
                for (size_t i = 0; i < d->n_buckets; i++)
                        if (!isfinite(d->buckets[i]) || (i > 0 && d->buckets[i] <= d->buckets[i - 1]))
                                return -EINVAL;
        }
        *ret_n_labels = n;
        return 0;
}

/* ---- families and series ---- */

static void series_free(struct series *s, size_t n_labels) {
        if (!s)
                return;
        for (size_t i = 0; s->values && i < n_labels; i++)
                free(s->values[i]);
        free(s->values);
        free(s->buckets);
        free(s->key);
        free(s);
}

static void family_free(struct metric_family *f) {
        if (!f)
                return;
        for (size_t i = 0; i < f->n_series; i++)
                series_free(f->series[i], f->n_labels);
        free(f->series);
        hashmap_free(f->index, NULL);
        for (size_t i = 0; i < f->n_labels; i++)
                free(f->labels[i]);
        free(f->bounds);
        free(f->name);
        free(f->help);
        free(f);
}

static bool same_desc(const struct metric_family *f, const struct metric_desc *d, size_t n_labels) {
        const double *b = d->buckets ? d->buckets : default_bounds;
        size_t nb = d->buckets ? d->n_buckets : ELEMENTSOF(default_bounds);

        if (f->type != d->type || f->n_labels != n_labels)
                return false;
        for (size_t i = 0; i < n_labels; i++)
                if (!streq(f->labels[i], d->labels[i]))
                        return false;
        if (f->type != METRIC_HISTOGRAM)
                return true;
        if (f->n_bounds != nb)
                return false;
        for (size_t i = 0; i < nb; i++)
                if (f->bounds[i] != b[i])
                        return false;
        return true;
}

int metrics_new(const struct metrics_options *o, struct metrics **ret) {
        struct metrics *m = calloc(1, sizeof(*m));

        if (!m)
                return -ENOMEM;
        m->max_families = o && o->max_families ? o->max_families : DEFAULT_MAX_FAMILIES;
        m->max_series = o && o->max_series ? o->max_series : DEFAULT_MAX_SERIES;
        m->families = calloc(m->max_families, sizeof(*m->families));
        if (!m->families) {
                free(m);
                return -ENOMEM;
        }
        *ret = m;
        return 0;
}

struct metrics *metrics_free(struct metrics *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_families; i++)
                family_free(m->families[i]);
        for (size_t i = 0; i < m->n_collectors; i++)
                if (m->collectors[i].free_userdata)
                        m->collectors[i].free_userdata(m->collectors[i].userdata);
        free(m->families);
        free(m);
        return NULL;
}

struct metric_family *metrics_find(const struct metrics *m, const char *name) {
        for (size_t i = 0; m && name && i < m->n_families; i++)
                if (streq(m->families[i]->name, name))
                        return m->families[i];
        return NULL;
}

int metrics_register(struct metrics *m, const struct metric_desc *d, struct metric_family **ret) {
        struct metric_family *f;
        size_t n_labels = 0;
        int r;

        r = validate(d, &n_labels);
        if (r < 0)
                return r;
        f = metrics_find(m, d->name);
        if (f) {
                if (!same_desc(f, d, n_labels))
                        return -EEXIST;
                if (ret)
                        *ret = f;
                return 0;
        }
        if (m->n_families >= m->max_families)
                return -ENOSPC;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->reg = m;
        f->type = d->type;
        f->name = strdup(d->name);
        f->help = strdup(d->help ? d->help : "");
        f->index = hashmap_new(m->max_series);
        if (!f->name || !f->help || !f->index)
                goto oom;
        for (; f->n_labels < n_labels; f->n_labels++)
                if (!(f->labels[f->n_labels] = strdup(d->labels[f->n_labels])))
                        goto oom;
        if (f->type == METRIC_HISTOGRAM) {
                const double *b = d->buckets ? d->buckets : default_bounds;

                f->n_bounds = d->buckets ? d->n_buckets : ELEMENTSOF(default_bounds);
                f->bounds = malloc(f->n_bounds * sizeof(double));
                if (!f->bounds)
                        goto oom;
                memcpy(f->bounds, b, f->n_bounds * sizeof(double));
        }
        m->families[m->n_families++] = f;
        if (ret)
                *ret = f;
        return 0;
oom:
        family_free(f);
        return -ENOMEM;
}

/* "len:value" for each value: unambiguous whatever the values contain. */
static int make_key(const struct metric_family *f, const char *const *values, char **ret) {
        size_t n = 0, len = 1;
        char *k, *p;

        for (; values && values[n]; n++) {
                size_t l = strlen(values[n]);

                if (n >= f->n_labels)
                        return -EINVAL;
                if (l > METRICS_MAX_LABEL_VALUE)
                        return -E2BIG;
                len += l + 8;
        }
        if (n != f->n_labels)
                return -EINVAL;
        k = p = malloc(len);
        if (!k)
                return -ENOMEM;
        *p = 0;
        for (size_t i = 0; i < n; i++)
                p += sprintf(p, "%zu:%s", strlen(values[i]), values[i]);
        *ret = k;
        return 0;
}

static int lookup(struct metric_family *f, const char *const *values, bool create, struct series **ret) {
        _cleanup_free_ char *key = NULL;
        struct series *s;
        int r;

        r = make_key(f, values, &key);
        if (r < 0)
                return r;
        s = hashmap_get(f->index, key);
        if (s) {
                *ret = s;
                return 0;
        }
        if (!create)
                return -ENOENT;
        if (f->reg->n_series >= f->reg->max_series) {
                f->reg->dropped++;
                return -ENOSPC;
        }
        r = buf_grow_array(&f->series, &f->cap_series, f->n_series + 1, sizeof(*f->series),
                           f->reg->max_series);
        if (r < 0)
                return r;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->key = TAKE_PTR(key);
        s->values = calloc(f->n_labels + 1, sizeof(char *));
        if (!s->values)
                goto oom;
        for (size_t i = 0; i < f->n_labels; i++)
                if (!(s->values[i] = strdup(values[i])))
                        goto oom;
        if (f->type == METRIC_HISTOGRAM && !(s->buckets = calloc(f->n_bounds + 1, sizeof(*s->buckets))))
                goto oom;
        r = hashmap_put(f->index, s->key, s, NULL);
        if (r < 0) {
                series_free(s, f->n_labels);
                return r;
        }
        f->series[f->n_series++] = s;
        f->reg->n_series++;
        *ret = s;
        return 0;
oom:
        series_free(s, f->n_labels);
        return -ENOMEM;
}

int metrics_add(struct metric_family *f, const char *const *values, double v) {
        struct series *s;
        int r;

        if (!f || f->type == METRIC_HISTOGRAM || isnan(v) || (f->type == METRIC_COUNTER && v < 0))
                return -EINVAL;
        r = lookup(f, values, true, &s);
        if (r < 0)
                return r;
        s->value += v;
        return 0;
}

int metrics_set(struct metric_family *f, const char *const *values, double v) {
        struct series *s;
        int r;

        if (!f || f->type == METRIC_HISTOGRAM)
                return -EINVAL;
        r = lookup(f, values, true, &s);
        if (r < 0)
                return r;
        s->value = v;
        return 0;
}

int metrics_observe(struct metric_family *f, const char *const *values, double v) {
        struct series *s;
        size_t i = 0;
        int r;

        if (!f || f->type != METRIC_HISTOGRAM || isnan(v))
                return -EINVAL;
        r = lookup(f, values, true, &s);
        if (r < 0)
                return r;
        while (i < f->n_bounds && v > f->bounds[i])
                i++;
        s->buckets[i]++;
        s->count++;
        s->sum += v;
        return 0;
}

static void remove_at(struct metric_family *f, size_t i) {
        struct series *s = f->series[i];

        hashmap_remove(f->index, s->key);
        memmove(&f->series[i], &f->series[i + 1], (f->n_series - i - 1) * sizeof(*f->series));
        f->n_series--;
        f->reg->n_series--;
        series_free(s, f->n_labels);
}

int metrics_remove(struct metric_family *f, const char *const *values) {
        struct series *s;
        int r;

        if (!f)
                return -EINVAL;
        r = lookup(f, values, false, &s);
        if (r < 0)
                return r;
        for (size_t i = 0; i < f->n_series; i++)
                if (f->series[i] == s) {
                        remove_at(f, i);
                        break;
                }
        return 0;
}

size_t metrics_remove_where(struct metric_family *f, const char *label, const char *value) {
        size_t removed = 0;

        for (size_t l = 0; f && label && value && l < f->n_labels; l++) {
                if (!streq(f->labels[l], label))
                        continue;
                for (size_t k = f->n_series; k > 0; k--)
                        if (streq(f->series[k - 1]->values[l], value)) {
                                remove_at(f, k - 1);
                                removed++;
                        }
        }
        return removed;
}

size_t metrics_remove_label(struct metrics *m, const char *label, const char *value) {
        size_t removed = 0;

        for (size_t i = 0; m && i < m->n_families; i++)
                removed += metrics_remove_where(m->families[i], label, value);
        return removed;
}

int metrics_get(const struct metric_family *f, const char *const *values, double *ret) {
        struct series *s;
        int r;

        if (!f || f->type == METRIC_HISTOGRAM)
                return -EINVAL;
        r = lookup((struct metric_family *)f, values, false, &s);
        if (r < 0)
                return r;
        *ret = s->value;
        return 0;
}

int metrics_get_histogram(const struct metric_family *f, const char *const *values,
                          unsigned long long *ret_count, double *ret_sum) {
        struct series *s;
        int r;

        if (!f || f->type != METRIC_HISTOGRAM)
                return -EINVAL;
        r = lookup((struct metric_family *)f, values, false, &s);
        if (r < 0)
                return r;
        if (ret_count)
                *ret_count = s->count;
        if (ret_sum)
                *ret_sum = s->sum;
        return 0;
}

size_t metrics_series(const struct metrics *m) {
        return m ? m->n_series : 0;
}

unsigned long long metrics_dropped(const struct metrics *m) {
        return m ? m->dropped : 0;
}

int metrics_add_collector(struct metrics *m, metrics_collect_fn fn, void *userdata) {
        if (!m || !fn)
                return -EINVAL;
        for (size_t i = 0; i < m->n_collectors; i++)
                if (m->collectors[i].fn == fn && m->collectors[i].userdata == userdata)
                        return 0;
        if (m->n_collectors >= MAX_COLLECTORS)
                return -ENOSPC;
        m->collectors[m->n_collectors++] = (struct collector){ fn, userdata, NULL };
        return 0;
}

static void collect(struct metrics *m) {
        for (size_t i = 0; i < m->n_collectors; i++)
                m->collectors[i].fn(m, m->collectors[i].userdata);
}

/* ---- the text format ---- */

/* The rendering, with a sticky error: the first failed append ends it. */
struct text {
        struct buf b;
        int error;
};

static void text_put(struct text *t, const char *s, size_t n) {
        if (t->error >= 0)
                t->error = buf_append(&t->b, s, n);
}

static void text_puts(struct text *t, const char *s) {
        text_put(t, s, strlen(s));
}

/* Label values escape backslash, double quote and newline; HELP text only
 * backslash and newline (the format's two escaping rules). */
static void text_escaped(struct text *b, const char *s, bool quote) {
        const char *run = s;

        for (; *s; s++) {
                const char *esc = *s == '\\'           ? "\\\\"
                                  : *s == '\n'         ? "\\n"
                                  : quote && *s == '"' ? "\\\""
                                                       : NULL;

                if (!esc)
                        continue;
                text_put(b, run, (size_t)(s - run));
                text_puts(b, esc);
                run = s + 1;
        }
        text_puts(b, run);
}

/* Shortest form that reads back as the same double; Inf and NaN as Prometheus spells them. */
static void format_double(double v, char *out, size_t size) {
        if (isnan(v))
                snprintf(out, size, "NaN");
        else if (isinf(v))
                snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
        else {
                snprintf(out, size, "%.15g", v);
                if (strtod(out, NULL) != v)
                        snprintf(out, size, "%.17g", v);
        }
}

static void text_double(struct text *b, double v) {
        char n[64];

        format_double(v, n, sizeof(n));
        text_puts(b, n);
}

static void put_labels(struct text *b, const struct metric_family *f, const struct series *s,
                       const char *le) {
        if (f->n_labels == 0 && !le)
                return;
        text_puts(b, "{");
        for (size_t i = 0; i < f->n_labels; i++) {
                if (i > 0)
                        text_puts(b, ",");
                text_puts(b, f->labels[i]);
                text_puts(b, "=\"");
                text_escaped(b, s->values[i], true);
                text_puts(b, "\"");
        }
        if (le) {
                text_puts(b, f->n_labels > 0 ? ",le=\"" : "le=\"");
                text_puts(b, le);
                text_puts(b, "\"");
        }
        text_puts(b, "}");
}

static void put_sample(struct text *b, const struct metric_family *f, const struct series *s,
                       const char *suffix, const char *le, double v) {
        text_puts(b, f->name);
        text_puts(b, suffix);
        put_labels(b, f, s, le);
        text_puts(b, " ");
        text_double(b, v);
        text_puts(b, "\n");
}

int metrics_render(struct metrics *m, char **ret, size_t *ret_len) {
        struct text b = { .b = BUF_INIT(BUF_CAP_METRICS_TEXT, false) };
        char *p;

        collect(m);
        for (size_t i = 0; i < m->n_families; i++) {
                const struct metric_family *f = m->families[i];

                text_puts(&b, "# HELP ");
                text_puts(&b, f->name);
                text_puts(&b, " ");
                text_escaped(&b, f->help, false);
                text_puts(&b, "\n# TYPE ");
                text_puts(&b, f->name);
                text_puts(&b, " ");
                text_puts(&b, metric_type_table[f->type]);
                text_puts(&b, "\n");
                for (size_t k = 0; k < f->n_series; k++) {
                        const struct series *s = f->series[k];
                        unsigned long long cum = 0;
                        char le[64];

                        if (f->type != METRIC_HISTOGRAM) {
                                put_sample(&b, f, s, "", NULL, s->value);
                                continue;
                        }
                        for (size_t j = 0; j < f->n_bounds; j++) {
                                cum += s->buckets[j];
                                format_double(f->bounds[j], le, sizeof(le));
                                put_sample(&b, f, s, "_bucket", le, (double)cum);
                        }
                        put_sample(&b, f, s, "_bucket", "+Inf", (double)s->count);
                        put_sample(&b, f, s, "_sum", NULL, s->sum);
                        put_sample(&b, f, s, "_count", NULL, (double)s->count);
                }
        }
        if (b.error < 0) {
                buf_done(&b.b);
                return b.error;
        }
        p = buf_steal(&b.b, ret_len);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

/* ---- JSON ---- */

static cJSON *series_json(const struct metric_family *f, const struct series *s) {
        cJSON *o = cJSON_CreateObject(), *labels = cJSON_AddObjectToObject(o, "labels");

        if (!o || !labels)
                goto oom;
        for (size_t i = 0; i < f->n_labels; i++)
                if (!cJSON_AddStringToObject(labels, f->labels[i], s->values[i]))
                        goto oom;
        if (f->type != METRIC_HISTOGRAM) {
                if (!cJSON_AddNumberToObject(o, "value", s->value))
                        goto oom;
                return o;
        }
        {
                cJSON *buckets;
                unsigned long long cum = 0;

                if (!cJSON_AddNumberToObject(o, "count", (double)s->count) ||
                    !cJSON_AddNumberToObject(o, "sum", s->sum) ||
                    !(buckets = cJSON_AddArrayToObject(o, "buckets")))
                        goto oom;
                for (size_t j = 0; j < f->n_bounds; j++) {
                        cJSON *bk = cJSON_CreateObject();

                        cum += s->buckets[j];
                        if (!bk || !cJSON_AddItemToArray(buckets, bk) ||
                            !cJSON_AddNumberToObject(bk, "le", f->bounds[j]) ||
                            !cJSON_AddNumberToObject(bk, "count", (double)cum))
                                goto oom;
                }
        }
        return o;
oom:
        cJSON_Delete(o);
        return NULL;
}

cJSON *metrics_to_json(struct metrics *m) {
        cJSON *j = cJSON_CreateObject();

        if (!j)
                return NULL;
        collect(m);
        for (size_t i = 0; i < m->n_families; i++) {
                const struct metric_family *f = m->families[i];
                cJSON *fo, *arr;

                if (f->n_series == 0)
                        continue;
                if (!(fo = cJSON_AddObjectToObject(j, f->name)) ||
                    !cJSON_AddStringToObject(fo, "type", metric_type_table[f->type]) ||
                    !(arr = cJSON_AddArrayToObject(fo, "series")))
                        goto oom;
                for (size_t k = 0; k < f->n_series; k++) {
                        cJSON *s = series_json(f, f->series[k]);

                        if (!s || !cJSON_AddItemToArray(arr, s)) {
                                cJSON_Delete(s);
                                goto oom;
                        }
                }
        }
        return j;
oom:
        cJSON_Delete(j);
        return NULL;
}

/* ---- process metrics ---- */

struct process_families {
        struct metric_family *cpu, *rss, *vsize, *start, *open_fds, *max_fds;
        double start_time; /* computed once */
};

static int read_file(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        size_t n;

        if (!f)
                return -errno;
        n = fread(buf, 1, size - 1, f);
        fclose(f);
        buf[n] = 0;
        return (int)n;
}

/* Fields 14 (utime), 15 (stime), 22 (starttime), 23 (vsize), 24 (rss) of
 * /proc/self/stat, counted after the command name, which may hold spaces and
 * parentheses: the last ')' ends it. */
static int read_stat(unsigned long long *utime, unsigned long long *stime, unsigned long long *starttime,
                     unsigned long long *vsize, long long *rss) {
        char buf[2048], *p;

        if (read_file("/proc/self/stat", buf, sizeof(buf)) < 0)
                return -errno;
        p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        /* After ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt (13)
         * utime(14) stime(15) cutime cstime priority nice threads itreal(21) starttime(22) vsize rss */
        if (sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu "
                   "%lld",
                   utime, stime, starttime, vsize, rss) != 5)
                return -EBADMSG;
        return 0;
}

static double boot_time(void) {
        char buf[8192], *p;

        if (read_file("/proc/stat", buf, sizeof(buf)) < 0)
                return 0;
        p = strstr(buf, "\nbtime ");
        return p ? strtod(p + 7, NULL) : 0;
}

static double open_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        double n = 0;

        if (!d)
                return 0;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n > 0 ? n - 1 : 0; /* not the one opendir() holds */
}

static void collect_process(struct metrics *m, void *userdata) {
        struct process_families *pf = userdata;
        unsigned long long ut, st, start, vsize;
        long long rss;
        long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
        struct rlimit rl;

        if (tck <= 0)
                tck = 100;
        if (read_stat(&ut, &st, &start, &vsize, &rss) >= 0) {
                metrics_set(pf->cpu, NULL, (double)(ut + st) / (double)tck);
                metrics_set(pf->rss, NULL, (double)rss * (double)page);
                metrics_set(pf->vsize, NULL, (double)vsize);
                if (pf->start_time == 0) {
                        double bt = boot_time();

                        if (bt > 0)
                                pf->start_time = bt + (double)start / (double)tck;
                }
        }
        if (pf->start_time > 0)
                metrics_set(pf->start, NULL, pf->start_time);
        metrics_set(pf->open_fds, NULL, open_fds());
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
                metrics_set(pf->max_fds, NULL,
                            rl.rlim_cur == RLIM_INFINITY ? (double)INT64_MAX : (double)rl.rlim_cur);
}

int metrics_add_process(struct metrics *m) {
#define PROCESS_METRIC(n, h, t) \
        { .name = (n), .help = (h), .type = (t) }
        static const struct metric_desc d[] = {
                PROCESS_METRIC("process_cpu_seconds_total",
                               "Total user and system CPU time spent in seconds.", METRIC_COUNTER),
                PROCESS_METRIC("process_resident_memory_bytes", "Resident memory size in bytes.",
                               METRIC_GAUGE),
                PROCESS_METRIC("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                               METRIC_GAUGE),
                PROCESS_METRIC("process_start_time_seconds",
                               "Start time of the process since unix epoch in seconds.", METRIC_GAUGE),
                PROCESS_METRIC("process_open_fds", "Number of open file descriptors.", METRIC_GAUGE),
                PROCESS_METRIC("process_max_fds", "Maximum number of open file descriptors.", METRIC_GAUGE),
        };
#undef PROCESS_METRIC
        struct process_families *pf;
        struct metric_family **slots[ELEMENTSOF(d)];
        int r;

        for (size_t i = 0; i < m->n_collectors; i++)
                if (m->collectors[i].fn == collect_process)
                        return 0;
        if (m->n_collectors >= MAX_COLLECTORS)
                return -ENOSPC;
        pf = calloc(1, sizeof(*pf));
        if (!pf)
                return -ENOMEM;
        slots[0] = &pf->cpu;
        slots[1] = &pf->rss;
        slots[2] = &pf->vsize;
        slots[3] = &pf->start;
        slots[4] = &pf->open_fds;
        slots[5] = &pf->max_fds;
        for (size_t i = 0; i < ELEMENTSOF(d); i++) {
                r = metrics_register(m, &d[i], slots[i]);
                if (r < 0) {
                        free(pf);
                        return r;
                }
        }
        /* The registry owns pf from here on. */
        m->collectors[m->n_collectors++] = (struct collector){ collect_process, pf, free };
        return 0;
}

/* ---- drainer's metrics ---- */

static const double bounds_api[] = { 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60 };
static const double bounds_wait[] = { 0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60 };
static const double bounds_drain[] = { 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200 };
static const double bounds_phase[] = {
        0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600
};

#define BUCKETS(b) .buckets = (b), .n_buckets = ELEMENTSOF(b)

static const struct metric_desc drainer_metrics[_DRAINER_METRIC_MAX] = {
        [DRAINER_METRIC_BUILD_INFO] = { "drainer_build_info",
                                        "A metric with a constant '1' value labeled by the drainer version.",
                                        METRIC_GAUGE,
                                        { "version" } },
        [DRAINER_METRIC_DRAINS] = { "drainer_drains_total",
                                    "Drain engine runs that ended, by goal (drain, uncordon) and result "
                                    "(done, "
                                    "timeout, refused, error).",
                                    METRIC_COUNTER,
                                    { "goal", "result" } },
        [DRAINER_METRIC_DRAIN_DURATION] = { "drainer_drain_duration_seconds",
                                            "Duration of drain engine runs in seconds, by goal and result.",
                                            METRIC_HISTOGRAM,
                                            { "goal", "result" },
                                            BUCKETS(bounds_drain) },
        [DRAINER_METRIC_PHASE_DURATION] = { "drainer_phase_duration_seconds",
                                            "Time a node spent in a drain phase before it left it, in "
                                            "seconds.",
                                            METRIC_HISTOGRAM,
                                            { "phase" },
                                            BUCKETS(bounds_phase) },
        [DRAINER_METRIC_PHASE] = { "drainer_drain_phase",
                                   "The node's current drain phase (drainer.io/state, or "
                                   "drainer.io/state.DRIVER "
                                   "for a drain of DRA driver DRIVER, label driver; empty for the node's) "
                                   "as "
                                   "last observed: 1 for that phase.",
                                   METRIC_GAUGE,
                                   { "node", "driver", "phase" } },
        [DRAINER_METRIC_PHASE_START] = { "drainer_drain_phase_start_time_seconds",
                                         "When the node (label driver: that DRA driver's drain) entered its "
                                         "current drain phase (drainer.io/state-since), Unix time in "
                                         "seconds.",
                                         METRIC_GAUGE,
                                         { "node", "driver", "phase" } },
        [DRAINER_METRIC_EVICTIONS] = { "drainer_evictions_total",
                                       "Eviction requests by result: accepted, pdb_blocked (429: a "
                                       "PodDisruptionBudget said not now), gone (404), error.",
                                       METRIC_COUNTER,
                                       { "result" } },
        [DRAINER_METRIC_EVICTIONS_PDB] = { "drainer_evictions_blocked_by_pdb",
                                           "Pods on the node whose last eviction attempt a "
                                           "PodDisruptionBudget "
                                           "refused (429), being retried.",
                                           METRIC_GAUGE,
                                           { "node" } },
        [DRAINER_METRIC_CLAIMS] = { "drainer_claims_on_node",
                                    "ResourceClaims allocated on or reserved for the node, the DRA drivers' "
                                    "own "
                                    "excepted.",
                                    METRIC_GAUGE,
                                    { "node" } },
        [DRAINER_METRIC_PODS_PENDING] = { "drainer_pods_pending",
                                          "Pods still on the node that the drain evicts, by eviction group.",
                                          METRIC_GAUGE,
                                          { "node", "group" } },
        [DRAINER_METRIC_DRIVER_HEALTHY] = { "drainer_driver_healthy",
                                            "Whether a DRA driver of the node (its DaemonSet, pod or "
                                            "systemd "
                                            "unit) is healthy: Running, Ready and SERVING when probed.",
                                            METRIC_GAUGE,
                                            { "node", "driver" } },
        [DRAINER_METRIC_DEVICE_UNHEALTHY] = { "drainer_device_unhealthy",
                                              "1 while a device of the node is reported unhealthy (serve "
                                              "--on-unhealthy-device): by its driver's device taint in the "
                                              "ResourceSlice, or in a pod's allocatedResourcesStatus.",
                                              METRIC_GAUGE,
                                              { "node", "device" } },
        [DRAINER_METRIC_DEVICE_HEALTH] = { "drainer_device_health_changes_total",
                                           "Devices that turned unhealthy, and healthy again, as serve "
                                           "--on-unhealthy-device saw them.",
                                           METRIC_COUNTER,
                                           { "health" } },
        [DRAINER_METRIC_DRAINS_STARTED] = { "drainer_drains_started_total",
                                            "Drains serve started (each Event 'drain started'), by who "
                                            "asked: cluster-api (its pre-drain hook, --cluster-api), "
                                            "shutdown (--on-shutdown), device-health "
                                            "(--on-unhealthy-device), request (drainer.io/request written "
                                            "by a person or a script).",
                                            METRIC_COUNTER,
                                            { "asker" } },
        [DRAINER_METRIC_API_REQUESTS] = { "drainer_api_requests_total",
                                          "Kubernetes API requests sent (every attempt), by verb and HTTP "
                                          "code "
                                          "(<error>: no answer).",
                                          METRIC_COUNTER,
                                          { "verb", "code" } },
        [DRAINER_METRIC_API_DURATION] = { "drainer_api_request_duration_seconds",
                                          "Kubernetes API request latency in seconds by verb, watches "
                                          "excepted.",
                                          METRIC_HISTOGRAM,
                                          { "verb" },
                                          BUCKETS(bounds_api) },
        [DRAINER_METRIC_API_RATELIMIT_WAIT] = { "drainer_api_rate_limiter_wait_seconds",
                                                "Time requests waited for the client-side token bucket "
                                                "(--kube-api-qps, --kube-api-burst), in seconds, by verb.",
                                                METRIC_HISTOGRAM,
                                                { "verb" },
                                                BUCKETS(bounds_wait) },
        [DRAINER_METRIC_API_CLIENT_QPS] = { "drainer_api_client_qps",
                                            "The client-side token bucket's rate now, in requests per "
                                            "second (0: no limit); with --kube-api-qps auto, what the API "
                                            "server allows.",
                                            METRIC_GAUGE },
        [DRAINER_METRIC_API_PUSHBACKS] = { "drainer_api_pushbacks_total",
                                           "Answers in which the API server pushed back on load (429 but a "
                                           "PodDisruptionBudget's, 5xx with Retry-After), by verb and code.",
                                           METRIC_COUNTER,
                                           { "verb", "code" } },
        [DRAINER_METRIC_WATCH_EVENTS] = { "drainer_watch_events_total",
                                          "Watch events received, by resource and event type.",
                                          METRIC_COUNTER,
                                          { "resource", "type" } },
        [DRAINER_METRIC_WATCH_RESTARTS] = { "drainer_watch_restarts_total",
                                            "Watches that ended and were started again, by resource and "
                                            "reason "
                                            "(closed by the server, expired: 410 relist, error).",
                                            METRIC_COUNTER,
                                            { "resource", "reason" } },
        [DRAINER_METRIC_METRICS_DROPPED] = { "drainer_metrics_dropped_total",
                                             "Observations dropped because the metrics registry reached its "
                                             "cap "
                                             "of series.",
                                             METRIC_COUNTER },
};

static struct metrics *default_registry;
static struct metric_family *default_families[_DRAINER_METRIC_MAX];
static bool default_failed;

const char *drainer_metric_name(enum drainer_metric id) {
        return id >= 0 && id < _DRAINER_METRIC_MAX ? drainer_metrics[id].name : NULL;
}

static void collect_drainer(struct metrics *m, void *userdata) {
        metrics_set(default_families[DRAINER_METRIC_METRICS_DROPPED], NULL, (double)metrics_dropped(m));
}

static void free_default(void) {
        default_registry = metrics_free(default_registry);
        for (size_t i = 0; i < _DRAINER_METRIC_MAX; i++)
                default_families[i] = NULL;
}

/* Frees the default registry at exit, so leak checkers see no reachable block. */
static __attribute__((destructor)) void metrics_default_destructor(void) {
        free_default();
}

struct metrics *metrics_default(void) {
        static const char *const eviction_results[] = { "accepted", "pdb_blocked", "gone", "error" };
        static const char *const goals[] = { "drain", "uncordon" };
        static const char *const results[] = { "done", "timeout", "refused", "error" };
        int r;

        if (default_registry || default_failed)
                return default_registry;
        r = metrics_new(&(struct metrics_options){ .max_series = 50000 }, &default_registry);
        if (r < 0)
                goto fail;
        for (size_t i = 0; i < _DRAINER_METRIC_MAX; i++)
                if (metrics_register(default_registry, &drainer_metrics[i], &default_families[i]) < 0)
                        goto fail;
        if (metrics_add_process(default_registry) < 0 ||
            metrics_add_collector(default_registry, collect_drainer, NULL) < 0)
                goto fail;
#ifdef DRAINER_VERSION
        metrics_set(default_families[DRAINER_METRIC_BUILD_INFO], METRIC_LABELS(DRAINER_VERSION), 1);
#endif
        /* Known label values start at 0, so rate() and increase() see the first one. */
        for (size_t i = 0; i < ELEMENTSOF(eviction_results); i++)
                metrics_add(default_families[DRAINER_METRIC_EVICTIONS], METRIC_LABELS(eviction_results[i]),
                            0);
        for (size_t g = 0; g < ELEMENTSOF(goals); g++)
                for (size_t i = 0; i < ELEMENTSOF(results); i++)
                        metrics_add(default_families[DRAINER_METRIC_DRAINS],
                                    METRIC_LABELS(goals[g], results[i]), 0);
        metrics_set(default_families[DRAINER_METRIC_METRICS_DROPPED], NULL, 0);
        return default_registry;
fail:
        free_default();
        default_failed = true;
        return NULL;
}

struct metric_family *metrics_family(enum drainer_metric id) {
        if (id < 0 || id >= _DRAINER_METRIC_MAX || !metrics_default())
                return NULL;
        return default_families[id];
}
