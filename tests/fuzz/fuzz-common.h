/* Shared by the libFuzzer targets of tests/fuzz: quiet but complete logging
 * (debug lines are formatted, so their arguments are checked by the
 * sanitizers, then dropped), a checked assertion that reports and aborts, and
 * small input helpers. Header only; each target includes it once. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "drainer/base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static inline int fuzz_discard_journal(const struct iovec *iov, int n) {
        /* Touch every byte, so a line built from freed or unterminated memory is seen. */
        size_t sum = 0;

        for (int i = 0; i < n; i++)
                for (size_t k = 0; k < iov[i].iov_len; k++)
                        sum += ((const unsigned char *)iov[i].iov_base)[k];
        return sum == (size_t)-1 ? -1 : 0;
}

/* Debug logging on, into a sink that drops it; FUZZ_LOG=1 prints it instead. */
static inline void fuzz_setup_logging(void) {
        log_set_max_level(LOG_LEVEL_DEBUG);
        if (getenv("FUZZ_LOG"))
                return;
        log_set_journal_sink(fuzz_discard_journal);
        log_set_journal(true);
}

_printf_(3, 4) static inline void fuzz_fail(const char *file, int line, const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "\n==FUZZ== invariant broken at %s:%d: ", file, line);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        abort();
}

/* Like assert(), always on, with a message; a failure is a finding. */
#define fuzz_check(cond, ...)                                       \
        do {                                                        \
                if (!(cond))                                        \
                        fuzz_fail(__FILE__, __LINE__, __VA_ARGS__); \
        } while (0)

/* A malloc'd NUL-terminated copy of the input (exactly size + 1 bytes, so
 * reads past the end are caught). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        if (!s)
                abort();
        if (size > 0)
                memcpy(s, data, size);
        s[size] = 0;
        return s;
}

/* FNV-1a: a stable number derived from the input, to choose chunking and caps. */
static inline uint64_t fuzz_hash(const uint8_t *data, size_t size) {
        uint64_t h = 1469598103934665603ULL;

        for (size_t i = 0; i < size; i++) {
                h ^= data[i];
                h *= 1099511628211ULL;
        }
        return h;
}

static inline uint64_t fuzz_next(uint64_t *state) {
        /* xorshift64*; state must not be 0 */
        uint64_t x = *state;

        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        return x * 2685821657736338717ULL;
}

/* The contracts say error messages are one line. */
static inline bool fuzz_one_line(const char *s) {
        return !s || (!strchr(s, '\n') && !strchr(s, '\r'));
}
