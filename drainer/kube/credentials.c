/* Credentials for each request without blocking the loop, from every source: a static
 * token or client certificate (copied from the config); a token file and client
 * certificate and key files, read at the start and re-read when they change (inode,
 * size or mtime), the previous ones kept while a file is caught mid-rotation; exec
 * credential plugins through uv_spawn on the loop (a process group of their own,
 * killed as a group at the timeout, the environment client-go gives minus what belongs
 * to drainer's service manager), their ExecCredential cached until it expires. Owns
 * the current credentials (wiped when replaced or freed), the plugin run in flight with
 * its handles, and the waiters' list; borrows the config, the loop and the time source.
 * Never logs secrets; debug level only. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "drainer/base/backoff.h"
#include "drainer/base/buf.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/credentials.h"

extern char **environ;

#define EXEC_INFO_ENV "KUBERNETES_EXEC_INFO"

/* One plugin run; outlives a closed struct credentials until its handles are closed. */
struct run {
        struct credentials *c; /* NULL once abandoned by credentials_close() */
        uv_process_t proc;
        uv_pipe_t out;
        unsigned open; /* uv handles not closed yet */
        bool exited, eof, too_big, timed_out;
        int64_t exit_status;
        int term_signal, read_error;
        struct buf out_buf; /* stdout: secret, one byte over BUF_CAP_EXEC_OUTPUT is too big */
        uint64_t started;
};

/* What a credential file was when read: a change of any is a rotation. */
struct file_id {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
};

struct credentials {
        uv_loop_t *loop;              /* borrowed; NULL without a plugin */
        struct timesrc *ts;           /* borrowed */
        const struct kube_auth *auth; /* borrowed from the config */
        const struct kube_exec *exec; /* borrowed from the config, NULL without a plugin */
        struct credentials_options o;

        /* The current credentials, whatever their source (owned, wiped when replaced):
         * static ones copied from the config, the files' contents, or the cached
         * ExecCredential (have: one came). */
        bool have;
        char *token, *cert, *key;
        size_t cert_len, key_len;
        bool has_expiry;
        int64_t expiry_usec; /* wall clock */
        uint64_t generation;
        struct file_id token_id, cert_id, key_id; /* the files, when they were read */

        struct run *run;       /* owned while under way */
        unsigned runs_closing; /* ended runs whose handles are still closing */
        struct dtimer run_timeout;

        /* a failed run or an expired answer: no new run before retry_timer fires */
        bool retry_pending;
        struct backoff retry; /* failed runs and expired answers in a row */
        struct dtimer retry_timer;
        int last_error;
        char *last_message;

        /* 401 refreshes, process-wide */
        struct backoff refresh; /* counts refreshes that follow each other closely */
        uint64_t refresh_next, refresh_last, refresh_interval;

        struct credentials_wait *waiters;
        struct dtimer wake; /* wakes waiters that came when nothing was under way */

        struct credentials_stats stats;
        bool closing;
        void (*close_cb)(void *userdata);
        void *close_userdata;
};

#define set_error(ret_error, r, ...) log_error_message(ret_error, r, "credentials", __VA_ARGS__)
#define oom(ret_error)               log_error_message_oom(ret_error)

/* cJSON frees its strings unwiped: wipe every string (and key) of the tree first. */
static void json_erase_delete(cJSON *j) {
        for (cJSON *i = j; i; i = i->next) {
                if (i->child)
                        json_erase_delete(i->child), i->child = NULL;
                if (i->valuestring)
                        explicit_bzero(i->valuestring, strlen(i->valuestring));
                if (i->string)
                        explicit_bzero(i->string, strlen(i->string));
        }
        cJSON_Delete(j);
}

/* ---- static credentials and credential files ---- */

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

/* Whether the file at path is no longer what known describes. A file that cannot be
 * looked at is not a change (mid-rotation, a symlink swap): keep what we have. */
static bool file_changed(const char *path, const struct file_id *known) {
        struct file_id id;
        struct stat st;

        if (!path || stat(path, &st) < 0)
                return false;
        file_id_from_stat(&id, &st);
        return !file_id_equal(&id, known);
}

/* A whole credential file into wiped memory. -EFBIG over max. */
static int read_secret(const char *path, size_t max, char **ret, size_t *ret_len, struct file_id *ret_id) {
        struct buf b = BUF_INIT(max, true);
        struct stat st;
        int r;

        r = buf_read_file(&b, path, &st);
        if (r < 0)
                return r;
        *ret = buf_steal(&b, ret_len);
        if (!*ret)
                return -ENOMEM;
        file_id_from_stat(ret_id, &st);
        return 0;
}

static char *memdup_str(const char *p, size_t n) {
        char *s = malloc(n + 1);

        if (s) {
                memcpy(s, p, n);
                s[n] = 0;
        }
        return s;
}

/* The token file, read at the start: an error names the file. */
static int load_token_file(struct credentials *c, char **ret_error) {
        const char *path = c->auth->token_file, *key = strna(c->auth->token_file_key);
        _cleanup_(buf_erase_freestrp) char *buf = NULL;
        int r;

        r = read_secret(path, BUF_CAP_TOKEN_FILE, &buf, NULL, &c->token_id);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s: cannot read %s: %s", path, key, buf_file_error(r));
        text_strip(buf);
        if (!*buf)
                return set_error(ret_error, -EINVAL, "%s: %s is empty", path, key);
        if (!kube_token_is_valid(buf))
                return set_error(ret_error, -EINVAL, "%s: %s contains control characters", path, key);
        c->token = TAKE_PTR(buf);
        return 0;
}

/* A client certificate or key file, read at the start. */
static int load_pem_file(const char *path, const char *key, char **ret, size_t *ret_len,
                         struct file_id *ret_id, char **ret_error) {
        _cleanup_(buf_erase_freestrp) char *buf = NULL;
        size_t len;
        int r;

        r = read_secret(path, BUF_CAP_PEM_FILE, &buf, &len, ret_id);
        if (r == -ENOMEM)
                return oom(ret_error);
        if (r < 0)
                return set_error(ret_error, r, "%s: cannot read %s: %s", path, key, buf_file_error(r));
        if (!kube_pem_has_block(buf, len))
                return set_error(ret_error, -EINVAL, "%s: %s: no PEM block in the file", path, key);
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

/* The static credentials, and the first contents of the files. */
static int load_static(struct credentials *c, char **ret_error) {
        const struct kube_auth *a = c->auth;
        int r;

        c->generation = 1;
        if (a->token && !(c->token = strdup(a->token)))
                return oom(ret_error);
        if (a->client_cert_pem) {
                c->cert = memdup_str(a->client_cert_pem, a->client_cert_pem_len);
                c->cert_len = a->client_cert_pem_len;
                if (!c->cert)
                        return oom(ret_error);
        }
        if (a->client_key_pem) {
                c->key = memdup_str(a->client_key_pem, a->client_key_pem_len);
                c->key_len = a->client_key_pem_len;
                if (!c->key)
                        return oom(ret_error);
        }
        if (a->token_file) {
                r = load_token_file(c, ret_error);
                if (r < 0)
                        return r;
        }
        if (a->client_cert_file) {
                r = load_pem_file(a->client_cert_file, "client-certificate", &c->cert, &c->cert_len,
                                  &c->cert_id, ret_error);
                if (r < 0)
                        return r;
        }
        if (a->client_key_file) {
                r = load_pem_file(a->client_key_file, "client-key", &c->key, &c->key_len, &c->key_id,
                                  ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* True when the credentials can change while running (token file, certificate or key
 * files): a 401 is then worth a refresh. */
static bool files_may_change(const struct credentials *c) {
        return c->auth->token_file || c->auth->client_cert_file || c->auth->client_key_file;
}

/* Re-reads the token file when it changed (the kubelet swaps the projected service
 * account token through a symlink, so the inode changes too). A file that cannot be
 * read or is empty (caught mid-rewrite) keeps the previous token, as client-go does. */
static int refresh_token_file(struct credentials *c, bool force) {
        const char *path = c->auth->token_file;
        _cleanup_(buf_erase_freestrp) char *buf = NULL;
        struct file_id id;
        int r;

        if (!force && !file_changed(path, &c->token_id))
                return 0;
        r = read_secret(path, BUF_CAP_TOKEN_FILE, &buf, NULL, &id);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_debug_errno(r, "credentials: %s: cannot read token file, keeping the previous token: %m",
                                path);
                return 0;
        }
        text_strip(buf);
        if (!kube_token_is_valid(buf)) {
                log_debug("credentials: %s: token file empty or invalid, keeping the previous token", path);
                return 0;
        }
        if (!streq_ptr(buf, c->token)) {
                log_debug("credentials: %s: token rotated", path);
                c->generation++;
        }
        buf_erase_freestr(c->token);
        c->token = TAKE_PTR(buf);
        c->token_id = id;
        return 0;
}

/* Re-reads client-certificate and client-key files when either changed (whoever rotates
 * them writes both). Both are read and must hold a PEM block; otherwise (caught
 * mid-rewrite, gone) the previous pair is kept and the next call tries again. */
static int refresh_cert_files(struct credentials *c, bool force) {
        const struct kube_auth *a = c->auth;
        _cleanup_(buf_erase_freestrp) char *cert = NULL, *key = NULL;
        size_t cert_len = c->cert_len, key_len = c->key_len;
        struct file_id cert_id = c->cert_id, key_id = c->key_id;
        int r;

        if (!force && !file_changed(a->client_cert_file, &c->cert_id) &&
            !file_changed(a->client_key_file, &c->key_id))
                return 0;
        if (a->client_cert_file) {
                r = read_secret(a->client_cert_file, BUF_CAP_PEM_FILE, &cert, &cert_len, &cert_id);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || !kube_pem_has_block(cert, cert_len)) {
                        log_debug("credentials: %s: cannot read the client certificate, keeping the "
                                  "previous one",
                                  a->client_cert_file);
                        return 0;
                }
        }
        if (a->client_key_file) {
                r = read_secret(a->client_key_file, BUF_CAP_PEM_FILE, &key, &key_len, &key_id);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || !kube_pem_has_block(key, key_len)) {
                        log_debug("credentials: %s: cannot read the client key, keeping the previous one",
                                  a->client_key_file);
                        return 0;
                }
        }
        c->cert_id = cert_id;
        c->key_id = key_id;
        if ((!cert || (cert_len == c->cert_len && memcmp(cert, c->cert, cert_len) == 0)) &&
            (!key || (key_len == c->key_len && memcmp(key, c->key, key_len) == 0)))
                return 0; /* touched, not changed */
        log_debug("credentials: client certificate or key rotated (%s, %s)", strna(a->client_cert_file),
                  strna(a->client_key_file));
        if (cert) {
                buf_erase_free(c->cert, c->cert_len);
                c->cert = TAKE_PTR(cert);
                c->cert_len = cert_len;
        }
        if (key) {
                buf_erase_free(c->key, c->key_len);
                c->key = TAKE_PTR(key);
                c->key_len = key_len;
        }
        c->generation++;
        return 0;
}

/* The files again when they changed (force: read them anyway). Only -ENOMEM fails. */
static int refresh_files(struct credentials *c, bool force) {
        int r = 0;

        if (c->auth->token_file)
                r = refresh_token_file(c, force);
        if (r >= 0 && (c->auth->client_cert_file || c->auth->client_key_file))
                r = refresh_cert_files(c, force);
        return r;
}

/* ---- the plugin's environment ---- */

/* What belongs to drainer's service manager and must not reach the plugin: it could
 * notify or feed systemd's watchdog as drainer, take over sockets handed to drainer, or
 * read drainer's other credentials. */
static bool env_is_service_managers(const char *v) {
        static const char *const exact[] = { "NOTIFY_SOCKET=", "CREDENTIALS_DIRECTORY=", EXEC_INFO_ENV "=" };
        static const char *const prefix[] = { "WATCHDOG_", "LISTEN_" };

        for (size_t i = 0; i < ELEMENTSOF(exact); i++)
                if (strncmp(v, exact[i], strlen(exact[i])) == 0)
                        return true;
        for (size_t i = 0; i < ELEMENTSOF(prefix); i++)
                if (strncmp(v, prefix[i], strlen(prefix[i])) == 0)
                        return true;
        return false;
}

/* As client-go: drainer's environment, then the kubeconfig's env (it wins; a name given
 * twice: the last), then KUBERNETES_EXEC_INFO. The strings are borrowed but info. */
static char **exec_environment(char **base, const struct kube_exec *e, char *info) {
        size_t n = 0, k = 0;
        char **envp;

        for (char **v = base; v && *v; v++)
                n++;
        envp = calloc(n + e->n_env + 2, sizeof(char *));
        if (!envp)
                return NULL;
        for (char **v = base; v && *v; v++) {
                size_t len = strcspn(*v, "=");
                bool skip = !(*v)[len] || env_is_service_managers(*v);

                for (size_t i = 0; i < e->n_env && !skip; i++)
                        skip = strncmp(*v, e->env[i], len + 1) == 0;
                if (!skip)
                        envp[k++] = *v;
        }
        for (size_t i = 0; i < e->n_env; i++) {
                bool dup = false;

                for (size_t j = i + 1; j < e->n_env && !dup; j++)
                        dup = strncmp(e->env[i], e->env[j], strcspn(e->env[i], "=") + 1) == 0;
                if (!dup)
                        envp[k++] = e->env[i];
        }
        envp[k] = info;
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

/* libuv's child keeps every descriptor that is not close-on-exec: make sure none of
 * ours (API connections, the metrics socket, the bus) reaches the plugin. */
static void cloexec_all(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                int fd = atoi(de->d_name), flags;

                if (fd <= STDERR_FILENO || fd == dirfd(d))
                        continue;
                flags = fcntl(fd, F_GETFD);
                if (flags >= 0 && !(flags & FD_CLOEXEC))
                        (void)fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        }
        closedir(d);
}

/* ---- the ExecCredential ---- */

struct answer {
        char *token, *cert, *key; /* owned */
        bool has_expiry;
        int64_t expiry_usec;
};

static void answer_done(struct answer *a) {
        buf_erase_freestr(a->token);
        buf_erase_freestr(a->cert);
        buf_erase_freestr(a->key);
        *a = (struct answer){};
}

/* Parses the plugin's stdout as client-go does (exec.go). */
static int parse_answer(const struct kube_exec *e, const char *out, size_t len, struct answer *ret,
                        char **ret_error) {
        struct answer a = {};
        const char *api, *kind, *tok, *crt, *k, *exp;
        const cJSON *status;
        cJSON *root;
        int r = 0;

        root = cJSON_ParseWithLength(out, len);
        if (!root || !cJSON_IsObject(root)) {
                json_erase_delete(root);
                return set_error(ret_error, -EPROTO,
                                 "exec plugin \"%s\": output is not an ExecCredential JSON object", e->name);
        }
        if (json_get_str_checked(root, "apiVersion", &api) < 0 ||
            json_get_str_checked(root, "kind", &kind) < 0 || !kind || !streq(kind, "ExecCredential")) {
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
        if (json_get_str_checked(status, "token", &tok) < 0 ||
            json_get_str_checked(status, "clientCertificateData", &crt) < 0 ||
            json_get_str_checked(status, "clientKeyData", &k) < 0 ||
            json_get_str_checked(status, "expirationTimestamp", &exp) < 0) {
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
        if (tok && !kube_token_is_valid(tok)) {
                r = set_error(ret_error, -EPROTO,
                              "exec plugin \"%s\": status.token contains control characters", e->name);
                goto out;
        }
        if (crt && (!kube_pem_has_block(crt, strlen(crt)) || !kube_pem_has_block(k, strlen(k)))) {
                r = set_error(ret_error, -EPROTO, "exec plugin \"%s\": client certificate or key is not PEM",
                              e->name);
                goto out;
        }
        if (exp && timesrc_parse_rfc3339(exp, &a.expiry_usec) < 0) {
                r = set_error(ret_error, -EPROTO,
                              "exec plugin \"%s\": status.expirationTimestamp: invalid RFC 3339 time",
                              e->name);
                goto out;
        }
        a.has_expiry = exp != NULL;
        if ((tok && !(a.token = strdup(tok))) || (crt && !(a.cert = strdup(crt))) ||
            (k && !(a.key = strdup(k)))) {
                answer_done(&a);
                r = -ENOMEM;
                if (ret_error)
                        *ret_error = NULL;
                goto out;
        }
        *ret = a;
out:
        json_erase_delete(root);
        return r;
}

/* ---- waiters ---- */

static void wake_waiters(struct credentials *c) {
        struct credentials_wait *list = c->waiters;

        /* Detached first: a waiter may wait again, or start calls that wait. */
        c->waiters = NULL;
        while (list) {
                struct credentials_wait *w = list;

                list = w->next;
                w->prev = w->next = NULL;
                w->c = NULL;
                w->fn(w);
        }
}

static void on_wake(struct dtimer *t) {
        wake_waiters(container_of(t, struct credentials, wake));
}

void credentials_wait(struct credentials *c, struct credentials_wait *w, credentials_ready_fn fn) {
        assert(!w->c);
        w->c = c;
        w->fn = fn;
        w->prev = NULL;
        w->next = c->waiters;
        if (c->waiters)
                c->waiters->prev = w;
        c->waiters = w;
        /* Nothing under way to end: wake it on the next turn anyway. */
        if (!c->run)
                dtimer_start(&c->wake, 0);
}

void credentials_unwait(struct credentials_wait *w) {
        struct credentials *c = w->c;

        if (!c)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                c->waiters = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->prev = w->next = NULL;
        w->c = NULL;
}

/* ---- running the plugin ---- */

static void maybe_finish_close(struct credentials *c);

static void on_retry_timer(struct dtimer *t) {
        container_of(t, struct credentials, retry_timer)->retry_pending = false;
}

static void schedule_retry(struct credentials *c) {
        c->retry_pending = true;
        dtimer_start(&c->retry_timer, backoff_next(&c->retry));
}

static void run_failed(struct credentials *c, int r, char *message) {
        c->stats.failures++;
        c->last_error = r;
        free(c->last_message);
        c->last_message = message;
        schedule_retry(c);
}

static void run_free(struct run *run) {
        buf_done(&run->out_buf);
        free(run);
}

static void on_run_handle_closed(uv_handle_t *h) {
        struct run *run = h->data;
        struct credentials *c = run->c;

        if (--run->open > 0)
                return;
        run_free(run);
        c->runs_closing--;
        maybe_finish_close(c);
}

/* The run is over: its handles close, and c waits for that before it may be freed. */
static void run_close(struct credentials *c, struct run *run) {
        if (c->run == run)
                c->run = NULL;
        c->runs_closing++;
        uv_close((uv_handle_t *)&run->proc, on_run_handle_closed);
        uv_close((uv_handle_t *)&run->out, on_run_handle_closed);
}

/* Both the exit and the end of stdout are in: the answer, or the failure. */
static void run_finish(struct run *run) {
        struct credentials *c = run->c;
        const struct kube_exec *e;
        struct answer a = {};
        char *msg = NULL;
        int r;

        run_close(c, run);
        if (c->closing) {
                wake_waiters(c);
                return;
        }
        e = c->exec;
        dtimer_stop(&c->run_timeout);
        c->stats.last_run_usec = timesrc_now(c->ts) - run->started;

        if (run->timed_out) {
                c->stats.timeouts++;
                r = c->o.exec_timeout_usec % USEC_PER_SEC == 0
                            ? set_error(&msg, -ETIMEDOUT, "exec plugin \"%s\" timed out after %" PRIu64 " s",
                                        e->name, c->o.exec_timeout_usec / USEC_PER_SEC)
                            : set_error(&msg, -ETIMEDOUT,
                                        "exec plugin \"%s\" timed out after %" PRIu64 " ms", e->name,
                                        c->o.exec_timeout_usec / USEC_PER_MSEC);
        } else if (run->too_big)
                r = set_error(&msg, -E2BIG, "exec plugin \"%s\" failed: output larger than %zu bytes",
                              e->name, BUF_CAP_EXEC_OUTPUT);
        else if (run->read_error)
                r = set_error(&msg, run->read_error, "exec plugin \"%s\" failed: reading its output: %s",
                              e->name, strerror(-run->read_error));
        else if (run->term_signal)
                r = set_error(&msg, -EIO, "exec plugin \"%s\" failed: killed by signal %d (%s)", e->name,
                              run->term_signal, strsignal(run->term_signal));
        else if (run->exit_status != 0)
                r = set_error(&msg, -EIO, "exec plugin \"%s\" failed: exit status %" PRId64, e->name,
                              run->exit_status);
        else
                r = parse_answer(e, run->out_buf.data ? run->out_buf.data : "", run->out_buf.len, &a, &msg);
        buf_clear(&run->out_buf, 0);

        if (r < 0)
                run_failed(c, r, msg);
        else {
                int64_t now = timesrc_realtime(c->ts);

                buf_erase_freestr(c->token);
                buf_erase_freestr(c->cert);
                buf_erase_freestr(c->key);
                c->token = a.token;
                c->cert = a.cert;
                c->cert_len = a.cert ? strlen(a.cert) : 0;
                c->key = a.key;
                c->key_len = a.key ? strlen(a.key) : 0;
                c->has_expiry = a.has_expiry;
                c->expiry_usec = a.expiry_usec;
                c->have = true;
                c->generation++;
                c->last_error = 0;
                c->last_message = mfree(c->last_message);
                if (a.has_expiry && a.expiry_usec <= now) {
                        /* Used as it is (the server decides: the clocks may differ), but the
                         * plugin runs again only after a backoff, not on every request. */
                        c->stats.expired_answers++;
                        log_debug("credentials: exec plugin \"%s\": its credential expired %" PRId64
                                  " s ago already, running it again in %" PRIu64 " ms at the earliest",
                                  e->name, (now - a.expiry_usec) / (int64_t)USEC_PER_SEC,
                                  backoff_delay(&c->retry, c->retry.failures + 1) / USEC_PER_MSEC);
                        schedule_retry(c);
                } else {
                        backoff_reset(&c->retry);
                        if (a.has_expiry)
                                log_debug("credentials: exec plugin \"%s\": credential valid for %" PRId64
                                          " s",
                                          e->name, (a.expiry_usec - now) / (int64_t)USEC_PER_SEC);
                }
        }
        wake_waiters(c);
}

static void on_run_exit(uv_process_t *p, int64_t exit_status, int term_signal) {
        struct run *run = container_of(p, struct run, proc);

        run->exited = true;
        run->exit_status = exit_status;
        run->term_signal = term_signal;
        if (run->eof)
                run_finish(run);
}

static void on_run_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        struct run *run = h->data;
        size_t want = MIN(buf_room(&run->out_buf), (size_t)16384);

        if (run->too_big || want == 0 || buf_reserve(&run->out_buf, want) < 0) {
                /* Out of memory or over the cap: read into a scratch buffer and drop it. */
                static char scratch[4096];

                *buf = uv_buf_init(scratch, sizeof(scratch));
                return;
        }
        *buf = uv_buf_init(buf_tail(&run->out_buf),
                           (unsigned)MIN(run->out_buf.size - run->out_buf.len - 1, (size_t)UINT_MAX));
}

static void on_run_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
        struct run *run = container_of((uv_pipe_t *)s, struct run, out);

        if (n > 0) {
                if (run->out_buf.data && buf->base == buf_tail(&run->out_buf)) {
                        buf_advance(&run->out_buf, (size_t)n);
                        if (run->out_buf.len > BUF_CAP_EXEC_OUTPUT)
                                run->too_big = true;
                } else {
                        explicit_bzero(buf->base, (size_t)n);
                        run->too_big = true;
                }
                if (run->too_big) {
                        /* Enough: the answer is refused whatever comes; end it now. */
                        (void)kill(-run->proc.pid, SIGKILL);
                }
                return;
        }
        if (n == 0 || n == UV_EAGAIN)
                return;
        if (n != UV_EOF)
                run->read_error = (int)n;
        uv_read_stop(s);
        run->eof = true;
        if (run->exited)
                run_finish(run);
}

/* The plugin ran out of time: kill its whole process group (what it started too), then
 * its exit and the end of its stdout come in as usual. */
static void on_run_timeout(struct dtimer *t) {
        struct credentials *c = container_of(t, struct credentials, run_timeout);

        if (!c->run)
                return;
        c->run->timed_out = true;
        log_debug("credentials: exec plugin \"%s\" (pid %d) runs longer than %" PRIu64 " ms, killing its "
                  "process group",
                  c->exec->name, c->run->proc.pid, c->o.exec_timeout_usec / USEC_PER_MSEC);
        (void)kill(-c->run->proc.pid, SIGKILL);
}

/* Starts the plugin. Returns 0 (under way) or a failure that counts as a failed run. */
static int run_start(struct credentials *c) {
        const struct kube_exec *e = c->exec;
        _cleanup_free_ char **envp = NULL;
        _cleanup_free_ char *exe = NULL;
        char *info = NULL, *msg = NULL;
        struct run *run;
        int r;

        assert(!c->run);
        c->stats.runs++;
        r = find_executable(e->argv[0], &exe);
        if (r == -ENOENT && !strchr(e->argv[0], '/'))
                r = set_error(&msg, r, "exec plugin \"%s\" failed: executable not found in $PATH", e->name);
        else if (r < 0)
                r = set_error(&msg, r, "exec plugin \"%s\" failed: %s", e->name, strerror(-r));
        if (r < 0) {
                run_failed(c, r, msg);
                return r;
        }
        if (asprintf(&info, EXEC_INFO_ENV "=%s", e->info_json) < 0)
                return run_failed(c, -ENOMEM, NULL), -ENOMEM;
        envp = exec_environment(c->o.environ ? c->o.environ : environ, e, info);
        run = calloc(1, sizeof(*run));
        if (!envp || !run) {
                free(run);
                buf_erase_freestr(info);
                run_failed(c, -ENOMEM, NULL);
                return -ENOMEM;
        }
        run->c = c;
        buf_init(&run->out_buf, BUF_CAP_EXEC_OUTPUT + 1, true);
        r = uv_pipe_init(c->loop, &run->out, 0);
        if (r < 0) {
                free(run);
                buf_erase_freestr(info);
                run_failed(c, r, NULL);
                return r;
        }
        run->out.data = run;
        run->open = 1;

        uv_stdio_container_t stdio[3] = {
                { .flags = UV_IGNORE }, /* /dev/null: drainer never has a terminal for it */
                { .flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&run->out },
                { .flags = UV_INHERIT_FD, .data.fd = STDERR_FILENO },
        };
        uv_process_options_t po = {
                .exit_cb = on_run_exit,
                .file = exe,
                .args = e->argv,
                .env = envp,
                /* setsid(): a process group of its own, to kill as a whole */
                .flags = UV_PROCESS_DETACHED,
                .stdio_count = 3,
                .stdio = stdio,
        };
        cloexec_all();
        r = uv_spawn(c->loop, &run->proc, &po);
        buf_erase_freestr(info);
        if (r < 0) {
                /* libuv requires closing the process handle even when spawning failed */
                run->proc.data = run;
                run->open++;
                run_close(c, run);
                r = set_error(&msg, r, "exec plugin \"%s\" failed: %s", e->name, uv_strerror(r));
                run_failed(c, r, msg);
                return r;
        }
        run->proc.data = run;
        run->open++;
        run->started = timesrc_now(c->ts);
        c->run = run;
        log_debug("credentials: running exec plugin \"%s\" (pid %d)", e->name, run->proc.pid);
        r = uv_read_start((uv_stream_t *)&run->out, on_run_alloc, on_run_read);
        if (r < 0) {
                run->read_error = r;
                run->eof = true;
                (void)kill(-run->proc.pid, SIGKILL);
        }
        dtimer_start(&c->run_timeout, c->o.exec_timeout_usec);
        return 0;
}

/* ---- the limiter of 401 refreshes ---- */

static bool refresh_allowed(struct credentials *c, uint64_t now) {
        return c->refresh_last == 0 || now >= c->refresh_next;
}

static bool refresh_take(struct credentials *c) {
        uint64_t now = timesrc_now(c->ts);

        if (!refresh_allowed(c, now)) {
                c->stats.refreshes_refused++;
                return false;
        }
        /* Refreshes that follow each other closely double the interval; a quiet spell of
         * twice the interval resets it. */
        if (!(c->refresh_last && now - c->refresh_last < 2 * c->refresh_interval))
                backoff_reset(&c->refresh);
        c->refresh_interval = backoff_next(&c->refresh);
        c->refresh_last = now ? now : 1;
        c->refresh_next = now + c->refresh_interval;
        c->stats.refreshes++;
        return true;
}

static int refused(struct credentials *c, char **ret_error, const char *why) {
        return set_error(ret_error, -EACCES, "the API server refused the credentials (401 Unauthorized); %s",
                         why);
}

/* ---- the API ---- */

static void fill(struct credentials *c, struct kube_credentials *ret) {
        *ret = (struct kube_credentials){
                .token = c->token,
                .client_cert_pem = c->cert,
                .client_cert_pem_len = c->cert_len,
                .client_key_pem = c->key,
                .client_key_pem_len = c->key_len,
                .generation = c->generation,
        };
}

static int last_failure(struct credentials *c, char **ret_error) {
        if (ret_error)
                *ret_error = c->last_message ? strdup(c->last_message) : NULL;
        return c->last_error < 0 ? c->last_error : -EIO;
}

static int get_static(struct credentials *c, uint64_t rejected, struct kube_credentials *ret,
                      char **ret_error) {
        bool force = false;

        if (rejected) {
                if (refresh_files(c, false) < 0)
                        return oom(ret_error);
                if (c->generation > rejected) {
                        fill(c, ret);
                        return 0;
                }
                if (!files_may_change(c))
                        return refused(c, ret_error, "they are static");
                if (!refresh_take(c))
                        return refused(c, ret_error, "they were refreshed moments ago");
                force = true;
        }
        if (refresh_files(c, force) < 0)
                return oom(ret_error);
        if (rejected && c->generation <= rejected)
                return refused(c, ret_error, "their files have not changed");
        fill(c, ret);
        return 0;
}

int credentials_get(struct credentials *c, uint64_t rejected, struct kube_credentials *ret,
                    char **ret_error) {
        int r;

        if (ret_error)
                *ret_error = NULL;
        if (c->closing)
                return set_error(ret_error, -ESHUTDOWN, "shutting down");
        if (!c->exec)
                return get_static(c, rejected, ret, ret_error);

        if (rejected) {
                if (c->have && c->generation > rejected) {
                        fill(c, ret);
                        return 0;
                }
                if (c->run)
                        return -EAGAIN;
                /* The refresh (ours, or another caller's) just failed: that is the answer. */
                if (c->retry_pending && c->last_error < 0)
                        return last_failure(c, ret_error);
                if (!refresh_take(c))
                        return refused(c, ret_error, "the exec plugin ran moments ago; not again yet");
                r = run_start(c);
                return r < 0 ? last_failure(c, ret_error) : -EAGAIN;
        }
        if (c->have && (!c->has_expiry || timesrc_realtime(c->ts) < c->expiry_usec)) {
                fill(c, ret);
                return 0;
        }
        if (c->run)
                return -EAGAIN;
        if (c->retry_pending) {
                /* No new run before the backoff ends: the last answer if there is one (even
                 * expired: the server decides), else the last failure. */
                if (c->have) {
                        fill(c, ret);
                        return 0;
                }
                return last_failure(c, ret_error);
        }
        r = run_start(c);
        return r < 0 ? last_failure(c, ret_error) : -EAGAIN;
}

bool credentials_may_refresh(struct credentials *c, uint64_t rejected) {
        uint64_t now = timesrc_now(c->ts);

        if (c->closing)
                return false;
        if (!c->exec) {
                if (!files_may_change(c))
                        return false;
                if (refresh_files(c, false) >= 0 && c->generation > rejected)
                        return true;
                return refresh_allowed(c, now);
        }
        return (c->have && c->generation > rejected) || c->run || refresh_allowed(c, now);
}

void credentials_get_stats(const struct credentials *c, struct credentials_stats *ret) {
        *ret = c->stats;
}

static void free_secrets(struct credentials *c) {
        buf_erase_freestr(c->token);
        buf_erase_free(c->cert, c->cert_len);
        buf_erase_free(c->key, c->key_len);
        c->token = c->cert = c->key = NULL;
}

int credentials_new(uv_loop_t *loop, struct timesrc *ts, const struct kube_config *cfg,
                    const struct credentials_options *o, struct credentials **ret, char **ret_error) {
        struct credentials *c;
        int r;

        assert(ts && cfg && ret);
        if (ret_error)
                *ret_error = NULL;
        assert(loop || !cfg->auth.exec);
        c = calloc(1, sizeof(*c));
        if (!c)
                return oom(ret_error);
        c->loop = loop;
        c->ts = ts;
        c->auth = &cfg->auth;
        c->exec = cfg->auth.exec;
        if (o)
                c->o = *o;
        if (!c->o.exec_timeout_usec)
                c->o.exec_timeout_usec = CREDENTIALS_EXEC_TIMEOUT_USEC;
        if (!c->o.retry_base_usec)
                c->o.retry_base_usec = USEC_PER_SEC;
        if (!c->o.retry_cap_usec)
                c->o.retry_cap_usec = 300 * USEC_PER_SEC;
        if (!c->o.refresh_base_usec)
                c->o.refresh_base_usec = 5 * USEC_PER_SEC;
        if (!c->o.refresh_cap_usec)
                c->o.refresh_cap_usec = 300 * USEC_PER_SEC;
        backoff_init(&c->retry, c->o.retry_base_usec, c->o.retry_cap_usec, false, 0);
        backoff_init(&c->refresh, c->o.refresh_base_usec, c->o.refresh_cap_usec, false, 0);
        if (!c->exec) {
                r = load_static(c, ret_error);
                if (r < 0) {
                        free_secrets(c);
                        free(c);
                        return r;
                }
        }
        r = dtimer_init(&c->run_timeout, ts, on_run_timeout);
        if (r >= 0)
                r = dtimer_init(&c->retry_timer, ts, on_retry_timer);
        if (r >= 0)
                r = dtimer_init(&c->wake, ts, on_wake);
        if (r < 0) {
                /* dtimer_done() is safe on a timer whose init failed or never ran */
                dtimer_done(&c->run_timeout);
                dtimer_done(&c->retry_timer);
                dtimer_done(&c->wake);
                free_secrets(c);
                free(c);
                return r == -ENOMEM ? oom(ret_error) : set_error(ret_error, r, "cannot set up timers");
        }
        *ret = c;
        return 0;
}

static void on_close_timer(struct dtimer *t) {
        struct credentials *c = container_of(t, struct credentials, wake);
        void (*cb)(void *) = c->close_cb;
        void *ud = c->close_userdata;

        dtimer_done(&c->run_timeout);
        dtimer_done(&c->retry_timer);
        dtimer_done(&c->wake);
        free_secrets(c);
        free(c->last_message);
        free(c);
        if (cb)
                cb(ud);
}

/* Once no run is left: free from the loop (the close callback never runs inside close). */
static void maybe_finish_close(struct credentials *c) {
        if (!c->closing || c->run || c->runs_closing)
                return;
        c->wake.cb = on_close_timer;
        dtimer_start(&c->wake, 0);
}

void credentials_close(struct credentials *c, void (*close_cb)(void *userdata), void *userdata) {
        if (!c)
                return;
        c->closing = true;
        c->close_cb = close_cb;
        c->close_userdata = userdata;
        dtimer_stop(&c->run_timeout);
        dtimer_stop(&c->retry_timer);
        if (c->run) {
                /* Its exit comes in, then its handles close, then maybe_finish_close(). */
                c->run->timed_out = true;
                (void)kill(-c->run->proc.pid, SIGKILL);
        }
        wake_waiters(c);
        maybe_finish_close(c);
}
