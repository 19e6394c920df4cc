/* Credentials for each request without blocking the loop: static and file-based ones
 * through kube_config_credentials(), exec credential plugins through uv_spawn on the
 * loop (a process group of their own, killed as a group at the timeout, the environment
 * client-go gives minus what belongs to drainer's service manager), their
 * ExecCredential cached until it expires. Owns the cached answer (wiped when replaced
 * or freed), the plugin run in flight with its handles, and the waiters' list; borrows
 * the config, the loop and the time source. Never logs secrets; debug level only. */
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

#include "drainer/backoff.h"
#include "drainer/credentials.h"
#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/macro.h"
#include "drainer/text.h"
#include "drainer/timesrc.h"

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
        char *buf; /* stdout, capped at KUBE_CONFIG_EXEC_OUTPUT_MAX */
        size_t len, size;
        uint64_t started;
};

struct credentials {
        uv_loop_t *loop;              /* borrowed */
        struct timesrc *ts;           /* borrowed */
        struct kube_config *cfg;      /* borrowed */
        const struct kube_exec *exec; /* borrowed from cfg, NULL without a plugin */
        struct credentials_options o;

        /* the cached ExecCredential (owned, wiped when replaced) */
        bool have;
        char *token, *cert, *key;
        size_t cert_len, key_len;
        bool has_expiry;
        int64_t expiry_usec; /* wall clock */
        uint64_t generation;

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

static int set_error(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int set_error(char **ret_error, int r, const char *fmt, ...) {
        char *m = NULL;
        va_list ap;

        assert(r < 0);
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        text_one_line(m);
        log_debug("credentials: %s", strna(m));
        if (ret_error)
                *ret_error = m;
        else
                free(m);
        return r;
}

static void erase_free(void *p, size_t n) {
        if (p) {
                explicit_bzero(p, n);
                free(p);
        }
}

static void erase_freestr(char *s) {
        if (s)
                erase_free(s, strlen(s));
}

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
        erase_freestr(a->token);
        erase_freestr(a->cert);
        erase_freestr(a->key);
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
        if (run->buf)
                erase_free(run->buf, run->size);
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
                r = set_error(&msg, -E2BIG, "exec plugin \"%s\" failed: output larger than %u bytes",
                              e->name, KUBE_CONFIG_EXEC_OUTPUT_MAX);
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
                r = parse_answer(e, run->buf ? run->buf : "", run->len, &a, &msg);
        if (run->buf)
                explicit_bzero(run->buf, run->size);

        if (r < 0)
                run_failed(c, r, msg);
        else {
                int64_t now = timesrc_realtime(c->ts);

                erase_freestr(c->token);
                erase_freestr(c->cert);
                erase_freestr(c->key);
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

        if (run->size - run->len < 4096 && !run->too_big) {
                size_t nsize =
                        MIN(MAX(run->size * 2, (size_t)16384), (size_t)KUBE_CONFIG_EXEC_OUTPUT_MAX + 2);
                char *n = nsize > run->size ? malloc(nsize) : NULL;

                if (n) {
                        /* Not realloc(): the old copy would stay unwiped. */
                        if (run->buf) {
                                memcpy(n, run->buf, run->len);
                                erase_free(run->buf, run->size);
                        }
                        run->buf = n;
                        run->size = nsize;
                }
        }
        if (!run->buf || run->size - run->len <= 1) {
                /* Out of memory or over the cap: read into a scratch buffer and drop it. */
                static char scratch[4096];

                *buf = uv_buf_init(scratch, sizeof(scratch));
                return;
        }
        *buf = uv_buf_init(run->buf + run->len, (unsigned)MIN(run->size - run->len - 1, (size_t)UINT_MAX));
}

static void on_run_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
        struct run *run = container_of((uv_pipe_t *)s, struct run, out);

        if (n > 0) {
                if (run->buf && buf->base == run->buf + run->len) {
                        run->len += (size_t)n;
                        run->buf[run->len] = 0;
                        if (run->len > KUBE_CONFIG_EXEC_OUTPUT_MAX)
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
                erase_freestr(info);
                run_failed(c, -ENOMEM, NULL);
                return -ENOMEM;
        }
        run->c = c;
        r = uv_pipe_init(c->loop, &run->out, 0);
        if (r < 0) {
                free(run);
                erase_freestr(info);
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
        erase_freestr(info);
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
        int r;

        if (rejected) {
                r = kube_config_credentials(c->cfg, false, ret, ret_error);
                if (r < 0 || ret->generation > rejected)
                        return r;
                if (!kube_config_may_change(c->cfg))
                        return refused(c, ret_error, "they are static");
                if (!refresh_take(c))
                        return refused(c, ret_error, "they were refreshed moments ago");
                force = true;
        }
        r = kube_config_credentials(c->cfg, force, ret, ret_error);
        if (r >= 0 && rejected && ret->generation <= rejected)
                return refused(c, ret_error, "their files have not changed");
        return r;
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
                struct kube_credentials cr;

                if (!kube_config_may_change(c->cfg))
                        return false;
                if (kube_config_credentials(c->cfg, false, &cr, NULL) >= 0 && cr.generation > rejected)
                        return true;
                return refresh_allowed(c, now);
        }
        return (c->have && c->generation > rejected) || c->run || refresh_allowed(c, now);
}

void credentials_get_stats(const struct credentials *c, struct credentials_stats *ret) {
        *ret = c->stats;
}

int credentials_new(uv_loop_t *loop, struct timesrc *ts, struct kube_config *cfg,
                    const struct credentials_options *o, struct credentials **ret) {
        struct credentials *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->loop = loop;
        c->ts = ts;
        c->cfg = cfg;
        c->exec = kube_config_exec(cfg);
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
        r = dtimer_init(&c->run_timeout, ts, on_run_timeout);
        if (r >= 0)
                r = dtimer_init(&c->retry_timer, ts, on_retry_timer);
        if (r >= 0)
                r = dtimer_init(&c->wake, ts, on_wake);
        if (r < 0) {
                /* dtimer_done() is safe on a timer whose init failed or never ran */
                free(c);
                return r;
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
        erase_freestr(c->token);
        erase_freestr(c->cert);
        erase_freestr(c->key);
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
