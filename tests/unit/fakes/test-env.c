/* Shared unit-test environment (see test-env.h). Owns what it hands out until the
 * test frees it; writes files only under the build tree's test-tmp/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "drainer/base/text.h"
#include "drainer/kube/client.h"
#include "drainer/kube/credentials.h"
#include "drainer/kube/kubeconfig.h"
#include "fakes/test-env.h"

#ifndef FIXTURES
#error "FIXTURES must name tests/unit/fixtures"
#endif
#ifndef TEST_TMP
#error "TEST_TMP must name the build tree's folder for test files"
#endif

/* ---- fixtures ---- */

const char *test_fixture_path(const char *rel) {
        static char path[PATH_MAX];

        assert_true((size_t)snprintf(path, sizeof(path), "%s/%s", FIXTURES, rel) < sizeof(path));
        return path;
}

char *test_fixture(const char *rel, size_t *ret_len) {
        const char *path = test_fixture_path(rel);
        FILE *f = fopen(path, "re");
        char *data;
        long n;

        if (!f)
                fail_msg("cannot open fixture %s: %s", path, strerror(errno));
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        assert_true(n >= 0);
        rewind(f);
        data = malloc((size_t)n + 1);
        assert_non_null(data);
        assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
        data[n] = 0;
        fclose(f);
        if (ret_len)
                *ret_len = (size_t)n;
        return data;
}

cJSON *test_fixture_json(const char *rel) {
        size_t n;
        char *data = test_fixture(rel, &n);
        cJSON *j = cJSON_ParseWithLength(data, n);

        if (!j)
                fail_msg("fixture %s is not valid JSON", rel);
        free(data);
        return j;
}

/* ---- a private directory ---- */

char *test_private_dir(const char *name) {
        char *dir;

        /* The parent may be shared by tests running in parallel: EEXIST is fine. */
        if (mkdir(TEST_TMP, 0700) < 0 && errno != EEXIST)
                fail_msg("mkdir %s: %s", TEST_TMP, strerror(errno));
        assert_true(asprintf(&dir, "%s/%s-XXXXXX", TEST_TMP, name) > 0);
        if (!mkdtemp(dir))
                fail_msg("mkdtemp %s: %s", dir, strerror(errno));
        return dir;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        return remove(path);
}

void test_private_dir_remove(char *dir) {
        size_t n = strlen(TEST_TMP);

        if (!dir)
                return;
        /* Only what test_private_dir() made: nothing else is ever removed. */
        if (strncmp(dir, TEST_TMP "/", n + 1) != 0 || strstr(dir + n, "/.."))
                fail_msg("refusing to remove %s: not a test directory under %s", dir, TEST_TMP);
        assert_int_equal(nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
        free(dir);
}

char *test_write_file(const char *dir, const char *name, const char *data) {
        char *path;
        int fd;

        assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
        for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')); p++) {
                *p = 0;
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        fail_msg("mkdir %s: %s", path, strerror(errno));
                *p = '/';
        }
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                fail_msg("cannot write %s: %s", path, strerror(errno));
        assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
        close(fd);
        return path;
}

char *test_read_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *data = NULL;
        size_t n = 0;

        if (!f)
                fail_msg("cannot open %s: %s", path, strerror(errno));
        for (;;) {
                data = realloc(data, n + 4096 + 1);
                assert_non_null(data);
                size_t k = fread(data + n, 1, 4096, f);

                n += k;
                if (k < 4096)
                        break;
        }
        data[n] = 0;
        fclose(f);
        return data;
}

/* ---- small helpers ---- */

/* text_vprintf(), not vasprintf(): that one leaves the buffers it outgrew in the heap
 * unwiped, which a test of wiped secrets would take for drainer's. */
char *test_asprintf(const char *fmt, ...) {
        va_list ap;
        char *s;

        va_start(ap, fmt);
        s = text_vprintf(fmt, ap);
        va_end(ap);
        assert_non_null(s);
        return s;
}

char *test_base64(const char *s) {
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

void test_assert_contains(const char *hay, const char *needle) {
        if (!hay || !strstr(hay, needle))
                fail_msg("\"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

/* Replaces each "%1$s" in tmpl with dir. */
char *test_subst_dir(const char *tmpl, const char *dir) {
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

/* ---- kubeconfig files ---- */

char *test_kubeconfig_yaml(const char *cluster, const char *user) {
        return test_asprintf("apiVersion: v1\n"
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
}

char *test_kubeconfig_write(const char *dir, const char *name, const char *cluster, const char *user) {
        char *y = test_kubeconfig_yaml(cluster, user), *path = test_write_file(dir, name, y);

        free(y);
        return path;
}

struct kube_config *test_kubeconfig_load(const char *path) {
        struct kube_config *c = NULL;
        char *err = NULL;
        int r;

        r = kube_config_load(&(struct kube_config_options){ .kubeconfig = path }, &c, &err);
        if (r < 0)
                fail_msg("kube_config_load(%s): %d %s", path, r, err ? err : "(null)");
        assert_null(err);
        assert_non_null(c);
        return c;
}

/* ---- secrets ---- */

bool test_memory_holds(const char *needle, size_t n, const void *skip, size_t skip_len) {
        FILE *maps = fopen("/proc/self/maps", "re");
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

void test_random_secret(char *buf, size_t size) {
        unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

        assert_true(size > 0);
        for (size_t i = 0; i + 1 < size; i++)
                buf[i] = "0123456789abcdef"[rand_r(&seed) % 16];
        buf[size - 1] = 0;
}

/* ---- the environment of an API test ---- */

struct kube_client *test_api_client(struct test_api *a, const struct kube_client_options *o) {
        struct kube_client_options d = { .random_seed = 3 };

        if (a->client) {
                assert_int_equal(kube_client_calls_in_flight(a->client), 0);
                kube_client_free(a->client);
                a->client = NULL;
        }
        assert_int_equal(
                kube_client_new(fake_transport_base(a->ft), a->ts, a->cfg, a->creds, o ? o : &d, &a->client),
                0);
        return a->client;
}

struct test_api *test_api_new(const struct test_api_options *o) {
        static const struct test_api_options defaults = {};
        struct test_api *a = calloc(1, sizeof(*a));
        char *yaml = NULL, *err = NULL;
        int n;

        assert_non_null(a);
        if (!o)
                o = &defaults;
        n = asprintf(&yaml,
                     "apiVersion: v1\n"
                     "kind: Config\n"
                     "clusters:\n"
                     "- name: test\n"
                     "  cluster:\n"
                     "    server: %s\n"
                     "users:\n"
                     "- name: admin\n"
                     "  user:\n"
                     "%s"
                     "contexts:\n"
                     "- name: test\n"
                     "  context:\n"
                     "    cluster: test\n"
                     "    user: admin\n"
                     "    namespace: default\n"
                     "current-context: test\n",
                     o->server ? o->server : TEST_API_SERVER,
                     o->user_yaml ? o->user_yaml : "    token: test-token\n");
        assert_true(n > 0);
        if (kube_config_load(
                    &(struct kube_config_options){ .data = yaml, .data_len = (size_t)n, .data_dir = o->dir },
                    &a->cfg, &err) < 0)
                fail_msg("kube_config_load: %s", err ? err : "?");
        free(yaml);
        a->clock = fake_clock_new(TEST_API_T0, o->realtime ? o->realtime : TEST_API_REALTIME);
        assert_non_null(a->clock);
        a->ts = fake_clock_timesrc(a->clock);
        a->ft = fake_transport_new(a->ts);
        assert_non_null(a->ft);
        if (credentials_new(NULL, a->ts, a->cfg, NULL, &a->creds, &err) < 0)
                fail_msg("credentials_new: %s", err ? err : "?");
        test_api_client(a, o->client);
        return a;
}

static void on_creds_closed(void *userdata) {
        *(bool *)userdata = true;
}

void test_api_run(struct test_api *a, uint64_t usec, uint64_t step) {
        for (uint64_t t = 0; t <= usec; t += step) {
                fake_transport_deliver(a->ft);
                fake_clock_advance(a->clock, step);
        }
        fake_transport_deliver(a->ft);
}

void test_api_free(struct test_api *a) {
        if (!a)
                return;
        if (a->client) {
                kube_client_cancel_all(a->client);
                for (int i = 0; i < 100 && kube_client_calls_in_flight(a->client) > 0; i++) {
                        fake_transport_deliver(a->ft);
                        fake_clock_advance(a->clock, 0);
                }
                assert_int_equal(kube_client_calls_in_flight(a->client), 0);
        }
        assert_int_equal(fake_transport_in_flight(a->ft), 0);
        kube_client_free(a->client);
        if (a->creds) {
                bool closed = false;

                credentials_close(a->creds, on_creds_closed, &closed);
                for (int i = 0; i < 100 && !closed; i++)
                        fake_clock_advance(a->clock, 0);
                assert_true(closed);
        }
        fake_transport_free(a->ft);
        assert_int_equal(fake_clock_timers(a->clock), 0);
        fake_clock_free(a->clock);
        kube_config_free(a->cfg);
        free(a);
}
