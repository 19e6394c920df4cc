/* Logging to stderr, one line per call. Owns only the level and format flags.
 * Never logs secrets: callers pass no token or key material here. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "drainer/log.h"

static enum log_level max_level = LOG_LEVEL_INFO;
static bool timestamps;

void log_set_max_level(enum log_level level) {
        max_level = level;
}

enum log_level log_get_max_level(void) {
        return max_level;
}

void log_set_timestamps(bool on) {
        timestamps = on;
}

int log_internal(enum log_level level, int error, const char *file, int line, const char *fmt, ...) {
        static const char *const prefix[_LOG_LEVEL_MAX] = {
                [LOG_LEVEL_ERROR] = "error: ",
                [LOG_LEVEL_WARNING] = "warning: ",
                [LOG_LEVEL_INFO] = "",
                [LOG_LEVEL_DEBUG] = "debug: ",
        };
        int saved = errno;
        char buf[4096];
        va_list ap;

        /* %m in the format means the error passed in, as in systemd. */
        errno = error < 0 ? -error : error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);

        if (timestamps) {
                struct timespec ts;
                struct tm tm;
                char when[32];

                /* Presentation only, never logic: the one clock read outside timesrc.c. */
                clock_gettime(CLOCK_REALTIME, &ts);
                gmtime_r(&ts.tv_sec, &tm);
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
                fprintf(stderr, "%s.%03ldZ ", when, ts.tv_nsec / 1000000);
        }
        if (level == LOG_LEVEL_DEBUG) {
                /* meson passes paths relative to the build dir: keep them from the source root. */
                const char *rel = strstr(file, "drainer/");

                fprintf(stderr, "%s%s (%s:%d)\n", prefix[level], buf, rel ? rel : file, line);
        } else
                fprintf(stderr, "%s%s\n", prefix[level], buf);

        errno = saved;
        return error == 0 ? 0 : -abs(error);
}
