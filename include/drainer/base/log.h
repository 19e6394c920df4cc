/* Logging: one line per event to stderr (or the journal under systemd).
 * Library layers log at debug level only; cmd decides what users see. */
#pragma once

#include <errno.h>
#include <stdbool.h>

#include "drainer/base/macro.h"

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
/* Put before the message of every line until set back to NULL (borrowed, not copied):
 * "FILE:LINE: " while a --config file's setting is parsed. */
void log_set_message_prefix(const char *prefix);

/* ---- journald ----
 * With the journal on, each line goes to journald as one structured entry:
 * MESSAGE=, PRIORITY= (3 error, 4 warning, 6 info, 7 debug), CODE_FILE=,
 * CODE_LINE=, SYSLOG_IDENTIFIER=drainer, ERRNO= when an error is passed, plus
 * the context fields set with log_set_field(). Off by default; a line the
 * journal refuses goes to stderr instead. (libsystemd reports success when no
 * journald listens at all, so do not force it on blindly: the auto mode turns
 * it on only when journald holds our stderr.) */
void log_set_journal(bool on);
bool log_get_journal(void);
/* Turns the journal on exactly when $JOURNAL_STREAM names stderr (its
 * "DEV:INODE" equals fstat(2)'s st_dev:st_ino, the check systemd.exec(5)
 * documents), off otherwise. Returns whether it is on. */
bool log_set_journal_auto(void);

#define LOG_FIELDS_MAX      8
#define LOG_FIELD_VALUE_MAX 512
/* Sets a context field sent with every journal entry from now on, e.g.
 * log_set_field("NODE", "node-1"); PHASE, POD, CLAIM likewise. A NULL or empty
 * value removes the field. Names follow journald's rules (A-Z, 0-9, '_', not
 * starting with '_' or a digit, at most 64 chars) and may not be one the
 * logger sets itself. Returns 0, -EINVAL for a bad name, -E2BIG when the value
 * or the number of fields exceeds its cap, -ENOMEM. Values are logged: never
 * pass a secret. */
int log_set_field(const char *name, const char *value);
/* Removes every context field. */
void log_clear_fields(void);

struct iovec;
/* For tests: where journal entries go instead of sd_journal_sendv() (NULL
 * restores it). Returns >= 0 on success, negative errno on failure. */
typedef int (*log_journal_sink_fn)(const struct iovec *iov, int n);
void log_set_journal_sink(log_journal_sink_fn sink);

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

/* The text of the last line logged at error level (cut at 1023 bytes), "" before any:
 * what a -o json summary says when the verb has no message of its own. */
const char *log_last_error(void);

/* Out of memory: logs and returns -ENOMEM. */
#define log_oom() log_full_errno(LOG_LEVEL_ERROR, ENOMEM, "Out of memory.")

/* Hands a one-line message about a failure to the caller: formats it, replaces
 * its control characters (names quoted from a file or an answer may hold line
 * breaks), logs it at debug level after "what: " and stores it in *ret_error
 * (freed when ret_error is NULL; NULL when out of memory). Returns r, which must
 * be negative, so that "return log_error_message(ret_error, -EINVAL, ...)"
 * reports and returns in one statement. */
int log_error_message(char **ret_error, int r, const char *what, const char *fmt, ...) _printf_(4, 5);
/* Out of memory, for a function that hands back a message: *ret_error = NULL,
 * returns -ENOMEM. */
int log_error_message_oom(char **ret_error);
