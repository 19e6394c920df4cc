/* hashmap: put/get/replace/remove, backward-shift deletion under collisions,
 * the entry cap, iteration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "drainer/base/hashmap.h"

/* The map's own hash, to build keys that collide on purpose. */
static uint32_t map_hash(const char *s) {
        return (uint32_t)hashmap_hash(s);
}

static void test_put_get_replace_remove(void **state) {
        struct hashmap *m = hashmap_new(0);
        int a = 1, b = 2, c = 3;
        void *old = (void *)1;

        assert_non_null(m);
        assert_null(hashmap_get(m, "x"));
        assert_null(hashmap_remove(m, "x"));
        assert_int_equal(hashmap_put(m, "default/pod-a", &a, &old), 0);
        assert_null(old);
        assert_int_equal(hashmap_put(m, "default/pod-b", &b, NULL), 0);
        assert_ptr_equal(hashmap_get(m, "default/pod-a"), &a);
        assert_ptr_equal(hashmap_get(m, "default/pod-b"), &b);
        assert_int_equal(hashmap_size(m), 2);

        assert_int_equal(hashmap_put(m, "default/pod-a", &c, &old), 0);
        assert_ptr_equal(old, &a);
        assert_ptr_equal(hashmap_get(m, "default/pod-a"), &c);
        assert_int_equal(hashmap_size(m), 2);

        assert_ptr_equal(hashmap_remove(m, "default/pod-a"), &c);
        assert_null(hashmap_get(m, "default/pod-a"));
        assert_null(hashmap_remove(m, "default/pod-a"));
        assert_int_equal(hashmap_size(m), 1);
        hashmap_free(m, NULL);

        /* NULL-tolerant readers. */
        assert_null(hashmap_get(NULL, "x"));
        assert_int_equal(hashmap_size(NULL), 0);
        hashmap_free(NULL, NULL);
}

/* Keys whose home slot (hash mod 16, the first table size) is the same. */
static void colliding_keys(uint32_t home, char keys[][32], size_t n) {
        size_t found = 0;

        for (unsigned i = 0; found < n; i++) {
                char k[32];

                snprintf(k, sizeof(k), "ns/pod-%u", i);
                if ((map_hash(k) & 15) == home)
                        strcpy(keys[found++], k);
        }
}

/* Each process hashes under a key of its own: the same name lands elsewhere in
 * another drainer, so nobody can compute colliding names ahead of time. */
static uint64_t hash_in_child(const char *key) {
        int fd[2];
        uint64_t h = 0;
        pid_t pid;

        assert_int_equal(pipe(fd), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                h = hashmap_hash(key);
                _exit(write(fd[1], &h, sizeof(h)) == sizeof(h) ? 0 : 1);
        }
        close(fd[1]);
        assert_int_equal(read(fd[0], &h, sizeof(h)), sizeof(h));
        close(fd[0]);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        return h;
}

static void test_seeded_per_process(void **state) {
        uint64_t a = hash_in_child("default/pod-a"), b = hash_in_child("default/pod-a");

        assert_true(a != b);
        assert_true(hashmap_hash("default/pod-a") == hashmap_hash("default/pod-a"));
        assert_true(hashmap_hash("default/pod-a") != hashmap_hash("default/pod-b"));
}

static void test_backward_shift(void **state) {
        char keys[6][32], other[2][32];
        struct hashmap *m = hashmap_new(0);
        intptr_t v;

        /* Five keys in one probe run starting at slot 14 (wrapping around the end of
         * the 16-slot table), plus keys homed at 15 and 0 in between. */
        colliding_keys(14, keys, 6);
        colliding_keys(15, other, 1);
        colliding_keys(0, other + 1, 1);
        for (v = 0; v < 5; v++)
                assert_int_equal(hashmap_put(m, keys[v], (void *)(v + 1), NULL), 0);
        assert_int_equal(hashmap_put(m, other[0], (void *)100, NULL), 0);
        assert_int_equal(hashmap_put(m, other[1], (void *)200, NULL), 0);
        assert_int_equal(hashmap_size(m), 7);

        /* Removing from the head, the middle and the wrapped part must keep every
         * other key reachable (no tombstones: entries are shifted back). */
        assert_ptr_equal(hashmap_remove(m, keys[0]), (void *)1);
        for (v = 1; v < 5; v++)
                assert_ptr_equal(hashmap_get(m, keys[v]), (void *)(v + 1));
        assert_ptr_equal(hashmap_get(m, other[0]), (void *)100);
        assert_ptr_equal(hashmap_get(m, other[1]), (void *)200);

        assert_ptr_equal(hashmap_remove(m, keys[2]), (void *)3);
        assert_ptr_equal(hashmap_remove(m, other[0]), (void *)100);
        assert_ptr_equal(hashmap_get(m, keys[1]), (void *)2);
        assert_ptr_equal(hashmap_get(m, keys[3]), (void *)4);
        assert_ptr_equal(hashmap_get(m, keys[4]), (void *)5);
        assert_ptr_equal(hashmap_get(m, other[1]), (void *)200);
        assert_null(hashmap_get(m, keys[0]));
        assert_null(hashmap_get(m, keys[2]));
        assert_null(hashmap_get(m, keys[5])); /* never inserted, same home */

        /* Reinsert and remove everything. */
        assert_int_equal(hashmap_put(m, keys[5], (void *)6, NULL), 0);
        assert_ptr_equal(hashmap_get(m, keys[5]), (void *)6);
        assert_ptr_equal(hashmap_remove(m, keys[1]), (void *)2);
        assert_ptr_equal(hashmap_remove(m, keys[3]), (void *)4);
        assert_ptr_equal(hashmap_remove(m, other[1]), (void *)200);
        assert_ptr_equal(hashmap_get(m, keys[4]), (void *)5);
        assert_ptr_equal(hashmap_get(m, keys[5]), (void *)6);
        assert_ptr_equal(hashmap_remove(m, keys[4]), (void *)5);
        assert_ptr_equal(hashmap_remove(m, keys[5]), (void *)6);
        assert_int_equal(hashmap_size(m), 0);
        hashmap_free(m, NULL);
}

/* Random operations checked against a plain array, across several resizes. */
static void test_against_model(void **state) {
        enum { N = 600 };
        struct hashmap *m = hashmap_new(0);
        intptr_t model[N] = {};
        unsigned seed = 42;
        size_t live = 0;

        for (int op = 0; op < 20000; op++) {
                int k = rand_r(&seed) % N;
                char key[32];

                snprintf(key, sizeof(key), "k%d", k);
                if (rand_r(&seed) % 3) {
                        void *old = NULL;

                        assert_int_equal(hashmap_put(m, key, (void *)(intptr_t)(op + 1), &old), 0);
                        assert_ptr_equal(old, (void *)model[k]);
                        live += model[k] == 0;
                        model[k] = op + 1;
                } else {
                        assert_ptr_equal(hashmap_remove(m, key), (void *)model[k]);
                        live -= model[k] != 0;
                        model[k] = 0;
                }
                assert_int_equal(hashmap_size(m), live);
        }
        for (int k = 0; k < N; k++) {
                char key[32];

                snprintf(key, sizeof(key), "k%d", k);
                assert_ptr_equal(hashmap_get(m, key), (void *)model[k]);
        }
        hashmap_free(m, NULL);
}

static void test_cap(void **state) {
        struct hashmap *m = hashmap_new(3);

        assert_int_equal(hashmap_put(m, "a", (void *)1, NULL), 0);
        assert_int_equal(hashmap_put(m, "b", (void *)2, NULL), 0);
        assert_int_equal(hashmap_put(m, "c", (void *)3, NULL), 0);
        assert_int_equal(hashmap_put(m, "d", (void *)4, NULL), -ENOSPC);
        assert_null(hashmap_get(m, "d"));
        /* Replacing at the cap is fine; removing makes room. */
        assert_int_equal(hashmap_put(m, "c", (void *)33, NULL), 0);
        assert_ptr_equal(hashmap_remove(m, "a"), (void *)1);
        assert_int_equal(hashmap_put(m, "d", (void *)4, NULL), 0);
        assert_int_equal(hashmap_size(m), 3);
        hashmap_free(m, NULL);
}

static void test_iterate_and_free_values(void **state) {
        struct hashmap *m = hashmap_new(0);
        bool seen[50] = {};
        const char *key;
        void *value;
        size_t i = 0, n = 0;

        for (int k = 0; k < 50; k++) {
                char name[16];
                int *v = malloc(sizeof(int));

                *v = k;
                snprintf(name, sizeof(name), "n%d", k);
                assert_int_equal(hashmap_put(m, name, v, NULL), 0);
        }
        while (hashmap_iterate(m, &i, &key, &value)) {
                int k = *(int *)value;
                char name[16];

                snprintf(name, sizeof(name), "n%d", k);
                assert_string_equal(key, name);
                assert_false(seen[k]);
                seen[k] = true;
                n++;
        }
        assert_int_equal(n, 50);
        assert_false(hashmap_iterate(m, &i, &key, &value)); /* stays at the end */
        i = 0;
        assert_false(hashmap_iterate(NULL, &i, &key, &value));
        hashmap_free(m, free); /* valgrind checks that every value was freed */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                /* first: no hash yet in this process, so each child draws its own key */
                cmocka_unit_test(test_seeded_per_process),
                cmocka_unit_test(test_put_get_replace_remove),
                cmocka_unit_test(test_backward_shift),
                cmocka_unit_test(test_against_model),
                cmocka_unit_test(test_cap),
                cmocka_unit_test(test_iterate_and_free_values),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
