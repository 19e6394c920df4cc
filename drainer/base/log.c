/* Logging to stderr, one line per call, or to journald as structured entries
 * when stderr is the journal. Owns the level and format flags and the context
 * fields (NODE=, PHASE=, ...). Never logs secrets: callers pass no token or key
 * material here. */
#define SD_JOURNAL_SUPPRESS_LOCATION /* we pass the caller's file and line ourselves */

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#include "drainer/base/log.h"
#include "drainer/base/macro.h"
#include "drainer/base/text.h"

#define LOG_FIELD_NAME_MAX 64

static enum log_level max_level = LOG_LEVEL_INFO;
static bool timestamps;
static bool journal;
static log_journal_sink_fn journal_sink;
static const char *message_prefix;

struct log_field {
        char name[LOG_FIELD_NAME_MAX + 1];
        char *entry; /* owned: "NAME=value", NULL when the slot is free */
};

static struct log_field fields[LOG_FIELDS_MAX];

void log_set_max_level(enum log_level level) {
        max_level = level;
}

enum log_level log_get_max_level(void) {
        return max_level;
}

void log_set_timestamps(bool on) {
        timestamps = on;
}

void log_set_journal(bool on) {
        journal = on;
}

bool log_get_journal(void) {
        return journal;
}

/* Parses a decimal unsigned number ending at end_char; returns the char after it or NULL. */
static const char *parse_ull(const char *s, char end_char, unsigned long long *ret) {
        unsigned long long v = 0;
        const char *p = s;

        if (*p < '0' || *p > '9')
                return NULL;
        for (; *p >= '0' && *p <= '9'; p++) {
                if (v > (~0ULL - (unsigned)(*p - '0')) / 10)
                        return NULL;
                v = v * 10 + (unsigned)(*p - '0');
        }
        if (*p != end_char)
                return NULL;
        *ret = v;
        return end_char ? p + 1 : p;
}

bool log_set_journal_auto(void) {
        const char *e = getenv("JOURNAL_STREAM"), *p;
        unsigned long long dev, ino;
        struct stat st;

        /* systemd.exec(5): $JOURNAL_STREAM is "DEV:INODE" of the stream it connected to
         * stdout/stderr; a process that finds its stderr matching may switch to the native
         * protocol. A mismatch means stderr was redirected since (e.g. 2>file). */
        journal = e && (p = parse_ull(e, ':', &dev)) && parse_ull(p, '\0', &ino) &&
                  fstat(STDERR_FILENO, &st) >= 0 && (unsigned long long)st.st_dev == dev &&
                  (unsigned long long)st.st_ino == ino;
        return journal;
}

static bool field_name_valid(const char *name) {
        static const char *const reserved[] = { "MESSAGE",   "MESSAGE_ID", "PRIORITY", "CODE_FILE",
                                                "CODE_LINE", "CODE_FUNC",  "ERRNO",    "SYSLOG_IDENTIFIER" };
        size_t l;

        if (!name)
                return false;
        l = strlen(name);
        if (l == 0 || l > LOG_FIELD_NAME_MAX || name[0] == '_' || (name[0] >= '0' && name[0] <= '9'))
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
                        return false;
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (streq(name, reserved[i]))
                        return false;
        return true;
}

int log_set_field(const char *name, const char *value) {
        struct log_field *slot = NULL, *free_slot = NULL;
        size_t nl, vl;
        char *entry;

        if (!field_name_valid(name))
                return -EINVAL;
        for (size_t i = 0; i < LOG_FIELDS_MAX; i++) {
                if (fields[i].entry && streq(fields[i].name, name))
                        slot = &fields[i];
                else if (!fields[i].entry && !free_slot)
                        free_slot = &fields[i];
        }
        if (!value || !*value) {
                if (slot)
                        slot->entry = mfree(slot->entry);
                return 0;
        }
        vl = strlen(value);
        if (vl > LOG_FIELD_VALUE_MAX)
                return -E2BIG;
        if (!slot && !free_slot)
                return -E2BIG;
        nl = strlen(name);
        entry = malloc(nl + 1 + vl + 1);
        if (!entry)
                return -ENOMEM;
        memcpy(entry, name, nl);
        entry[nl] = '=';
        memcpy(entry + nl + 1, value, vl + 1);
        if (!slot) {
                slot = free_slot;
                memcpy(slot->name, name, nl + 1);
        }
        free(slot->entry);
        slot->entry = entry;
        return 0;
}

void log_clear_fields(void) {
        for (size_t i = 0; i < LOG_FIELDS_MAX; i++)
                fields[i].entry = mfree(fields[i].entry);
}

void log_set_message_prefix(const char *prefix) {
        message_prefix = prefix;
}

void log_set_journal_sink(log_journal_sink_fn sink) {
        journal_sink = sink;
}

/* meson passes paths relative to the build dir: keep them from the source root. */
static const char *source_path(const char *file) {
        const char *rel = strstr(file, "drainer/");

        return rel ? rel : file;
}

/* One journal entry for one log line; returns < 0 if the journal refused it. */
static int journal_send(enum log_level level, int error, const char *file, int line, const char *message) {
        static const char priority[_LOG_LEVEL_MAX] = {
                [LOG_LEVEL_ERROR] = '3',
                [LOG_LEVEL_WARNING] = '4',
                [LOG_LEVEL_INFO] = '6',
                [LOG_LEVEL_DEBUG] = '7',
        };
        char prio[] = "PRIORITY=?", code_file[512], code_line[32], errno_field[32];
        _cleanup_free_ char *msg = NULL;
        struct iovec iov[6 + LOG_FIELDS_MAX];
        int n = 0;

        if (asprintf(&msg, "MESSAGE=%s", message) < 0)
                return -ENOMEM;
        prio[strlen(prio) - 1] = priority[level];
        snprintf(code_file, sizeof(code_file), "CODE_FILE=%s", source_path(file));
        snprintf(code_line, sizeof(code_line), "CODE_LINE=%d", line);

        iov[n++] = (struct iovec){ msg, strlen(msg) };
        iov[n++] = (struct iovec){ prio, strlen(prio) };
        iov[n++] = (struct iovec){ code_file, strlen(code_file) };
        iov[n++] = (struct iovec){ code_line, strlen(code_line) };
        iov[n++] =
                (struct iovec){ (char *)"SYSLOG_IDENTIFIER=drainer", strlen("SYSLOG_IDENTIFIER=drainer") };
        if (error != 0) {
                snprintf(errno_field, sizeof(errno_field), "ERRNO=%d", abs(error));
                iov[n++] = (struct iovec){ errno_field, strlen(errno_field) };
        }
        for (size_t i = 0; i < LOG_FIELDS_MAX; i++)
                if (fields[i].entry)
                        iov[n++] = (struct iovec){ fields[i].entry, strlen(fields[i].entry) };

        return journal_sink ? journal_sink(iov, n) : sd_journal_sendv(iov, n);
}

/* The last error line, for a verb's -o json summary when it has none of its own. */
static char last_error[1024];

const char *log_last_error(void) {
        return last_error;
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
        size_t pl = 0;
        va_list ap;

        if (message_prefix) {
                pl = strlen(message_prefix);
                if (pl >= sizeof(buf) / 2)
                        pl = 0;
                memcpy(buf, message_prefix, pl);
        }
        /* %m in the format means the error passed in, as in systemd. */
        errno = error < 0 ? -error : error;
        va_start(ap, fmt);
        vsnprintf(buf + pl, sizeof(buf) - pl, fmt, ap);
        va_end(ap);
        if (level == LOG_LEVEL_ERROR) {
                size_t n = MIN(strlen(buf), sizeof(last_error) - 1);

                memcpy(last_error, buf, n);
                last_error[n] = 0;
        }

        if (journal && journal_send(level, error, file, line, buf) >= 0) {
                errno = saved;
                return error == 0 ? 0 : -abs(error);
        }

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
        if (level == LOG_LEVEL_DEBUG)
                fprintf(stderr, "%s%s (%s:%d)\n", prefix[level], buf, source_path(file), line);
        else
                fprintf(stderr, "%s%s\n", prefix[level], buf);

        errno = saved;
        return error == 0 ? 0 : -abs(error);
}

int log_error_message(char **ret_error, int r, const char *what, const char *fmt, ...) {
        char *m = NULL;
        va_list ap;

        assert(r < 0);
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        text_one_line(m);
        log_debug("%s: %s", what, strna(m));
        if (ret_error)
                *ret_error = m;
        else
                free(m);
        return r;
}

int log_error_message_oom(char **ret_error) {
        if (ret_error)
                *ret_error = NULL;
        return -ENOMEM;
}
