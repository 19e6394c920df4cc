/* Client configuration as kubectl reads it: --kubeconfig, $KUBECONFIG (several
 * files merged the clientcmd way), ~/.kube/config, or the in-cluster service
 * account; loaded, merged and validated. How the user authenticates is described
 * here (struct kube_auth: a token, a token file, client certificate and key as data
 * or files, an exec plugin); reading and refreshing the credentials themselves is
 * credentials.h's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"

#define KUBE_CONFIG_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

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

/* Where the credentials come from, as validated syntax: nothing here has been read from
 * a file (credentials_new() reads them, and reports a file it cannot read). At most one
 * of token and token_file; client certificate and key both or neither, each as data or
 * as a file; exec only when there is neither a token nor a certificate (client-go skips
 * the plugin then). All owned; token, key data and exec wiped when freed. */
struct kube_auth {
        char *token;                /* static bearer token, or NULL */
        char *token_file;           /* absolute path: tokenFile, or the service account's token */
        const char *token_file_key; /* "tokenFile" or "service account token", for messages */
        char *client_cert_pem;      /* client-certificate-data, decoded (PEM checked), or NULL */
        size_t client_cert_pem_len;
        char *client_key_pem; /* client-key-data, likewise */
        size_t client_key_pem_len;
        char *client_cert_file; /* absolute path of client-certificate, or NULL */
        char *client_key_file;  /* absolute path of client-key, or NULL */
        struct kube_exec *exec; /* or NULL */
};

/* Public fields, all owned. PEM blobs are NUL-terminated; the _len excludes the NUL. */
struct kube_config {
        char *server; /* e.g. https://127.0.0.1:6443, no trailing slash */
        char *ca_pem; /* NULL = system CAs */
        size_t ca_pem_len;
        char *tls_server_name; /* or NULL */
        bool insecure_skip_tls_verify;
        char *namespace;    /* context namespace or in-cluster namespace file; "default" if none */
        char *source;       /* for messages: the file path(s) joined by ':', or "in-cluster" */
        char *context_name; /* NULL in-cluster */
        struct kube_auth auth;
};

/* Loads the configuration with kubectl's precedence: opts->kubeconfig (exactly that
 * file; missing is an error) > opts->kubeconfig_env (':'-separated; missing files are
 * skipped; for named clusters/users/contexts the first file that defines a name wins,
 * current-context comes from the first file that sets it) > HOME/.kube/config >
 * in-cluster (only when no kubeconfig defines anything and service_host/port are set).
 * The certificate authority file is read here; credential files are not (see
 * struct kube_auth).
 * On failure returns negative errno and sets *ret_error to a malloc'd one-line message
 * naming the file and key (NULL if out of memory); it never contains secrets. */
int kube_config_load(const struct kube_config_options *opts, struct kube_config **ret, char **ret_error);

struct kube_config *kube_config_free(struct kube_config *c); /* NULL ok; returns NULL */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct kube_config *, kube_config_free);

/* True when the server is plain http:// and a bearer token (static, tokenFile or from
 * an exec plugin) would be sent to it: readable by anyone on the path. */
bool kube_config_token_in_clear(const struct kube_config *c);

/* Checks shared with credentials.h: a token fit for an HTTP header (no control
 * characters, not empty), and PEM data. */
bool kube_token_is_valid(const char *t);
bool kube_pem_has_block(const char *data, size_t n);
