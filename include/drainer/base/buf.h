/* Growable buffers with a hard cap, and the caps themselves: one documented set
 * for the whole program. A buffer never grows past its cap: the append fails with
 * -E2BIG (a file: -EFBIG) and the caller reports it or retries, never crashes. A
 * secret buffer (tokens, keys, the files and plugin output that hold them) wipes
 * every byte it gives back, on growth (no realloc: it would leave the old copy
 * behind), on clear and on free. Also: arrays of records grown the same way, and
 * whole small files read into a buffer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "drainer/base/macro.h"

/* ---- the caps ----
 *
 * API objects. etcd keeps an object in at most --max-request-bytes (1.5 MiB by
 * default; operators raise it to about 10 MiB) of its storage encoding, and the JSON
 * drainer asks for is several times larger than the protobuf etcd holds for built-in
 * kinds (field names on every value, base64 of byte fields, managedFields). 16 MiB
 * takes any object such a cluster can store, and so any watch event (the object and a
 * small envelope); a watch buffers one event at a time. */
#define BUF_CAP_API_OBJECT        ((size_t)16 << 20)
/* One API response read whole (a GET, or a list page of at most `limit` = 500
 * objects): 256 MiB is half a MiB per listed object, far above any real pod, node or
 * claim, and still a bound on what a broken server can make us hold. */
#define BUF_CAP_API_BODY          ((size_t)256 << 20)
/* The first bytes of a watch answer, kept to read the Status of an HTTP error (a few
 * hundred bytes). */
#define BUF_CAP_API_ERROR         ((size_t)64 << 10)
/* A gRPC health answer: a HealthCheckResponse is 7 bytes framed. */
#define BUF_CAP_GRPC_HEALTH       ((size_t)4 << 10)
/* A kubeconfig file: the largest real ones (hundreds of contexts with embedded
 * certificates) are a few MiB. */
#define BUF_CAP_KUBECONFIG        ((size_t)16 << 20)
/* A PEM file (certificate authority bundle, client certificate or key): a whole system
 * CA bundle is about 200 KiB. */
#define BUF_CAP_PEM_FILE          ((size_t)4 << 20)
/* A token file or a namespace file: a service account token (a JWT) is about 1 KiB. */
#define BUF_CAP_TOKEN_FILE        ((size_t)1 << 20)
/* An exec credential plugin's stdout, one ExecCredential: a token, or a certificate
 * chain and its key, a few KiB. */
#define BUF_CAP_EXEC_OUTPUT       ((size_t)1 << 20)
/* One rendering of the metrics text: the registry's series cap (metrics.h) at a few
 * hundred bytes per series. */
#define BUF_CAP_METRICS_TEXT      ((size_t)16 << 20)
/* A Prometheus query answer (doctor): one vector of a few series. */
#define BUF_CAP_PROMETHEUS_ANSWER ((size_t)8 << 20)
/* Records of one kind held at once outside an informer (a one-shot list, the
 * eviction targets): the informer's own cap (informer.h, max_objects). */
#define BUF_CAP_OBJECTS           ((size_t)100000)

/* Embedded in its owner; BUF_INIT() or buf_init() before use. data is NUL-terminated
 * whenever it is not NULL (the NUL is not counted in len, and never in the cap). */
struct buf {
        char *data; /* owned; NULL until the first byte */
        size_t len;
        size_t size; /* allocated bytes, NUL included */
        size_t cap;  /* len never exceeds it */
        bool secret;
};

#define BUF_INIT(c, s) ((struct buf){ .cap = (c), .secret = (s) })

void buf_init(struct buf *b, size_t cap, bool secret);
/* Frees the memory (wiped first when secret); b may be initialized again. NULL ok. */
void buf_done(struct buf *b);
/* Forgets the contents (wiped when secret) and keeps the memory unless it is larger
 * than keep_max bytes (a buffer grown by one huge message is not kept around). */
void buf_clear(struct buf *b, size_t keep_max);

/* Makes room for n more bytes (and the NUL): -E2BIG when len + n exceeds the cap,
 * -ENOMEM. Grows to at least twice the current size, so appends are amortized O(1). */
int buf_reserve(struct buf *b, size_t n);
/* Appends n bytes (p may be NULL for n == 0): -E2BIG (nothing appended), -ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) _printf_(2, 3);

/* Bytes that may still be appended before the cap. */
static inline size_t buf_room(const struct buf *b) {
        return b->cap - b->len;
}
/* Writing in place (a read() into the buffer): after buf_reserve(b, n), up to n bytes
 * at buf_tail(b), then buf_advance(b, k) with k <= n. */
static inline char *buf_tail(struct buf *b) {
        return b->data + b->len;
}
void buf_advance(struct buf *b, size_t n);

/* Hands the contents over (malloc'd, NUL-terminated, "" when empty; a secret one must
 * be wiped by its new owner) and leaves b empty. NULL only when out of memory. */
char *buf_steal(struct buf *b, size_t *ret_len);

/* Reads a whole file (a regular one, or anything read() ends) into the empty buffer b,
 * within its cap; *ret_st (may be NULL) is the file's fstat. -EFBIG when larger than
 * the cap, -EISDIR, or the errno of open()/read(). On failure b is left empty. */
int buf_read_file(struct buf *b, const char *path, struct stat *ret_st);
/* The reason of a buf_read_file() failure, for a message: "file too large" for -EFBIG. */
const char *buf_file_error(int r);

/* Secrets outside a struct buf: wipe n bytes at p (a string: all of it), then free. NULL
 * ok; return NULL. */
void *buf_erase_free(void *p, size_t n);
void *buf_erase_freestr(char *s);
static inline void buf_erase_freestrp(char **s) {
        buf_erase_freestr(*s);
}

/* Grows the array *p of *alloc elements of size elem to hold at least need, doubling,
 * at most max elements: -E2BIG beyond it, -ENOMEM (then *p and *alloc are unchanged).
 * Records in such an array are not secret. */
int buf_grow_array(void *p, size_t *alloc, size_t need, size_t elem, size_t max);
