/* String-keyed open-addressing hash map with backward-shift deletion (no
 * tombstones), FNV-1a hashing and a hard cap on entries. Owns its key copies
 * and slot array, never the values. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/hashmap.h"

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

static uint32_t hash_string(const char *s) {
        uint32_t h = 2166136261u;

        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 16777619u;
        }
        return h;
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
