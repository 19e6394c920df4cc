/* The progress of several runs on one screen (progressboard.h): a live block of the
 * running nodes' parts, or plain lines; the held pods' lines. Owns each run's part,
 * last plain line and held pods. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/base/text.h"
#include "drainer/drain/heldlog.h"
#include "drainer/drain/progressboard.h"

/* One run's part of the display. */
struct board_part {
        bool active;         /* its engine runs: its part of the live block is drawn */
        bool has_last_phase; /* the last progress drawn */
        enum drain_phase last_phase;
        char *last_line; /* the last plain line (not a live terminal) */
        char *block;     /* its part of the live block (a live terminal) */
        int block_lines;
        struct held_log held; /* the pods held at the last progress (their lines said once) */
};

struct progress_board {
        struct progress_board_options o;
        struct board_part *parts;
        size_t n;
        int drawn_lines;
        uint64_t last_draw;
};

int progress_board_new(const struct progress_board_options *o, size_t n, struct progress_board **ret) {
        struct progress_board *b = calloc(1, sizeof(*b));

        if (!b)
                return -ENOMEM;
        b->o = *o;
        b->n = n;
        b->parts = calloc(n + 1, sizeof(*b->parts));
        if (!b->parts) {
                free(b);
                return -ENOMEM;
        }
        *ret = b;
        return 0;
}

struct progress_board *progress_board_free(struct progress_board *b) {
        if (!b)
                return NULL;
        for (size_t i = 0; i < b->n; i++) {
                free(b->parts[i].last_line);
                free(b->parts[i].block);
                held_log_clear(&b->parts[i].held);
        }
        free(b->parts);
        free(b);
        return NULL;
}

/* The live block off the screen (the cursor where it began). */
static void clear_block(struct progress_board *b) {
        if (b->drawn_lines > 0)
                fprintf(b->o.term, "\033[%dA\033[J", b->drawn_lines);
        b->drawn_lines = 0;
}

/* The live block: the part of every run going on now, in the order of the runs. */
static void draw_block(struct progress_board *b) {
        clear_block(b);
        for (size_t i = 0; i < b->n; i++) {
                const struct board_part *d = &b->parts[i];

                if (d->active && d->block) {
                        fputs(d->block, b->o.term);
                        b->drawn_lines += d->block_lines;
                }
        }
}

void progress_board_commit(struct progress_board *b) {
        if (b->o.live && b->drawn_lines > 0)
                fputc('\n', b->o.term);
        b->drawn_lines = 0;
}

void progress_board_put(struct progress_board *b, FILE *out, const char *line) {
        bool above = b->o.live && (out == b->o.term || b->o.trail_on_term);

        if (above) {
                clear_block(b);
                fflush(b->o.term);
        }
        fputs(line, out);
        fflush(out);
        if (above)
                draw_block(b);
}

static void now_rfc3339(struct progress_board *b, char when[static 32]) {
        if (timesrc_format_rfc3339(timesrc_realtime(b->o.ts), when, 32) < 0)
                strcpy(when, "?");
}

struct held_ctx {
        struct progress_board *b;
        const char *node;
};

/* A pod's eviction became held, or no longer is: one line each. */
static void on_held_change(bool held, const char *ns, const char *name, const char *reason, void *userdata) {
        struct held_ctx *c = userdata;
        _cleanup_free_ char *line = NULL, *safe = NULL;
        char when[32];

        now_rfc3339(c->b, when);
        /* (the reason is the API server's answer: no control character reaches the terminal) */
        if (held)
                safe = text_escape_controls(strna(reason), strlen(strna(reason)));
        line = held ? text_printf("%s %s   held: %s/%s: %s\n", when, c->node, ns, name, strna(safe))
                    : text_printf("%s %s   no longer held: %s/%s\n", when, c->node, ns, name);
        if (line)
                progress_board_put(c->b, c->b->o.term, line);
}

void progress_board_start(struct progress_board *b, size_t i) {
        b->parts[i].active = true;
        b->parts[i].has_last_phase = false;
}

/* Plain lines: one per phase change or new message (none when out of memory: the next
 * progress writes it). */
static void put_plain(struct progress_board *b, struct board_part *d, const char *node,
                      const struct engine_progress *p) {
        char *line = text_printf("%s: %s", p->has_phase ? drain_phase_to_string(p->phase) : "preflight",
                                 strna(p->message));
        char when[32];

        if (!line)
                return;
        if (streq_ptr(line, d->last_line)) {
                free(line);
                return;
        }
        now_rfc3339(b, when);
        fprintf(b->o.term, "%s %s %s\n", when, node, line);
        free(d->last_line);
        d->last_line = line;
}

int progress_board_update(struct progress_board *b, size_t i, const char *node,
                          const struct engine_progress *p, uint64_t started_usec) {
        struct board_part *d = &b->parts[i];
        bool force = p->has_phase != d->has_last_phase || p->phase != d->last_phase;
        uint64_t now = timesrc_now(b->o.ts);
        char *buf = NULL;
        size_t size = 0;
        int r = 0, lines;
        FILE *f;

        d->has_last_phase = p->has_phase;
        d->last_phase = p->phase;
        if (held_log_update(&d->held, p->held, p->n_held, on_held_change,
                            &(struct held_ctx){ .b = b, .node = node }) < 0)
                r = -ENOMEM;
        if (!b->o.live) {
                put_plain(b, d, node, p);
                return r;
        }
        /* This run's part of the one live block, redrawn in place (kept as it was when
         * out of memory: the next progress draws it). */
        f = open_memstream(&buf, &size);
        if (!f)
                return r;
        lines = engine_progress_print(f, node, p, (double)(now - started_usec) / (double)USEC_PER_SEC,
                                      &b->o.sgr);
        if (fclose(f) != 0) {
                free(buf);
                return r;
        }
        free(d->block);
        d->block = buf;
        d->block_lines = lines;
        if (!force && now - b->last_draw < b->o.redraw_usec)
                return r;
        b->last_draw = now;
        draw_block(b);
        return r;
}

void progress_board_end(struct progress_board *b, size_t i) {
        b->parts[i].active = false;
        held_log_clear(&b->parts[i].held);
}

void progress_board_redraw(struct progress_board *b) {
        if (b->o.live)
                draw_block(b);
}
