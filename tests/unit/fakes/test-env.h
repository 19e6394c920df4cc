/* What unit tests share besides the fakes: fixtures read from tests/unit/fixtures/,
 * a private directory under the build tree (never /tmp) for tests that need real
 * files, and a scan of the heap for secrets left in freed memory. The environment of
 * an API test (fake clock, fake transport, config from memory, credentials, client)
 * is in this header too, below. Every function fails the test (cmocka) rather than
 * returning an error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/client.h"
#include "drainer/kube/credentials.h"
#include "drainer/kube/kubeconfig.h"
#include "fakes/fake-clock.h"
#include "fakes/fake-transport.h"

/* ---- fixtures ---- */

/* The contents of tests/unit/fixtures/<rel>, NUL-terminated (malloc'd); *ret_len may be NULL. */
char *test_fixture(const char *rel, size_t *ret_len);
/* The fixture parsed as JSON (cJSON_Delete() it). */
cJSON *test_fixture_json(const char *rel);
/* The absolute path of a fixture (static storage, overwritten by the next call). */
const char *test_fixture_path(const char *rel);

/* ---- a private directory ---- */

/* Makes a fresh directory <build>/tests/unit/test-tmp/<name>-XXXXXX (malloc'd path). */
char *test_private_dir(const char *name);
/* Removes it and everything in it, and frees the path. NULL ok. Refuses (fails the test)
 * any path outside the build tree's test-tmp/. */
void test_private_dir_remove(char *dir);
/* Writes data to dir/name with write(2) (no stdio buffer left behind holding it), mode
 * 0600, making the folders name has; returns the malloc'd path. */
char *test_write_file(const char *dir, const char *name, const char *data);
/* The whole file, NUL-terminated (malloc'd). */
char *test_read_file(const char *path);

/* ---- small helpers ---- */

char *test_asprintf(const char *fmt, ...) _printf_(1, 2);
/* Standard base64 with padding (malloc'd). */
char *test_base64(const char *s);
/* tmpl with each "%1$s" replaced by dir (malloc'd): messages and YAML that name a folder. */
char *test_subst_dir(const char *tmpl, const char *dir);
/* Fails the test unless hay (may be NULL) contains needle. */
void test_assert_contains(const char *hay, const char *needle);

/* ---- kubeconfig files ---- */

/* The YAML of a kubeconfig with one cluster "c", one user "u" and their context "ctx"
 * (current): cluster and user are the lines of their mappings, indented by 4 (malloc'd). */
char *test_kubeconfig_yaml(const char *cluster, const char *user);
/* The same written to dir/name; returns the path. */
char *test_kubeconfig_write(const char *dir, const char *name, const char *cluster, const char *user);
/* Loads exactly that file (--kubeconfig); fails the test with the message if it cannot. */
struct kube_config *test_kubeconfig_load(const char *path);

/* ---- secrets ---- */

/* Whether the process's writable memory (the heap and anonymous mappings; not the
 * stack, not files) holds needle anywhere outside [skip, skip + skip_len). Meaningless
 * under AddressSanitizer (its quarantine keeps freed memory): see TEST_SKIP_UNDER_ASAN. */
bool test_memory_holds(const char *needle, size_t n, const void *skip, size_t skip_len);
/* A secret for such a scan: size - 1 random hex digits and a NUL, different each run. */
void test_random_secret(char *buf, size_t size);

#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif
#ifndef TEST_UNDER_ASAN
#define TEST_UNDER_ASAN 0
#endif

/* ---- the environment of an API test ---- */

#define TEST_API_SERVER   "https://10.0.0.1:6443"
#define TEST_API_T0       (1000 * USEC_PER_SEC)           /* the fake clock's first now() */
#define TEST_API_REALTIME (INT64_C(1750000000) * 1000000) /* its wall clock at TEST_API_T0 */

/* A fake clock at TEST_API_T0, a fake transport on it, a configuration loaded from
 * memory (no file), its credentials and an API client over the fake transport. The
 * fields are the test's to use; test_api_free() frees them. */
struct test_api {
        struct fake_clock *clock;
        struct timesrc *ts;
        struct fake_transport *ft;
        struct kube_config *cfg;
        struct credentials *creds; /* on the fake clock, without a loop: no exec plugin here */
        struct kube_client *client;
};

struct test_api_options {
        const char *server;    /* NULL: TEST_API_SERVER */
        const char *user_yaml; /* lines of the user mapping, indented by 4; NULL: a static token */
        const char *dir;       /* the base of relative paths in the kubeconfig; NULL: none */
        const struct kube_client_options *client; /* NULL: defaults, random_seed 3 */
        int64_t realtime;                         /* the wall clock at TEST_API_T0; 0: TEST_API_REALTIME */
};

/* o may be NULL. */
struct test_api *test_api_new(const struct test_api_options *o);
/* Replaces the client (no call may be in flight) and returns the new one. */
struct kube_client *test_api_client(struct test_api *a, const struct kube_client_options *o);
/* Lets time pass: answers what is due, then moves the clock by step, until usec have
 * passed, and answers what is due once more (usec 0: only that). */
void test_api_run(struct test_api *a, uint64_t usec, uint64_t step);
/* Cancels what is left, lets the cancellations arrive, and asserts that no call, no
 * transport request and no timer remains before it frees everything. NULL ok. */
void test_api_free(struct test_api *a);
