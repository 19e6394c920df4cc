/* Client configuration the way kubectl reads it (clientcmd loading rules, merging,
 * context selection, in-cluster fallback) and the credentials derived from it: token
 * files re-read when they rotate, exec credential plugins run and cached until expiry.
 * Owns the parsed config and the credential cache. Must never log or put into an error
 * message any token or key material. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <yaml.h>

#include "drainer/kubeconfig.h"
#include "drainer/log.h"

extern char **environ;

#define USEC_PER_SEC           ((int64_t)1000000)
#define KUBECONFIG_FILE_MAX    (16U << 20)
#define PEM_FILE_MAX           (4U << 20)
#define TOKEN_FILE_MAX         (1U << 20)
#define YAML_TO_JSON_NODES_MAX 10000
#define YAML_TO_JSON_DEPTH_MAX 64

#define EXEC_API_V1         "client.authentication.k8s.io/v1"
#define EXEC_API_V1BETA1    "client.authentication.k8s.io/v1beta1"
#define EXEC_INFO_ENV       "KUBERNETES_EXEC_INFO"
#define EXEC_EXTENSION_NAME "client.authentication.k8s.io/exec"

struct file_id {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
};

struct exec_config {
        char *name;        /* command as written in the kubeconfig, for messages */
        char *api_version; /* EXEC_API_V1 or EXEC_API_V1BETA1 */
        char **argv;       /* argv[0] is the command (resolved when it has a '/'); NULL-terminated */
        char **env;        /* "NAME=value", NULL-terminated */
        size_t n_env;
        bool provide_cluster_info;
        char *info_json; /* KUBERNETES_EXEC_INFO */
};

struct kube_config_private {
        char *token;      /* owned: static token, or the current contents of token_file */
        char *token_file; /* owned: absolute path, re-read when it changes */
        struct file_id token_id;

        struct exec_config *exec; /* owned, or NULL */
        uint64_t exec_timeout_usec;
        bool exec_cached;
        bool exec_has_expiry;
        int64_t exec_expiry_usec;
        char *exec_token; /* owned */
        char *exec_cert;  /* owned */
        size_t exec_cert_len;
        char *exec_key; /* owned */
        size_t exec_key_len;

        bool returned_before; /* kube_config_credentials() succeeded once */
        bool cert_dirty;      /* cert/key changed since the last kube_config_credentials() */
};

struct kc_file {
        char *path;    /* as given */
        char *display; /* path with $HOME shown as ~, for messages */
        char *dir;     /* absolute directory, base of relative paths inside */
        yaml_document_t doc;
        bool have_doc;
        yaml_node_t *root; /* mapping, or NULL when the file defines nothing */
};

struct loader {
        const struct kube_config_options *opts;
        struct kc_file *files;
        size_t n_files;
        char *sources; /* displayed paths joined by ':' */
};

static inline void freestrv(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}

static int set_error(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int set_error(char **ret_error, int r, const char *fmt, ...) {
        char *m = NULL;
        va_list ap;

        assert(r < 0);
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        /* One line: names and values quoted from the file may hold line breaks. */
        for (char *c = m; c && *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        *c = '?';

        log_debug("kubeconfig: %s", strna(m));
        if (ret_error)
                *ret_error = m;
        else
                free(m);
        return r;
}

static int oom(char **ret_error) {
        if (ret_error)
                *ret_error = NULL;
        return -ENOMEM;
}

/* ---- small helpers: paths, files, encodings ---- */

static char *display_path(const char *home, const char *path) {
        size_t n;
        char *s;

        if (home && *home && !streq(home, "/")) {
                n = strlen(home);
                while (n > 1 && home[n - 1] == '/')
                        n--;
                if (strncmp(path, home, n) == 0 && path[n] == '/') {
                        if (asprintf(&s, "~%s", path + n) < 0)
                                return NULL;
                        return s;
                }
        }
        return strdup(path);
}

/* Absolute directory of path (relative paths are taken against the current directory,
 * as filepath.Abs does). */
static char *abs_dir_of(const char *path) {
        _cleanup_(freep) char *cwd = NULL;
        const char *slash = strrchr(path, '/');
        char *s;

        if (path[0] == '/') {
                if (slash == path)
                        return strdup("/");
                return strndup(path, slash - path);
        }
        cwd = getcwd(NULL, 0);
        if (!cwd)
                return NULL;
        if (!slash)
                return TAKE_PTR(cwd);
        if (asprintf(&s, "%s/%.*s", streq(cwd, "/") ? "" : cwd, (int)(slash - path), path) < 0)
                return NULL;
        return s;
}

static char *resolve_path(const char *dir, const char *p) {
        char *s;

        if (p[0] == '/')
                return strdup(p);
        if (asprintf(&s, "%s/%s", streq(dir, "/") ? "" : dir, p) < 0)
                return NULL;
        return s;
}

static char *path_join(const char *a, const char *b) {
        char *s;

        if (asprintf(&s, "%s/%s", a, b) < 0)
                return NULL;
        return s;
}

static void file_id_from_stat(struct file_id *id, const struct stat *st) {
        *id = (struct file_id){
                .dev = st->st_dev,
                .ino = st->st_ino,
                .size = st->st_size,
                .mtime = st->st_mtim,
        };
}

static bool file_id_equal(const struct file_id *a, const struct file_id *b) {
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Reads a whole regular file, NUL-terminated. -EFBIG when larger than max. */
static int read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct file_id *ret_id) {
        _cleanup_(freep) char *buf = NULL;
        size_t len = 0, size = 4096;
        struct stat st;
        int fd, r = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                goto out;
        }
        if (S_ISDIR(st.st_mode)) {
                r = -EISDIR;
                goto out;
        }
        if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max) {
                r = -EFBIG;
                goto out;
        }
        if (S_ISREG(st.st_mode))
                size = MAX(size, (size_t)st.st_size + 1);

        buf = malloc(size);
        if (!buf) {
                r = -ENOMEM;
                goto out;
        }
        for (;;) {
                ssize_t k;

                if (len + 1 >= size) {
                        char *nbuf;

                        if (size > max + 1) {
                                r = -EFBIG;
                                goto out;
                        }
                        nbuf = realloc(buf, size * 2);
                        if (!nbuf) {
                                r = -ENOMEM;
                                goto out;
                        }
                        buf = nbuf;
                        size *= 2;
                }
                k = read(fd, buf + len, size - len - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        goto out;
                }
                if (k == 0)
                        break;
                len += k;
                if (len > max) {
                        r = -EFBIG;
                        goto out;
                }
        }
        buf[len] = 0;

        *ret = TAKE_PTR(buf);
        if (ret_len)
                *ret_len = len;
        if (ret_id)
                file_id_from_stat(ret_id, &st);
out:
        close(fd);
        return r;
}

static const char *read_error_string(int r) {
        return r == -EFBIG ? "file too large" : strerror(-r);
}

static int b64_value(unsigned char ch) {
        if (ch >= 'A' && ch <= 'Z')
                return ch - 'A';
        if (ch >= 'a' && ch <= 'z')
                return ch - 'a' + 26;
        if (ch >= '0' && ch <= '9')
                return ch - '0' + 52;
        if (ch == '+')
                return 62;
        if (ch == '/')
                return 63;
        return -1;
}

/* Strict standard base64 with padding; whitespace (line breaks) is skipped.
 * The result is NUL-terminated. */
static int base64_decode(const char *s, size_t n, char **ret, size_t *ret_len) {
        _cleanup_(freep) char *out = NULL;
        size_t count = 0, pad = 0, len = 0;
        uint32_t acc = 0;

        out = malloc(n / 4 * 3 + 4);
        if (!out)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                unsigned char ch = s[i];
                int v;

                if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
                        continue;
                if (ch == '=') {
                        pad++;
                        continue;
                }
                if (pad > 0)
                        return -EINVAL; /* data after padding */
                v = b64_value(ch);
                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t)v;
                if (++count % 4 == 0) {
                        out[len++] = (char)((acc >> 16) & 0xff);
                        out[len++] = (char)((acc >> 8) & 0xff);
                        out[len++] = (char)(acc & 0xff);
                        acc = 0;
                }
        }

        switch (count % 4) {
        case 0:
                if (pad != 0)
                        return -EINVAL;
                break;
        case 2:
                if (pad != 2)
                        return -EINVAL;
                out[len++] = (char)((acc >> 4) & 0xff);
                break;
        case 3:
                if (pad != 1)
                        return -EINVAL;
                out[len++] = (char)((acc >> 10) & 0xff);
                out[len++] = (char)((acc >> 2) & 0xff);
                break;
        default:
                return -EINVAL;
        }
        out[len] = 0;

        *ret = TAKE_PTR(out);
        *ret_len = len;
        return 0;
}

static char *base64_encode(const char *data, size_t n) {
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const unsigned char *p = (const unsigned char *)data;
        char *out, *o;

        out = malloc((n + 2) / 3 * 4 + 1);
        if (!out)
                return NULL;
        o = out;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16;

                if (i + 1 < n)
                        v |= (uint32_t)p[i + 1] << 8;
                if (i + 2 < n)
                        v |= p[i + 2];
                *o++ = alphabet[(v >> 18) & 63];
                *o++ = alphabet[(v >> 12) & 63];
                *o++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
                *o++ = i + 2 < n ? alphabet[v & 63] : '=';
        }
        *o = 0;
        return out;
}

static bool has_pem_block(const char *data, size_t n) {
        return memmem(data, n, "-----BEGIN ", 11) != NULL;
}

/* A token goes into an HTTP header: no control characters (CR/LF would inject headers). */
static bool token_is_valid(const char *t) {
        if (!*t)
                return false;
        for (const unsigned char *p = (const unsigned char *)t; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

/* Trims ASCII whitespace in place; returns s. */
static char *strstrip(char *s) {
        size_t n;
        char *p = s;

        while (*p && isspace((unsigned char)*p))
                p++;
        n = strlen(p);
        while (n > 0 && isspace((unsigned char)p[n - 1]))
                n--;
        memmove(s, p, n);
        s[n] = 0;
        return s;
}

static int parse_digits(const char **p, int n, int *ret) {
        int v = 0;

        for (int i = 0; i < n; i++) {
                if (!isdigit((unsigned char)(*p)[i]))
                        return -EINVAL;
                v = v * 10 + ((*p)[i] - '0');
        }
        *p += n;
        *ret = v;
        return 0;
}

/* RFC 3339: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM), to µs since the epoch. */
static int parse_rfc3339(const char *s, int64_t *ret_usec) {
        int year, mon, day, hour, min, sec, oh = 0, om = 0, sign = 0;
        int64_t usec = 0, scale = 100000;
        const char *p = s;
        struct tm tm = {};
        time_t t;

        if (parse_digits(&p, 4, &year) < 0 || *p++ != '-' || parse_digits(&p, 2, &mon) < 0 || *p++ != '-' ||
            parse_digits(&p, 2, &day) < 0)
                return -EINVAL;
        if (*p != 'T' && *p != 't' && *p != ' ')
                return -EINVAL;
        p++;
        if (parse_digits(&p, 2, &hour) < 0 || *p++ != ':' || parse_digits(&p, 2, &min) < 0 || *p++ != ':' ||
            parse_digits(&p, 2, &sec) < 0)
                return -EINVAL;
        if (*p == '.') {
                p++;
                if (!isdigit((unsigned char)*p))
                        return -EINVAL;
                for (; isdigit((unsigned char)*p); p++) {
                        usec += (*p - '0') * scale;
                        scale /= 10;
                }
        }
        if (*p == 'Z' || *p == 'z')
                p++;
        else if (*p == '+' || *p == '-') {
                sign = *p++ == '-' ? -1 : 1;
                if (parse_digits(&p, 2, &oh) < 0 || *p++ != ':' || parse_digits(&p, 2, &om) < 0)
                        return -EINVAL;
                if (oh > 23 || om > 59)
                        return -EINVAL;
        } else
                return -EINVAL;
        if (*p != 0)
                return -EINVAL;
        if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
                return -EINVAL;

        tm.tm_year = year - 1900;
        tm.tm_mon = mon - 1;
        tm.tm_mday = day;
        tm.tm_hour = hour;
        tm.tm_min = min;
        tm.tm_sec = sec;
        t = timegm(&tm);
        t -= (time_t)sign * (oh * 3600 + om * 60);

        *ret_usec = (int64_t)t * USEC_PER_SEC + usec;
        return 0;
}

/* ---- YAML document access ---- */

static bool node_is_null(const yaml_node_t *n) {
        const char *v;

        if (!n)
                return true;
        if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        v = (const char *)n->data.scalar.value;
        return streq(v, "") || streq(v, "~") || streq(v, "null") || streq(v, "Null") || streq(v, "NULL");
}

static yaml_node_t *map_get(yaml_document_t *d, yaml_node_t *map, const char *key) {
        if (!map || map->type != YAML_MAPPING_NODE)
                return NULL;
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
                yaml_node_t *k = yaml_document_get_node(d, p->key);

                if (k && k->type == YAML_SCALAR_NODE && streq((const char *)k->data.scalar.value, key))
                        return yaml_document_get_node(d, p->value);
        }
        return NULL;
}

/* Like map_get(), but null values count as absent. */
static yaml_node_t *map_get_set(yaml_document_t *d, yaml_node_t *map, const char *key) {
        yaml_node_t *n = map_get(d, map, key);

        return node_is_null(n) ? NULL : n;
}

/* *ret = the string value of key, or NULL when absent, null or empty (as clientcmd's
 * empty Go strings). where is the message prefix ("file: users[u]"). */
static int get_string(yaml_document_t *d, yaml_node_t *map, const char *key, const char *where,
                      const char **ret, char **ret_error) {
        yaml_node_t *n = map_get_set(d, map, key);
        const char *v;

        if (!n) {
                *ret = NULL;
                return 0;
        }
        if (n->type != YAML_SCALAR_NODE)
                return set_error(ret_error, -EINVAL, "%s.%s: expected a string", where, key);
        v = (const char *)n->data.scalar.value;
        if (strlen(v) != n->data.scalar.length)
                return set_error(ret_error, -EINVAL, "%s.%s: contains a NUL character", where, key);
        *ret = *v ? v : NULL;
        return 0;
}

static int get_bool(yaml_document_t *d, yaml_node_t *map, const char *key, const char *where, bool *ret,
                    char **ret_error) {
        static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON" };
        static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF" };
        yaml_node_t *n = map_get_set(d, map, key);
        const char *v;

        if (!n) {
                *ret = false;
                return 0;
        }
        if (n->type == YAML_SCALAR_NODE) {
                v = (const char *)n->data.scalar.value;
                for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                        if (streq(v, yes[i])) {
                                *ret = true;
                                return 0;
                        }
                        if (streq(v, no[i])) {
                                *ret = false;
                                return 0;
                        }
                }
        }
        return set_error(ret_error, -EINVAL, "%s.%s: expected true or false", where, key);
}

/* The entry called name in the list under key (clusters/users/contexts), across the files
 * in order: the first file that defines the name wins, as in clientcmd. Returns 1 and the
 * entry's inner mapping (the value of item_key), 0 if no file defines it. */
static int find_named(struct loader *l, const char *key, const char *item_key, const char *name,
                      yaml_node_t **ret_node, struct kc_file **ret_file, char **ret_error) {
        for (size_t i = 0; i < l->n_files; i++) {
                struct kc_file *f = l->files + i;
                yaml_node_t *seq, *found = NULL;
                size_t idx = 0;

                seq = map_get_set(&f->doc, f->root, key);
                if (!seq)
                        continue;
                if (seq->type != YAML_SEQUENCE_NODE)
                        return set_error(ret_error, -EINVAL, "%s: %s: expected a list", f->display, key);

                for (yaml_node_item_t *it = seq->data.sequence.items.start;
                     it < seq->data.sequence.items.top; it++, idx++) {
                        yaml_node_t *entry = yaml_document_get_node(&f->doc, *it);
                        yaml_node_t *n, *inner;
                        const char *v;

                        if (!entry || entry->type != YAML_MAPPING_NODE)
                                return set_error(ret_error, -EINVAL, "%s: %s[%zu]: expected a mapping",
                                                 f->display, key, idx);
                        n = map_get_set(&f->doc, entry, "name");
                        if (!n || n->type != YAML_SCALAR_NODE)
                                continue; /* nameless entries can never be selected */
                        v = (const char *)n->data.scalar.value;
                        if (!streq(v, name))
                                continue;
                        if (found)
                                return set_error(ret_error, -EINVAL, "%s: %s: duplicate name \"%s\"",
                                                 f->display, key, name);

                        inner = map_get_set(&f->doc, entry, item_key);
                        if (!inner)
                                return set_error(ret_error, -EINVAL, "%s: %s[%s].%s: missing", f->display,
                                                 key, name, item_key);
                        if (inner->type != YAML_MAPPING_NODE)
                                return set_error(ret_error, -EINVAL, "%s: %s[%s].%s: expected a mapping",
                                                 f->display, key, name, item_key);
                        found = inner;
                }
                if (found) {
                        *ret_node = found;
                        *ret_file = f;
                        return 1;
                }
        }
        return 0;
}

/* YAML to JSON for the exec plugin's cluster config (the kubeconfig extension), typed
 * the way sigs.k8s.io/yaml would. Capped: aliases could otherwise expand without bound. */
static cJSON *yaml_to_json(yaml_document_t *d, yaml_node_t *n, unsigned depth, unsigned *budget) {
        cJSON *j = NULL;

        if (!n || depth > YAML_TO_JSON_DEPTH_MAX || *budget == 0)
                return NULL;
        (*budget)--;

        switch (n->type) {
        case YAML_SCALAR_NODE: {
                const char *v = (const char *)n->data.scalar.value;
                char *end;
                double num;

                if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                        return cJSON_CreateString(v);
                if (node_is_null(n))
                        return cJSON_CreateNull();
                if (streq(v, "true") || streq(v, "True") || streq(v, "TRUE"))
                        return cJSON_CreateTrue();
                if (streq(v, "false") || streq(v, "False") || streq(v, "FALSE"))
                        return cJSON_CreateFalse();
                errno = 0;
                num = strtod(v, &end);
                if (errno == 0 && end != v && *end == 0 && !isspace((unsigned char)*v) &&
                    strpbrk(v, "xXnN") == NULL)
                        return cJSON_CreateNumber(num);
                return cJSON_CreateString(v);
        }
        case YAML_SEQUENCE_NODE:
                j = cJSON_CreateArray();
                if (!j)
                        return NULL;
                for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
                     it++) {
                        cJSON *c = yaml_to_json(d, yaml_document_get_node(d, *it), depth + 1, budget);

                        if (!c) {
                                cJSON_Delete(j);
                                return NULL;
                        }
                        cJSON_AddItemToArray(j, c);
                }
                return j;
        case YAML_MAPPING_NODE:
                j = cJSON_CreateObject();
                if (!j)
                        return NULL;
                for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                        yaml_node_t *k = yaml_document_get_node(d, p->key);
                        cJSON *c;

                        if (!k || k->type != YAML_SCALAR_NODE) {
                                cJSON_Delete(j);
                                return NULL;
                        }
                        c = yaml_to_json(d, yaml_document_get_node(d, p->value), depth + 1, budget);
                        if (!c) {
                                cJSON_Delete(j);
                                return NULL;
                        }
                        cJSON_AddItemToObject(j, (const char *)k->data.scalar.value, c);
                }
                return j;
        default:
                return NULL;
        }
}

/* ---- the parts of one context ---- */

static int normalize_server(const char *s, char **ret) {
        _cleanup_(freep) char *url = NULL;
        const char *rest;
        size_t n;

        if (!strstr(s, "://")) {
                /* clientcmd defaults a scheme-less server to https when TLS is in use;
                 * drainer always uses TLS */
                if (asprintf(&url, "https://%s", s) < 0)
                        return -ENOMEM;
        } else {
                url = strdup(s);
                if (!url)
                        return -ENOMEM;
        }
        if (strncasecmp(url, "https://", 8) == 0)
                rest = url + 8;
        else if (strncasecmp(url, "http://", 7) == 0)
                rest = url + 7;
        else
                return -EPROTONOSUPPORT;
        if (*rest == 0 || *rest == '/')
                return -EINVAL;
        for (const char *p = url; *p; p++)
                if ((unsigned char)*p <= 0x20 || *p == 0x7f)
                        return -EINVAL;
        n = strlen(url);
        while (n > 0 && url[n - 1] == '/')
                url[--n] = 0;

        *ret = TAKE_PTR(url);
        return 0;
}

/* One PEM input given as -data (base64) or as a file; data wins, as in kubectl. */
static int load_pem(yaml_document_t *d, yaml_node_t *map, const char *data_key, const char *file_key,
                    const char *dir, const char *where, char **ret, size_t *ret_len, char **ret_error) {
        _cleanup_(freep) char *buf = NULL, *path = NULL;
        const char *data, *file;
        size_t len;
        int r;

        r = get_string(d, map, data_key, where, &data, ret_error);
        if (r < 0)
                return r;
        r = get_string(d, map, file_key, where, &file, ret_error);
        if (r < 0)
                return r;

        if (data) {
                r = base64_decode(data, strlen(data), &buf, &len);
                if (r == -ENOMEM)
                        return oom(ret_error);
                if (r < 0)
                        return set_error(ret_error, r, "%s.%s: invalid base64", where, data_key);
                if (!has_pem_block(buf, len))
                        return set_error(ret_error, -EINVAL, "%s.%s: no PEM block in the decoded data",
                                         where, data_key);
        } else if (file) {
                path = resolve_path(dir, file);
                if (!path)
                        return oom(ret_error);
                r = read_file(path, PEM_FILE_MAX, &buf, &len, NULL);
                if (r == -ENOMEM)
                        return oom(ret_error);
                if (r < 0)
                        return set_error(ret_error, r, "%s: cannot read %s: %s", path, file_key,
                                         read_error_string(r));
                if (!has_pem_block(buf, len))
                        return set_error(ret_error, -EINVAL, "%s: %s: no PEM block in the file", path,
                                         file_key);
        } else {
                *ret = NULL;
                *ret_len = 0;
                return 0;
        }

        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 1;
}

static int parse_cluster(struct kube_config *c, struct kc_file *f, yaml_node_t *cl, const char *name,
                         char **ret_error) {
        _cleanup_(freep) char *where = NULL;
        yaml_document_t *d = &f->doc;
        const char *server, *proxy, *tsn;
        int r;

        if (asprintf(&where, "%s: clusters[%s]", f->display, name) < 0)
                return oom(ret_error);

        r = get_string(d, cl, "server", where, &server, ret_error);
        if (r < 0)
                return r;
        if (!server)
                return set_error(ret_error, -EINVAL, "%s.server: missing", where);
        r = normalize_server(server, &c->server);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, -EINVAL, "%s.server: not an http(s) URL", where);

        r = get_string(d, cl, "proxy-url", where, &proxy, ret_error);
        if (r < 0)
                return r;
        if (proxy)
                return set_error(ret_error, -EOPNOTSUPP, "%s.proxy-url: not supported", where);

        r = load_pem(d, cl, "certificate-authority-data", "certificate-authority", f->dir, where, &c->ca_pem,
                     &c->ca_pem_len, ret_error);
        if (r < 0)
                return r;

        r = get_string(d, cl, "tls-server-name", where, &tsn, ret_error);
        if (r < 0)
                return r;
        if (tsn) {
                c->tls_server_name = strdup(tsn);
                if (!c->tls_server_name)
                        return oom(ret_error);
        }

        r = get_bool(d, cl, "insecure-skip-tls-verify", where, &c->insecure_skip_tls_verify, ret_error);
        if (r < 0)
                return r;
        /* As client-go (transport.TLSConfigFor): a CA that would not be checked is a mistake. */
        if (c->insecure_skip_tls_verify && c->ca_pem)
                return set_error(ret_error, -EINVAL,
                                 "%s: insecure-skip-tls-verify together with a certificate authority: "
                                 "specifying a root certificates file with the insecure flag is not allowed",
                                 where);
        return 0;
}

static struct exec_config *exec_config_free(struct exec_config *e) {
        if (!e)
                return NULL;
        free(e->name);
        free(e->api_version);
        freestrv(e->argv);
        freestrv(e->env);
        free(e->info_json);
        free(e);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct exec_config *, exec_config_free);

static int parse_exec(struct kc_file *f, yaml_node_t *ex, const char *user, struct exec_config **ret,
                      char **ret_error) {
        _cleanup_(exec_config_freep) struct exec_config *e = NULL;
        _cleanup_(freep) char *where = NULL;
        yaml_document_t *d = &f->doc;
        const char *api, *cmd, *mode;
        yaml_node_t *args, *env;
        size_t n_args = 0, i;
        int r;

        if (asprintf(&where, "%s: users[%s].exec", f->display, user) < 0)
                return oom(ret_error);
        if (ex->type != YAML_MAPPING_NODE)
                return set_error(ret_error, -EINVAL, "%s: expected a mapping", where);

        e = calloc(1, sizeof(*e));
        if (!e)
                return oom(ret_error);

        r = get_string(d, ex, "apiVersion", where, &api, ret_error);
        if (r < 0)
                return r;
        if (!api)
                return set_error(ret_error, -EINVAL, "%s.apiVersion: missing", where);
        if (!streq(api, EXEC_API_V1) && !streq(api, EXEC_API_V1BETA1))
                return set_error(ret_error, -EOPNOTSUPP,
                                 "%s.apiVersion: \"%s\" not supported (want %s or %s)", where, api,
                                 EXEC_API_V1, EXEC_API_V1BETA1);
        e->api_version = strdup(api);
        if (!e->api_version)
                return oom(ret_error);

        r = get_string(d, ex, "command", where, &cmd, ret_error);
        if (r < 0)
                return r;
        if (!cmd)
                return set_error(ret_error, -EINVAL, "%s.command: missing", where);
        e->name = strdup(cmd);
        if (!e->name)
                return oom(ret_error);

        /* interactiveMode: drainer never has a terminal for the plugin (stdin is /dev/null) */
        r = get_string(d, ex, "interactiveMode", where, &mode, ret_error);
        if (r < 0)
                return r;
        if (mode && streq(mode, "Always"))
                return set_error(
                        ret_error, -EOPNOTSUPP,
                        "%s.interactiveMode: Always needs a terminal, drainer runs the plugin without one",
                        where);
        if (mode && !streq(mode, "Never") && !streq(mode, "IfAvailable"))
                return set_error(ret_error, -EINVAL, "%s.interactiveMode: invalid value \"%s\"", where,
                                 mode);

        r = get_bool(d, ex, "provideClusterInfo", where, &e->provide_cluster_info, ret_error);
        if (r < 0)
                return r;

        args = map_get_set(d, ex, "args");
        if (args && args->type != YAML_SEQUENCE_NODE)
                return set_error(ret_error, -EINVAL, "%s.args: expected a list", where);
        if (args)
                n_args = args->data.sequence.items.top - args->data.sequence.items.start;

        e->argv = calloc(n_args + 2, sizeof(char *));
        if (!e->argv)
                return oom(ret_error);
        /* a command with a slash is a path, relative to the kubeconfig; else looked up in PATH */
        e->argv[0] = strchr(cmd, '/') ? resolve_path(f->dir, cmd) : strdup(cmd);
        if (!e->argv[0])
                return oom(ret_error);
        for (i = 0; i < n_args; i++) {
                yaml_node_t *a = yaml_document_get_node(d, args->data.sequence.items.start[i]);

                if (!a || a->type != YAML_SCALAR_NODE)
                        return set_error(ret_error, -EINVAL, "%s.args[%zu]: expected a string", where, i);
                e->argv[i + 1] = strdup((const char *)a->data.scalar.value);
                if (!e->argv[i + 1])
                        return oom(ret_error);
        }

        env = map_get_set(d, ex, "env");
        if (env && env->type != YAML_SEQUENCE_NODE)
                return set_error(ret_error, -EINVAL, "%s.env: expected a list", where);
        if (env)
                e->n_env = env->data.sequence.items.top - env->data.sequence.items.start;
        e->env = calloc(e->n_env + 1, sizeof(char *));
        if (!e->env)
                return oom(ret_error);
        for (i = 0; i < e->n_env; i++) {
                yaml_node_t *item = yaml_document_get_node(d, env->data.sequence.items.start[i]);
                _cleanup_(freep) char *w = NULL;
                const char *name, *value;

                if (!item || item->type != YAML_MAPPING_NODE)
                        return set_error(ret_error, -EINVAL, "%s.env[%zu]: expected a mapping", where, i);
                if (asprintf(&w, "%s.env[%zu]", where, i) < 0)
                        return oom(ret_error);
                r = get_string(d, item, "name", w, &name, ret_error);
                if (r < 0)
                        return r;
                if (!name || strchr(name, '='))
                        return set_error(ret_error, -EINVAL, "%s.name: missing or invalid", w);
                r = get_string(d, item, "value", w, &value, ret_error);
                if (r < 0)
                        return r;
                if (asprintf(&e->env[i], "%s=%s", name, strempty(value)) < 0) {
                        e->env[i] = NULL;
                        return oom(ret_error);
                }
        }

        *ret = TAKE_PTR(e);
        return 0;
}

/* KUBERNETES_EXEC_INFO: an ExecCredential with spec.interactive=false and, with
 * provideClusterInfo, spec.cluster (the CA always as data). */
static int build_exec_info(struct exec_config *e, const struct kube_config *c, struct kc_file *cf,
                           yaml_node_t *cl, char **ret_error) {
        cJSON *root, *spec, *cluster;
        char *s;

        root = cJSON_CreateObject();
        if (!root)
                return oom(ret_error);
        if (!cJSON_AddStringToObject(root, "apiVersion", e->api_version) ||
            !cJSON_AddStringToObject(root, "kind", "ExecCredential") ||
            !(spec = cJSON_AddObjectToObject(root, "spec")) || !cJSON_AddFalseToObject(spec, "interactive"))
                goto fail;

        if (e->provide_cluster_info) {
                yaml_node_t *exts;

                cluster = cJSON_AddObjectToObject(spec, "cluster");
                if (!cluster || !cJSON_AddStringToObject(cluster, "server", c->server))
                        goto fail;
                if (c->tls_server_name &&
                    !cJSON_AddStringToObject(cluster, "tls-server-name", c->tls_server_name))
                        goto fail;
                if (c->insecure_skip_tls_verify &&
                    !cJSON_AddTrueToObject(cluster, "insecure-skip-tls-verify"))
                        goto fail;
                if (c->ca_pem) {
                        _cleanup_(freep) char *b64 = base64_encode(c->ca_pem, c->ca_pem_len);

                        if (!b64 || !cJSON_AddStringToObject(cluster, "certificate-authority-data", b64))
                                goto fail;
                }

                /* clusters[].extensions[name=client.authentication.k8s.io/exec].extension */
                exts = map_get_set(&cf->doc, cl, "extensions");
                if (exts && exts->type == YAML_SEQUENCE_NODE) {
                        for (yaml_node_item_t *it = exts->data.sequence.items.start;
                             it < exts->data.sequence.items.top; it++) {
                                yaml_node_t *x = yaml_document_get_node(&cf->doc, *it);
                                yaml_node_t *nm = map_get_set(&cf->doc, x, "name");
                                unsigned budget = YAML_TO_JSON_NODES_MAX;
                                cJSON *cfg;

                                if (!nm || nm->type != YAML_SCALAR_NODE ||
                                    !streq((const char *)nm->data.scalar.value, EXEC_EXTENSION_NAME))
                                        continue;
                                cfg = yaml_to_json(&cf->doc, map_get_set(&cf->doc, x, "extension"), 0,
                                                   &budget);
                                if (cfg)
                                        cJSON_AddItemToObject(cluster, "config", cfg);
                                break;
                        }
                }
        }

        s = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        if (!s)
                return oom(ret_error);
        e->info_json = s;
        return 0;
fail:
        cJSON_Delete(root);
        return oom(ret_error);
}

/* Reads the token file at load time; an error names the file. */
static int load_token_file(struct kube_config_private *p, const char *path, const char *key,
                           char **ret_error) {
        _cleanup_(freep) char *buf = NULL;
        struct file_id id;
        int r;

        r = read_file(path, TOKEN_FILE_MAX, &buf, NULL, &id);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s: cannot read %s: %s", path, key, read_error_string(r));
        strstrip(buf);
        if (!*buf)
                return set_error(ret_error, -EINVAL, "%s: %s is empty", path, key);
        if (!token_is_valid(buf))
                return set_error(ret_error, -EINVAL, "%s: %s contains control characters", path, key);

        p->token_file = strdup(path);
        if (!p->token_file)
                return oom(ret_error);
        free(p->token);
        p->token = TAKE_PTR(buf);
        p->token_id = id;
        return 0;
}

static int parse_user(struct kube_config *c, struct kc_file *f, yaml_node_t *u, const char *name,
                      struct kc_file *cluster_file, yaml_node_t *cluster_node, char **ret_error) {
        static const char *const impersonation[] = { "as", "as-uid", "as-groups", "as-user-extra" };
        struct kube_config_private *p = c->priv;
        _cleanup_(freep) char *where = NULL, *key_pem = NULL, *cert_pem = NULL;
        yaml_document_t *d = &f->doc;
        const char *token, *token_file, *username, *password;
        size_t cert_len = 0, key_len = 0;
        yaml_node_t *ex;
        int r, have_cert, have_key;

        if (asprintf(&where, "%s: users[%s]", f->display, name) < 0)
                return oom(ret_error);

        r = get_string(d, u, "username", where, &username, ret_error);
        if (r < 0)
                return r;
        r = get_string(d, u, "password", where, &password, ret_error);
        if (r < 0)
                return r;
        if (username || password)
                return set_error(ret_error, -EOPNOTSUPP, "%s: unsupported auth method \"username/password\"",
                                 where);
        if (map_get_set(d, u, "auth-provider"))
                return set_error(ret_error, -EOPNOTSUPP, "%s: unsupported auth method \"auth-provider\"",
                                 where);
        for (size_t i = 0; i < ELEMENTSOF(impersonation); i++)
                if (map_get_set(d, u, impersonation[i]))
                        return set_error(ret_error, -EOPNOTSUPP, "%s.%s: impersonation is not supported",
                                         where, impersonation[i]);

        r = get_string(d, u, "token", where, &token, ret_error);
        if (r < 0)
                return r;
        if (token) {
                if (!token_is_valid(token))
                        return set_error(ret_error, -EINVAL, "%s.token: contains control characters", where);
                p->token = strdup(token);
                if (!p->token)
                        return oom(ret_error);
        }

        r = get_string(d, u, "tokenFile", where, &token_file, ret_error);
        if (r < 0)
                return r;
        if (token_file) {
                _cleanup_(freep) char *path = resolve_path(f->dir, token_file);

                if (!path)
                        return oom(ret_error);
                /* as client-go's transport: the file, when set, supersedes a static token */
                r = load_token_file(p, path, "tokenFile", ret_error);
                if (r < 0)
                        return r;
        }

        have_cert = load_pem(d, u, "client-certificate-data", "client-certificate", f->dir, where, &cert_pem,
                             &cert_len, ret_error);
        if (have_cert < 0)
                return have_cert;
        have_key = load_pem(d, u, "client-key-data", "client-key", f->dir, where, &key_pem, &key_len,
                            ret_error);
        if (have_key < 0)
                return have_key;
        if (have_cert && !have_key)
                return set_error(ret_error, -EINVAL, "%s: client-certificate without client-key", where);
        if (have_key && !have_cert)
                return set_error(ret_error, -EINVAL, "%s: client-key without client-certificate", where);
        if (have_cert) {
                c->client_cert_pem = TAKE_PTR(cert_pem);
                c->client_cert_pem_len = cert_len;
                c->client_key_pem = TAKE_PTR(key_pem);
                c->client_key_pem_len = key_len;
        }

        ex = map_get_set(d, u, "exec");
        if (!ex)
                return 0;
        if (p->token || have_cert) {
                /* client-go skips the exec plugin when the user has a token or a certificate */
                log_debug("kubeconfig: %s: static credentials present, exec plugin not used", where);
                return 0;
        }
        r = parse_exec(f, ex, name, &p->exec, ret_error);
        if (r < 0)
                return r;
        return build_exec_info(p->exec, c, cluster_file, cluster_node, ret_error);
}

/* ---- loading ---- */

static void loader_done(struct loader *l) {
        for (size_t i = 0; i < l->n_files; i++) {
                struct kc_file *f = l->files + i;

                if (f->have_doc)
                        yaml_document_delete(&f->doc);
                free(f->path);
                free(f->display);
                free(f->dir);
        }
        free(l->files);
        free(l->sources);
}

/* Parses one kubeconfig file. Returns 0 when added, 1 when missing and !required. */
static int loader_add_file(struct loader *l, const char *path, bool required, char **ret_error) {
        _cleanup_(freep) char *buf = NULL, *display = NULL;
        struct kc_file *f, *nfiles;
        yaml_parser_t parser;
        size_t len;
        int r;

        for (size_t i = 0; i < l->n_files; i++)
                if (streq(l->files[i].path, path))
                        return 1; /* $KUBECONFIG names it twice: load once */

        display = display_path(l->opts->home, path);
        if (!display)
                return oom(ret_error);

        r = read_file(path, KUBECONFIG_FILE_MAX, &buf, &len, NULL);
        if (r == -ENOENT && !required) {
                log_debug("kubeconfig: %s: not found, skipping", display);
                return 1;
        }
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s: cannot read kubeconfig: %s", display,
                                 read_error_string(r));

        nfiles = realloc(l->files, (l->n_files + 1) * sizeof(*l->files));
        if (!nfiles)
                return oom(ret_error);
        l->files = nfiles;
        f = l->files + l->n_files;
        *f = (struct kc_file){};
        f->path = strdup(path);
        f->dir = abs_dir_of(path);
        f->display = TAKE_PTR(display);
        l->n_files++; /* from here on loader_done() frees it */
        if (!f->path || !f->dir)
                return oom(ret_error);

        if (!yaml_parser_initialize(&parser))
                return oom(ret_error);
        yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
        if (!yaml_parser_load(&parser, &f->doc)) {
                r = set_error(ret_error, parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EINVAL,
                              "%s: invalid YAML: %s at line %zu, column %zu", f->display,
                              strna(parser.problem), parser.problem_mark.line + 1,
                              parser.problem_mark.column + 1);
                yaml_parser_delete(&parser);
                return r;
        }
        yaml_parser_delete(&parser);
        f->have_doc = true;

        f->root = yaml_document_get_root_node(&f->doc);
        if (node_is_null(f->root))
                f->root = NULL; /* empty file: defines nothing */
        else if (f->root->type != YAML_MAPPING_NODE)
                return set_error(ret_error, -EINVAL, "%s: not a kubeconfig: top level is not a mapping",
                                 f->display);
        return 0;
}

static bool loader_is_empty(struct loader *l) {
        static const char *const keys[] = { "clusters", "users", "contexts", "current-context" };

        for (size_t i = 0; i < l->n_files; i++)
                for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                        yaml_node_t *n = map_get_set(&l->files[i].doc, l->files[i].root, keys[k]);

                        if (n && !(n->type == YAML_SEQUENCE_NODE &&
                                   n->data.sequence.items.top == n->data.sequence.items.start))
                                return false;
                }
        return true;
}

static int loader_sources(struct loader *l) {
        size_t n = 1;
        char *s;

        for (size_t i = 0; i < l->n_files; i++)
                n += strlen(l->files[i].display) + 1;
        s = l->sources = malloc(n);
        if (!s)
                return -ENOMEM;
        *s = 0;
        for (size_t i = 0; i < l->n_files; i++) {
                if (i > 0)
                        *s++ = ':';
                s = stpcpy(s, l->files[i].display);
        }
        return 0;
}

static struct kube_config *config_new(void) {
        struct kube_config *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->priv = calloc(1, sizeof(*c->priv));
        if (!c->priv)
                return mfree(c);
        c->priv->exec_timeout_usec = KUBE_CONFIG_EXEC_TIMEOUT_USEC;
        return c;
}

static int load_context(struct loader *l, struct kube_config **ret, char **ret_error) {
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        yaml_node_t *ctx, *cluster, *user = NULL;
        struct kc_file *ctx_file, *cluster_file, *user_file = NULL;
        _cleanup_(freep) char *where = NULL;
        const char *ctx_name = l->opts->context, *cluster_name, *user_name, *ns;
        int r;

        if (loader_sources(l) < 0)
                return oom(ret_error);

        if (!ctx_name || !*ctx_name) {
                ctx_name = NULL;
                /* current-context: the first file that sets it wins */
                for (size_t i = 0; i < l->n_files && !ctx_name; i++) {
                        struct kc_file *f = l->files + i;
                        yaml_node_t *n = map_get_set(&f->doc, f->root, "current-context");

                        if (!n)
                                continue;
                        if (n->type != YAML_SCALAR_NODE)
                                return set_error(ret_error, -EINVAL,
                                                 "%s: current-context: expected a string", f->display);
                        ctx_name = (const char *)n->data.scalar.value;
                }
                if (!ctx_name)
                        return set_error(ret_error, -ENOENT,
                                         "no current-context in %s: set current-context or use --context",
                                         l->sources);
        }

        r = find_named(l, "contexts", "context", ctx_name, &ctx, &ctx_file, ret_error);
        if (r < 0)
                return r;
        if (r == 0)
                return set_error(ret_error, -ENOENT, "context \"%s\" not found in %s", ctx_name, l->sources);

        if (asprintf(&where, "%s: contexts[%s]", ctx_file->display, ctx_name) < 0)
                return oom(ret_error);
        r = get_string(&ctx_file->doc, ctx, "cluster", where, &cluster_name, ret_error);
        if (r < 0)
                return r;
        if (!cluster_name)
                return set_error(ret_error, -EINVAL, "%s.cluster: missing", where);
        r = get_string(&ctx_file->doc, ctx, "user", where, &user_name, ret_error);
        if (r < 0)
                return r;
        r = get_string(&ctx_file->doc, ctx, "namespace", where, &ns, ret_error);
        if (r < 0)
                return r;

        r = find_named(l, "clusters", "cluster", cluster_name, &cluster, &cluster_file, ret_error);
        if (r < 0)
                return r;
        if (r == 0)
                return set_error(ret_error, -ENOENT, "%s: cluster \"%s\" not found in %s", where,
                                 cluster_name, l->sources);
        if (user_name) {
                r = find_named(l, "users", "user", user_name, &user, &user_file, ret_error);
                if (r < 0)
                        return r;
                if (r == 0)
                        return set_error(ret_error, -ENOENT, "%s: user \"%s\" not found in %s", where,
                                         user_name, l->sources);
        }

        c = config_new();
        if (!c)
                return oom(ret_error);
        c->namespace = strdup(ns ?: "default");
        c->context_name = strdup(ctx_name);
        c->source = strdup(l->sources);
        if (!c->namespace || !c->context_name || !c->source)
                return oom(ret_error);

        r = parse_cluster(c, cluster_file, cluster, cluster_name, ret_error);
        if (r < 0)
                return r;
        if (user) {
                r = parse_user(c, user_file, user, user_name, cluster_file, cluster, ret_error);
                if (r < 0)
                        return r;
        }

        log_debug("kubeconfig: context \"%s\" from %s, server %s", ctx_name, c->source, c->server);
        *ret = TAKE_PTR(c);
        return 0;
}

static int load_in_cluster(const struct kube_config_options *opts, struct kube_config **ret,
                           char **ret_error) {
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        _cleanup_(freep) char *token_path = NULL, *ca_path = NULL, *ns_path = NULL, *ns = NULL;
        const char *sa_dir = opts->sa_dir ?: KUBE_CONFIG_SA_DIR;
        const char *host = opts->service_host;
        bool v6;
        int r;

        if (opts->context && *opts->context)
                return set_error(ret_error, -ENOENT,
                                 "context \"%s\" not found: no kubeconfig file, and the in-cluster "
                                 "configuration has no contexts",
                                 opts->context);

        c = config_new();
        if (!c)
                return oom(ret_error);

        /* an IPv6 literal goes in brackets, as net.JoinHostPort does */
        v6 = strchr(host, ':') && host[0] != '[';
        if (asprintf(&c->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
                     opts->service_port) < 0) {
                c->server = NULL;
                return oom(ret_error);
        }

        token_path = path_join(sa_dir, "token");
        ca_path = path_join(sa_dir, "ca.crt");
        ns_path = path_join(sa_dir, "namespace");
        c->source = strdup("in-cluster");
        if (!token_path || !ca_path || !ns_path || !c->source)
                return oom(ret_error);

        r = load_token_file(c->priv, token_path, "service account token", ret_error);
        if (r < 0)
                return r;

        r = read_file(ca_path, PEM_FILE_MAX, &c->ca_pem, &c->ca_pem_len, NULL);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s: cannot read certificate-authority: %s", ca_path,
                                 read_error_string(r));
        if (!has_pem_block(c->ca_pem, c->ca_pem_len))
                return set_error(ret_error, -EINVAL, "%s: certificate-authority: no PEM block in the file",
                                 ca_path);

        r = read_file(ns_path, TOKEN_FILE_MAX, &ns, NULL, NULL);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0 && r != -ENOENT)
                return set_error(ret_error, r, "%s: cannot read namespace: %s", ns_path,
                                 read_error_string(r));
        if (ns)
                strstrip(ns);
        c->namespace = ns && *ns ? TAKE_PTR(ns) : strdup("default");
        if (!c->namespace)
                return oom(ret_error);

        log_debug("kubeconfig: in-cluster configuration, server %s", c->server);
        *ret = TAKE_PTR(c);
        return 0;
}

int kube_config_load(const struct kube_config_options *opts, struct kube_config **ret, char **ret_error) {
        _cleanup_(loader_done) struct loader l = { .opts = opts };
        int r;

        assert(opts);
        assert(ret);

        if (opts->kubeconfig && *opts->kubeconfig) {
                r = loader_add_file(&l, opts->kubeconfig, true, ret_error);
                if (r < 0)
                        return r;
                return load_context(&l, ret, ret_error);
        }

        if (opts->kubeconfig_env && *opts->kubeconfig_env) {
                const char *p = opts->kubeconfig_env;

                while (*p) {
                        size_t n = strcspn(p, ":");

                        if (n > 0) {
                                _cleanup_(freep) char *path = strndup(p, n);

                                if (!path)
                                        return oom(ret_error);
                                r = loader_add_file(&l, path, false, ret_error);
                                if (r < 0)
                                        return r;
                        }
                        p += n;
                        if (*p == ':')
                                p++;
                }
        } else if (opts->home && *opts->home) {
                _cleanup_(freep) char *path = path_join(opts->home, ".kube/config");

                if (!path)
                        return oom(ret_error);
                r = loader_add_file(&l, path, false, ret_error);
                if (r < 0)
                        return r;
        }

        if (!loader_is_empty(&l))
                return load_context(&l, ret, ret_error);

        if (opts->service_host && *opts->service_host && opts->service_port && *opts->service_port)
                return load_in_cluster(opts, ret, ret_error);

        return set_error(ret_error, -ENOENT,
                         "no configuration: set --kubeconfig or KUBECONFIG, or create ~/.kube/config");
}

struct kube_config *kube_config_free(struct kube_config *c) {
        struct kube_config_private *p;

        if (!c)
                return NULL;
        p = c->priv;
        if (p) {
                free(p->token);
                free(p->token_file);
                exec_config_free(p->exec);
                free(p->exec_token);
                free(p->exec_cert);
                free(p->exec_key);
                free(p);
        }
        free(c->server);
        free(c->ca_pem);
        free(c->client_cert_pem);
        free(c->client_key_pem);
        free(c->tls_server_name);
        free(c->namespace);
        free(c->source);
        free(c->context_name);
        free(c);
        return NULL;
}

void kube_config_set_exec_timeout(struct kube_config *c, uint64_t timeout_usec) {
        assert(c);
        c->priv->exec_timeout_usec = timeout_usec > 0 ? timeout_usec : KUBE_CONFIG_EXEC_TIMEOUT_USEC;
}

bool kube_config_uses_exec(const struct kube_config *c) {
        return c && c->priv->exec;
}

bool kube_config_token_in_clear(const struct kube_config *c) {
        return c && c->server && strncmp(c->server, "http://", 7) == 0 &&
               (c->priv->token || c->priv->token_file || c->priv->exec);
}

/* ---- credentials ---- */

/* Re-reads the token file when it changed (the kubelet swaps the projected service
 * account token through a symlink, so the inode changes too). A file that cannot be
 * read or is empty (caught mid-rewrite) keeps the previous token, as client-go does. */
static int refresh_token_file(struct kube_config_private *p, bool force) {
        _cleanup_(freep) char *buf = NULL;
        struct file_id id;
        struct stat st;
        int r;

        if (!force) {
                if (stat(p->token_file, &st) < 0) {
                        log_debug_errno(
                                errno,
                                "kubeconfig: %s: cannot stat token file, keeping the previous token: %m",
                                p->token_file);
                        return 0;
                }
                file_id_from_stat(&id, &st);
                if (file_id_equal(&id, &p->token_id))
                        return 0;
        }

        r = read_file(p->token_file, TOKEN_FILE_MAX, &buf, NULL, &id);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_debug_errno(r, "kubeconfig: %s: cannot read token file, keeping the previous token: %m",
                                p->token_file);
                return 0;
        }
        strstrip(buf);
        if (!token_is_valid(buf)) {
                log_debug("kubeconfig: %s: token file empty or invalid, keeping the previous token",
                          p->token_file);
                return 0;
        }
        if (!streq(buf, p->token))
                log_debug("kubeconfig: %s: token rotated", p->token_file);
        free(p->token);
        p->token = TAKE_PTR(buf);
        p->token_id = id;
        return 0;
}

static char **exec_environment(const struct exec_config *e) {
        size_t n = 0, k = 0;
        char **envp;

        for (char **v = environ; v && *v; v++)
                n++;
        envp = calloc(n + e->n_env + 2, sizeof(char *));
        if (!envp)
                return NULL;

        /* inherited, minus what the kubeconfig sets (the configured value wins) */
        for (char **v = environ; v && *v; v++) {
                size_t len = strcspn(*v, "=");
                bool overridden = strncmp(*v, EXEC_INFO_ENV "=", strlen(EXEC_INFO_ENV) + 1) == 0;

                for (size_t i = 0; i < e->n_env && !overridden; i++)
                        overridden = strncmp(*v, e->env[i], len + 1) == 0;
                if (!overridden)
                        envp[k++] = *v;
        }
        for (size_t i = 0; i < e->n_env; i++) {
                bool dup = false;

                /* a name listed twice: the last one wins */
                for (size_t j = i + 1; j < e->n_env && !dup; j++)
                        dup = strncmp(e->env[i], e->env[j], strcspn(e->env[i], "=") + 1) == 0;
                if (!dup)
                        envp[k++] = e->env[i];
        }
        return envp;
}

/* The plugin's executable, as execvp/Go's exec.LookPath find it: a command with a '/' is a
 * path, else the first executable regular file in $PATH. Checked before spawning so that
 * "not found" is reported the same way whatever posix_spawn can tell us. */
static int find_executable(const char *cmd, char **ret) {
        const char *path, *p;
        struct stat st;

        if (strchr(cmd, '/')) {
                if (access(cmd, X_OK) < 0)
                        return -errno;
                if (stat(cmd, &st) < 0)
                        return -errno;
                if (S_ISDIR(st.st_mode))
                        return -EISDIR;
                *ret = strdup(cmd);
                return *ret ? 0 : -ENOMEM;
        }

        path = getenv("PATH");
        if (!path || !*path)
                path = "/usr/local/bin:/usr/bin:/bin";
        for (p = path; *p;) {
                size_t n = strcspn(p, ":");

                if (n > 0) {
                        char *full;

                        if (asprintf(&full, "%.*s/%s", (int)n, p, cmd) < 0)
                                return -ENOMEM;
                        if (access(full, X_OK) == 0 && stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
                                *ret = full;
                                return 0;
                        }
                        free(full);
                }
                p += n;
                if (*p == ':')
                        p++;
        }
        return -ENOENT;
}

/* Runs the plugin: stdin /dev/null, stdout captured (capped), stderr inherited, killed
 * after timeout_usec. This blocks the caller for at most the timeout. */
static int exec_run(const struct exec_config *e, uint64_t timeout_usec, char **ret_out, size_t *ret_len,
                    char **ret_error) {
        _cleanup_(freep) char **envp = NULL;
        _cleanup_(freep) char *out = NULL;
        _cleanup_(freep) char *info = NULL, *exe = NULL;
        size_t len = 0, size = 0;
        int pipefd[2] = { -1, -1 }, tfd = -1, status = 0, r = 0;
        bool timed_out = false, too_big = false, reaped = false;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        struct itimerspec its = {};
        sigset_t all, none;
        pid_t pid;

        if (asprintf(&info, EXEC_INFO_ENV "=%s", e->info_json) < 0) {
                info = NULL;
                return oom(ret_error);
        }
        envp = exec_environment(e);
        if (!envp)
                return oom(ret_error);
        for (char **v = envp;; v++)
                if (!*v) {
                        *v = info;
                        break;
                }

        r = find_executable(e->argv[0], &exe);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r == -ENOENT && !strchr(e->argv[0], '/'))
                return set_error(ret_error, r, "exec plugin \"%s\" failed: executable not found in $PATH",
                                 e->name);
        if (r < 0)
                return set_error(ret_error, r, "exec plugin \"%s\" failed: %s", e->name, strerror(-r));

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return set_error(ret_error, -errno, "exec plugin \"%s\": cannot create pipe: %s", e->name,
                                 strerror(errno));
        tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        if (tfd < 0) {
                r = set_error(ret_error, -errno, "exec plugin \"%s\": cannot create timer: %s", e->name,
                              strerror(errno));
                goto out_fds;
        }
        its.it_value.tv_sec = (time_t)(timeout_usec / USEC_PER_SEC);
        its.it_value.tv_nsec = (long)(timeout_usec % USEC_PER_SEC) * 1000;
        if (timerfd_settime(tfd, 0, &its, NULL) < 0) {
                r = set_error(ret_error, -errno, "exec plugin \"%s\": cannot arm timer: %s", e->name,
                              strerror(errno));
                goto out_fds;
        }

        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
        /* the plugin gets stdin, stdout and stderr, not our API connections */
        posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
#endif
        posix_spawnattr_init(&attr);
        /* the plugin starts with default signal handling (we may ignore SIGPIPE) */
        sigfillset(&all);
        sigemptyset(&none);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
        r = posix_spawn(&pid, exe, &fa, &attr, e->argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        close(pipefd[1]);
        pipefd[1] = -1;
        if (r != 0) {
                r = set_error(ret_error, -r, "exec plugin \"%s\" failed: %s", e->name, strerror(r));
                goto out_fds;
        }
        log_debug("kubeconfig: running exec plugin \"%s\" (pid %d)", e->name, (int)pid);

        for (;;) {
                struct pollfd fds[2] = {
                        { .fd = pipefd[0], .events = POLLIN },
                        { .fd = tfd, .events = POLLIN },
                };
                ssize_t k;

                if (poll(fds, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (fds[1].revents) {
                        timed_out = true;
                        break;
                }
                if (!fds[0].revents)
                        continue;
                if (size - len < 4096) {
                        size_t nsize = MAX(size * 2, (size_t)16384);
                        char *nout;

                        nsize = MIN(nsize, (size_t)KUBE_CONFIG_EXEC_OUTPUT_MAX + 2);
                        nout = realloc(out, nsize);
                        if (!nout) {
                                r = -ENOMEM;
                                break;
                        }
                        out = nout;
                        size = nsize;
                }
                k = read(pipefd[0], out + len, size - len - 1);
                if (k < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        r = -errno;
                        break;
                }
                if (k == 0)
                        break;
                len += k;
                if (len > KUBE_CONFIG_EXEC_OUTPUT_MAX) {
                        too_big = true;
                        break;
                }
        }

        /* stdout is closed; wait for the exit, still bounded by the timer */
        while (r == 0 && !timed_out && !too_big) {
                struct pollfd t = { .fd = tfd, .events = POLLIN };
                pid_t w = waitpid(pid, &status, WNOHANG);

                if (w == pid) {
                        reaped = true;
                        break;
                }
                if (w < 0 && errno != EINTR) {
                        r = -errno;
                        break;
                }
                if (poll(&t, 1, 5) > 0)
                        timed_out = true;
        }
        if (!reaped) {
                (void)kill(pid, SIGKILL);
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
        }

        if (r == -ENOMEM) {
                r = oom(ret_error);
                goto out_fds;
        }
        if (r < 0) {
                r = set_error(ret_error, r, "exec plugin \"%s\" failed: %s", e->name, strerror(-r));
                goto out_fds;
        }
        if (timed_out) {
                if (timeout_usec % USEC_PER_SEC == 0)
                        r = set_error(ret_error, -ETIMEDOUT,
                                      "exec plugin \"%s\" timed out after %" PRIu64 " s", e->name,
                                      timeout_usec / USEC_PER_SEC);
                else
                        r = set_error(ret_error, -ETIMEDOUT,
                                      "exec plugin \"%s\" timed out after %" PRIu64 " ms", e->name,
                                      timeout_usec / 1000);
                goto out_fds;
        }
        if (too_big) {
                r = set_error(ret_error, -E2BIG, "exec plugin \"%s\" failed: output larger than %u bytes",
                              e->name, KUBE_CONFIG_EXEC_OUTPUT_MAX);
                goto out_fds;
        }
        if (WIFSIGNALED(status)) {
                r = set_error(ret_error, -EIO, "exec plugin \"%s\" failed: killed by signal %d (%s)",
                              e->name, WTERMSIG(status), strsignal(WTERMSIG(status)));
                goto out_fds;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                r = set_error(ret_error, -EIO, "exec plugin \"%s\" failed: exit status %d", e->name,
                              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
                goto out_fds;
        }

        if (!out) {
                out = strdup("");
                if (!out) {
                        r = oom(ret_error);
                        goto out_fds;
                }
        }
        out[len] = 0;
        *ret_out = TAKE_PTR(out);
        *ret_len = len;
        r = 0;
out_fds:
        if (pipefd[0] >= 0)
                close(pipefd[0]);
        if (pipefd[1] >= 0)
                close(pipefd[1]);
        if (tfd >= 0)
                close(tfd);
        if (out)
                explicit_bzero(out, size);
        return r;
}

static int json_string_field(const cJSON *obj, const char *key, const char **ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

        if (!v || cJSON_IsNull(v)) {
                *ret = NULL;
                return 0;
        }
        if (!cJSON_IsString(v))
                return -EINVAL;
        *ret = *v->valuestring ? v->valuestring : NULL;
        return 0;
}

/* Parses an ExecCredential and, when valid, replaces the cache. */
static int exec_apply(struct kube_config_private *p, const char *out, size_t len, int64_t now_usec,
                      char **ret_error) {
        const struct exec_config *e = p->exec;
        _cleanup_(freep) char *token = NULL, *cert = NULL, *key = NULL;
        const char *api, *kind, *tok, *crt, *k, *exp;
        const cJSON *status;
        int64_t expiry = 0;
        cJSON *root;
        int r = 0;

        root = cJSON_ParseWithLength(out, len);
        if (!root || !cJSON_IsObject(root)) {
                cJSON_Delete(root);
                return set_error(ret_error, -EPROTO,
                                 "exec plugin \"%s\": output is not an ExecCredential JSON object", e->name);
        }

        if (json_string_field(root, "apiVersion", &api) < 0 || json_string_field(root, "kind", &kind) < 0 ||
            !kind || !streq(kind, "ExecCredential")) {
                r = set_error(ret_error, -EPROTO, "exec plugin \"%s\": output is not an ExecCredential",
                              e->name);
                goto out;
        }
        if (!api || !streq(api, e->api_version)) {
                r = set_error(ret_error, -EPROTO,
                              "exec plugin \"%s\" is configured to use API version %s, plugin returned "
                              "version %.64s",
                              e->name, e->api_version, strna(api));
                goto out;
        }
        status = cJSON_GetObjectItemCaseSensitive(root, "status");
        if (!cJSON_IsObject(status)) {
                r = set_error(ret_error, -EPROTO, "exec plugin \"%s\" didn't return a status", e->name);
                goto out;
        }
        if (json_string_field(status, "token", &tok) < 0 ||
            json_string_field(status, "clientCertificateData", &crt) < 0 ||
            json_string_field(status, "clientKeyData", &k) < 0 ||
            json_string_field(status, "expirationTimestamp", &exp) < 0) {
                r = set_error(ret_error, -EPROTO, "exec plugin \"%s\": status fields must be strings",
                              e->name);
                goto out;
        }
        if (!tok && !crt && !k) {
                r = set_error(ret_error, -EPROTO,
                              "exec plugin \"%s\" didn't return a token or a client certificate", e->name);
                goto out;
        }
        if (!crt != !k) {
                r = set_error(ret_error, -EPROTO,
                              "exec plugin \"%s\" returned only a certificate or a key, not both", e->name);
                goto out;
        }
        if (tok && !token_is_valid(tok)) {
                r = set_error(ret_error, -EPROTO,
                              "exec plugin \"%s\": status.token contains control characters", e->name);
                goto out;
        }
        if (crt && (!has_pem_block(crt, strlen(crt)) || !has_pem_block(k, strlen(k)))) {
                r = set_error(ret_error, -EPROTO, "exec plugin \"%s\": client certificate or key is not PEM",
                              e->name);
                goto out;
        }
        if (exp && parse_rfc3339(exp, &expiry) < 0) {
                r = set_error(ret_error, -EPROTO,
                              "exec plugin \"%s\": status.expirationTimestamp: invalid RFC 3339 time",
                              e->name);
                goto out;
        }

        if ((tok && !(token = strdup(tok))) || (crt && !(cert = strdup(crt))) || (k && !(key = strdup(k)))) {
                r = oom(ret_error);
                goto out;
        }

        if (!streq_ptr(cert, p->exec_cert) || !streq_ptr(key, p->exec_key))
                p->cert_dirty = true;
        free(p->exec_token);
        free(p->exec_cert);
        free(p->exec_key);
        p->exec_token = TAKE_PTR(token);
        p->exec_cert_len = cert ? strlen(cert) : 0;
        p->exec_cert = TAKE_PTR(cert);
        p->exec_key_len = key ? strlen(key) : 0;
        p->exec_key = TAKE_PTR(key);
        p->exec_cached = true;
        p->exec_has_expiry = exp != NULL;
        p->exec_expiry_usec = expiry;
        if (exp)
                log_debug("kubeconfig: exec plugin \"%s\": credential valid for %" PRId64 " s", e->name,
                          (expiry - now_usec) / USEC_PER_SEC);
out:
        cJSON_Delete(root);
        return r;
}

int kube_config_credentials(struct kube_config *c, int64_t now_usec, bool force_refresh,
                            struct kube_credentials *ret, char **ret_error) {
        struct kube_config_private *p;
        struct kube_credentials cr = {};
        int r;

        assert(c);
        assert(ret);
        p = c->priv;

        if (p->token_file) {
                r = refresh_token_file(p, force_refresh);
                if (r < 0)
                        return oom(ret_error);
        }

        if (p->exec) {
                bool expired = p->exec_has_expiry && now_usec >= p->exec_expiry_usec;

                if (!p->exec_cached || expired || force_refresh) {
                        _cleanup_(freep) char *out = NULL;
                        size_t len;

                        r = exec_run(p->exec, p->exec_timeout_usec, &out, &len, ret_error);
                        if (r < 0)
                                return r;
                        r = exec_apply(p, out, len, now_usec, ret_error);
                        explicit_bzero(out, len);
                        if (r < 0)
                                return r;
                }
                cr.token = p->exec_token;
                cr.client_cert_pem = p->exec_cert;
                cr.client_cert_pem_len = p->exec_cert_len;
                cr.client_key_pem = p->exec_key;
                cr.client_key_pem_len = p->exec_key_len;
        } else {
                cr.token = p->token;
                cr.client_cert_pem = c->client_cert_pem;
                cr.client_cert_pem_len = c->client_cert_pem_len;
                cr.client_key_pem = c->client_key_pem;
                cr.client_key_pem_len = c->client_key_pem_len;
        }

        cr.changed = p->returned_before ? p->cert_dirty : cr.client_cert_pem != NULL;
        p->cert_dirty = false;
        p->returned_before = true;
        *ret = cr;
        return 0;
}
