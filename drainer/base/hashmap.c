/* String-keyed open-addressing hash map with backward-shift deletion (no
 * tombstones), SipHash-1-3 under a key drawn once per process, and a hard cap on
 * entries. Owns its key copies and slot array, never the values. Keys are names
 * tenants choose (pods, claims): an unkeyed hash would let them pick names that
 * all land in one probe run. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "drainer/base/hashmap.h"

struct slot {
        char *key; /* NULL = empty */
        void *value;
        uint32_t hash;
};

struct hashmap {
        struct slot *slots;
        size_t n_slots; /* power of two, or 0 */
        size_t n_entries;
        size_t max_entries;
};

/* SipHash-1-3 (Aumasson and Bernstein; the variant Redis and Python use for
 * their tables): one compression round per word, three at the end. */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND(v0, v1, v2, v3)                                          \
        do {                                                              \
                v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32); \
                v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                    \
                v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                    \
                v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32); \
        } while (0)

static uint64_t siphash13(const uint8_t key[16], const uint8_t *in, size_t len) {
        uint64_t k0, k1, m, b = (uint64_t)len << 56;
        uint64_t v0 = 0x736f6d6570736575ull, v1 = 0x646f72616e646f6dull;
        uint64_t v2 = 0x6c7967656e657261ull, v3 = 0x7465646279746573ull;
        size_t i, tail = len & 7;

        memcpy(&k0, key, 8);
        memcpy(&k1, key + 8, 8);
        v0 ^= k0, v1 ^= k1, v2 ^= k0, v3 ^= k1;
        for (i = 0; i + 8 <= len; i += 8) {
                m = 0;
                for (int j = 7; j >= 0; j--) /* little-endian, whatever the host */
                        m = m << 8 | in[i + j];
                v3 ^= m;
                SIPROUND(v0, v1, v2, v3);
                v0 ^= m;
        }
        for (size_t j = tail; j > 0; j--)
                b |= (uint64_t)in[i + j - 1] << (8 * (j - 1));
        v3 ^= b;
        SIPROUND(v0, v1, v2, v3);
        v0 ^= b;
        v2 ^= 0xff;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        return v0 ^ v1 ^ v2 ^ v3;
}

/* The process's key, drawn at the first hash. getrandom() without GRND_NONBLOCK
 * blocks only before the kernel's pool is initialised; should it fail anyway
 * (an old kernel, a seccomp filter), the pid and the addresses ASLR placed
 * still differ per process. */
static uint8_t hash_key[16];
static bool hash_key_set;

static void hash_key_init(void) {
        size_t got = 0;

        while (got < sizeof(hash_key)) {
                ssize_t n = getrandom(hash_key + got, sizeof(hash_key) - got, 0);

                if (n <= 0) {
                        if (n < 0 && errno == EINTR)
                                continue;
                        break;
                }
                got += (size_t)n;
        }
        if (got < sizeof(hash_key)) {
                uint64_t a = (uint64_t)(uintptr_t)&got * 0x9e3779b97f4a7c15ull ^
                             (uint64_t)(uintptr_t)hash_key,
                         b = (uint64_t)getpid() * 0xbf58476d1ce4e5b9ull ^
                             (uint64_t)(uintptr_t)&hash_key_init;
                memcpy(hash_key, &a, 8);
                memcpy(hash_key + 8, &b, 8);
        }
        hash_key_set = true;
}

uint64_t hashmap_hash(const char *key) {
        if (!hash_key_set)
                hash_key_init();
        return siphash13(hash_key, (const uint8_t *)key, strlen(key));
}

static uint32_t hash_string(const char *s) {
        return (uint32_t)hashmap_hash(s);
}

struct hashmap *hashmap_new(size_t max_entries) {
        struct hashmap *m = calloc(1, sizeof(*m));

        if (m)
                m->max_entries = max_entries ? max_entries : SIZE_MAX;
        return m;
}

void hashmap_free(struct hashmap *m, void (*free_value)(void *value)) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n_slots; i++)
                if (m->slots[i].key) {
                        free(m->slots[i].key);
                        if (free_value)
                                free_value(m->slots[i].value);
                }
        free(m->slots);
        free(m);
}

static size_t find(const struct hashmap *m, const char *key, uint32_t h, bool *found) {
        size_t mask = m->n_slots - 1, i = h & mask;

        for (;; i = (i + 1) & mask) {
                struct slot *s = &m->slots[i];

                if (!s->key) {
                        *found = false;
                        return i;
                }
                if (s->hash == h && strcmp(s->key, key) == 0) {
                        *found = true;
                        return i;
                }
        }
}

static int grow(struct hashmap *m) {
        size_t n = m->n_slots ? m->n_slots * 2 : 16;
        struct slot *slots = calloc(n, sizeof(*slots)), *old = m->slots;
        size_t old_n = m->n_slots;

        if (!slots)
                return -ENOMEM;
        m->slots = slots;
        m->n_slots = n;
        for (size_t i = 0; i < old_n; i++)
                if (old[i].key) {
                        bool found;
                        size_t j = find(m, old[i].key, old[i].hash, &found);

                        m->slots[j] = old[i];
                }
        free(old);
        return 0;
}

int hashmap_put(struct hashmap *m, const char *key, void *value, void **ret_old) {
        uint32_t h = hash_string(key);
        bool found = false;
        size_t i;
        int r;

        if (m->n_slots > 0) {
                i = find(m, key, h, &found);
                if (found) {
                        if (ret_old)
                                *ret_old = m->slots[i].value;
                        m->slots[i].value = value;
                        return 0;
                }
        }
        if (m->n_entries >= m->max_entries)
                return -ENOSPC;
        /* Keep the load factor under 3/4. */
        if ((m->n_entries + 1) * 4 > m->n_slots * 3) {
                r = grow(m);
                if (r < 0)
                        return r;
        }
        i = find(m, key, h, &found);
        m->slots[i].key = strdup(key);
        if (!m->slots[i].key)
                return -ENOMEM;
        m->slots[i].value = value;
        m->slots[i].hash = h;
        m->n_entries++;
        if (ret_old)
                *ret_old = NULL;
        return 0;
}

void *hashmap_get(const struct hashmap *m, const char *key) {
        bool found;
        size_t i;

        if (!m || m->n_entries == 0)
                return NULL;
        i = find(m, key, hash_string(key), &found);
        return found ? m->slots[i].value : NULL;
}

void *hashmap_remove(struct hashmap *m, const char *key) {
        size_t mask, i, j;
        bool found;
        void *value;

        if (!m || m->n_entries == 0)
                return NULL;
        mask = m->n_slots - 1;
        i = find(m, key, hash_string(key), &found);
        if (!found)
                return NULL;
        value = m->slots[i].value;
        free(m->slots[i].key);
        m->slots[i].key = NULL;
        m->n_entries--;

        /* Backward-shift the entries of the probe run that follows. */
        for (j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
                size_t home = m->slots[j].hash & mask;

                /* Move j into the hole at i unless its home lies cyclically in (i, j]. */
                if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
                        m->slots[i] = m->slots[j];
                        m->slots[j].key = NULL;
                        i = j;
                }
        }
        return value;
}

size_t hashmap_size(const struct hashmap *m) {
        return m ? m->n_entries : 0;
}

bool hashmap_iterate(const struct hashmap *m, size_t *i, const char **ret_key, void **ret_value) {
        if (!m)
                return false;
        for (; *i < m->n_slots; (*i)++)
                if (m->slots[*i].key) {
                        if (ret_key)
                                *ret_key = m->slots[*i].key;
                        if (ret_value)
                                *ret_value = m->slots[*i].value;
                        (*i)++;
                        return true;
                }
        return false;
}
