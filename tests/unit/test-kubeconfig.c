/* Unit tests for kubeconfig.c: loading precedence, merging, contexts, every auth kind
 * (token, tokenFile rotation, client certificates, exec plugins with caching), in-cluster
 * configuration and each malformed case. Files live in a mkdtemp directory per test; the
 * exec plugin is tests/unit/fixtures/kubeconfig/exec-plugin.sh, run by credentials.c on a
 * real libuv loop with a fake clock (whose wall clock the tests set) for its timers. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include <uv.h>

#include "drainer/credentials.h"
#include "drainer/kubeconfig.h"
#include "drainer/macro.h"
#include "drainer/timesrc.h"
#include "fakes/fake-clock.h"

#define FIXDIR FIXTURES "/kubeconfig"
#define PLUGIN FIXDIR "/exec-plugin.sh"
#define USEC   1000000LL

/* 2030-01-01T00:00:00Z */
#define T2030 (1893456000LL * USEC)

#define CA_PEM   "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n"
#define KEY_PEM  "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n"

struct fx {
        char *dir;
};

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)flag;
        (void)ftw;
        remove(path);
        return 0;
}

static void creds_env_start(void);
static void creds_env_stop(void);

static int setup(void **state) {
        char tmpl[] = "/tmp/test-kubeconfig-XXXXXX";
        struct fx *f = calloc(1, sizeof(*f));

        creds_env_start();
        if (!f || !mkdtemp(tmpl))
                return -1;
        f->dir = strdup(tmpl);
        *state = f;
        return f->dir ? 0 : -1;
}

static int teardown(void **state) {
        struct fx *f = *state;

        creds_env_stop();
        nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        free(f->dir);
        free(f);
        return 0;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...) {
        va_list ap;
        char *s;

        va_start(ap, fmt);
        assert_true(vasprintf(&s, fmt, ap) >= 0);
        va_end(ap);
        return s;
}

static char *b64(const char *s) {
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t n = strlen(s);
        const unsigned char *p = (const unsigned char *)s;
        char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

        assert_non_null(out);
        for (size_t i = 0; i < n; i += 3) {
                unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                             (i + 2 < n ? p[i + 2] : 0);

                *o++ = a[(v >> 18) & 63];
                *o++ = a[(v >> 12) & 63];
                *o++ = i + 1 < n ? a[(v >> 6) & 63] : '=';
                *o++ = i + 2 < n ? a[v & 63] : '=';
        }
        *o = 0;
        return out;
}

/* Writes dir/name (creating a subdirectory when name has one); returns the path. */
static char *write_file(const char *dir, const char *name, const char *content) {
        char *path = xasprintf("%s/%s", dir, name);
        char *slash = strrchr(path, '/');
        FILE *fp;

        for (char *p = path + strlen(dir) + 1; p < slash; p++)
                if (*p == '/') {
                        *p = 0;
                        mkdir(path, 0755);
                        *p = '/';
                }
        *slash = 0;
        mkdir(path, 0755);
        *slash = '/';
        fp = fopen(path, "w");
        assert_non_null(fp);
        assert_int_equal(fputs(content, fp) >= 0, 1);
        assert_int_equal(fclose(fp), 0);
        return path;
}

static char *read_all(const char *path) {
        FILE *fp = fopen(path, "r");
        char *buf = calloc(1, 65536);
        size_t n;

        assert_non_null(fp);
        assert_non_null(buf);
        n = fread(buf, 1, 65535, fp);
        buf[n] = 0;
        fclose(fp);
        return buf;
}

/* Replaces each "%1$s" in tmpl with dir. */
static char *subst_dir(const char *tmpl, const char *dir) {
        size_t n = strlen(tmpl) + 1;
        char *out, *o;

        for (const char *p = tmpl; (p = strstr(p, "%1$s")); p += 4)
                n += strlen(dir);
        o = out = malloc(n);
        assert_non_null(out);
        while (*tmpl) {
                if (strncmp(tmpl, "%1$s", 4) == 0) {
                        o = stpcpy(o, dir);
                        tmpl += 4;
                } else
                        *o++ = *tmpl++;
        }
        *o = 0;
        return out;
}

static void assert_contains(const char *hay, const char *needle) {
        if (!hay || !strstr(hay, needle)) {
                print_error("\"%s\" does not contain \"%s\"\n", hay ? hay : "(null)", needle);
                fail();
        }
}

/* Loads with only --kubeconfig set. */
static struct kube_config *load_path(const char *path) {
        struct kube_config_options o = { .kubeconfig = path };
        struct kube_config *c = NULL;
        char *err = NULL;
        int r;

        r = kube_config_load(&o, &c, &err);
        if (r < 0)
                print_error("kube_config_load(%s): %d %s\n", path, r, err ? err : "(null)");
        assert_int_equal(r, 0);
        assert_null(err);
        assert_non_null(c);
        return c;
}

/* Expects the load to fail with errno r and a message containing needle. */
static void expect_load_error(const struct kube_config_options *o, int r, const char *needle) {
        struct kube_config *c = NULL;
        char *err = NULL;
        int q;

        q = kube_config_load(o, &c, &err);
        if (q != r)
                print_error("kube_config_load: got %d (%s), want %d\n", q, err ? err : "(null)", r);
        assert_int_equal(q, r);
        assert_null(c);
        assert_contains(err, needle);
        assert_null(strchr(err, '\n')); /* one line */
        free(err);
}

static void expect_file_error(const char *path, int r, const char *needle) {
        struct kube_config_options o = { .kubeconfig = path };

        expect_load_error(&o, r, needle);
}

/* dir/name in a static buffer (for unlink). */
static const char *xasprintf_tmp(const char *dir, const char *name) {
        static char buf[4096];

        snprintf(buf, sizeof(buf), "%s/%s", dir, name);
        return buf;
}

/* ---- credentials: file-based ones straight from kube_config_credentials(), exec plugins
 * through the credentials module on a real loop ---- */

/* The fake clock's monotonic time and timers, with a wall clock the test sets freely. */
struct test_ts {
        struct timesrc base;
        struct timesrc *fake;
        int64_t realtime;
};

static uint64_t tts_now(struct timesrc *s) {
        struct timesrc *f = container_of(s, struct test_ts, base)->fake;
        return f->ops->now(f);
}
static int64_t tts_realtime(struct timesrc *s) {
        return container_of(s, struct test_ts, base)->realtime;
}
static int tts_timer_init(struct timesrc *s, struct dtimer *t) {
        struct timesrc *f = container_of(s, struct test_ts, base)->fake;
        return f->ops->timer_init(f, t);
}
static void tts_timer_arm(struct timesrc *s, struct dtimer *t) {
        struct timesrc *f = container_of(s, struct test_ts, base)->fake;
        f->ops->timer_arm(f, t);
}
static void tts_timer_disarm(struct timesrc *s, struct dtimer *t) {
        struct timesrc *f = container_of(s, struct test_ts, base)->fake;
        f->ops->timer_disarm(f, t);
}
static void tts_timer_done(struct timesrc *s, struct dtimer *t) {
        struct timesrc *f = container_of(s, struct test_ts, base)->fake;
        f->ops->timer_done(f, t);
}
static const struct timesrc_ops tts_ops = {
        .now = tts_now,
        .realtime = tts_realtime,
        .timer_init = tts_timer_init,
        .timer_arm = tts_timer_arm,
        .timer_disarm = tts_timer_disarm,
        .timer_done = tts_timer_done,
};

static struct {
        uv_loop_t loop;
        struct fake_clock *clock;
        struct test_ts ts;
        struct kube_config *cfg; /* the config cr serves */
        struct credentials *cr;
        uint64_t exec_timeout_usec; /* for the next credentials made */
        char **environ;             /* likewise (NULL: the process's) */
        uint64_t last_generation;
        char *prev_cert; /* for changed() */
        bool seen;
} T;

static void creds_env_start(void) {
        assert_int_equal(uv_loop_init(&T.loop), 0);
        T.clock = fake_clock_new(1000 * USEC, 0);
        assert_non_null(T.clock);
        T.ts = (struct test_ts){ .base.ops = &tts_ops, .fake = fake_clock_timesrc(T.clock) };
}

static void on_test_creds_closed(void *userdata) {
        *(bool *)userdata = true;
}

/* Closes the credentials of the current config (runs the loop and fires the fake timers
 * until they are gone). */
static void creds_drop(void) {
        bool closed = false;

        if (!T.cr)
                return;
        credentials_close(T.cr, on_test_creds_closed, &closed);
        for (int i = 0; i < 100000 && !closed; i++) {
                fake_clock_advance(T.clock, 0);
                uv_run(&T.loop, UV_RUN_NOWAIT);
        }
        assert_true(closed);
        T.cr = NULL;
        T.cfg = NULL;
        T.last_generation = 0;
        T.prev_cert = mfree(T.prev_cert);
        T.seen = false;
}

static void creds_env_stop(void) {
        creds_drop();
        uv_run(&T.loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&T.loop), 0);
        fake_clock_free(T.clock);
        T.clock = NULL;
        T.exec_timeout_usec = 0;
        T.environ = NULL;
}

/* kube_config_free() of the tests: the config's credentials go first. */
static struct kube_config *test_config_free(struct kube_config *c) {
        if (c && c == T.cfg)
                creds_drop();
        T.prev_cert = mfree(T.prev_cert);
        T.seen = false;
        T.last_generation = 0;
        return (kube_config_free)(c);
}
#define kube_config_free test_config_free

struct test_wait {
        struct credentials_wait w;
        bool ready;
};

static void on_test_creds_ready(struct credentials_wait *w) {
        container_of(w, struct test_wait, w)->ready = true;
}

/* Gets credentials the way the client does: force = the last ones got a 401. Plugin runs
 * happen on the loop; the fake clock moves 1 ms per turn while one is under way (a
 * plugin that never ends meets its timeout). */
static int get_creds(struct kube_config *c, int64_t now, bool force, struct kube_credentials *ret,
                     char **ret_error) {
        uint64_t rejected = 0;
        int r;

        if (!kube_config_uses_exec(c))
                return kube_config_credentials(c, force, ret, ret_error);
        if (T.cfg != c) {
                creds_drop();
                assert_int_equal(credentials_new(&T.loop, &T.ts.base, c,
                                                 &(struct credentials_options){ .exec_timeout_usec =
                                                                                        T.exec_timeout_usec,
                                                                                .environ = T.environ },
                                                 &T.cr),
                                 0);
                T.cfg = c;
        }
        T.ts.realtime = now;
        if (force) {
                rejected = T.last_generation ? T.last_generation : 1;
                /* Out of the reach of the 401 limiter (tested on its own). */
                fake_clock_advance(T.clock, 3600 * USEC);
        }
        for (;;) {
                struct test_wait tw = {};

                r = credentials_get(T.cr, rejected, ret, ret_error);
                if (r != -EAGAIN)
                        break;
                credentials_wait(T.cr, &tw.w, on_test_creds_ready);
                for (int i = 0; i < 200000 && !tw.ready; i++) {
                        uv_run(&T.loop, UV_RUN_NOWAIT);
                        if (tw.ready)
                                break;
                        usleep(200);
                        fake_clock_advance(T.clock, 1000);
                }
                assert_true(tw.ready);
        }
        if (r >= 0)
                T.last_generation = ret->generation;
        return r;
}

static struct kube_credentials creds(struct kube_config *c, int64_t now, bool force) {
        struct kube_credentials cr;
        char *err = NULL;
        int r;

        r = get_creds(c, now, force, &cr, &err);
        if (r < 0)
                print_error("credentials: %d %s\n", r, err ? err : "(null)");
        assert_int_equal(r, 0);
        assert_null(err);
        return cr;
}

/* The client certificate differs from the one the previous call returned (on the first
 * call: there is one). */
static bool changed(const struct kube_credentials *cr) {
        bool r = T.seen || !kube_config_uses_exec(T.cfg) ? !streq_ptr(cr->client_cert_pem, T.prev_cert)
                                                         : cr->client_cert_pem != NULL;

        free(T.prev_cert);
        T.prev_cert = cr->client_cert_pem ? strdup(cr->client_cert_pem) : NULL;
        T.seen = true;
        return r;
}

static void expect_creds_error(struct kube_config *c, int64_t now, bool force, int r, const char *needle) {
        struct kube_credentials cr;
        char *err = NULL;
        int q;

        q = get_creds(c, now, force, &cr, &err);
        if (q != r)
                print_error("credentials: got %d (%s), want %d\n", q, err ? err : "(null)", r);
        assert_int_equal(q, r);
        assert_contains(err, needle);
        assert_null(strchr(err, '\n'));
        free(err);
}

/* A one-context kubeconfig: cluster body and user body are YAML indented by 4. */
static char *write_simple(const char *dir, const char *name, const char *cluster, const char *user) {
        char *y = xasprintf("apiVersion: v1\n"
                            "kind: Config\n"
                            "clusters:\n"
                            "- name: c\n"
                            "  cluster:\n"
                            "%s"
                            "users:\n"
                            "- name: u\n"
                            "  user:\n"
                            "%s"
                            "contexts:\n"
                            "- name: ctx\n"
                            "  context:\n"
                            "    cluster: c\n"
                            "    user: u\n"
                            "current-context: ctx\n",
                            cluster, user);
        char *p = write_file(dir, name, y);

        free(y);
        return p;
}

#define SERVER_URL "https://10.0.0.1:6443"
#define SERVER     "    server: " SERVER_URL "\n"

/* An exec user running the fixture plugin in the given mode, with extra exec YAML. */
static char *exec_user(const char *mode, const char *extra) {
        return xasprintf("    exec:\n"
                         "      apiVersion: client.authentication.k8s.io/v1\n"
                         "      command: /bin/sh\n"
                         "      args: [\"%s\", \"%s\"]\n"
                         "      interactiveMode: Never\n"
                         "%s",
                         PLUGIN, mode, extra ? extra : "");
}

static int counter(const char *dir) {
        char *path = xasprintf("%s/counter", dir);
        FILE *fp = fopen(path, "r");
        int n = 0;

        free(path);
        if (!fp)
                return 0;
        assert_int_equal(fscanf(fp, "%d", &n), 1);
        fclose(fp);
        return n;
}

/* ---- static credentials ---- */

static void test_token(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *path;

        path = write_simple(f->dir, "config",
                            "    server: https://example.com:6443/\n"
                            "    tls-server-name: api.internal\n",
                            "    token: static-token\n");
        c = load_path(path);
        assert_string_equal(c->server, "https://example.com:6443");
        assert_string_equal(c->tls_server_name, "api.internal");
        assert_null(c->ca_pem);
        assert_null(c->client_cert_pem);
        assert_false(c->insecure_skip_tls_verify);
        assert_string_equal(c->namespace, "default");
        assert_string_equal(c->context_name, "ctx");
        assert_string_equal(c->source, path);
        assert_false(kube_config_uses_exec(c));

        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "static-token");
        assert_null(cr.client_cert_pem);
        assert_false(changed(&cr));
        cr = creds(c, 0, true);
        assert_string_equal(cr.token, "static-token");
        assert_false(changed(&cr));
        assert_false(kube_config_token_in_clear(c));

        kube_config_free(c);
        free(path);

        /* The same token to a plain http:// server: the caller warns. */
        path = write_simple(f->dir, "config", "    server: http://example.com:8080\n",
                            "    token: static-token\n");
        c = load_path(path);
        assert_true(kube_config_token_in_clear(c));
        kube_config_free(c);
        free(path);
        /* No token, nothing to warn about. */
        path = write_simple(f->dir, "config", "    server: http://example.com:8080\n", "    {}\n");
        c = load_path(path);
        assert_false(kube_config_token_in_clear(c));
        kube_config_free(c);
        free(path);
}

static void test_no_user(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *path;

        path = write_file(f->dir, "config",
                          "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080'}}]\n"
                          "contexts: [{name: x, context: {cluster: c, namespace: team-a}}]\n"
                          "current-context: x\n");
        c = load_path(path);
        assert_string_equal(c->server, "http://127.0.0.1:8080");
        assert_string_equal(c->namespace, "team-a");
        cr = creds(c, 0, false);
        assert_null(cr.token);
        assert_null(cr.client_cert_pem);
        assert_false(changed(&cr));
        kube_config_free(c);
        free(path);
}

static void test_json(void **state) {
        struct kube_config *c;
        struct kube_credentials cr;

        (void)state;
        c = load_path(FIXDIR "/config.json");
        assert_string_equal(c->server, "https://[::1]:6443");
        assert_true(c->insecure_skip_tls_verify);
        assert_string_equal(c->context_name, "json");
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "json-token");
        kube_config_free(c);
}

static void test_relative_files(void **state) {
        struct kube_config *c;
        struct kube_credentials cr;
        char *ca, *crt, *key, *cwd;

        /* run from elsewhere: paths must resolve against the kubeconfig's directory */
        cwd = getcwd(NULL, 0);
        assert_int_equal(chdir(((struct fx *)*state)->dir), 0);
        c = load_path(FIXDIR "/relative.yaml");
        assert_int_equal(chdir(cwd), 0);
        free(cwd);

        ca = read_all(FIXDIR "/pki/ca.crt");
        crt = read_all(FIXDIR "/pki/client.crt");
        key = read_all(FIXDIR "/pki/client.key");
        assert_string_equal(c->server, "https://127.0.0.1:6443");
        assert_string_equal(c->ca_pem, ca);
        assert_int_equal(c->ca_pem_len, strlen(ca));
        assert_string_equal(c->client_cert_pem, crt);
        assert_int_equal(c->client_cert_pem_len, strlen(crt));
        assert_string_equal(c->client_key_pem, key);
        assert_int_equal(c->client_key_pem_len, strlen(key));
        assert_string_equal(c->tls_server_name, "kubernetes.default");
        assert_string_equal(c->namespace, "kube-system");

        cr = creds(c, 0, false);
        assert_null(cr.token);
        assert_string_equal(cr.client_cert_pem, crt);
        assert_string_equal(cr.client_key_pem, key);
        assert_true(changed(&cr)); /* first call with a certificate */
        cr = creds(c, 0, false);
        assert_false(changed(&cr));

        kube_config_free(c);
        free(ca);
        free(crt);
        free(key);
}

static void test_cert_data(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *ca = b64(CA_PEM), *crt = b64(CERT_PEM), *key = b64(KEY_PEM);
        char *cl, *us, *path;

        /* data wins over the file (which does not even exist); base64 may be wrapped */
        cl = xasprintf(SERVER "    certificate-authority: /nonexistent/ca.crt\n"
                              "    certificate-authority-data: |\n      %.8s\n      %s\n",
                       ca, ca + 8);
        us = xasprintf("    client-certificate-data: %s\n"
                       "    client-key-data: %s\n"
                       "    client-certificate: /nonexistent/client.crt\n",
                       crt, key);
        path = write_simple(f->dir, "config", cl, us);
        c = load_path(path);
        assert_string_equal(c->ca_pem, CA_PEM);
        assert_int_equal(c->ca_pem_len, strlen(CA_PEM));
        assert_string_equal(c->client_cert_pem, CERT_PEM);
        assert_string_equal(c->client_key_pem, KEY_PEM);
        cr = creds(c, 0, false);
        assert_string_equal(cr.client_cert_pem, CERT_PEM);
        assert_int_equal(cr.client_key_pem_len, strlen(KEY_PEM));
        assert_true(changed(&cr));
        kube_config_free(c);

        free(ca);
        free(crt);
        free(key);
        free(cl);
        free(us);
        free(path);
}

static void test_token_file_rotation(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        struct timespec ts[2] = { { 1000, 0 }, { 1000, 0 } };
        char *path, *tok, *tmp;

        tok = write_file(f->dir, "secrets/token", "first-token\n");
        path = write_simple(f->dir, "config", SERVER,
                            "    token: ignored-static-token\n"
                            "    tokenFile: secrets/token\n");
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "first-token");

        /* rewritten in place, same length; a distinct mtime tells it apart */
        free(write_file(f->dir, "secrets/token", "secnd-token\n"));
        assert_int_equal(utimensat(AT_FDCWD, tok, ts, 0), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "secnd-token");

        /* replaced by rename (how the kubelet swaps projected tokens) */
        tmp = write_file(f->dir, "secrets/token.new", "third-token-longer");
        assert_int_equal(rename(tmp, tok), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "third-token-longer");

        /* caught empty mid-rewrite, or gone: the previous token stays */
        free(write_file(f->dir, "secrets/token", ""));
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "third-token-longer");
        assert_int_equal(unlink(tok), 0);
        cr = creds(c, 0, true);
        assert_string_equal(cr.token, "third-token-longer");

        free(write_file(f->dir, "secrets/token", "  fourth-token  \n"));
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "fourth-token");
        assert_false(changed(&cr));

        kube_config_free(c);
        free(path);
        free(tok);
        free(tmp);
}

/* ---- exec plugins ---- */

static void test_exec_token_cache(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *user, *path, *extra;

        /* 2030-01-01T00:00:00.5Z written with an offset */
        extra = xasprintf("      env:\n"
                          "      - name: PLUGIN_COUNTER\n"
                          "        value: %s/counter\n"
                          "      - name: PLUGIN_EXPIRY\n"
                          "        value: \"2030-01-01T01:00:00.5+01:00\"\n",
                          f->dir);
        user = exec_user("token", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        assert_true(kube_config_uses_exec(c));
        assert_int_equal(counter(f->dir), 0); /* nothing runs at load */

        cr = creds(c, T2030 - 3600 * USEC, false);
        assert_string_equal(cr.token, "token-1");
        assert_null(cr.client_cert_pem);
        assert_false(changed(&cr));
        cr = creds(c, T2030 + USEC / 2 - 1, false); /* cached until expirationTimestamp */
        assert_string_equal(cr.token, "token-1");
        assert_int_equal(counter(f->dir), 1);

        cr = creds(c, T2030 + USEC / 2, false); /* expired */
        assert_string_equal(cr.token, "token-2");
        assert_int_equal(counter(f->dir), 2);

        cr = creds(c, T2030 + USEC / 2, true); /* a 401: run again */
        assert_string_equal(cr.token, "token-3");
        assert_int_equal(counter(f->dir), 3);

        kube_config_free(c);
        free(extra);
        free(user);
        free(path);
}

static void test_exec_no_expiry(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *user, *path, *extra;

        extra = xasprintf("      env: [{name: PLUGIN_COUNTER, value: \"%s/counter\"}]\n", f->dir);
        user = exec_user("token", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "token-1");
        cr = creds(c, INT64_MAX, false); /* no expirationTimestamp: cached until a 401 */
        assert_string_equal(cr.token, "token-1");
        cr = creds(c, 0, true);
        assert_string_equal(cr.token, "token-2");
        kube_config_free(c);
        free(extra);
        free(user);
        free(path);
}

static void test_exec_cert(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *user, *path, *extra;

        extra = xasprintf("      env: [{name: PLUGIN_COUNTER, value: \"%s/counter\"}]\n", f->dir);

        /* the same certificate on every run: changed only on the first call */
        user = exec_user("cert", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        assert_null(c->client_cert_pem);
        cr = creds(c, 0, false);
        assert_null(cr.token);
        assert_non_null(cr.client_cert_pem);
        assert_string_equal(cr.client_cert_pem,
                            "-----BEGIN CERTIFICATE-----\nEXECCERT\n-----END CERTIFICATE-----\n");
        assert_int_equal(cr.client_cert_pem_len, strlen(cr.client_cert_pem));
        assert_string_equal(cr.client_key_pem,
                            "-----BEGIN PRIVATE KEY-----\nEXECKEY\n-----END PRIVATE KEY-----\n");
        assert_true(changed(&cr));
        cr = creds(c, 0, true);
        assert_false(changed(&cr));
        kube_config_free(c);
        free(user);
        free(path);

        /* a new certificate on every run */
        user = exec_user("cert-rotating", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_true(changed(&cr));
        assert_contains(cr.client_cert_pem, "\nCERT3\n");
        cr = creds(c, 0, false);
        assert_false(changed(&cr));
        cr = creds(c, 0, true);
        assert_true(changed(&cr));
        assert_contains(cr.client_cert_pem, "\nCERT4\n");
        cr = creds(c, 0, false);
        assert_false(changed(&cr));
        kube_config_free(c);

        free(user);
        free(path);
        free(extra);
}

static void test_exec_cluster_info(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *user, *path, *extra, *cl, *ca = b64(CA_PEM), *info_path, *info;
        cJSON *j, *cluster;

        info_path = xasprintf("%s/exec-info.json", f->dir);
        cl = xasprintf(SERVER "    certificate-authority-data: %s\n"
                              "    tls-server-name: api.internal\n"
                              "    extensions:\n"
                              "    - name: client.authentication.k8s.io/exec\n"
                              "      extension:\n"
                              "        audience: drainer\n"
                              "        retries: 3\n"
                              "        verbose: true\n",
                       ca);
        extra = xasprintf("      provideClusterInfo: true\n"
                          "      env:\n"
                          "      - name: PLUGIN_INFO_OUT\n"
                          "        value: %s\n"
                          "      - name: KUBERNETES_EXEC_INFO\n"
                          "        value: overridden-by-drainer\n",
                          info_path);
        user = exec_user("token", extra);
        path = write_simple(f->dir, "config", cl, user);
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "token-0");

        info = read_all(info_path);
        j = cJSON_Parse(info);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "apiVersion")->valuestring,
                            "client.authentication.k8s.io/v1");
        assert_string_equal(cJSON_GetObjectItem(j, "kind")->valuestring, "ExecCredential");
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "interactive")));
        cluster = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "cluster");
        assert_non_null(cluster);
        assert_string_equal(cJSON_GetObjectItem(cluster, "server")->valuestring, "https://10.0.0.1:6443");
        assert_string_equal(cJSON_GetObjectItem(cluster, "tls-server-name")->valuestring, "api.internal");
        assert_string_equal(cJSON_GetObjectItem(cluster, "certificate-authority-data")->valuestring, ca);
        assert_string_equal(
                cJSON_GetObjectItem(cJSON_GetObjectItem(cluster, "config"), "audience")->valuestring,
                "drainer");
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cluster, "config"), "retries")->valueint,
                         3);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(cluster, "config"), "verbose")));
        cJSON_Delete(j);
        free(info);
        kube_config_free(c);
        free(user);
        free(extra);
        free(path);

        /* without provideClusterInfo: no spec.cluster; v1beta1 asks for v1beta1 */
        extra = xasprintf("      env:\n"
                          "      - {name: PLUGIN_INFO_OUT, value: \"%s\"}\n"
                          "      - {name: PLUGIN_API, value: client.authentication.k8s.io/v1beta1}\n",
                          info_path);
        user = xasprintf("    exec:\n"
                         "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                         "      command: /bin/sh\n"
                         "      args: [%s, token]\n"
                         "%s",
                         PLUGIN, extra);
        path = write_simple(f->dir, "config", cl, user);
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "token-0");
        info = read_all(info_path);
        assert_string_equal(info, "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
                                  "\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":false}}");
        free(info);
        kube_config_free(c);

        free(user);
        free(extra);
        free(path);
        free(cl);
        free(ca);
        free(info_path);
}

static void test_exec_relative_command(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *script, *path;

        script = write_file(f->dir, "bin/plugin",
                            "#!/bin/sh\n"
                            "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                            "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"relative-ok\"}}'\n");
        assert_int_equal(chmod(script, 0755), 0);
        path = write_simple(f->dir, "config", SERVER,
                            "    exec:\n"
                            "      apiVersion: client.authentication.k8s.io/v1\n"
                            "      command: ./bin/plugin\n"
                            "      env: null\n");
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "relative-ok");
        kube_config_free(c);
        free(script);
        free(path);
}

static void test_exec_ignored_with_token(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *user, *path, *extra;

        /* as client-go: a static token makes the exec plugin unused */
        extra = xasprintf("      env: [{name: PLUGIN_COUNTER, value: \"%s/counter\"}]\n", f->dir);
        user = exec_user("token", extra);
        free(extra);
        extra = xasprintf("    token: the-static-one\n%s", user);
        path = write_simple(f->dir, "config", SERVER, extra);
        c = load_path(path);
        assert_false(kube_config_uses_exec(c));
        cr = creds(c, 0, true);
        assert_string_equal(cr.token, "the-static-one");
        assert_int_equal(counter(f->dir), 0);
        kube_config_free(c);
        free(extra);
        free(user);
        free(path);
}

static void test_exec_failures(void **state) {
        static const struct {
                const char *mode;
                int r;
                const char *msg;
        } cases[] = {
                { "fail", -EIO, "exec plugin \"/bin/sh\" failed: exit status 3" },
                { "garbage", -EPROTO,
                  "exec plugin \"/bin/sh\": output is not an ExecCredential JSON object" },
                { "wrong-kind", -EPROTO, "output is not an ExecCredential" },
                { "empty-status", -EPROTO, "didn't return a token or a client certificate" },
                { "cert-only", -EPROTO, "returned only a certificate or a key, not both" },
                { "bad-expiry", -EPROTO, "status.expirationTimestamp: invalid RFC 3339 time" },
                { "big", -E2BIG, "output larger than 1048576 bytes" },
                { "no-such-mode", -EIO, "exit status 2" },
        };
        struct fx *f = *state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct kube_config *c;
                char *user = exec_user(cases[i].mode, NULL), *path;

                path = write_simple(f->dir, "config", SERVER, user);
                c = load_path(path);
                expect_creds_error(c, 0, false, cases[i].r, cases[i].msg);
                /* nothing was cached: the next call runs the plugin again and fails again */
                expect_creds_error(c, 0, false, cases[i].r, cases[i].msg);
                kube_config_free(c);
                free(user);
                free(path);
        }
}

static void test_exec_api_mismatch(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *user, *path;

        user = exec_user("token",
                         "      env: [{name: PLUGIN_API, value: client.authentication.k8s.io/v1beta1}]\n");
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        expect_creds_error(c, 0, false, -EPROTO,
                           "is configured to use API version client.authentication.k8s.io/v1, plugin "
                           "returned version client.authentication.k8s.io/v1beta1");
        kube_config_free(c);
        free(user);
        free(path);
}

static void test_exec_failure_keeps_cache(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *user, *path, *extra, *flag;

        flag = xasprintf("%s/fail-now", f->dir);
        extra = xasprintf("      env:\n"
                          "      - {name: PLUGIN_COUNTER, value: \"%s/counter\"}\n"
                          "      - {name: PLUGIN_FAIL_IF, value: \"%s\"}\n",
                          f->dir, flag);
        user = exec_user("token", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "token-1");

        free(write_file(f->dir, "fail-now", ""));
        expect_creds_error(c, 0, true, -EIO, "exec plugin \"/bin/sh\" failed: exit status 4");
        cr = creds(c, 0, false); /* the old credential is still cached (no expiry) */
        assert_string_equal(cr.token, "token-1");
        assert_int_equal(unlink(flag), 0);
        cr = creds(c, 0, true);
        assert_string_equal(cr.token, "token-2");

        kube_config_free(c);
        free(flag);
        free(extra);
        free(user);
        free(path);
}

static void test_exec_timeout(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct timespec t0, t1;
        char *user, *path;
        int64_t ms;

        user = exec_user("sleep", NULL);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        T.exec_timeout_usec = 300 * 1000;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        expect_creds_error(c, 0, false, -ETIMEDOUT, "exec plugin \"/bin/sh\" timed out after 300 ms");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        assert_true(ms < 10000);
        kube_config_free(c);
        free(user);
        free(path);
}

/* client-certificate / client-key files that change on disk are read again (both), and
 * the generation moves so that new connections use them; a half-written pair (a key
 * without a PEM block) keeps the previous one. */
static void test_cert_file_rotation(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *path, *user;
        uint64_t gen;

        free(write_file(f->dir, "tls.crt",
                        "-----BEGIN CERTIFICATE-----\nCERT-A\n-----END CERTIFICATE-----\n"));
        free(write_file(f->dir, "tls.key",
                        "-----BEGIN PRIVATE KEY-----\nKEY-A\n-----END PRIVATE KEY-----\n"));
        user = xasprintf("    client-certificate: %s/tls.crt\n    client-key: %s/tls.key\n", f->dir, f->dir);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        assert_true(kube_config_may_change(c));
        cr = creds(c, 0, false);
        assert_contains(cr.client_cert_pem, "CERT-A");
        assert_contains(cr.client_key_pem, "KEY-A");
        gen = cr.generation;
        cr = creds(c, 0, false);
        assert_int_equal(cr.generation, gen); /* unchanged files: nothing read */

        /* cert-manager writes both (new inode, other size) */
        unlink(xasprintf_tmp(f->dir, "tls.crt"));
        unlink(xasprintf_tmp(f->dir, "tls.key"));
        free(write_file(f->dir, "tls.crt",
                        "-----BEGIN CERTIFICATE-----\nCERT-BB\n-----END CERTIFICATE-----\n"));
        free(write_file(f->dir, "tls.key",
                        "-----BEGIN PRIVATE KEY-----\nKEY-BB\n-----END PRIVATE KEY-----\n"));
        cr = creds(c, 0, false);
        assert_contains(cr.client_cert_pem, "CERT-BB");
        assert_contains(cr.client_key_pem, "KEY-BB");
        assert_true(cr.generation > gen);
        gen = cr.generation;

        /* caught mid-rewrite: the key file holds no PEM yet; the pair stays */
        unlink(xasprintf_tmp(f->dir, "tls.key"));
        free(write_file(f->dir, "tls.key", ""));
        cr = creds(c, 0, false);
        assert_contains(cr.client_cert_pem, "CERT-BB");
        assert_contains(cr.client_key_pem, "KEY-BB");
        assert_int_equal(cr.generation, gen);
        kube_config_free(c);
        free(user);
        free(path);

        /* as data: nothing to re-read */
        {
                char *crt = b64(CERT_PEM), *key = b64(KEY_PEM);

                user = xasprintf("    client-certificate-data: %s\n    client-key-data: %s\n", crt, key);
                free(crt);
                free(key);
        }
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        assert_false(kube_config_may_change(c));
        kube_config_free(c);
        free(user);
        free(path);
}

/* ---- credentials.c: the plugin on the loop ---- */

static char *read_text(const char *path) {
        FILE *fp = fopen(path, "r");
        char *buf = calloc(1, 65536);

        assert_non_null(fp);
        assert_non_null(buf);
        (void)!fread(buf, 1, 65535, fp);
        fclose(fp);
        return buf;
}

static void on_tick(uv_timer_t *t) {
        (*(int *)t->data)++;
}

/* The loop goes on while the plugin runs: a timer keeps firing, and three requests that
 * wait for credentials are all served by the one run. */
static void test_exec_async(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        struct test_wait tw[3] = {};
        char *user, *path, *extra, *err = NULL;
        uv_timer_t tick;
        int ticks = 0, ready = 0, ticks_when_ready = -1;

        extra = xasprintf("      env:\n"
                          "      - {name: PLUGIN_COUNTER, value: \"%s/counter\"}\n"
                          "      - {name: PLUGIN_SLEEP, value: \"0.5\"}\n",
                          f->dir);
        user = exec_user("slow", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        assert_int_equal(credentials_new(&T.loop, &T.ts.base, c, NULL, &T.cr), 0);
        T.cfg = c;
        uv_timer_init(&T.loop, &tick);
        tick.data = &ticks;
        uv_timer_start(&tick, on_tick, 10, 10);
        for (size_t i = 0; i < ELEMENTSOF(tw); i++) {
                assert_int_equal(credentials_get(T.cr, 0, &cr, &err), -EAGAIN);
                assert_null(err);
                credentials_wait(T.cr, &tw[i].w, on_test_creds_ready);
        }
        while (ready < 3) {
                uv_run(&T.loop, UV_RUN_ONCE);
                ready = tw[0].ready + tw[1].ready + tw[2].ready;
                if (ready && ticks_when_ready < 0)
                        ticks_when_ready = ticks;
        }
        print_message("the loop turned %d times (10 ms timer) while the plugin ran 0.5 s\n",
                      ticks_when_ready);
        assert_true(ticks_when_ready > 0);
        assert_int_equal(credentials_get(T.cr, 0, &cr, &err), 0);
        assert_string_equal(cr.token, "token-1");
        assert_int_equal(counter(f->dir), 1);
        uv_close((uv_handle_t *)&tick, NULL);
        kube_config_free(c);
        free(extra);
        free(user);
        free(path);
}

static bool pid_gone(pid_t pid) {
        char p[64], *stat;
        bool gone;
        FILE *fp;

        snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
        fp = fopen(p, "r");
        if (!fp)
                return true;
        fclose(fp);
        stat = read_text(p);
        /* a zombie waiting for its reaper (reparented) is gone too */
        gone = strstr(stat, ") Z ") != NULL;
        free(stat);
        return gone;
}

static pid_t read_pid(const char *path) {
        char *t = read_text(path);
        pid_t pid = (pid_t)atoi(t);

        free(t);
        assert_true(pid > 1);
        return pid;
}

/* At the timeout the plugin's whole process group dies, the helper it started too. */
static void test_exec_timeout_kills_group(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *user, *path, *extra, *pidfile;
        pid_t child;

        pidfile = xasprintf("%s/child.pid", f->dir);
        extra = xasprintf("      env: [{name: PLUGIN_CHILD_PID, value: \"%s\"}]\n", pidfile);
        user = exec_user("hang-with-child", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        T.exec_timeout_usec = 300 * 1000;
        expect_creds_error(c, 0, false, -ETIMEDOUT, "exec plugin \"/bin/sh\" timed out after 300 ms");
        child = read_pid(pidfile);
        for (int i = 0; i < 500 && !pid_gone(child); i++)
                usleep(10000);
        assert_true(pid_gone(child));
        /* A failed run is not repeated on the next request: its error, until the backoff ends. */
        expect_creds_error(c, 0, false, -ETIMEDOUT, "timed out");
        {
                struct credentials_stats st;

                credentials_get_stats(T.cr, &st);
                assert_int_equal(st.runs, 1);
                assert_int_equal(st.timeouts, 1);
        }
        kube_config_free(c);
        free(pidfile);
        free(extra);
        free(user);
        free(path);
}

/* Closing (drainer exits) while the plugin runs kills its process group too. */
static void test_exec_close_kills_group(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *user, *path, *extra, *pidfile, *err = NULL;
        pid_t child = 0;

        pidfile = xasprintf("%s/child.pid", f->dir);
        extra = xasprintf("      env: [{name: PLUGIN_CHILD_PID, value: \"%s\"}]\n", pidfile);
        user = exec_user("hang-with-child", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        assert_int_equal(credentials_new(&T.loop, &T.ts.base, c, NULL, &T.cr), 0);
        T.cfg = c;
        assert_int_equal(credentials_get(T.cr, 0, &cr, &err), -EAGAIN);
        for (int i = 0; i < 1000 && access(pidfile, F_OK) < 0; i++) {
                uv_run(&T.loop, UV_RUN_NOWAIT);
                usleep(5000);
        }
        usleep(50000); /* the pid is written */
        child = read_pid(pidfile);
        kube_config_free(c); /* closes the credentials first */
        for (int i = 0; i < 500 && !pid_gone(child); i++)
                usleep(10000);
        assert_true(pid_gone(child));
        free(pidfile);
        free(extra);
        free(user);
        free(path);
}

/* The plugin gets drainer's environment and KUBERNETES_EXEC_INFO, the kubeconfig's env
 * winning, but nothing of drainer's service manager. */
static void test_exec_environment(void **state) {
        struct fx *f = *state;
        static char *env[] = {
                "HOME=/home/x",
                "KEEP_ME=yes",
                "OVERRIDE=old",
                "NOTIFY_SOCKET=/run/systemd/notify",
                "WATCHDOG_PID=1",
                "WATCHDOG_USEC=30000000",
                "LISTEN_FDS=1",
                "LISTEN_PID=1",
                "LISTEN_FDNAMES=metrics",
                "CREDENTIALS_DIRECTORY=/run/credentials/drainer.service",
                "KUBERNETES_EXEC_INFO=stale",
                "PATH=/usr/bin:/bin",
                NULL,
        };
        struct kube_config *c;
        char *user, *path, *extra, *out, *got;

        out = xasprintf("%s/env.out", f->dir);
        extra = xasprintf("      env:\n"
                          "      - {name: PLUGIN_ENV_OUT, value: \"%s\"}\n"
                          "      - {name: OVERRIDE, value: new}\n",
                          out);
        user = exec_user("env", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        T.environ = env;
        (void)creds(c, 0, false);
        got = read_text(out);
        memmove(got + 1, got, strlen(got) + 1);
        got[0] = '\n'; /* every line now starts after a \n */
        assert_non_null(strstr(got, "\nKEEP_ME=yes\n"));
        assert_non_null(strstr(got, "\nHOME=/home/x\n"));
        assert_non_null(strstr(got, "\nOVERRIDE=new\n"));
        assert_null(strstr(got, "OVERRIDE=old"));
        assert_non_null(
                strstr(got, "KUBERNETES_EXEC_INFO={\"apiVersion\":\"client.authentication.k8s.io/v1\""));
        assert_null(strstr(got, "stale"));
        static const char *const gone[] = { "NOTIFY_SOCKET=", "WATCHDOG_",       "LISTEN_FDS=",
                                            "LISTEN_PID=",    "LISTEN_FDNAMES=", "CREDENTIALS_DIRECTORY=" };
        for (size_t i = 0; i < ELEMENTSOF(gone); i++)
                if (strstr(got, gone[i]))
                        fail_msg("the plugin got %s", gone[i]);
        free(got);
        kube_config_free(c);
        free(out);
        free(extra);
        free(user);
        free(path);
}

/* None of drainer's descriptors (API connections, sockets) reaches the plugin. */
static void test_exec_fds(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *user, *path, *extra, *out, *got;
        int fd;

        fd = open("/dev/null", O_RDONLY); /* no O_CLOEXEC on purpose */
        assert_true(fd >= 0);
        assert_int_equal(dup2(fd, 77), 77);
        close(fd);
        out = xasprintf("%s/fds.out", f->dir);
        extra = xasprintf("      env: [{name: PLUGIN_FDS_OUT, value: \"%s\"}]\n", out);
        user = exec_user("fds", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        (void)creds(c, 0, false);
        got = read_text(out);
        assert_null(strstr(got, "77\n"));
        free(got);
        close(77);
        kube_config_free(c);
        free(out);
        free(extra);
        free(user);
        free(path);
}

/* An answer already expired when it arrives is used, and the plugin runs again only
 * after a backoff (1 s, then 2 s, ...), not on every request. */
static void test_exec_expired_answer(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        struct credentials_stats st;
        char *user, *path, *extra;

        extra = xasprintf("      env:\n"
                          "      - {name: PLUGIN_COUNTER, value: \"%s/counter\"}\n"
                          "      - {name: PLUGIN_EXPIRY, value: \"2020-01-01T00:00:00Z\"}\n",
                          f->dir);
        user = exec_user("token", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        for (int i = 0; i < 20; i++) {
                cr = creds(c, T2030, false);
                assert_string_equal(cr.token, "token-1");
        }
        assert_int_equal(counter(f->dir), 1);
        credentials_get_stats(T.cr, &st);
        assert_int_equal(st.expired_answers, 1);
        fake_clock_advance(T.clock, USEC); /* the first backoff: 1 s */
        cr = creds(c, T2030, false);
        assert_string_equal(cr.token, "token-2");
        for (int i = 0; i < 20; i++)
                (void)creds(c, T2030, false);
        assert_int_equal(counter(f->dir), 2);
        fake_clock_advance(T.clock, USEC + USEC / 2); /* the second: 2 s */
        (void)creds(c, T2030, false);
        assert_int_equal(counter(f->dir), 2);
        fake_clock_advance(T.clock, USEC / 2);
        cr = creds(c, T2030, false);
        assert_string_equal(cr.token, "token-3");
        assert_int_equal(counter(f->dir), 3);
        kube_config_free(c);
        free(extra);
        free(user);
        free(path);
}

/* Refreshes after a 401 are limited process-wide: at most one per 5 s, the interval
 * doubling while 401s keep coming; a refused one is -EACCES without a plugin run. */
static void test_exec_refresh_limited(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        struct credentials_stats st;
        struct test_wait tw = {};
        char *user, *path, *extra, *err = NULL;
        uint64_t gen;

        extra = xasprintf("      env: [{name: PLUGIN_COUNTER, value: \"%s/counter\"}]\n", f->dir);
        user = exec_user("token", extra);
        path = write_simple(f->dir, "config", SERVER, user);
        c = load_path(path);
        cr = creds(c, 0, false);
        gen = cr.generation;
        /* 401: a refresh (run 2) */
        assert_true(credentials_may_refresh(T.cr, gen));
        assert_int_equal(credentials_get(T.cr, gen, &cr, &err), -EAGAIN);
        credentials_wait(T.cr, &tw.w, on_test_creds_ready);
        while (!tw.ready)
                uv_run(&T.loop, UV_RUN_ONCE);
        assert_int_equal(credentials_get(T.cr, gen, &cr, &err), 0);
        assert_string_equal(cr.token, "token-2");
        /* Another call refused with the old generation: the new one, no run. */
        assert_int_equal(credentials_get(T.cr, gen, &cr, &err), 0);
        assert_string_equal(cr.token, "token-2");
        gen = cr.generation;
        /* 401 again at once: refused, no run */
        assert_false(credentials_may_refresh(T.cr, gen));
        assert_int_equal(credentials_get(T.cr, gen, &cr, &err), -EACCES);
        assert_contains(err, "401");
        free(err);
        err = NULL;
        assert_int_equal(counter(f->dir), 2);
        /* after 5 s: allowed; the next one then waits 10 s (doubled) */
        fake_clock_advance(T.clock, 5 * USEC);
        assert_true(credentials_may_refresh(T.cr, gen));
        T.last_generation = gen;
        tw = (struct test_wait){};
        assert_int_equal(credentials_get(T.cr, gen, &cr, &err), -EAGAIN);
        credentials_wait(T.cr, &tw.w, on_test_creds_ready);
        while (!tw.ready)
                uv_run(&T.loop, UV_RUN_ONCE);
        assert_int_equal(credentials_get(T.cr, gen, &cr, &err), 0);
        gen = cr.generation;
        fake_clock_advance(T.clock, 5 * USEC);
        assert_false(credentials_may_refresh(T.cr, gen));
        fake_clock_advance(T.clock, 5 * USEC);
        assert_true(credentials_may_refresh(T.cr, gen));
        credentials_get_stats(T.cr, &st);
        assert_int_equal(st.refreshes, 2);
        assert_int_equal(st.refreshes_refused, 1);
        assert_int_equal(counter(f->dir), 3);
        kube_config_free(c);
        free(extra);
        free(user);
        free(path);
}

/* ---- no secret left in freed memory ---- */

/* Whether the process's writable memory (heap and anonymous mappings; not the stack)
 * holds needle anywhere outside [skip, skip + skip_len). */
static bool memory_holds(const char *needle, size_t n, const void *skip, size_t skip_len) {
        FILE *maps = fopen("/proc/self/maps", "r");
        char line[512];
        bool found = false;

        assert_non_null(maps);
        while (!found && fgets(line, sizeof(line), maps)) {
                unsigned long lo, hi;
                char perms[8], path[256] = "";
                int k = sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &lo, &hi, perms, path);

                if (k < 3 || perms[0] != 'r' || perms[1] != 'w')
                        continue;
                if (k == 4 && strcmp(path, "[heap]") != 0)
                        continue; /* files, the stack, vdso */
                for (const char *p = (const char *)lo; p && p + n <= (const char *)hi;) {
                        const char *m = memmem(p, (size_t)((const char *)hi - p), needle, n);

                        if (!m)
                                break;
                        if (!(m >= (const char *)skip && m < (const char *)skip + skip_len)) {
                                found = true;
                                break;
                        }
                        p = m + 1;
                }
        }
        fclose(maps);
        return found;
}

/* Writes a file with write(2) (no stdio buffer left behind). */
static void write_raw(const char *path, const char *data) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
        close(fd);
}

/* A token in the kubeconfig, and a token, certificate and key from an exec plugin: once
 * the config and the credentials are freed, none of them is left anywhere in the heap
 * (the file and its YAML, the plugin's output and its JSON, the cached answer). glibc
 * reuses the first 16 bytes of a freed chunk, so the probe is the tail of each secret. */
static void test_secrets_wiped(void **state) {
        struct fx *f = *state;
        char secret[49], buf[2048], path[512];
        struct kube_config *c;
        struct kube_credentials cr;
        unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

#if defined(__SANITIZE_ADDRESS__)
        /* ASan's allocator quarantines and poisons freed memory and maps its shadow among
         * the anonymous mappings: a scan is meaningless there (the plain build runs it). */
        print_message("under AddressSanitizer: skipped\n");
        skip();
#endif
        for (size_t i = 0; i < 48; i++)
                secret[i] = "0123456789abcdef"[rand_r(&seed) % 16];
        secret[48] = 0;

        /* a static token */
        snprintf(path, sizeof(path), "%s/secret-static", f->dir);
        snprintf(buf, sizeof(buf),
                 "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"" SERVER_URL
                 "\"}\nusers:\n- name: u\n  user:\n    token: %s\ncontexts:\n- name: ctx\n  context: "
                 "{cluster: c, "
                 "user: u}\ncurrent-context: ctx\n",
                 secret);
        write_raw(path, buf);
        explicit_bzero(buf, sizeof(buf));
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_int_equal(strlen(cr.token), 48);
        kube_config_free(c);
        assert_false(memory_holds(secret + 24, 24, secret, sizeof(secret)));
        unlink(path);

        /* an exec plugin's token, certificate and key */
        snprintf(path, sizeof(path), "%s/secret-exec", f->dir);
        snprintf(buf, sizeof(buf),
                 "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"" SERVER_URL
                 "\"}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: "
                 "client.authentication.k8s.io/v1\n"
                 "      command: /bin/sh\n      args: [\"%s\", secret]\n      env: [{name: PLUGIN_SECRET, "
                 "value: \"%s\"}]\ncontexts:\n- name: ctx\n  context: {cluster: c, user: "
                 "u}\ncurrent-context: "
                 "ctx\n",
                 PLUGIN, secret);
        write_raw(path, buf);
        explicit_bzero(buf, sizeof(buf));
        c = load_path(path);
        cr = creds(c, 0, false);
        assert_int_equal(strlen(cr.token), 48);
        assert_non_null(strstr(cr.client_key_pem, secret + 24));
        kube_config_free(c);
        assert_false(memory_holds(secret + 24, 24, secret, sizeof(secret)));
        unlink(path);
        explicit_bzero(secret, sizeof(secret));
}

static void test_exec_not_found(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *path;

        path = write_simple(f->dir, "config", SERVER,
                            "    exec:\n"
                            "      apiVersion: client.authentication.k8s.io/v1\n"
                            "      command: drainer-no-such-plugin-xyz\n");
        c = load_path(path);
        expect_creds_error(
                c, 0, false, -ENOENT,
                "exec plugin \"drainer-no-such-plugin-xyz\" failed: executable not found in $PATH");
        kube_config_free(c);
        free(path);

        path = write_simple(f->dir, "config", SERVER,
                            "    exec:\n"
                            "      apiVersion: client.authentication.k8s.io/v1\n"
                            "      command: bin/missing-plugin\n");
        c = load_path(path);
        expect_creds_error(c, 0, false, -ENOENT,
                           "exec plugin \"bin/missing-plugin\" failed: No such file or directory");
        kube_config_free(c);
        free(path);

        /* not executable */
        free(write_file(f->dir, "bin/plain-file", "#!/bin/sh\n"));
        path = write_simple(f->dir, "config", SERVER,
                            "    exec:\n"
                            "      apiVersion: client.authentication.k8s.io/v1\n"
                            "      command: bin/plain-file\n");
        c = load_path(path);
        expect_creds_error(c, 0, false, -EACCES, "exec plugin \"bin/plain-file\" failed: Permission denied");
        kube_config_free(c);
        free(path);
}

/* ---- merging, precedence, contexts ---- */

static void write_merge_files(const char *dir, char **a, char **b, char **cc) {
        *a = write_file(dir, "a.yaml",
                        "clusters:\n"
                        "- name: shared\n"
                        "  cluster: {server: https://a.example:6443}\n"
                        "users:\n"
                        "- name: shared-user\n"
                        "  user: {token: token-from-a}\n"
                        "contexts:\n"
                        "- name: ctx-b\n"
                        "  context: {cluster: only-b, user: shared-user, namespace: from-a}\n");
        *b = write_file(dir, "b.yaml",
                        "clusters:\n"
                        "- name: shared\n"
                        "  cluster: {server: https://b.example:6443, tls-server-name: from-b}\n"
                        "- name: only-b\n"
                        "  cluster: {server: https://only-b.example}\n"
                        "users:\n"
                        "- name: shared-user\n"
                        "  user: {token: token-from-b}\n"
                        "contexts:\n"
                        "- name: ctx-b\n"
                        "  context: {cluster: shared, user: shared-user, namespace: from-b}\n"
                        "- name: ctx-shared\n"
                        "  context: {cluster: shared, user: shared-user}\n"
                        "current-context: ctx-b\n");
        *cc = write_file(dir, "c.yaml",
                         "contexts:\n"
                         "- name: ctx-c\n"
                         "  context: {cluster: shared}\n"
                         "current-context: ctx-c\n");
}

static void test_merge(void **state) {
        struct fx *f = *state;
        struct kube_config_options o = {};
        struct kube_config *c = NULL;
        struct kube_credentials cr;
        char *a, *b, *cc, *env, *missing, *want, *err = NULL;

        write_merge_files(f->dir, &a, &b, &cc);
        missing = xasprintf("%s/missing.yaml", f->dir);
        env = xasprintf("%s::%s:%s:%s:%s", a, missing, b, a, cc); /* empty, missing, duplicate entries */
        o.kubeconfig_env = env;
        o.home = "/nonexistent-home";

        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        /* current-context from the first file that sets it (b), the context named ctx-b
         * from the first file that defines it (a): cluster only-b, namespace from-a */
        assert_string_equal(c->context_name, "ctx-b");
        assert_string_equal(c->server, "https://only-b.example");
        assert_string_equal(c->namespace, "from-a");
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "token-from-a");
        want = xasprintf("%s:%s:%s", a, b, cc);
        assert_string_equal(c->source, want);
        free(want);
        kube_config_free(c);

        /* --context; cluster "shared": a's entry wins entirely (no tls-server-name from b) */
        o.context = "ctx-shared";
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://a.example:6443");
        assert_null(c->tls_server_name);
        assert_string_equal(c->namespace, "default");
        kube_config_free(c);

        o.context = "ctx-c";
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        cr = creds(c, 0, false);
        assert_null(cr.token);
        kube_config_free(c);

        o.context = "nope";
        want = xasprintf("context \"nope\" not found in %s:%s:%s", a, b, cc);
        expect_load_error(&o, -ENOENT, want);
        free(want);

        free(a);
        free(b);
        free(cc);
        free(env);
        free(missing);
}

static void test_precedence(void **state) {
        struct fx *f = *state;
        struct kube_config_options o = {};
        struct kube_config *c = NULL;
        char *a, *b, *cc, *home, *home_cfg, *missing, *err = NULL;

        write_merge_files(f->dir, &a, &b, &cc);
        home_cfg = write_simple(f->dir, "home/.kube/config", "    server: https://home.example\n",
                                "    token: t\n");
        missing = xasprintf("%s/missing.yaml", f->dir);
        home = xasprintf("%s/home", f->dir);
        o.home = home;

        /* ~/.kube/config when nothing else is set; messages show it as ~ */
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://home.example");
        assert_string_equal(c->source, "~/.kube/config");
        kube_config_free(c);

        /* $KUBECONFIG beats ~/.kube/config */
        o.kubeconfig_env = b;
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://b.example:6443");
        kube_config_free(c);

        /* --kubeconfig beats $KUBECONFIG, and is used alone */
        o.kubeconfig = home_cfg;
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://home.example");
        assert_string_equal(c->source, "~/.kube/config");
        kube_config_free(c);
        o.context = "ctx-shared"; /* only in b: not merged in */
        expect_load_error(&o, -ENOENT, "context \"ctx-shared\" not found in ~/.kube/config");
        o.context = NULL;
        o.kubeconfig = a;
        expect_load_error(&o, -ENOENT, "no current-context in");

        /* --kubeconfig that does not exist is an error */
        o.kubeconfig = missing;
        expect_load_error(&o, -ENOENT, "missing.yaml: cannot read kubeconfig: No such file or directory");

        /* $KUBECONFIG naming only missing files: no fallback to ~/.kube/config */
        o.kubeconfig = NULL;
        o.kubeconfig_env = missing;
        expect_load_error(&o, -ENOENT,
                          "no configuration: set --kubeconfig or KUBECONFIG, or create ~/.kube/config");

        /* an empty $KUBECONFIG is unset */
        o.kubeconfig_env = "";
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://home.example");
        kube_config_free(c);

        /* a kubeconfig wins over in-cluster */
        o.service_host = "10.96.0.1";
        o.service_port = "443";
        o.sa_dir = "/nonexistent";
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://home.example");
        kube_config_free(c);

        /* nothing at all */
        o = (struct kube_config_options){ .home = "/nonexistent-home" };
        expect_load_error(&o, -ENOENT, "no configuration");
        o.home = NULL;
        expect_load_error(&o, -ENOENT, "no configuration");

        free(home);
        free(a);
        free(b);
        free(cc);
        free(home_cfg);
        free(missing);
}

static void test_in_cluster(void **state) {
        struct fx *f = *state;
        struct kube_config_options o = {};
        struct kube_config *c = NULL;
        struct kube_credentials cr;
        char *sa, *tok, *ca, *ns, *tmp, *empty, *err = NULL;
        struct timespec ts[2] = { { 2000, 0 }, { 2000, 0 } };

        tok = write_file(f->dir, "sa/token", "sa-token-1\n");
        ca = write_file(f->dir, "sa/ca.crt", CA_PEM);
        ns = write_file(f->dir, "sa/namespace", "drainer-system\n");
        sa = xasprintf("%s/sa", f->dir);
        empty = write_file(f->dir, "empty.yaml", "# nothing here\n");

        /* $KUBECONFIG names only an empty file: in-cluster, like clientcmd */
        o.kubeconfig_env = empty;
        o.service_host = "10.96.0.1";
        o.service_port = "443";
        o.sa_dir = sa;
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://10.96.0.1:443");
        assert_string_equal(c->ca_pem, CA_PEM);
        assert_string_equal(c->namespace, "drainer-system");
        assert_string_equal(c->source, "in-cluster");
        assert_null(c->context_name);
        assert_null(c->client_cert_pem);

        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "sa-token-1");
        assert_false(changed(&cr));
        free(write_file(f->dir, "sa/token", "sa-token-2\n"));
        assert_int_equal(utimensat(AT_FDCWD, tok, ts, 0), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "sa-token-2");
        tmp = write_file(f->dir, "sa/..data-token", "sa-token-3");
        assert_int_equal(rename(tmp, tok), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "sa-token-3");
        kube_config_free(c);

        /* IPv6 in brackets; no namespace file: default */
        assert_int_equal(unlink(ns), 0);
        o.service_host = "fd00:10:96::1";
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://[fd00:10:96::1]:443");
        assert_string_equal(c->namespace, "default");
        kube_config_free(c);

        /* --context makes no sense in-cluster */
        o.context = "prod";
        expect_load_error(&o, -ENOENT, "context \"prod\" not found");
        o.context = NULL;

        /* only one of host and port: not in-cluster */
        o.service_port = NULL;
        expect_load_error(&o, -ENOENT, "no configuration");
        o.service_port = "443";

        assert_int_equal(unlink(ca), 0);
        free(tmp);
        tmp = xasprintf("%s/ca.crt: cannot read certificate-authority: No such file or directory", sa);
        expect_load_error(&o, -ENOENT, tmp);
        assert_int_equal(unlink(tok), 0);
        free(tmp);
        tmp = xasprintf("%s/token: cannot read service account token: No such file or directory", sa);
        expect_load_error(&o, -ENOENT, tmp);

        free(tmp);
        free(sa);
        free(tok);
        free(ca);
        free(ns);
        free(empty);
}

/* ---- malformed input ---- */

struct error_case {
        const char *name;
        const char *yaml;
        int r;
        const char *msg; /* %1$s: the kubeconfig path */
};

static const char ctx_tail[] = "contexts: [{name: ctx, context: {cluster: c, user: u}}]\n"
                               "current-context: ctx\n";

static void test_errors(void **state) {
        static const struct error_case cases[] = {
                { "bad-ca-data",
                  "clusters: [{name: c, cluster: {server: https://x, certificate-authority-data: "
                  "'not*base64'}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "%1$s/config: clusters[c].certificate-authority-data: invalid base64" },
                { "bad-ca-padding",
                  "clusters: [{name: c, cluster: {server: https://x, certificate-authority-data: "
                  "'QUJD='}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "clusters[c].certificate-authority-data: invalid base64" },
                { "ca-data-not-pem",
                  "clusters: [{name: c, cluster: {server: https://x, certificate-authority-data: 'QUJD'}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "clusters[c].certificate-authority-data: no PEM block" },
                { "bad-cert-data",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: alice, user: {client-certificate-data: '@@@', client-key-data: 'QUJD'}}]\n"
                  "contexts: [{name: ctx, context: {cluster: c, user: alice}}]\n",
                  -EINVAL, "%1$s/config: users[alice].client-certificate-data: invalid base64" },
                { "missing-ca-file",
                  "clusters: [{name: c, cluster: {server: https://x, certificate-authority: "
                  "pki/none.crt}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -ENOENT,
                  "%1$s/pki/none.crt: cannot read certificate-authority: No such file or directory" },
                { "missing-client-key-file",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {client-certificate: " FIXDIR
                  "/pki/client.crt, client-key: nokey}}]\n",
                  -ENOENT, "%1$s/nokey: cannot read client-key: No such file or directory" },
                { "cert-without-key",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {client-certificate-data: "
                  "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
                  "}}]\n",
                  -EINVAL, "users[u]: client-certificate without client-key" },
                { "missing-token-file",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {tokenFile: tok}}]\n",
                  -ENOENT, "%1$s/tok: cannot read tokenFile: No such file or directory" },
                { "basic-auth",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: bob, user: {username: bob, password: secret}}]\n"
                  "contexts: [{name: ctx, context: {cluster: c, user: bob}}]\n",
                  -EOPNOTSUPP, "%1$s/config: users[bob]: unsupported auth method \"username/password\"" },
                { "auth-provider",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {auth-provider: {name: oidc, config: {}}}}]\n",
                  -EOPNOTSUPP, "%1$s/config: users[u]: unsupported auth method \"auth-provider\"" },
                { "impersonation",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {token: t, as: admin}}]\n",
                  -EOPNOTSUPP, "users[u].as: impersonation is not supported" },
                { "exec-v1alpha1",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1alpha1, "
                  "command: aws}}}]\n",
                  -EOPNOTSUPP,
                  "users[u].exec.apiVersion: \"client.authentication.k8s.io/v1alpha1\" not supported" },
                { "exec-no-command",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1}}}]\n",
                  -EINVAL, "users[u].exec.command: missing" },
                { "exec-interactive",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: "
                  "aws, "
                  "interactiveMode: Always}}}]\n",
                  -EOPNOTSUPP, "users[u].exec.interactiveMode: Always needs a terminal" },
                { "exec-env-no-name",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: "
                  "aws, "
                  "env: [{value: x}]}}}]\n",
                  -EINVAL, "users[u].exec.env[0].name: missing or invalid" },
                { "exec-args-map",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: "
                  "aws, "
                  "args: {a: b}}}}]\n",
                  -EINVAL, "users[u].exec.args: expected a list" },
                { "no-server",
                  "clusters: [{name: c, cluster: {certificate-authority-data: ''}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "%1$s/config: clusters[c].server: missing" },
                { "bad-scheme",
                  "clusters: [{name: c, cluster: {server: 'ftp://x'}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "clusters[c].server: not an http(s) URL" },
                { "proxy-url",
                  "clusters: [{name: c, cluster: {server: https://x, proxy-url: 'socks5://p:1080'}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EOPNOTSUPP, "clusters[c].proxy-url: not supported" },
                /* client-go: "specifying a root certificates file with the insecure flag is not
                 * allowed" (transport.TLSConfigFor) */
                { "insecure-with-ca-file",
                  "clusters: [{name: c, cluster: {server: https://x, insecure-skip-tls-verify: true, "
                  "certificate-authority: " FIXDIR "/pki/ca.crt}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL,
                  "%1$s/config: clusters[c]: insecure-skip-tls-verify together with a certificate "
                  "authority: specifying a root certificates file with the insecure flag is not allowed" },
                { "insecure-with-ca-data",
                  "clusters: [{name: c, cluster: {insecure-skip-tls-verify: true, server: https://x, "
                  "certificate-authority-data: "
                  "'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFBQUEKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo='}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "clusters[c]: insecure-skip-tls-verify together with a certificate authority" },
                { "bad-bool",
                  "clusters: [{name: c, cluster: {server: https://x, insecure-skip-tls-verify: maybe}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "clusters[c].insecure-skip-tls-verify: expected true or false" },
                { "server-not-string",
                  "clusters: [{name: c, cluster: {server: [a, b]}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "clusters[c].server: expected a string" },
                { "cluster-not-found",
                  "clusters: [{name: other, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -ENOENT, "%1$s/config: contexts[ctx]: cluster \"c\" not found in %1$s/config" },
                { "user-not-found", "clusters: [{name: c, cluster: {server: https://x}}]\n", -ENOENT,
                  "contexts[ctx]: user \"u\" not found in" },
                { "context-without-cluster", "contexts: [{name: ctx, context: {user: u}}]\n", -EINVAL,
                  "contexts[ctx].cluster: missing" },
                { "duplicate-cluster",
                  "clusters: [{name: c, cluster: {server: https://x}}, {name: c, cluster: {server: "
                  "https://y}}]\n"
                  "users: [{name: u, user: {}}]\n",
                  -EINVAL, "%1$s/config: clusters: duplicate name \"c\"" },
                { "clusters-not-list", "clusters: {c: {server: https://x}}\n", -EINVAL,
                  "%1$s/config: clusters: expected a list" },
                { "cluster-entry-not-map", "clusters: [c]\n", -EINVAL,
                  "%1$s/config: clusters[0]: expected a mapping" },
                { "cluster-body-missing", "clusters: [{name: c}]\nusers: [{name: u, user: {}}]\n", -EINVAL,
                  "clusters[c].cluster: missing" },
                { "invalid-yaml", "clusters: [{name: c, cluster: {server: https://x}\n", -EINVAL,
                  "%1$s/config: invalid YAML: " },
                { "top-level-list", "- a\n- b\n", -EINVAL,
                  "%1$s/config: not a kubeconfig: top level is not a mapping" },
                { "no-current-context", "clusters: [{name: c, cluster: {server: https://x}}]\n", -ENOENT,
                  "no current-context in %1$s/config: set current-context or use --context" },
        };
        struct fx *f = *state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *yaml, *path, *msg;
                bool tail = !strstr(cases[i].yaml, "contexts:") &&
                            !streq(cases[i].name, "no-current-context") &&
                            !streq(cases[i].name, "top-level-list") && !streq(cases[i].name, "invalid-yaml");

                yaml = xasprintf("%s%s%s", cases[i].yaml, tail ? ctx_tail : "",
                                 !tail && strstr(cases[i].yaml, "contexts:") ? "current-context: ctx\n"
                                                                             : "");
                path = write_file(f->dir, "config", yaml);
                msg = subst_dir(cases[i].msg, f->dir);
                print_message("case %s\n", cases[i].name);
                expect_file_error(path, cases[i].r, msg);
                free(msg);
                free(path);
                free(yaml);
        }
}

static void test_error_names_home(void **state) {
        struct fx *f = *state;
        struct kube_config_options o = {};
        char *path;

        path = write_file(
                f->dir, ".kube/config",
                "clusters: [{name: c, cluster: {server: https://x}}]\n"
                "users: [{name: alice, user: {client-certificate-data: 'no!', client-key-data: 'QUJD'}}]\n"
                "contexts: [{name: ctx, context: {cluster: c, user: alice}}]\n"
                "current-context: ctx\n");
        o.home = f->dir;
        expect_load_error(&o, -EINVAL,
                          "~/.kube/config: users[alice].client-certificate-data: invalid base64");
        free(path);
}

static void test_secrets_not_in_errors(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *path, *err = NULL;
        int r;

        /* a token with a line break is rejected without echoing it */
        path = write_file(f->dir, "config",
                          "clusters: [{name: c, cluster: {server: https://x}}]\n"
                          "users: [{name: u, user: {token: \"supersecret\\nX-Evil: 1\"}}]\n"
                          "contexts: [{name: ctx, context: {cluster: c, user: u}}]\n"
                          "current-context: ctx\n");
        r = kube_config_load(&(struct kube_config_options){ .kubeconfig = path }, &c, &err);
        assert_int_equal(r, -EINVAL);
        assert_contains(err, "users[u].token: contains control characters");
        assert_null(strstr(err, "supersecret"));
        free(err);
        free(path);
}

static void test_unknown_keys_and_nulls(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *path;

        path = write_file(f->dir, "config",
                          "apiVersion: v1\n"
                          "kind: Config\n"
                          "preferences: {colors: true}\n"
                          "extensions: [{name: foo, extension: {a: 1}}]\n"
                          "something-new: 42\n"
                          "clusters:\n"
                          "- name: c\n"
                          "  cluster:\n"
                          "    server: https://x:6443\n"
                          "    insecure-skip-tls-verify: yes\n"
                          "    disable-compression: true\n"
                          "    certificate-authority: null\n"
                          "    unknown: field\n"
                          "- cluster: {server: https://nameless}\n"
                          "users: null\n"
                          "contexts:\n"
                          "- name: ctx\n"
                          "  context:\n"
                          "    cluster: c\n"
                          "    user: ~\n"
                          "    namespace: ''\n"
                          "current-context: ctx\n");
        c = load_path(path);
        assert_string_equal(c->server, "https://x:6443");
        assert_true(c->insecure_skip_tls_verify);
        assert_null(c->ca_pem);
        assert_string_equal(c->namespace, "default");
        kube_config_free(c);
        free(path);
}

static void test_free_null(void **state) {
        (void)state;
        assert_null(kube_config_free(NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_token, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_user, setup, teardown),
                cmocka_unit_test_setup_teardown(test_json, setup, teardown),
                cmocka_unit_test_setup_teardown(test_relative_files, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cert_data, setup, teardown),
                cmocka_unit_test_setup_teardown(test_token_file_rotation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_token_cache, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_no_expiry, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_cert, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_cluster_info, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_relative_command, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_ignored_with_token, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_failures, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_api_mismatch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_failure_keeps_cache, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_not_found, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cert_file_rotation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_secrets_wiped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_async, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_timeout_kills_group, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_close_kills_group, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_environment, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_fds, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_expired_answer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_refresh_limited, setup, teardown),
                cmocka_unit_test_setup_teardown(test_merge, setup, teardown),
                cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
                cmocka_unit_test_setup_teardown(test_in_cluster, setup, teardown),
                cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_error_names_home, setup, teardown),
                cmocka_unit_test_setup_teardown(test_secrets_not_in_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_keys_and_nulls, setup, teardown),
                cmocka_unit_test(test_free_null),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
