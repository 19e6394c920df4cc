/* Fuzzes the kubeconfig loader (kubeconfig.h). The input is written to a
 * kubeconfig file in a private temporary directory (which also holds the PEM
 * and token files the seeds refer to, relative to it, and a service-account
 * directory for the in-cluster fallback) and loaded with kube_config_load();
 * some inputs are loaded through $KUBECONFIG merged with a second, fixed file.
 *
 * A config that loads and names no exec plugin then goes through credentials_new()
 * (credentials.h), which reads the token, certificate and key files it names, and
 * credentials_get().
 *
 * Nothing may ever run a command. kube_config_load() only parses exec: it
 * stores the plugin's argv and runs nothing, and a config with an exec plugin
 * never reaches credentials_new() here. To hold that even if the code regressed,
 * this file interposes every
 * libc entry point that starts a program (posix_spawn[p], the exec family,
 * fork, vfork, system, popen): while the target runs they abort with a
 * finding instead; outside it (libFuzzer's -fork/-jobs modes) they pass through.
 * A seccomp filter would also stop ASan's symbolizer and libFuzzer's own modes,
 * and a PATH without the command would not stop "command: /bin/sh" or a
 * relative path, which the loader resolves against the kubeconfig's directory.
 *
 * Files the input names are read for real, so open() is confined the same way
 * while the target runs: files under the temporary directory, and other
 * regular files outside /proc, /sys and /dev (a FIFO or a device would block or
 * stream without end). Secrets: the error message of a failed load must never
 * contain the token or key the input or the fixture files hold. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "drainer/base/timesrc.h"
#include "drainer/kube/credentials.h"
#include "drainer/kube/kubeconfig.h"
#include "fuzz-common.h"

#define SECRET_TOKEN_FILE "fuzz-secret-token-file-7c1e93d0a5"
#define SECRET_SA_TOKEN   "fuzz-secret-sa-token-51be04c2f6"
#define SECRET_KEY_BODY   "RlVaWlNFQ1JFVEtFWUJPRFk5MTcz"

static char tmpdir[PATH_MAX];
static char config_path[PATH_MAX + 16];
static char second_path[PATH_MAX + 16];
static char sa_dir[PATH_MAX + 16];
static volatile int in_target;
static uv_loop_t loop;
static struct timesrc *ts;
static bool try_exec;

/* ---- no command may run ---- */

static void refuse(const char *what, const char *path) {
        fprintf(stderr, "\n==FUZZ== the kubeconfig loader tried to run a command: %s(\"%s\")\n", what,
                path ? path : "");
        abort();
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
        if (in_target)
                refuse("posix_spawn", path);
        return NEXT(posix_spawn)(pid, path, fa, attr, argv, envp);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
        if (in_target)
                refuse("posix_spawnp", file);
        return NEXT(posix_spawnp)(pid, file, fa, attr, argv, envp);
}

int execve(const char *path, char *const argv[], char *const envp[]) {
        if (in_target)
                refuse("execve", path);
        return NEXT(execve)(path, argv, envp);
}

int execv(const char *path, char *const argv[]) {
        if (in_target)
                refuse("execv", path);
        return NEXT(execv)(path, argv);
}

int execvp(const char *file, char *const argv[]) {
        if (in_target)
                refuse("execvp", file);
        return NEXT(execvp)(file, argv);
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
        if (in_target)
                refuse("execvpe", file);
        return NEXT(execvpe)(file, argv, envp);
}

int fexecve(int fd, char *const argv[], char *const envp[]) {
        if (in_target)
                refuse("fexecve", NULL);
        return NEXT(fexecve)(fd, argv, envp);
}

/* execl, execlp, execle: variadic, never used by drainer; refused always while
 * the target runs, else rebuilt as execv/execvp/execve. */
#define MAX_L_ARGS 256
static int collect_args(const char *arg0, va_list ap, char **argv, char ***envp) {
        int n = 0;

        argv[n++] = (char *)arg0;
        while (arg0 && n < MAX_L_ARGS - 1 && (argv[n] = va_arg(ap, char *)))
                n++;
        argv[n] = NULL;
        if (envp)
                *envp = va_arg(ap, char **);
        return n;
}

int execl(const char *path, const char *arg, ...) {
        char *argv[MAX_L_ARGS];
        va_list ap;

        if (in_target)
                refuse("execl", path);
        va_start(ap, arg);
        collect_args(arg, ap, argv, NULL);
        va_end(ap);
        return execv(path, argv);
}

int execlp(const char *file, const char *arg, ...) {
        char *argv[MAX_L_ARGS];
        va_list ap;

        if (in_target)
                refuse("execlp", file);
        va_start(ap, arg);
        collect_args(arg, ap, argv, NULL);
        va_end(ap);
        return execvp(file, argv);
}

int execle(const char *path, const char *arg, ...) {
        char *argv[MAX_L_ARGS], **envp;
        va_list ap;

        if (in_target)
                refuse("execle", path);
        va_start(ap, arg);
        collect_args(arg, ap, argv, &envp);
        va_end(ap);
        return execve(path, argv, envp);
}

pid_t fork(void) {
        if (in_target)
                refuse("fork", NULL);
        return NEXT(fork)();
}

pid_t vfork(void) {
        if (in_target)
                refuse("vfork", NULL);
        return NEXT(fork)(); /* vfork cannot be wrapped; fork is a correct substitute */
}

int system(const char *command) {
        if (in_target)
                refuse("system", command);
        return NEXT(system)(command);
}

FILE *popen(const char *command, const char *type) {
        if (in_target)
                refuse("popen", command);
        return NEXT(popen)(command, type);
}

/* ---- reads stay harmless ---- */

static bool path_allowed(const char *path) {
        char real[PATH_MAX];
        struct stat st;
        size_t n = strlen(tmpdir);

        if (!realpath(path, real))
                return true; /* does not exist: open fails by itself */
        if (strncmp(real, tmpdir, n) == 0 && (real[n] == '/' || real[n] == 0))
                return true;
        if (strncmp(real, "/proc/", 6) == 0 || strncmp(real, "/sys/", 5) == 0 ||
            strncmp(real, "/dev/", 5) == 0)
                return false;
        return stat(real, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
}

static int open_mode(int flags, va_list ap) {
        return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
        va_list ap;
        int mode;

        va_start(ap, flags);
        mode = open_mode(flags, ap);
        va_end(ap);
        if (in_target && !path_allowed(path)) {
                errno = EACCES;
                return -1;
        }
        return NEXT(open)(path, flags, mode);
}

int open64(const char *path, int flags, ...) {
        va_list ap;
        int mode;

        va_start(ap, flags);
        mode = open_mode(flags, ap);
        va_end(ap);
        if (in_target && !path_allowed(path)) {
                errno = EACCES;
                return -1;
        }
        return NEXT(open64)(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
        va_list ap;
        int mode;

        va_start(ap, flags);
        mode = open_mode(flags, ap);
        va_end(ap);
        if (in_target && (path[0] != '/' || !path_allowed(path))) {
                errno = EACCES;
                return -1;
        }
        return NEXT(openat)(dirfd, path, flags, mode);
}

/* ---- fixture files ---- */

static void write_fixture(const char *name, const char *content) {
        char path[PATH_MAX + 64];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        f = fopen(path, "we");
        if (!f || fputs(content, f) < 0 || fclose(f) != 0) {
                fprintf(stderr, "fuzz-kubeconfig: cannot write %s\n", path);
                exit(1);
        }
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        remove(path);
        return 0;
}

static void remove_tmpdir(void) {
        nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A run that crashed (abort skips atexit) left its directory behind: removes those of
 * processes that are gone. */
static void remove_stale_tmpdirs(void) {
        DIR *d = opendir("/tmp");
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                char path[PATH_MAX];
                long pid;

                if (sscanf(de->d_name, "fuzz-kubeconfig-%ld-", &pid) != 1 || pid <= 0 ||
                    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                        continue;
                snprintf(path, sizeof(path), "/tmp/%s", de->d_name);
                nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        }
        closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char tmpl[64];

        fuzz_setup_logging();
        remove_stale_tmpdirs();
        snprintf(tmpl, sizeof(tmpl), "/tmp/fuzz-kubeconfig-%ld-XXXXXX", (long)getpid());
        if (!mkdtemp(tmpl) || !realpath(tmpl, tmpdir)) {
                perror("fuzz-kubeconfig: mkdtemp");
                exit(1);
        }
        atexit(remove_tmpdir);
        if (uv_loop_init(&loop) < 0 || timesrc_uv_new(&loop, &ts) < 0) {
                fprintf(stderr, "fuzz-kubeconfig: cannot set up the loop\n");
                exit(1);
        }
        snprintf(config_path, sizeof(config_path), "%s/config", tmpdir);
        snprintf(second_path, sizeof(second_path), "%s/second.yaml", tmpdir);
        snprintf(sa_dir, sizeof(sa_dir), "%s/sa", tmpdir);
        mkdir(sa_dir, 0700);
        {
                char pki[PATH_MAX + 16];

                snprintf(pki, sizeof(pki), "%s/pki", tmpdir);
                mkdir(pki, 0700);
        }
        write_fixture("pki/ca.crt", "-----BEGIN CERTIFICATE-----\nRlVaWkNB\n-----END CERTIFICATE-----\n");
        write_fixture("pki/client.crt",
                      "-----BEGIN CERTIFICATE-----\nRlVaWkNMSUVOVA==\n-----END CERTIFICATE-----\n");
        write_fixture("pki/client.key",
                      "-----BEGIN PRIVATE KEY-----\n" SECRET_KEY_BODY "\n-----END PRIVATE KEY-----\n");
        write_fixture("token", SECRET_TOKEN_FILE "\n");
        write_fixture("sa/token", SECRET_SA_TOKEN);
        write_fixture("sa/ca.crt", "-----BEGIN CERTIFICATE-----\nU0FDQQ==\n-----END CERTIFICATE-----\n");
        write_fixture("sa/namespace", "fuzz-ns\n");
        write_fixture("second.yaml", "apiVersion: v1\n"
                                     "kind: Config\n"
                                     "clusters:\n"
                                     "- name: second\n"
                                     "  cluster:\n"
                                     "    server: https://127.0.0.1:7443\n"
                                     "    certificate-authority: pki/ca.crt\n"
                                     "users:\n"
                                     "- name: second\n"
                                     "  user:\n"
                                     "    tokenFile: token\n"
                                     "contexts:\n"
                                     "- name: second\n"
                                     "  context: {cluster: second, user: second, namespace: two}\n"
                                     "current-context: second\n");
        try_exec = getenv("FUZZ_KUBECONFIG_TRY_EXEC");
        /* Even if something ran a command by name, there is nothing to find. */
        setenv("PATH", tmpdir, 1);
        unsetenv("KUBECONFIG");
        return 0;
}

/* ---- secrets ---- */

static size_t count_occurrences(const char *hay, size_t n, const char *needle, size_t k) {
        size_t c = 0;

        for (const char *p = hay; (p = memmem(p, n - (size_t)(p - hay), needle, k)); p++)
                c++;
        return c;
}

/* Whether VALUE is part of a word the messages write themselves: the kubeconfig's own
 * key names and the flags they suggest. A "token" of "rrent-context" is found in "no
 * current-context in FILE" without any credential reaching the message. */
static bool in_vocabulary(const char *value, size_t n) {
        static const char *const words[] = {
                "current-context",          "certificate-authority-data",
                "client-certificate-data",  "client-key-data",
                "insecure-skip-tls-verify", "tls-server-name",
                "impersonate-groups",       "impersonate-user-extra",
                "disable-compression",      "provideClusterInfo",
                "interactiveMode",          "set current-context or use --context",
        };

        for (size_t i = 0; i < ELEMENTSOF(words); i++)
                if (memmem(words[i], strlen(words[i]), value, n))
                        return true;
        return false;
}

/* Values of "KEY: VALUE" / "KEY": "VALUE" in the input that are secrets, long and
 * unique enough that finding them in a message cannot be a coincidence. */
static void check_no_secret_in(const char *msg, const char *input, size_t size) {
        static const char *const keys[] = { "token", "client-key-data", "password" };

        if (!msg)
                return;
        /* (unless the input itself holds the text, e.g. as a context name) */
        {
                static const char *const file_secrets[] = { SECRET_TOKEN_FILE, SECRET_SA_TOKEN,
                                                            SECRET_KEY_BODY };

                for (size_t k = 0; k < ELEMENTSOF(file_secrets); k++)
                        fuzz_check(!strstr(msg, file_secrets[k]) ||
                                           memmem(input, size, file_secrets[k], strlen(file_secrets[k])),
                                   "a secret from a file reached the message: %s", msg);
        }
        for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                size_t kl = strlen(keys[k]);

                for (const char *p = input; (p = memmem(p, size - (size_t)(p - input), keys[k], kl)); p++) {
                        const char *v = p + kl, *end = input + size, *e;

                        /* only where it is a mapping key: "token:" or "\"token\":" after a separator */
                        if (p > input && !strchr(" \t\n{,\"", p[-1]))
                                continue;
                        if (v < end && *v == '"')
                                v++;
                        if (v >= end || *v != ':')
                                continue;
                        while (v < end && (*v == '"' || *v == ':' || *v == ' '))
                                v++;
                        for (e = v; e < end && *e != '"' && *e != '\n' && *e != '\r' && *e != ',' &&
                                    *e != '}' && *e != ' ' && *e != 0;
                             e++)
                                ;
                        if (e - v < 12 || count_occurrences(input, size, v, (size_t)(e - v)) != 1 ||
                            in_vocabulary(v, (size_t)(e - v)))
                                continue;
                        /* A message that quotes "KEY: VALUE" itself echoes source text the parser
                         * read as something else (a name an unclosed quote ran on into), not
                         * the credential it parsed. */
                        if (memmem(msg, strlen(msg), p, (size_t)(v - p)))
                                continue;
                        fuzz_check(!memmem(msg, strlen(msg), v, (size_t)(e - v)),
                                   "the value of %s reached the message: %s", keys[k], msg);
                }
        }
}

static void check_pem(const char *pem, size_t len, const char *what) {
        if (!pem) {
                fuzz_check(len == 0, "%s: NULL with length %zu", what, len);
                return;
        }
        fuzz_check(pem[len] == 0, "%s is not NUL-terminated at its length", what);
}

static void on_closed(void *userdata) {
        *(bool *)userdata = true;
}

/* The credentials of a config without an exec plugin: read from its files now. */
static void check_credentials(struct kube_config *c, const char *input, size_t size) {
        struct credentials *creds = NULL;
        struct kube_credentials cr;
        char *cerr = NULL;
        bool closed = false;
        int r;

        r = credentials_new(&loop, ts, c, NULL, &creds, &cerr);
        if (r < 0) {
                fuzz_check(!creds, "credentials_new failed (%d) but returned credentials", r);
                fuzz_check(cerr || r == -ENOMEM, "credentials_new failed (%d) without a message", r);
                check_no_secret_in(cerr, input, size);
                fuzz_check(fuzz_one_line(cerr), "error message is not one line: %s", cerr);
                free(cerr);
                return;
        }
        r = credentials_get(creds, 0, &cr, &cerr);
        fuzz_check(r == 0 || r == -ENOMEM, "static credentials failed: %d", r);
        if (r == 0) {
                if (cr.token)
                        fuzz_check(*cr.token && !strpbrk(cr.token, "\r\n"),
                                   "token empty or with a line break");
                check_pem(cr.client_cert_pem, cr.client_cert_pem_len, "client certificate");
                check_pem(cr.client_key_pem, cr.client_key_pem_len, "client key");
                fuzz_check(!!cr.client_cert_pem == !!cr.client_key_pem, "a client certificate without key");
        }
        free(cerr);
        credentials_close(creds, on_closed, &closed);
        while (!closed)
                if (uv_run(&loop, UV_RUN_ONCE) == 0 && !closed)
                        fuzz_check(false, "credentials never closed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct kube_config_options opts = {
                .kubeconfig = config_path,
                .home = tmpdir,
                .service_host = "10.96.0.1",
                .service_port = "443",
                .sa_dir = sa_dir,
        };
        uint64_t h = fuzz_hash(data, size);
        struct kube_config *c = NULL;
        char *err = NULL, *input, env[2 * PATH_MAX + 64];
        FILE *f;
        int r;

        f = fopen(config_path, "we");
        if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
                abort();
        input = fuzz_strndup(data, size);

        switch (try_exec ? 7 : h % 8) {
        case 0: /* $KUBECONFIG: this file first, a missing one, then a fixed second file */
                snprintf(env, sizeof(env), "%s:%s/missing:%s", config_path, tmpdir, second_path);
                opts.kubeconfig = NULL;
                opts.kubeconfig_env = env;
                break;
        case 1: /* $KUBECONFIG: the fixed file first */
                snprintf(env, sizeof(env), "%s:%s", second_path, config_path);
                opts.kubeconfig = NULL;
                opts.kubeconfig_env = env;
                break;
        case 2:
                opts.context = "second";
                break;
        default:
                break;
        }

        in_target = 1;
        r = kube_config_load(&opts, &c, &err);
        if (r < 0) {
                fuzz_check(!c, "kube_config_load failed (%d) but returned a config", r);
                fuzz_check(err || r == -ENOMEM, "kube_config_load failed (%d) without a message", r);
                check_no_secret_in(err, input, size);
                fuzz_check(fuzz_one_line(err), "error message is not one line: %s", err);
        } else {
                fuzz_check(c && c->server && c->namespace && c->source,
                           "config lacks server, namespace or source");
                fuzz_check(*c->server && c->server[strlen(c->server) - 1] != '/',
                           "server \"%s\" ends in '/'", c->server);
                check_pem(c->ca_pem, c->ca_pem_len, "CA");
                check_pem(c->auth.client_cert_pem, c->auth.client_cert_pem_len, "client certificate data");
                check_pem(c->auth.client_key_pem, c->auth.client_key_pem_len, "client key data");
                fuzz_check(!!(c->auth.client_cert_pem || c->auth.client_cert_file) ==
                                   !!(c->auth.client_key_pem || c->auth.client_key_file),
                           "a client certificate without key");
                fuzz_check(!(c->auth.token && c->auth.token_file), "both a token and a token file");
                check_no_secret_in(c->source, input, size);
                check_no_secret_in(c->server, input, size);
                if (!c->auth.exec)
                        check_credentials(c, input, size);
                /* FUZZ_KUBECONFIG_TRY_EXEC=1: a self-check that the guard above stops a
                 * command started from inside the target (the run must abort). */
                if (try_exec) {
                        char *argv[] = { (char *)"/bin/sh", NULL };
                        pid_t pid;

                        (void)posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ);
                }
                kube_config_free(c);
        }
        in_target = 0;

        free(err);
        free(input);
        return 0;
}
