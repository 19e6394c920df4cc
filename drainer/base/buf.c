/* Capped growable buffers (see buf.h for the caps and why), capped arrays, and
 * whole-file reads. A secret buffer is never realloc()ed: it moves to a new
 * allocation and the old one is wiped, so no copy of a token or key is left in
 * freed memory. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "drainer/base/buf.h"

/* The first allocation of a buffer; later ones double. */
#define BUF_MIN_ALLOC 4096

void buf_init(struct buf *b, size_t cap, bool secret) {
        assert(b);
        *b = BUF_INIT(cap, secret);
}

static void release(struct buf *b) {
        if (b->data && b->secret)
                explicit_bzero(b->data, b->size);
        b->data = mfree(b->data);
        b->size = 0;
}

void buf_done(struct buf *b) {
        if (!b)
                return;
        release(b);
        b->len = 0;
}

void buf_clear(struct buf *b, size_t keep_max) {
        assert(b);
        if (b->size > keep_max)
                release(b);
        else if (b->data) {
                if (b->secret)
                        explicit_bzero(b->data, b->size);
                b->data[0] = 0;
        }
        b->len = 0;
}

int buf_reserve(struct buf *b, size_t n) {
        size_t need, size;
        char *p;

        assert(b);
        if (n > buf_room(b))
                return -E2BIG;
        need = b->len + n + 1;
        if (b->data && need <= b->size)
                return 0;
        size = MAX(need, b->size > SIZE_MAX / 2 ? SIZE_MAX : b->size * 2);
        size = MAX(size, (size_t)BUF_MIN_ALLOC);
        size = MIN(size, b->cap + 1);
        if (b->secret) {
                p = malloc(size);
                if (!p)
                        return -ENOMEM;
                if (b->data) {
                        memcpy(p, b->data, b->len + 1);
                        explicit_bzero(b->data, b->size);
                        free(b->data);
                }
        } else {
                p = realloc(b->data, size);
                if (!p)
                        return -ENOMEM;
        }
        if (!b->data)
                p[0] = 0;
        b->data = p;
        b->size = size;
        return 0;
}

void buf_advance(struct buf *b, size_t n) {
        assert(b->data && b->len + n < b->size);
        b->len += n;
        b->data[b->len] = 0;
}

int buf_append(struct buf *b, const void *p, size_t n) {
        int r;

        r = buf_reserve(b, n);
        if (r < 0)
                return r;
        if (n > 0)
                memcpy(b->data + b->len, p, n);
        buf_advance(b, n);
        return 0;
}

int buf_puts(struct buf *b, const char *s) {
        return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...) {
        va_list ap;
        char small[256];
        int n, r;

        va_start(ap, fmt);
        n = vsnprintf(small, sizeof(small), fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if ((size_t)n < sizeof(small)) {
                r = buf_append(b, small, (size_t)n);
                if (b->secret)
                        explicit_bzero(small, sizeof(small));
                return r;
        }
        r = buf_reserve(b, (size_t)n);
        if (r < 0)
                return r;
        va_start(ap, fmt);
        (void)vsnprintf(buf_tail(b), (size_t)n + 1, fmt, ap);
        va_end(ap);
        buf_advance(b, (size_t)n);
        return 0;
}

char *buf_steal(struct buf *b, size_t *ret_len) {
        char *p;

        assert(b);
        if (!b->data) {
                p = strdup("");
                if (!p)
                        return NULL;
        } else
                p = b->data;
        if (ret_len)
                *ret_len = b->len;
        *b = BUF_INIT(b->cap, b->secret);
        return p;
}

int buf_read_file(struct buf *b, const char *path, struct stat *ret_st) {
        struct stat st;
        int fd, r = 0;

        assert(b && b->len == 0);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                goto out;
        }
        if (S_ISDIR(st.st_mode)) {
                r = -EISDIR;
                goto out;
        }
        if (S_ISREG(st.st_mode)) {
                if ((uint64_t)st.st_size > b->cap) {
                        r = -EFBIG;
                        goto out;
                }
                /* The whole file and one byte to see its end in one read, usually. */
                r = buf_reserve(b, MIN((size_t)st.st_size + 1, b->cap));
                if (r < 0)
                        goto out;
        }
        for (;;) {
                size_t room;
                ssize_t k;

                r = buf_reserve(b, MIN(buf_room(b), (size_t)BUF_MIN_ALLOC));
                if (r < 0)
                        goto out;
                room = b->size - b->len - 1;
                if (room == 0) {
                        /* At the cap: one more byte means too large. */
                        char c;

                        k = read(fd, &c, 1);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0) {
                                r = -errno;
                                goto out;
                        }
                        if (k > 0)
                                r = -EFBIG;
                        break;
                }
                k = read(fd, buf_tail(b), room);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        goto out;
                }
                if (k == 0)
                        break;
                buf_advance(b, (size_t)k);
        }
        if (r >= 0 && !b->data)
                r = buf_reserve(b, 0); /* an empty file is "" */
out:
        close(fd);
        if (r < 0)
                buf_clear(b, 0);
        else if (ret_st)
                *ret_st = st;
        return r;
}

const char *buf_file_error(int r) {
        return r == -EFBIG ? "file too large" : strerror(-r);
}

void *buf_erase_free(void *p, size_t n) {
        if (p) {
                explicit_bzero(p, n);
                free(p);
        }
        return NULL;
}

void *buf_erase_freestr(char *s) {
        return s ? buf_erase_free(s, strlen(s)) : NULL;
}

int buf_grow_array(void *p, size_t *alloc, size_t need, size_t elem, size_t max) {
        void **a = p;
        size_t n;
        void *q;

        assert(p && alloc && elem > 0);
        if (need <= *alloc)
                return 0;
        if (need > max || max > SIZE_MAX / elem)
                return -E2BIG;
        n = MAX(need, MAX(*alloc > max / 2 ? max : *alloc * 2, (size_t)8));
        n = MIN(n, max);
        q = realloc(*a, n * elem);
        if (!q)
                return -ENOMEM;
        *a = q;
        *alloc = n;
        return 0;
}
