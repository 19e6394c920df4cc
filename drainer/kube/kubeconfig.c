/* Client configuration the way kubectl reads it: clientcmd's loading rules, merging,
 * context selection, the in-cluster fallback, and the validation of every field. Owns
 * the parsed config, including the description of the user's credentials (struct
 * kube_auth); reads no credential file (credentials.c does, and refreshes them). Must
 * never log or put into an error message any token or key material, and wipes every
 * buffer that held some (the files, their YAML, tokens, key data) before it is freed. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <yaml.h>

#include "drainer/base/buf.h"
#include "drainer/base/log.h"
#include "drainer/base/text.h"
#include "drainer/kube/kubeconfig.h"

#define YAML_TO_JSON_NODES_MAX 10000
#define YAML_TO_JSON_DEPTH_MAX 64

#define EXEC_API_V1         "client.authentication.k8s.io/v1"
#define EXEC_API_V1BETA1    "client.authentication.k8s.io/v1beta1"
#define EXEC_EXTENSION_NAME "client.authentication.k8s.io/exec"

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

#define set_error(ret_error, r, ...) log_error_message(ret_error, r, "kubeconfig", __VA_ARGS__)
#define oom(ret_error)               log_error_message_oom(ret_error)

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

/* Reads a whole file (a certificate authority, a namespace: nothing secret),
 * NUL-terminated. -EFBIG when larger than max. */
static int read_file(const char *path, size_t max, char **ret, size_t *ret_len) {
        struct buf b = BUF_INIT(max, false);
        int r;

        r = buf_read_file(&b, path, NULL);
        if (r < 0)
                return r;
        *ret = buf_steal(&b, ret_len);
        return *ret ? 0 : -ENOMEM;
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
        _cleanup_(buf_erase_freestrp) char *out = NULL;
        size_t count = 0, pad = 0, len = 0;
        uint32_t acc = 0;

        out = calloc(1, n / 4 * 3 + 4); /* zeroed: buf_erase_freestr() stops at the first NUL */
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

/* The -data of a PEM input, base64-decoded and checked: 1 with *ret set, 0 when absent. */
static int pem_data(yaml_document_t *d, yaml_node_t *map, const char *data_key, const char *where,
                    char **ret, size_t *ret_len, char **ret_error) {
        _cleanup_(buf_erase_freestrp) char *buf = NULL;
        const char *data;
        size_t len;
        int r;

        r = get_string(d, map, data_key, where, &data, ret_error);
        if (r < 0)
                return r;
        if (!data)
                return 0;
        r = base64_decode(data, strlen(data), &buf, &len);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s.%s: invalid base64", where, data_key);
        if (!has_pem_block(buf, len))
                return set_error(ret_error, -EINVAL, "%s.%s: no PEM block in the decoded data", where,
                                 data_key);
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 1;
}

/* A PEM input given as -data (base64) or as a file; data wins, as in kubectl. Returns 1
 * with either *ret (the data) or *ret_path (the file's absolute path, not read) set, 0
 * when neither is given. */
static int pem_source(yaml_document_t *d, yaml_node_t *map, const char *data_key, const char *file_key,
                      const char *dir, const char *where, char **ret, size_t *ret_len, char **ret_path,
                      char **ret_error) {
        const char *file;
        int r;

        r = pem_data(d, map, data_key, where, ret, ret_len, ret_error);
        if (r != 0)
                return r;
        r = get_string(d, map, file_key, where, &file, ret_error);
        if (r < 0)
                return r;
        if (!file)
                return 0;
        *ret_path = resolve_path(dir, file);
        return *ret_path ? 1 : oom(ret_error);
}

/* The certificate authority: its data, or its file read now (it is not a secret, and it
 * never rotates under a running client-go either). */
static int load_ca(yaml_document_t *d, yaml_node_t *map, const char *dir, const char *where, char **ret,
                   size_t *ret_len, char **ret_error) {
        _cleanup_(freep) char *path = NULL;
        char *buf = NULL;
        size_t len;
        int r;

        r = pem_source(d, map, "certificate-authority-data", "certificate-authority", dir, where, ret,
                       ret_len, &path, ret_error);
        if (r <= 0 || !path)
                return r;
        r = read_file(path, BUF_CAP_PEM_FILE, &buf, &len);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s: cannot read certificate-authority: %s", path,
                                 buf_file_error(r));
        if (!has_pem_block(buf, len)) {
                free(buf);
                return set_error(ret_error, -EINVAL, "%s: certificate-authority: no PEM block in the file",
                                 path);
        }
        *ret = buf;
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

        r = load_ca(d, cl, f->dir, where, &c->ca_pem, &c->ca_pem_len, ret_error);
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

static void erase_freestrv(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                buf_erase_freestr(*i);
        free(l);
}

/* Its arguments and environment may carry secrets (an API key in env): wiped. */
static struct kube_exec *exec_config_free(struct kube_exec *e) {
        if (!e)
                return NULL;
        free(e->name);
        free(e->api_version);
        erase_freestrv(e->argv);
        erase_freestrv(e->env);
        buf_erase_freestr(e->info_json);
        free(e);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct kube_exec *, exec_config_free);

static int parse_exec(struct kc_file *f, yaml_node_t *ex, const char *user, struct kube_exec **ret,
                      char **ret_error) {
        _cleanup_(exec_config_freep) struct kube_exec *e = NULL;
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
                /* a value may be a secret: text_printf() leaves no outgrown copies */
                e->env[i] = text_printf("%s=%s", name, strempty(value));
                if (!e->env[i])
                        return oom(ret_error);
        }

        *ret = TAKE_PTR(e);
        return 0;
}

/* KUBERNETES_EXEC_INFO: an ExecCredential with spec.interactive=false and, with
 * provideClusterInfo, spec.cluster (the CA always as data). */
static int build_exec_info(struct kube_exec *e, const struct kube_config *c, struct kc_file *cf,
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

static int parse_user(struct kube_config *c, struct kc_file *f, yaml_node_t *u, const char *name,
                      struct kc_file *cluster_file, yaml_node_t *cluster_node, char **ret_error) {
        static const char *const impersonation[] = { "as", "as-uid", "as-groups", "as-user-extra" };
        struct kube_auth *p = &c->auth;
        _cleanup_(freep) char *where = NULL;
        yaml_document_t *d = &f->doc;
        const char *token, *token_file, *username, *password;
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
                p->token_file = resolve_path(f->dir, token_file);
                if (!p->token_file)
                        return oom(ret_error);
                p->token_file_key = "tokenFile";
                /* as client-go's transport: the file, when set, supersedes a static token */
                p->token = buf_erase_freestr(p->token);
        }

        /* As files, both are read (and re-read when they change: cert-manager, kubelet-style
         * rotation) by credentials.c. */
        have_cert =
                pem_source(d, u, "client-certificate-data", "client-certificate", f->dir, where,
                           &p->client_cert_pem, &p->client_cert_pem_len, &p->client_cert_file, ret_error);
        if (have_cert < 0)
                return have_cert;
        have_key = pem_source(d, u, "client-key-data", "client-key", f->dir, where, &p->client_key_pem,
                              &p->client_key_pem_len, &p->client_key_file, ret_error);
        if (have_key < 0)
                return have_key;
        if (have_cert && !have_key)
                return set_error(ret_error, -EINVAL, "%s: client-certificate without client-key", where);
        if (have_key && !have_cert)
                return set_error(ret_error, -EINVAL, "%s: client-key without client-certificate", where);

        ex = map_get_set(d, u, "exec");
        if (!ex)
                return 0;
        if (p->token || p->token_file || have_cert) {
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

/* libyaml keeps the decoded input in buffers of its own: wipe them (the kubeconfig holds
 * tokens and keys) before it frees them. */
static void parser_erase_delete(yaml_parser_t *parser) {
        if (parser->buffer.start)
                explicit_bzero(parser->buffer.start, (size_t)(parser->buffer.end - parser->buffer.start));
        if (parser->raw_buffer.start)
                explicit_bzero(parser->raw_buffer.start,
                               (size_t)(parser->raw_buffer.end - parser->raw_buffer.start));
        yaml_parser_delete(parser);
}

/* Every scalar of the document (tokens, key data, exec env values) is wiped before
 * libyaml frees it. */
static void document_erase_delete(yaml_document_t *d) {
        for (yaml_node_t *n = d->nodes.start; n && n < d->nodes.top; n++)
                if (n->type == YAML_SCALAR_NODE && n->data.scalar.value)
                        explicit_bzero(n->data.scalar.value, n->data.scalar.length);
        yaml_document_delete(d);
}

static void loader_done(struct loader *l) {
        for (size_t i = 0; i < l->n_files; i++) {
                struct kc_file *f = l->files + i;

                if (f->have_doc)
                        document_erase_delete(&f->doc);
                free(f->path);
                free(f->display);
                free(f->dir);
        }
        free(l->files);
        free(l->sources);
}

/* Parses one kubeconfig document (path as given, display for messages, dir the base of
 * its relative paths; path, display and dir are taken over). */
static int loader_add_yaml(struct loader *l, char *path, char *display, char *dir, const char *data,
                           size_t len, char **ret_error) {
        struct kc_file *f, *nfiles;
        yaml_parser_t parser;
        int r;

        nfiles = realloc(l->files, (l->n_files + 1) * sizeof(*l->files));
        if (!nfiles) {
                free(path);
                free(display);
                free(dir);
                return oom(ret_error);
        }
        l->files = nfiles;
        f = l->files + l->n_files;
        *f = (struct kc_file){ .path = path, .display = display, .dir = dir };
        l->n_files++; /* from here on loader_done() frees it */
        if (!f->path || !f->display || !f->dir)
                return oom(ret_error);

        if (!yaml_parser_initialize(&parser))
                return oom(ret_error);
        yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
        if (!yaml_parser_load(&parser, &f->doc)) {
                r = set_error(ret_error, parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EINVAL,
                              "%s: invalid YAML: %s at line %zu, column %zu", f->display,
                              strna(parser.problem), parser.problem_mark.line + 1,
                              parser.problem_mark.column + 1);
                parser_erase_delete(&parser);
                return r;
        }
        parser_erase_delete(&parser);
        f->have_doc = true;

        f->root = yaml_document_get_root_node(&f->doc);
        if (node_is_null(f->root))
                f->root = NULL; /* empty file: defines nothing */
        else if (f->root->type != YAML_MAPPING_NODE)
                return set_error(ret_error, -EINVAL, "%s: not a kubeconfig: top level is not a mapping",
                                 f->display);
        return 0;
}

/* Parses one kubeconfig file. Returns 0 when added, 1 when missing and !required. */
static int loader_add_file(struct loader *l, const char *path, bool required, char **ret_error) {
        _cleanup_(buf_done) struct buf b = BUF_INIT(BUF_CAP_KUBECONFIG, true);
        _cleanup_(freep) char *display = NULL;
        int r;

        for (size_t i = 0; i < l->n_files; i++)
                if (streq(l->files[i].path, path))
                        return 1; /* $KUBECONFIG names it twice: load once */

        display = display_path(l->opts->home, path);
        if (!display)
                return oom(ret_error);

        r = buf_read_file(&b, path, NULL);
        if (r == -ENOENT && !required) {
                log_debug("kubeconfig: %s: not found, skipping", display);
                return 1;
        }
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s: cannot read kubeconfig: %s", display, buf_file_error(r));
        return loader_add_yaml(l, strdup(path), TAKE_PTR(display), abs_dir_of(path), b.data, b.len,
                               ret_error);
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

        c->auth.token_file = TAKE_PTR(token_path);
        c->auth.token_file_key = "service account token";

        r = read_file(ca_path, BUF_CAP_PEM_FILE, &c->ca_pem, &c->ca_pem_len);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s: cannot read certificate-authority: %s", ca_path,
                                 buf_file_error(r));
        if (!has_pem_block(c->ca_pem, c->ca_pem_len))
                return set_error(ret_error, -EINVAL, "%s: certificate-authority: no PEM block in the file",
                                 ca_path);

        r = read_file(ns_path, BUF_CAP_TOKEN_FILE, &ns, NULL);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0 && r != -ENOENT)
                return set_error(ret_error, r, "%s: cannot read namespace: %s", ns_path, buf_file_error(r));
        if (ns)
                text_strip(ns);
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

        if (opts->data) {
                r = loader_add_yaml(&l, strdup("kubeconfig data"), strdup("kubeconfig data"),
                                    opts->data_dir ? strdup(opts->data_dir) : getcwd(NULL, 0), opts->data,
                                    opts->data_len, ret_error);
                if (r < 0)
                        return r;
                return load_context(&l, ret, ret_error);
        }

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
        struct kube_auth *p;

        if (!c)
                return NULL;
        p = &c->auth;
        buf_erase_freestr(p->token);
        free(p->token_file);
        buf_erase_free(p->client_cert_pem, p->client_cert_pem_len);
        buf_erase_free(p->client_key_pem, p->client_key_pem_len);
        free(p->client_cert_file);
        free(p->client_key_file);
        exec_config_free(p->exec);
        free(c->server);
        free(c->ca_pem);
        free(c->tls_server_name);
        free(c->namespace);
        free(c->source);
        free(c->context_name);
        free(c);
        return NULL;
}

bool kube_config_token_in_clear(const struct kube_config *c) {
        return c && c->server && strncmp(c->server, "http://", 7) == 0 &&
               (c->auth.token || c->auth.token_file || c->auth.exec);
}

bool kube_token_is_valid(const char *t) {
        return t && token_is_valid(t);
}

bool kube_pem_has_block(const char *data, size_t n) {
        return data && has_pem_block(data, n);
}
