/* Client configuration as kubectl reads it: --kubeconfig, $KUBECONFIG (several
 * files merged the clientcmd way), ~/.kube/config, or the in-cluster service
 * account; and the file-based credentials for each request (static, a token file
 * and client certificate/key files that rotate). Exec credential plugins are
 * parsed here and run, on the loop, by credentials.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/macro.h"

#define KUBE_CONFIG_SA_DIR          "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBE_CONFIG_EXEC_OUTPUT_MAX (1024U * 1024U)

/* Everything kube_config_load() looks at, so it never reads the environment itself. */
struct kube_config_options {
        const char *kubeconfig;     /* --kubeconfig, or NULL */
        const char *context;        /* --context, or NULL */
        const char *kubeconfig_env; /* value of $KUBECONFIG, or NULL */
        const char *home;           /* $HOME for ~/.kube/config, or NULL */
        const char *service_host;   /* $KUBERNETES_SERVICE_HOST, or NULL */
        const char *service_port;   /* $KUBERNETES_SERVICE_PORT, or NULL */
        const char *sa_dir;         /* service-account dir, NULL = KUBE_CONFIG_SA_DIR */
        /* The kubeconfig's YAML itself instead of any file (tests, fuzzing): when set, the
         * fields above but context are not looked at. Relative paths in it are taken
         * against data_dir (NULL: the current directory); messages name it "kubeconfig data". */
        const char *data;
        size_t data_len;
        const char *data_dir;
};

struct kube_config_private;

/* An exec credential plugin as the kubeconfig gives it (client.authentication.k8s.io). */
struct kube_exec {
        char *name;        /* command as written in the kubeconfig, for messages */
        char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
        char **argv;       /* argv[0] is the command (resolved when it has a '/'); NULL-terminated */
        char **env;        /* "NAME=value" from the kubeconfig, NULL-terminated */
        size_t n_env;
        bool provide_cluster_info;
        char *info_json; /* KUBERNETES_EXEC_INFO */
};

/* Public fields, all owned. PEM blobs are NUL-terminated; the _len excludes the NUL.
 * client_cert_pem/client_key_pem are the current ones (re-read from their files by
 * kube_config_credentials()). */
struct kube_config {
        char *server; /* e.g. https://127.0.0.1:6443, no trailing slash */
        char *ca_pem; /* NULL = system CAs */
        size_t ca_pem_len;
        char *client_cert_pem; /* static client certificate, or NULL */
        size_t client_cert_pem_len;
        char *client_key_pem;
        size_t client_key_pem_len;
        char *tls_server_name; /* or NULL */
        bool insecure_skip_tls_verify;
        char *namespace;    /* context namespace or in-cluster namespace file; "default" if none */
        char *source;       /* for messages: the file path(s) joined by ':', or "in-cluster" */
        char *context_name; /* NULL in-cluster */

        struct kube_config_private *priv; /* owned: token, token file, exec plugin, caches */
};

/* Loads the configuration with kubectl's precedence: opts->kubeconfig (exactly that
 * file; missing is an error) > opts->kubeconfig_env (':'-separated; missing files are
 * skipped; for named clusters/users/contexts the first file that defines a name wins,
 * current-context comes from the first file that sets it) > HOME/.kube/config >
 * in-cluster (only when no kubeconfig defines anything and service_host/port are set).
 * Static files (CA, client certificate and key, tokenFile) are read here.
 * On failure returns negative errno and sets *ret_error to a malloc'd one-line message
 * naming the file and key (NULL if out of memory); it never contains secrets. */
int kube_config_load(const struct kube_config_options *opts, struct kube_config **ret, char **ret_error);

struct kube_config *kube_config_free(struct kube_config *c); /* NULL ok; returns NULL */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct kube_config *, kube_config_free);

/* True when credentials come from an exec plugin. */
bool kube_config_uses_exec(const struct kube_config *c);
/* The exec plugin, or NULL. */
const struct kube_exec *kube_config_exec(const struct kube_config *c);
/* True when the server is plain http:// and a bearer token (static, tokenFile or from
 * an exec plugin) would be sent to it: readable by anyone on the path. */
bool kube_config_token_in_clear(const struct kube_config *c);
/* True when the credentials can change while running (token file, certificate or key
 * files, exec plugin): a 401 is then worth a refresh. */
bool kube_config_may_change(const struct kube_config *c);

/* Checks shared with the exec plugin's ExecCredential: a token fit for an HTTP header
 * (no control characters, not empty), and PEM data. */
bool kube_token_is_valid(const char *t);
bool kube_pem_has_block(const char *data, size_t n);

/* Borrowed from the config (or the credentials module): valid until the next call that
 * may refresh them or the owner is freed. */
struct kube_credentials {
        const char *token;           /* bearer token or NULL */
        const char *client_cert_pem; /* or NULL */
        size_t client_cert_pem_len;
        const char *client_key_pem;
        size_t client_key_pem_len;
        /* > 0; grows whenever the token, certificate or key changes. A request rejected
         * with 401 names the generation it was sent with. */
        uint64_t generation;
};

/* The static and file-based credentials (not exec plugins: -EOPNOTSUPP, see
 * credentials.h). Re-reads tokenFile / the in-cluster token, and client-certificate /
 * client-key files, when they changed (inode, size or mtime; force_refresh: read them
 * anyway); a file that cannot be read, is empty or holds no PEM keeps the previous
 * value. Never blocks longer than reading small local files. On failure returns
 * negative errno and sets *ret_error (malloc'd one-line message, NULL if out of memory). */
int kube_config_credentials(struct kube_config *c, bool force_refresh, struct kube_credentials *ret,
                            char **ret_error);
