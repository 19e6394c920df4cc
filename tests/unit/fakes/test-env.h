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
 * 0600; returns the malloc'd path. */
char *test_write_file(const char *dir, const char *name, const char *data);

/* ---- secrets ---- */

/* Whether the process's writable memory (the heap and anonymous mappings; not the
 * stack, not files) holds needle anywhere outside [skip, skip + skip_len). Meaningless
 * under AddressSanitizer (its quarantine keeps freed memory): see TEST_SKIP_UNDER_ASAN. */
bool test_memory_holds(const char *needle, size_t n, const void *skip, size_t skip_len);

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
