/* The held pods as lines printed once: what changed since the last progress. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/base/text.h"
#include "drainer/drain/heldlog.h"

static bool held_now(const struct engine_held *held, size_t n, const char *key) {
        for (size_t i = 0; i < n; i++) {
                size_t l = strlen(held[i].ns);

                if (strncmp(key, held[i].ns, l) == 0 && key[l] == '/' && streq(key + l + 1, held[i].name))
                        return true;
        }
        return false;
}

int held_log_update(struct held_log *l, const struct engine_held *held, size_t n, held_log_fn fn,
                    void *userdata) {
        size_t k = 0;

        /* No longer held: reported, forgotten. */
        for (size_t i = 0; i < l->n; i++) {
                char *key = l->keys[i];

                if (held_now(held, n, key)) {
                        l->keys[k++] = key;
                        continue;
                }
                char *slash = strchr(key, '/');

                if (slash) {
                        *slash = 0;
                        fn(false, key, slash + 1, NULL, userdata);
                }
                free(key);
        }
        l->n = k;
        /* Newly held: reported, remembered. */
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *key = text_printf("%s/%s", held[i].ns, held[i].name);
                int r;

                if (!key)
                        return -ENOMEM;
                r = strv_push_unique(&l->keys, &l->n, key);
                if (r < 0)
                        return r;
                if (r > 0)
                        fn(true, held[i].ns, held[i].name, held[i].reason, userdata);
        }
        return 0;
}

void held_log_clear(struct held_log *l) {
        strv_free_n(l->keys, l->n);
        l->keys = NULL;
        l->n = 0;
}
