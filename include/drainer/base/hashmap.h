/* A string-keyed hash map (open addressing, linear probing) with a cap on
 * entries. Keys are copied; values are borrowed pointers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hashmap;

struct hashmap *hashmap_new(size_t max_entries);
/* The hash the maps of this process use for key: SipHash-1-3 under a key drawn at
 * random once per process, so that names chosen by tenants cannot be made to
 * collide ahead of time. Tests use it to build collisions. */
uint64_t hashmap_hash(const char *key);
/* Frees the map; calls free_value on each value when not NULL. NULL ok. */
void hashmap_free(struct hashmap *m, void (*free_value)(void *value));

/* Inserts or replaces. When replacing, *ret_old (if given) gets the previous value,
 * else NULL. -ENOMEM, or -ENOSPC when the cap is reached. */
int hashmap_put(struct hashmap *m, const char *key, void *value, void **ret_old);
void *hashmap_get(const struct hashmap *m, const char *key);
/* Removes and returns the value, or NULL. */
void *hashmap_remove(struct hashmap *m, const char *key);
size_t hashmap_size(const struct hashmap *m);

/* Iteration: start with *i = 0; returns false at the end. The map must not
 * change during an iteration (collect keys first to remove several). */
bool hashmap_iterate(const struct hashmap *m, size_t *i, const char **ret_key, void **ret_value);
