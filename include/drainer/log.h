/* Logging: one line per event to stderr (or the journal under systemd).
 * Library layers log at debug level only; cmd decides what users see. */
#pragma once

#include <errno.h>
#include <stdbool.h>

#include "drainer/macro.h"

enum log_level {
        LOG_LEVEL_ERROR,
        LOG_LEVEL_WARNING,
        LOG_LEVEL_INFO,
        LOG_LEVEL_DEBUG,
        _LOG_LEVEL_MAX,
};

void log_set_max_level(enum log_level level);
enum log_level log_get_max_level(void);
void log_set_timestamps(bool on);

/* Writes one line if level is enabled. Returns -abs(error) when error != 0, else 0,
 * so "return log_error_errno(r, ...)" logs and returns in one statement. */
int log_internal(enum log_level level, int error, const char *file, int line, const char *fmt, ...)
        _printf_(5, 6);

#define log_full_errno(level, error, ...)                                             \
        ({                                                                            \
                int _e_ = (error);                                                    \
                (log_get_max_level() >= (level))                                      \
                        ? log_internal((level), _e_, __FILE__, __LINE__, __VA_ARGS__) \
                        : (_e_ == 0 ? 0 : -abs(_e_));                                 \
        })

#define log_debug(...)            log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_info(...)             log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_warning(...)          log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_error(...)            log_full_errno(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...)   log_full_errno(LOG_LEVEL_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...)    log_full_errno(LOG_LEVEL_INFO, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_LEVEL_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...)   log_full_errno(LOG_LEVEL_ERROR, e, __VA_ARGS__)

/* Out of memory: logs and returns -ENOMEM. */
#define log_oom() log_full_errno(LOG_LEVEL_ERROR, ENOMEM, "Out of memory.")
