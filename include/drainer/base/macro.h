/* Small helpers shared by every module: cleanup attributes, ownership moves,
 * container_of. Header only. */
#pragma once

#include <stddef.h>
#include <stdlib.h>

#define _cleanup_(f)         __attribute__((cleanup(f)))
#define _unused_             __attribute__((unused))
#define _printf_(a, b)       __attribute__((format(printf, a, b)))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Takes the value out of a variable that has a cleanup attribute, leaving NULL. */
#define TAKE_PTR(p)                      \
        ({                               \
                __typeof__(p) _p_ = (p); \
                (p) = NULL;              \
                _p_;                     \
        })

/* <sys/param.h> (pulled in by uv.h) defines the same two. */
#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline void freep(void *p) {
        free(*(void **)p);
}

/* Defines <name>p() for use with _cleanup_, calling name(*p) when *p is not NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
        static inline void func##p(type *p) {   \
                if (*p)                         \
                        func(*p);               \
        }

static inline const char *strna(const char *s) {
        return s ? s : "n/a";
}

static inline const char *strempty(const char *s) {
        return s ? s : "";
}

static inline int streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return __builtin_strcmp(a, b) == 0;
}

#define streq(a, b) (__builtin_strcmp((a), (b)) == 0)

#define _cleanup_free_ _cleanup_(freep)

/* Index of s in a table of n names (NULL entries never match), or invalid. */
static inline int string_table_lookup(const char *const *table, int n, const char *s, int invalid) {
        if (!s)
                return invalid;
        for (int i = 0; i < n; i++)
                if (table[i] && __builtin_strcmp(table[i], s) == 0)
                        return i;
        return invalid;
}

/* Defines name_to_string()/name_from_string() over a table `name##_table` indexed by the
 * enum, as STYLE.md's enum convention asks (to_string NULL when out of range, from_string
 * the _INVALID value for NULL or an unknown name). */
#define DEFINE_STRING_TABLE_LOOKUP(name, type, max, invalid)                         \
        const char *name##_to_string(type v) {                                       \
                return (int)v >= 0 && (int)v < (max) ? name##_table[v] : NULL;       \
        }                                                                            \
        type name##_from_string(const char *s) {                                     \
                return (type)string_table_lookup(name##_table, (max), s, (invalid)); \
        }
