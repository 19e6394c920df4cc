/* Unit tests for kubeconfig.c: loading precedence, merging, contexts, every auth kind as
 * the config describes it (token, tokenFile, client certificates as data or files, exec
 * plugins with their environment and cluster info), in-cluster configuration and each
 * malformed case. Reading and refreshing the credentials is test-credentials.c's. Files
 * live in a private folder under the build tree, one per test. */
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
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "drainer/base/macro.h"
#include "drainer/kube/kubeconfig.h"
#include "fakes/test-env.h"

#define FIXDIR FIXTURES "/kubeconfig"
#define PLUGIN FIXDIR "/exec-plugin.sh"

#define CA_PEM   "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n"
#define KEY_PEM  "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n"

#define SERVER_URL "https://10.0.0.1:6443"
#define SERVER     "    server: " SERVER_URL "\n"

struct fx {
        char *dir;
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        f->dir = test_private_dir("kubeconfig");
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;

        test_private_dir_remove(f->dir);
        free(f);
        return 0;
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
        test_assert_contains(err, needle);
        assert_null(strchr(err, '\n')); /* one line */
        free(err);
}

static void expect_file_error(const char *path, int r, const char *needle) {
        struct kube_config_options o = { .kubeconfig = path };

        expect_load_error(&o, r, needle);
}

/* ---- what the config says about credentials ---- */

static void test_token(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *path;

        path = test_kubeconfig_write(f->dir, "config",
                                     "    server: https://example.com:6443/\n"
                                     "    tls-server-name: api.internal\n",
                                     "    token: static-token\n");
        c = test_kubeconfig_load(path);
        assert_string_equal(c->server, "https://example.com:6443");
        assert_string_equal(c->tls_server_name, "api.internal");
        assert_null(c->ca_pem);
        assert_false(c->insecure_skip_tls_verify);
        assert_string_equal(c->namespace, "default");
        assert_string_equal(c->context_name, "ctx");
        assert_string_equal(c->source, path);
        assert_string_equal(c->auth.token, "static-token");
        assert_null(c->auth.token_file);
        assert_null(c->auth.client_cert_pem);
        assert_null(c->auth.client_cert_file);
        assert_null(c->auth.exec);
        assert_false(kube_config_token_in_clear(c));

        kube_config_free(c);
        free(path);

        /* The same token to a plain http:// server: the caller warns. */
        path = test_kubeconfig_write(f->dir, "config", "    server: http://example.com:8080\n",
                                     "    token: static-token\n");
        c = test_kubeconfig_load(path);
        assert_true(kube_config_token_in_clear(c));
        kube_config_free(c);
        free(path);
        /* No token, nothing to warn about. */
        path = test_kubeconfig_write(f->dir, "config", "    server: http://example.com:8080\n", "    {}\n");
        c = test_kubeconfig_load(path);
        assert_false(kube_config_token_in_clear(c));
        kube_config_free(c);
        free(path);
}

static void test_no_user(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *path;

        path = test_write_file(f->dir, "config",
                               "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080'}}]\n"
                               "contexts: [{name: x, context: {cluster: c, namespace: team-a}}]\n"
                               "current-context: x\n");
        c = test_kubeconfig_load(path);
        assert_string_equal(c->server, "http://127.0.0.1:8080");
        assert_string_equal(c->namespace, "team-a");
        assert_null(c->auth.token);
        assert_null(c->auth.token_file);
        assert_null(c->auth.client_cert_pem);
        assert_null(c->auth.client_cert_file);
        assert_null(c->auth.exec);
        kube_config_free(c);
        free(path);
}

static void test_json(void **state) {
        struct kube_config *c;

        (void)state;
        c = test_kubeconfig_load(FIXDIR "/config.json");
        assert_string_equal(c->server, "https://[::1]:6443");
        assert_true(c->insecure_skip_tls_verify);
        assert_string_equal(c->context_name, "json");
        assert_string_equal(c->auth.token, "json-token");
        kube_config_free(c);
}

static void test_relative_files(void **state) {
        struct kube_config *c;
        char *ca, *cwd;

        /* run from elsewhere: paths must resolve against the kubeconfig's directory */
        cwd = getcwd(NULL, 0);
        assert_int_equal(chdir(((struct fx *)*state)->dir), 0);
        c = test_kubeconfig_load(FIXDIR "/relative.yaml");
        assert_int_equal(chdir(cwd), 0);
        free(cwd);

        ca = test_read_file(FIXDIR "/pki/ca.crt");
        assert_string_equal(c->server, "https://127.0.0.1:6443");
        assert_string_equal(c->ca_pem, ca);
        assert_int_equal(c->ca_pem_len, strlen(ca));
        /* the credential files are named, not read (credentials.c reads them) */
        assert_string_equal(c->auth.client_cert_file, FIXDIR "/pki/client.crt");
        assert_string_equal(c->auth.client_key_file, FIXDIR "/./pki/client.key");
        assert_null(c->auth.client_cert_pem);
        assert_null(c->auth.client_key_pem);
        assert_null(c->auth.token);
        assert_string_equal(c->tls_server_name, "kubernetes.default");
        assert_string_equal(c->namespace, "kube-system");

        kube_config_free(c);
        free(ca);
}

static void test_cert_data(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *ca = test_base64(CA_PEM), *crt = test_base64(CERT_PEM), *key = test_base64(KEY_PEM);
        char *cl, *us, *path;

        /* data wins over the file (which does not even exist); base64 may be wrapped */
        cl = test_asprintf(SERVER "    certificate-authority: /nonexistent/ca.crt\n"
                                  "    certificate-authority-data: |\n      %.8s\n      %s\n",
                           ca, ca + 8);
        us = test_asprintf("    client-certificate-data: %s\n"
                           "    client-key-data: %s\n"
                           "    client-certificate: /nonexistent/client.crt\n",
                           crt, key);
        path = test_kubeconfig_write(f->dir, "config", cl, us);
        c = test_kubeconfig_load(path);
        assert_string_equal(c->ca_pem, CA_PEM);
        assert_int_equal(c->ca_pem_len, strlen(CA_PEM));
        assert_string_equal(c->auth.client_cert_pem, CERT_PEM);
        assert_int_equal(c->auth.client_cert_pem_len, strlen(CERT_PEM));
        assert_string_equal(c->auth.client_key_pem, KEY_PEM);
        assert_int_equal(c->auth.client_key_pem_len, strlen(KEY_PEM));
        assert_null(c->auth.client_cert_file);
        assert_null(c->auth.client_key_file);
        kube_config_free(c);

        free(ca);
        free(crt);
        free(key);
        free(cl);
        free(us);
        free(path);
}

/* What the user's credentials are, as validated syntax: files named (resolved against the
 * kubeconfig's folder) but not read, so a missing one is not a load error; tokenFile
 * supersedes token; an exec plugin parsed (argv, env, KUBERNETES_EXEC_INFO) but skipped
 * when there is a token, a token file or a certificate (as client-go). */
static void test_auth_sources(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *path, *want, *key = test_base64(KEY_PEM);
        const struct kube_exec *e;
        cJSON *info;

        path = test_kubeconfig_write(f->dir, "config", SERVER,
                                     "    token: static\n"
                                     "    tokenFile: secrets/missing-token\n");
        c = test_kubeconfig_load(path);
        assert_null(c->auth.token);
        want = test_asprintf("%s/secrets/missing-token", f->dir);
        assert_string_equal(c->auth.token_file, want);
        assert_string_equal(c->auth.token_file_key, "tokenFile");
        free(want);
        kube_config_free(c);
        free(path);

        /* a certificate file with key data; neither read */
        want = test_asprintf("    client-certificate: pki/missing.crt\n    client-key-data: %s\n", key);
        path = test_kubeconfig_write(f->dir, "config", SERVER, want);
        free(want);
        c = test_kubeconfig_load(path);
        want = test_asprintf("%s/pki/missing.crt", f->dir);
        assert_string_equal(c->auth.client_cert_file, want);
        free(want);
        assert_null(c->auth.client_cert_pem);
        assert_string_equal(c->auth.client_key_pem, KEY_PEM);
        assert_null(c->auth.client_key_file);
        kube_config_free(c);
        free(path);

        /* an exec plugin, parsed: nothing runs at load */
        path = test_kubeconfig_write(f->dir, "config", SERVER,
                                     "    exec:\n"
                                     "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                                     "      command: ./bin/plugin\n"
                                     "      args: [--audience, drainer]\n"
                                     "      env: [{name: A, value: one}, {name: B, value: ''}]\n"
                                     "      provideClusterInfo: true\n");
        c = test_kubeconfig_load(path);
        e = c->auth.exec;
        assert_non_null(e);
        assert_string_equal(e->name, "./bin/plugin");
        assert_string_equal(e->api_version, "client.authentication.k8s.io/v1beta1");
        want = test_asprintf("%s/./bin/plugin", f->dir);
        assert_string_equal(e->argv[0], want);
        free(want);
        assert_string_equal(e->argv[1], "--audience");
        assert_string_equal(e->argv[2], "drainer");
        assert_null(e->argv[3]);
        assert_int_equal(e->n_env, 2);
        assert_string_equal(e->env[0], "A=one");
        assert_string_equal(e->env[1], "B=");
        assert_null(e->env[2]);
        assert_true(e->provide_cluster_info);
        info = cJSON_Parse(e->info_json);
        assert_non_null(info);
        assert_string_equal(cJSON_GetObjectItem(info, "kind")->valuestring, "ExecCredential");
        assert_string_equal(
                cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(info, "spec"), "cluster"),
                                    "server")
                        ->valuestring,
                SERVER_URL);
        cJSON_Delete(info);
        assert_null(c->auth.token);
        assert_true(kube_config_token_in_clear(c) == false);
        kube_config_free(c);
        free(path);

        /* skipped next to a token file or a certificate */
        path = test_kubeconfig_write(
                f->dir, "config", SERVER,
                "    tokenFile: tok\n"
                "    exec: {apiVersion: client.authentication.k8s.io/v1, command: x}\n");
        c = test_kubeconfig_load(path);
        assert_null(c->auth.exec);
        kube_config_free(c);
        free(path);
        want = test_asprintf("    client-certificate: a.crt\n    client-key: a.key\n"
                             "    exec: {apiVersion: client.authentication.k8s.io/v1, command: x}\n");
        path = test_kubeconfig_write(f->dir, "config", SERVER, want);
        free(want);
        c = test_kubeconfig_load(path);
        assert_null(c->auth.exec);
        kube_config_free(c);
        free(path);
        free(key);
}

/* A kubeconfig given as data: nothing written anywhere, relative paths against data_dir,
 * messages naming "kubeconfig data". */
static void test_from_memory(void **state) {
        struct fx *f = *state;
        struct kube_config *c = NULL;
        char *y, *err = NULL, *want;
        struct kube_config_options o = { .data_dir = f->dir };

        y = test_kubeconfig_yaml(SERVER, "    tokenFile: tok\n");
        o.data = y;
        o.data_len = strlen(y);
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->source, "kubeconfig data");
        assert_string_equal(c->server, SERVER_URL);
        want = test_asprintf("%s/tok", f->dir);
        assert_string_equal(c->auth.token_file, want);
        free(want);
        kube_config_free(c);
        free(y);

        o.data = "clusters: [";
        o.data_len = strlen(o.data);
        expect_load_error(&o, -EINVAL, "kubeconfig data: invalid YAML");
        /* the data wins over every file */
        o.kubeconfig = "/nonexistent";
        o.data = "clusters: [{name: c, cluster: {server: https://x}}]\ncontexts: [{name: x, context: "
                 "{cluster: c}}]\ncurrent-context: x\n";
        o.data_len = strlen(o.data);
        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        assert_string_equal(c->server, "https://x");
        kube_config_free(c);
}

/* ---- merging, precedence, contexts ---- */

static void write_merge_files(const char *dir, char **a, char **b, char **cc) {
        *a = test_write_file(dir, "a.yaml",
                             "clusters:\n"
                             "- name: shared\n"
                             "  cluster: {server: https://a.example:6443}\n"
                             "users:\n"
                             "- name: shared-user\n"
                             "  user: {token: token-from-a}\n"
                             "contexts:\n"
                             "- name: ctx-b\n"
                             "  context: {cluster: only-b, user: shared-user, namespace: from-a}\n");
        *b = test_write_file(dir, "b.yaml",
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
        *cc = test_write_file(dir, "c.yaml",
                              "contexts:\n"
                              "- name: ctx-c\n"
                              "  context: {cluster: shared}\n"
                              "current-context: ctx-c\n");
}

static void test_merge(void **state) {
        struct fx *f = *state;
        struct kube_config_options o = {};
        struct kube_config *c = NULL;
        char *a, *b, *cc, *env, *missing, *want, *err = NULL;

        write_merge_files(f->dir, &a, &b, &cc);
        missing = test_asprintf("%s/missing.yaml", f->dir);
        env = test_asprintf("%s::%s:%s:%s:%s", a, missing, b, a, cc); /* empty, missing, duplicate entries */
        o.kubeconfig_env = env;
        o.home = "/nonexistent-home";

        assert_int_equal(kube_config_load(&o, &c, &err), 0);
        /* current-context from the first file that sets it (b), the context named ctx-b
         * from the first file that defines it (a): cluster only-b, namespace from-a */
        assert_string_equal(c->context_name, "ctx-b");
        assert_string_equal(c->server, "https://only-b.example");
        assert_string_equal(c->namespace, "from-a");
        assert_string_equal(c->auth.token, "token-from-a");
        want = test_asprintf("%s:%s:%s", a, b, cc);
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
        assert_null(c->auth.token);
        kube_config_free(c);

        o.context = "nope";
        want = test_asprintf("context \"nope\" not found in %s:%s:%s", a, b, cc);
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
        home_cfg = test_kubeconfig_write(f->dir, "home/.kube/config", "    server: https://home.example\n",
                                         "    token: t\n");
        missing = test_asprintf("%s/missing.yaml", f->dir);
        home = test_asprintf("%s/home", f->dir);
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
        char *sa, *tok, *ca, *ns, *tmp, *empty, *err = NULL;

        tok = test_asprintf("%s/sa/token", f->dir); /* named, not read: credentials.c reads it */
        ca = test_write_file(f->dir, "sa/ca.crt", CA_PEM);
        ns = test_write_file(f->dir, "sa/namespace", "drainer-system\n");
        sa = test_asprintf("%s/sa", f->dir);
        empty = test_write_file(f->dir, "empty.yaml", "# nothing here\n");

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
        assert_string_equal(c->auth.token_file, tok);
        assert_string_equal(c->auth.token_file_key, "service account token");
        assert_null(c->auth.token);
        assert_null(c->auth.client_cert_pem);
        assert_null(c->auth.exec);
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
        tmp = test_asprintf("%s/ca.crt: cannot read certificate-authority: No such file or directory", sa);
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
                { "cert-without-key",
                  "clusters: [{name: c, cluster: {server: https://x}}]\n"
                  "users: [{name: u, user: {client-certificate-data: "
                  "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
                  "}}]\n",
                  -EINVAL, "users[u]: client-certificate without client-key" },
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

                yaml = test_asprintf("%s%s%s", cases[i].yaml, tail ? ctx_tail : "",
                                     !tail && strstr(cases[i].yaml, "contexts:") ? "current-context: ctx\n"
                                                                                 : "");
                path = test_write_file(f->dir, "config", yaml);
                msg = test_subst_dir(cases[i].msg, f->dir);
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

        path = test_write_file(
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
        path = test_write_file(f->dir, "config",
                               "clusters: [{name: c, cluster: {server: https://x}}]\n"
                               "users: [{name: u, user: {token: \"supersecret\\nX-Evil: 1\"}}]\n"
                               "contexts: [{name: ctx, context: {cluster: c, user: u}}]\n"
                               "current-context: ctx\n");
        r = kube_config_load(&(struct kube_config_options){ .kubeconfig = path }, &c, &err);
        assert_int_equal(r, -EINVAL);
        test_assert_contains(err, "users[u].token: contains control characters");
        assert_null(strstr(err, "supersecret"));
        free(err);
        free(path);
}

static void test_unknown_keys_and_nulls(void **state) {
        struct fx *f = *state;
        struct kube_config *c;
        char *path;

        path = test_write_file(f->dir, "config",
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
        c = test_kubeconfig_load(path);
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
                cmocka_unit_test_setup_teardown(test_auth_sources, setup, teardown),
                cmocka_unit_test_setup_teardown(test_from_memory, setup, teardown),
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
