/* Client configuration as kubectl reads it: --kubeconfig, $KUBECONFIG (several
 * files merged the clientcmd way), ~/.kube/config, or the in-cluster service
 * account; and the credentials for each request (static, token files that
 * rotate, exec credential plugins cached until they expire). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/macro.h"

#define KUBE_CONFIG_SA_DIR            "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBE_CONFIG_EXEC_TIMEOUT_USEC (30ULL * 1000000ULL)
#define KUBE_CONFIG_EXEC_OUTPUT_MAX   (1024U * 1024U)

/* Everything kube_config_load() looks at, so it never reads the environment itself. */
struct kube_config_options {
        const char *kubeconfig;     /* --kubeconfig, or NULL */
        const char *context;        /* --context, or NULL */
        const char *kubeconfig_env; /* value of $KUBECONFIG, or NULL */
        const char *home;           /* $HOME for ~/.kube/config, or NULL */
        const char *service_host;   /* $KUBERNETES_SERVICE_HOST, or NULL */
        const char *service_port;   /* $KUBERNETES_SERVICE_PORT, or NULL */
        const char *sa_dir;         /* service-account dir, NULL = KUBE_CONFIG_SA_DIR */
};

struct kube_config_private;

/* Public fields, all owned. PEM blobs are NUL-terminated; the _len excludes the NUL. */
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

/* Caps how long one exec plugin run may take (default KUBE_CONFIG_EXEC_TIMEOUT_USEC);
 * the plugin is killed when it runs longer. */
void kube_config_set_exec_timeout(struct kube_config *c, uint64_t timeout_usec);

/* True when credentials come from an exec plugin (a 401 is worth one force_refresh). */
bool kube_config_uses_exec(const struct kube_config *c);
/* True when the server is plain http:// and a bearer token (static, tokenFile or from
 * an exec plugin) would be sent to it: readable by anyone on the path. */
bool kube_config_token_in_clear(const struct kube_config *c);

/* Borrowed from the config: valid until the next kube_config_credentials() call or
 * kube_config_free(). */
struct kube_credentials {
        const char *token;           /* bearer token or NULL */
        const char *client_cert_pem; /* from the exec plugin or static, or NULL */
        size_t client_cert_pem_len;
        const char *client_key_pem;
        size_t client_key_pem_len;
        bool changed; /* cert/key differ from the previous call (on the first call: a cert is
                       * present); the transport must be recreated */
};

/* now_usec: wall clock (Unix epoch, µs), compared with the exec credential's
 * expirationTimestamp. Re-reads tokenFile / the in-cluster token when the file changed
 * (inode, size or mtime; the service-account token rotates); a token file that cannot be
 * read or is empty keeps the previous token. Runs the exec plugin when there is no cached
 * ExecCredential, it expired, or force_refresh (the caller got a 401). Blocks while the
 * plugin runs (at most the exec timeout). On failure returns negative errno and sets
 * *ret_error (malloc'd one-line message, NULL if out of memory); the cache is unchanged. */
int kube_config_credentials(struct kube_config *c, int64_t now_usec, bool force_refresh,
                            struct kube_credentials *ret, char **ret_error);
