/* Unit tests for credentials.c: every credential source a kubeconfig can name, as the
 * client gets them: static tokens and certificates; token files and client certificate
 * and key files, read at the start (an unreadable one is an error naming it) and re-read
 * when they rotate; exec plugins run on a real libuv loop with their cache, timeouts,
 * process groups, environment and descriptors, expired answers and the 401 limiter; no
 * secret left in freed memory. Files live in a private folder under the build tree; the
 * plugin is tests/unit/fixtures/kubeconfig/exec-plugin.sh; timers run on a fake clock
 * whose wall clock the tests set. */
#include <errno.h>
#include <fcntl.h>
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

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/credentials.h"
#include "drainer/kube/kubeconfig.h"
#include "fakes/fake-clock.h"
#include "fakes/test-env.h"

#define FIXDIR FIXTURES "/kubeconfig"
#define PLUGIN FIXDIR "/exec-plugin.sh"
#define USEC   1000000LL

/* 2030-01-01T00:00:00Z */
#define T2030 (1893456000LL * USEC)

#define CA_PEM   "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n"
#define KEY_PEM  "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n"

#define SERVER_URL "https://10.0.0.1:6443"
#define SERVER     "    server: " SERVER_URL "\n"

struct fx {
        char *dir;
};

static void creds_env_start(void);
static void creds_env_stop(void);

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        creds_env_start();
        f->dir = test_private_dir("credentials");
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;

        creds_env_stop();
        test_private_dir_remove(f->dir);
        free(f);
        return 0;
}

/* dir/name in a static buffer (for unlink). */
static const char *path_in(const char *dir, const char *name) {
        static char buf[4096];

        snprintf(buf, sizeof(buf), "%s/%s", dir, name);
        return buf;
}

/* ---- the credentials of a config, got as the client gets them, on a real loop ---- */

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

/* Gets credentials the way the client does: force = the last ones got a 401 (then only newer
 * ones are an answer: static ones are -EACCES, unchanged files too). Plugin runs
 * happen on the loop; the fake clock moves 1 ms per turn while one is under way (a
 * plugin that never ends meets its timeout). */
static int get_creds(struct kube_config *c, int64_t now, bool force, struct kube_credentials *ret,
                     char **ret_error) {
        uint64_t rejected = 0;
        int r;

        if (T.cfg != c) {
                creds_drop();
                r = credentials_new(&T.loop, &T.ts.base, c,
                                    &(struct credentials_options){ .exec_timeout_usec = T.exec_timeout_usec,
                                                                   .environ = T.environ },
                                    &T.cr, ret_error);
                if (r < 0)
                        return r;
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
        bool r = T.seen || !T.cfg->auth.exec ? !streq_ptr(cr->client_cert_pem, T.prev_cert)
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
        test_assert_contains(err, needle);
        assert_null(strchr(err, '\n'));
        free(err);
}

/* An exec user running the fixture plugin in the given mode, with extra exec YAML. */
static char *exec_user(const char *mode, const char *extra) {
        return test_asprintf("    exec:\n"
                             "      apiVersion: client.authentication.k8s.io/v1\n"
                             "      command: /bin/sh\n"
                             "      args: [\"%s\", \"%s\"]\n"
                             "      interactiveMode: Never\n"
                             "%s",
                             PLUGIN, mode, extra ? extra : "");
}

static int counter(const char *dir) {
        char *path = test_asprintf("%s/counter", dir);
        FILE *fp = fopen(path, "r");
        int n = 0;

        free(path);
        if (!fp)
                return 0;
        assert_int_equal(fscanf(fp, "%d", &n), 1);
        fclose(fp);
        return n;
}

/* ---- static credentials and credential files ---- */

/* A static token: the same on every call, never refreshed after a 401 (-EACCES at once);
 * no user at all: anonymous. */
static void test_static_token(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *path;

        path = test_kubeconfig_write(f->dir, "config", SERVER, "    token: static-token\n");
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "static-token");
        assert_null(cr.client_cert_pem);
        assert_int_equal(cr.generation, 1);
        assert_false(changed(&cr));
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "static-token");
        assert_false(credentials_may_refresh(T.cr, cr.generation));
        expect_creds_error(c, 0, true, -EACCES, "they are static");
        kube_config_free(c);
        free(path);

        path = test_write_file(f->dir, "config",
                               "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080'}}]\n"
                               "contexts: [{name: x, context: {cluster: c, namespace: team-a}}]\n"
                               "current-context: x\n");
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_null(cr.token);
        assert_null(cr.client_cert_pem);
        assert_false(changed(&cr));
        kube_config_free(c);
        free(path);

        c = test_kubeconfig_load(FIXDIR "/config.json");
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "json-token");
        kube_config_free(c);
}

/* Certificate and key files named relative to the kubeconfig are read (whatever the
 * working directory); data is used as it is. */
static void test_cert_files_and_data(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *crt, *key, *cwd, *us, *path, *crt64 = test_base64(CERT_PEM), *key64 = test_base64(KEY_PEM);

        cwd = getcwd(NULL, 0);
        assert_int_equal(chdir(f->dir), 0);
        c = test_kubeconfig_load(FIXDIR "/relative.yaml");
        cr = creds(c, 0, false);
        assert_int_equal(chdir(cwd), 0);
        free(cwd);
        crt = test_read_file(FIXDIR "/pki/client.crt");
        key = test_read_file(FIXDIR "/pki/client.key");
        assert_null(cr.token);
        assert_string_equal(cr.client_cert_pem, crt);
        assert_int_equal(cr.client_cert_pem_len, strlen(crt));
        assert_string_equal(cr.client_key_pem, key);
        assert_int_equal(cr.client_key_pem_len, strlen(key));
        assert_true(changed(&cr)); /* first call with a certificate */
        cr = creds(c, 0, false);
        assert_false(changed(&cr));
        kube_config_free(c);
        free(crt);
        free(key);

        us = test_asprintf("    client-certificate-data: %s\n"
                           "    client-key-data: %s\n"
                           "    client-certificate: /nonexistent/client.crt\n",
                           crt64, key64);
        path = test_kubeconfig_write(f->dir, "config", SERVER, us);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.client_cert_pem, CERT_PEM);
        assert_int_equal(cr.client_cert_pem_len, strlen(CERT_PEM));
        assert_string_equal(cr.client_key_pem, KEY_PEM);
        assert_int_equal(cr.client_key_pem_len, strlen(KEY_PEM));
        assert_true(changed(&cr));
        kube_config_free(c);
        free(us);
        free(path);
        free(crt64);
        free(key64);
}

/* A credential file that cannot be used fails at the start (credentials_new), with a
 * message naming the file, never its contents. */
static void test_file_errors(void **state) {
        static const struct {
                const char *user; /* %1$s: the folder */
                const char *file, *data;
                int r;
                const char *msg;
        } cases[] = {
                { "    tokenFile: tok\n", NULL, NULL, -ENOENT,
                  "%1$s/tok: cannot read tokenFile: No such file or directory" },
                { "    tokenFile: tok\n", "tok", " \n\t\n", -EINVAL, "%1$s/tok: tokenFile is empty" },
                { "    tokenFile: tok\n", "tok", "secret-a\nsecret-b\n", -EINVAL,
                  "%1$s/tok: tokenFile contains control characters" },
                { "    tokenFile: tok\n", "tok/x", "t", -EISDIR,
                  "%1$s/tok: cannot read tokenFile: Is a directory" },
                { "    client-certificate: " FIXDIR "/pki/client.crt\n    client-key: nokey\n", NULL, NULL,
                  -ENOENT, "%1$s/nokey: cannot read client-key: No such file or directory" },
                { "    client-certificate: crt\n    client-key: " FIXDIR "/pki/client.key\n", "crt",
                  "not a certificate\n", -EINVAL, "%1$s/crt: client-certificate: no PEM block in the file" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct fx *f = *state;
                struct kube_config *c;
                char *dir = test_asprintf("%s/case-%zu", f->dir, i), *path, *msg, *user;

                assert_int_equal(mkdir(dir, 0700), 0);

                user = test_subst_dir(cases[i].user, dir);
                path = test_kubeconfig_write(dir, "config", SERVER, user);
                if (cases[i].file)
                        free(test_write_file(dir, cases[i].file, cases[i].data));
                c = test_kubeconfig_load(path); /* the config itself is fine */
                msg = test_subst_dir(cases[i].msg, dir);
                expect_creds_error(c, 0, false, cases[i].r, msg);
                if (cases[i].data)
                        assert_null(strstr(msg, "secret"));
                kube_config_free(c);
                free(msg);
                free(path);
                free(user);
                free(dir);
        }
}

static void test_token_file_rotation(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        struct timespec ts[2] = { { 1000, 0 }, { 1000, 0 } };
        char *path, *tok, *tmp;

        tok = test_write_file(f->dir, "secrets/token", "first-token\n");
        path = test_kubeconfig_write(f->dir, "config", SERVER,
                                     "    token: ignored-static-token\n"
                                     "    tokenFile: secrets/token\n");
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "first-token");

        /* rewritten in place, same length; a distinct mtime tells it apart */
        free(test_write_file(f->dir, "secrets/token", "secnd-token\n"));
        assert_int_equal(utimensat(AT_FDCWD, tok, ts, 0), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "secnd-token");

        /* replaced by rename (how the kubelet swaps projected tokens) */
        tmp = test_write_file(f->dir, "secrets/token.new", "third-token-longer");
        assert_int_equal(rename(tmp, tok), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "third-token-longer");

        /* caught empty mid-rewrite, or gone: the previous token stays */
        free(test_write_file(f->dir, "secrets/token", ""));
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "third-token-longer");
        assert_int_equal(unlink(tok), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "third-token-longer");
        /* a 401 while the file is gone: read again, nothing newer, so no resend */
        expect_creds_error(c, 0, true, -EACCES, "their files have not changed");

        free(test_write_file(f->dir, "secrets/token", "  fourth-token  \n"));
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "fourth-token");
        assert_false(changed(&cr));

        kube_config_free(c);
        free(path);
        free(tok);
        free(tmp);
}

static void test_exec_token_cache(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        struct kube_credentials cr;
        char *user, *path, *extra;

        /* 2030-01-01T00:00:00.5Z written with an offset */
        extra = test_asprintf("      env:\n"
                              "      - name: PLUGIN_COUNTER\n"
                              "        value: %s/counter\n"
                              "      - name: PLUGIN_EXPIRY\n"
                              "        value: \"2030-01-01T01:00:00.5+01:00\"\n",
                              f->dir);
        user = exec_user("token", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        assert_non_null(c->auth.exec);
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

        extra = test_asprintf("      env: [{name: PLUGIN_COUNTER, value: \"%s/counter\"}]\n", f->dir);
        user = exec_user("token", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
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

        extra = test_asprintf("      env: [{name: PLUGIN_COUNTER, value: \"%s/counter\"}]\n", f->dir);

        /* the same certificate on every run: changed only on the first call */
        user = exec_user("cert", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        assert_null(c->auth.client_cert_pem);
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
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_true(changed(&cr));
        test_assert_contains(cr.client_cert_pem, "\nCERT3\n");
        cr = creds(c, 0, false);
        assert_false(changed(&cr));
        cr = creds(c, 0, true);
        assert_true(changed(&cr));
        test_assert_contains(cr.client_cert_pem, "\nCERT4\n");
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
        char *user, *path, *extra, *cl, *ca = test_base64(CA_PEM), *info_path, *info;
        cJSON *j, *cluster;

        info_path = test_asprintf("%s/exec-info.json", f->dir);
        cl = test_asprintf(SERVER "    certificate-authority-data: %s\n"
                                  "    tls-server-name: api.internal\n"
                                  "    extensions:\n"
                                  "    - name: client.authentication.k8s.io/exec\n"
                                  "      extension:\n"
                                  "        audience: drainer\n"
                                  "        retries: 3\n"
                                  "        verbose: true\n",
                           ca);
        extra = test_asprintf("      provideClusterInfo: true\n"
                              "      env:\n"
                              "      - name: PLUGIN_INFO_OUT\n"
                              "        value: %s\n"
                              "      - name: KUBERNETES_EXEC_INFO\n"
                              "        value: overridden-by-drainer\n",
                              info_path);
        user = exec_user("token", extra);
        path = test_kubeconfig_write(f->dir, "config", cl, user);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "token-0");

        info = test_read_file(info_path);
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
        extra = test_asprintf("      env:\n"
                              "      - {name: PLUGIN_INFO_OUT, value: \"%s\"}\n"
                              "      - {name: PLUGIN_API, value: client.authentication.k8s.io/v1beta1}\n",
                              info_path);
        user = test_asprintf("    exec:\n"
                             "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                             "      command: /bin/sh\n"
                             "      args: [%s, token]\n"
                             "%s",
                             PLUGIN, extra);
        path = test_kubeconfig_write(f->dir, "config", cl, user);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "token-0");
        info = test_read_file(info_path);
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

        script = test_write_file(f->dir, "bin/plugin",
                                 "#!/bin/sh\n"
                                 "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                                 "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"relative-ok\"}}'\n");
        assert_int_equal(chmod(script, 0755), 0);
        path = test_kubeconfig_write(f->dir, "config", SERVER,
                                     "    exec:\n"
                                     "      apiVersion: client.authentication.k8s.io/v1\n"
                                     "      command: ./bin/plugin\n"
                                     "      env: null\n");
        c = test_kubeconfig_load(path);
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
        extra = test_asprintf("      env: [{name: PLUGIN_COUNTER, value: \"%s/counter\"}]\n", f->dir);
        user = exec_user("token", extra);
        free(extra);
        extra = test_asprintf("    token: the-static-one\n%s", user);
        path = test_kubeconfig_write(f->dir, "config", SERVER, extra);
        c = test_kubeconfig_load(path);
        assert_null(c->auth.exec);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "the-static-one");
        expect_creds_error(c, 0, true, -EACCES, "they are static"); /* a 401 runs no plugin either */
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

                path = test_kubeconfig_write(f->dir, "config", SERVER, user);
                c = test_kubeconfig_load(path);
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
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
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

        flag = test_asprintf("%s/fail-now", f->dir);
        extra = test_asprintf("      env:\n"
                              "      - {name: PLUGIN_COUNTER, value: \"%s/counter\"}\n"
                              "      - {name: PLUGIN_FAIL_IF, value: \"%s\"}\n",
                              f->dir, flag);
        user = exec_user("token", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "token-1");

        free(test_write_file(f->dir, "fail-now", ""));
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
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
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

        free(test_write_file(f->dir, "tls.crt",
                             "-----BEGIN CERTIFICATE-----\nCERT-A\n-----END CERTIFICATE-----\n"));
        free(test_write_file(f->dir, "tls.key",
                             "-----BEGIN PRIVATE KEY-----\nKEY-A\n-----END PRIVATE KEY-----\n"));
        user = test_asprintf("    client-certificate: %s/tls.crt\n    client-key: %s/tls.key\n", f->dir,
                             f->dir);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        test_assert_contains(cr.client_cert_pem, "CERT-A");
        test_assert_contains(cr.client_key_pem, "KEY-A");
        gen = cr.generation;
        assert_true(credentials_may_refresh(T.cr, gen)); /* files may have rotated */
        cr = creds(c, 0, false);
        assert_int_equal(cr.generation, gen); /* unchanged files: nothing read */

        /* cert-manager writes both (new inode, other size) */
        unlink(path_in(f->dir, "tls.crt"));
        unlink(path_in(f->dir, "tls.key"));
        free(test_write_file(f->dir, "tls.crt",
                             "-----BEGIN CERTIFICATE-----\nCERT-BB\n-----END CERTIFICATE-----\n"));
        free(test_write_file(f->dir, "tls.key",
                             "-----BEGIN PRIVATE KEY-----\nKEY-BB\n-----END PRIVATE KEY-----\n"));
        cr = creds(c, 0, false);
        test_assert_contains(cr.client_cert_pem, "CERT-BB");
        test_assert_contains(cr.client_key_pem, "KEY-BB");
        assert_true(cr.generation > gen);
        gen = cr.generation;

        /* caught mid-rewrite: the key file holds no PEM yet; the pair stays */
        unlink(path_in(f->dir, "tls.key"));
        free(test_write_file(f->dir, "tls.key", ""));
        cr = creds(c, 0, false);
        test_assert_contains(cr.client_cert_pem, "CERT-BB");
        test_assert_contains(cr.client_key_pem, "KEY-BB");
        assert_int_equal(cr.generation, gen);
        kube_config_free(c);
        free(user);
        free(path);

        /* as data: nothing to re-read */
        {
                char *crt = test_base64(CERT_PEM), *key = test_base64(KEY_PEM);

                user = test_asprintf("    client-certificate-data: %s\n    client-key-data: %s\n", crt, key);
                free(crt);
                free(key);
        }
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_false(credentials_may_refresh(T.cr, cr.generation));
        kube_config_free(c);
        free(user);
        free(path);
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

        extra = test_asprintf("      env:\n"
                              "      - {name: PLUGIN_COUNTER, value: \"%s/counter\"}\n"
                              "      - {name: PLUGIN_SLEEP, value: \"0.5\"}\n",
                              f->dir);
        user = exec_user("slow", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        assert_int_equal(credentials_new(&T.loop, &T.ts.base, c, NULL, &T.cr, NULL), 0);
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
        stat = test_read_file(p);
        /* a zombie waiting for its reaper (reparented) is gone too */
        gone = strstr(stat, ") Z ") != NULL;
        free(stat);
        return gone;
}

static pid_t read_pid(const char *path) {
        char *t = test_read_file(path);
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

        pidfile = test_asprintf("%s/child.pid", f->dir);
        extra = test_asprintf("      env: [{name: PLUGIN_CHILD_PID, value: \"%s\"}]\n", pidfile);
        user = exec_user("hang-with-child", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
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

        pidfile = test_asprintf("%s/child.pid", f->dir);
        extra = test_asprintf("      env: [{name: PLUGIN_CHILD_PID, value: \"%s\"}]\n", pidfile);
        user = exec_user("hang-with-child", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        assert_int_equal(credentials_new(&T.loop, &T.ts.base, c, NULL, &T.cr, NULL), 0);
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

        out = test_asprintf("%s/env.out", f->dir);
        extra = test_asprintf("      env:\n"
                              "      - {name: PLUGIN_ENV_OUT, value: \"%s\"}\n"
                              "      - {name: OVERRIDE, value: new}\n",
                              out);
        user = exec_user("env", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        T.environ = env;
        (void)creds(c, 0, false);
        got = test_read_file(out);
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
        out = test_asprintf("%s/fds.out", f->dir);
        extra = test_asprintf("      env: [{name: PLUGIN_FDS_OUT, value: \"%s\"}]\n", out);
        user = exec_user("fds", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
        (void)creds(c, 0, false);
        got = test_read_file(out);
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

        extra = test_asprintf("      env:\n"
                              "      - {name: PLUGIN_COUNTER, value: \"%s/counter\"}\n"
                              "      - {name: PLUGIN_EXPIRY, value: \"2020-01-01T00:00:00Z\"}\n",
                              f->dir);
        user = exec_user("token", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
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

        extra = test_asprintf("      env: [{name: PLUGIN_COUNTER, value: \"%s/counter\"}]\n", f->dir);
        user = exec_user("token", extra);
        path = test_kubeconfig_write(f->dir, "config", SERVER, user);
        c = test_kubeconfig_load(path);
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
        test_assert_contains(err, "401");
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

/* A token in the kubeconfig, a token file, a client key file, and a token, certificate
 * and key from an exec plugin: once the config and the credentials are freed, none of
 * them is left anywhere in the heap (the files and their YAML, the plugin's output and
 * its JSON, the cached answer). glibc reuses the first 16 bytes of a freed chunk, so the
 * probe is the tail of each secret. A control shows that the scan finds a secret freed
 * unwiped (meson's MALLOC_PERTURB_ would otherwise hide it: off for this test). */
static void test_secrets_wiped(void **state) {
        struct fx *f = *state;
        char secret[49], *yaml, *path, *user;
        struct kube_config *c;
        struct kube_credentials cr;

        if (TEST_UNDER_ASAN) {
                /* ASan's allocator quarantines and poisons freed memory and maps its shadow
                 * among the anonymous mappings: a scan is meaningless there. */
                print_message("under AddressSanitizer: skipped\n");
                skip();
        }
        test_random_secret(secret, sizeof(secret));

        /* the control */
        {
                char *copy = strdup(secret);

                assert_non_null(copy);
                free(copy);
                assert_true(test_memory_holds(secret + 24, 24, secret, sizeof(secret)));
                /* a fresh allocation of the same size takes the chunk over; wipe it */
                copy = malloc(sizeof(secret));
                assert_non_null(copy);
                explicit_bzero(copy, sizeof(secret));
                free(copy);
        }

        /* a static token */
        user = test_asprintf("    token: %s\n", secret);
        yaml = test_kubeconfig_yaml(SERVER, user);
        path = test_write_file(f->dir, "secret-static", yaml);
        explicit_bzero(yaml, strlen(yaml));
        free(yaml);
        explicit_bzero(user, strlen(user));
        free(user);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_int_equal(strlen(cr.token), 48);
        kube_config_free(c);
        assert_false(test_memory_holds(secret + 24, 24, secret, sizeof(secret)));
        unlink(path);
        free(path);

        /* a token file and a key file */
        free(test_write_file(f->dir, "secret-token", secret));
        {
                char *key = test_asprintf("-----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY-----\n",
                                          secret);

                free(test_write_file(f->dir, "secret.key", key));
                explicit_bzero(key, strlen(key));
                free(key);
        }
        path = test_kubeconfig_write(f->dir, "secret-files", SERVER,
                                     "    tokenFile: secret-token\n"
                                     "    client-certificate: " FIXDIR "/pki/client.crt\n"
                                     "    client-key: secret.key\n");
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_int_equal(strlen(cr.token), 48);
        assert_non_null(strstr(cr.client_key_pem, secret + 24));
        kube_config_free(c);
        assert_false(test_memory_holds(secret + 24, 24, secret, sizeof(secret)));
        free(path);

        /* an exec plugin's token, certificate and key */
        user = test_asprintf("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                             "      command: /bin/sh\n      args: [\"%s\", secret]\n"
                             "      env: [{name: PLUGIN_SECRET, value: \"%s\"}]\n",
                             PLUGIN, secret);
        yaml = test_kubeconfig_yaml(SERVER, user);
        path = test_write_file(f->dir, "secret-exec", yaml);
        explicit_bzero(yaml, strlen(yaml));
        free(yaml);
        explicit_bzero(user, strlen(user));
        free(user);
        c = test_kubeconfig_load(path);
        cr = creds(c, 0, false);
        assert_int_equal(strlen(cr.token), 48);
        assert_non_null(strstr(cr.client_key_pem, secret + 24));
        kube_config_free(c);
        assert_false(test_memory_holds(secret + 24, 24, secret, sizeof(secret)));
        unlink(path);
        free(path);
        explicit_bzero(secret, sizeof(secret));
}

static void test_exec_not_found(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *path;

        path = test_kubeconfig_write(f->dir, "config", SERVER,
                                     "    exec:\n"
                                     "      apiVersion: client.authentication.k8s.io/v1\n"
                                     "      command: drainer-no-such-plugin-xyz\n");
        c = test_kubeconfig_load(path);
        expect_creds_error(
                c, 0, false, -ENOENT,
                "exec plugin \"drainer-no-such-plugin-xyz\" failed: executable not found in $PATH");
        kube_config_free(c);
        free(path);

        path = test_kubeconfig_write(f->dir, "config", SERVER,
                                     "    exec:\n"
                                     "      apiVersion: client.authentication.k8s.io/v1\n"
                                     "      command: bin/missing-plugin\n");
        c = test_kubeconfig_load(path);
        expect_creds_error(c, 0, false, -ENOENT,
                           "exec plugin \"bin/missing-plugin\" failed: No such file or directory");
        kube_config_free(c);
        free(path);

        /* not executable */
        free(test_write_file(f->dir, "bin/plain-file", "#!/bin/sh\n"));
        path = test_kubeconfig_write(f->dir, "config", SERVER,
                                     "    exec:\n"
                                     "      apiVersion: client.authentication.k8s.io/v1\n"
                                     "      command: bin/plain-file\n");
        c = test_kubeconfig_load(path);
        expect_creds_error(c, 0, false, -EACCES, "exec plugin \"bin/plain-file\" failed: Permission denied");
        kube_config_free(c);
        free(path);
}

/* The service account token in-cluster, re-read when the kubelet rotates it (in place, or
 * by renaming its ..data link); a missing one is an error naming it. */
static void test_in_cluster_token(void **state) {
        struct fx *f = *state;
        struct kube_config_options o = {};
        struct kube_config *c = NULL;
        struct kube_credentials cr;
        char *sa, *tok, *tmp, *err = NULL;
        struct timespec ts[2] = { { 2000, 0 }, { 2000, 0 } };

        tok = test_write_file(f->dir, "sa/token", "sa-token-1\n");
        free(test_write_file(f->dir, "sa/ca.crt", CA_PEM));
        sa = test_asprintf("%s/sa", f->dir);
        o.service_host = "10.96.0.1";
        o.service_port = "443";
        o.sa_dir = sa;
        o.home = "/nonexistent-home";
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->source, "in-cluster");
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "sa-token-1");
        assert_false(changed(&cr));
        free(test_write_file(f->dir, "sa/token", "sa-token-2\n"));
        assert_int_equal(utimensat(AT_FDCWD, tok, ts, 0), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "sa-token-2");
        tmp = test_write_file(f->dir, "sa/..data-token", "sa-token-3");
        assert_int_equal(rename(tmp, tok), 0);
        cr = creds(c, 0, false);
        assert_string_equal(cr.token, "sa-token-3");
        kube_config_free(c);
        free(tmp);

        assert_int_equal(unlink(tok), 0);
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        tmp = test_asprintf("%s/token: cannot read service account token: No such file or directory", sa);
        expect_creds_error(c, 0, false, -ENOENT, tmp);
        kube_config_free(c);
        free(tmp);
        free(sa);
        free(tok);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_static_token, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cert_files_and_data, setup, teardown),
                cmocka_unit_test_setup_teardown(test_file_errors, setup, teardown),
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
                cmocka_unit_test_setup_teardown(test_cert_file_rotation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_async, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_timeout_kills_group, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_close_kills_group, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_environment, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_fds, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_expired_answer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_refresh_limited, setup, teardown),
                cmocka_unit_test_setup_teardown(test_secrets_wiped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_not_found, setup, teardown),
                cmocka_unit_test_setup_teardown(test_in_cluster_token, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
