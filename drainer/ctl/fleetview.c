/* The fleet at a glance (fleetview.h): a node's drainer.io/ state sorted into what
 * an admin steering a wave asks (how many wait, why, which failed). Reads only what
 * it is given; owns nothing. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/macro.h"
#include "drainer/base/timesrc.h"

#include "drainer/ctl/fleetview.h"

const char *const fleet_class_names[_FLEET_CLASS_MAX] = {
        [FLEET_IN_SERVICE] = "in-service", [FLEET_REQUESTED] = "requested", [FLEET_WAITING] = "waiting",
        [FLEET_DRAINING] = "draining",     [FLEET_DRAINED] = "drained",     [FLEET_RESTORING] = "restoring",
        [FLEET_FAILED] = "failed",
};

static bool refused(const struct drain_state *st) {
        return st->message && strncmp(st->message, "refused", 7) == 0;
}

enum fleet_class fleet_classify(const struct drain_state *st) {
        if (!st)
                return FLEET_FAILED;
        if (!st->has_phase)
                return st->request != DRAIN_REQUEST_NONE ? FLEET_REQUESTED : FLEET_IN_SERVICE;
        if (refused(st) && st->phase != DRAIN_PHASE_DRAINED)
                return FLEET_FAILED;
        switch (st->phase) {
        case DRAIN_PHASE_WAITING:
                return FLEET_WAITING;
        case DRAIN_PHASE_DRAINED:
                return st->request == DRAIN_REQUEST_UNCORDON ? FLEET_RESTORING : FLEET_DRAINED;
        case DRAIN_PHASE_RESTORE_DRIVERS:
        case DRAIN_PHASE_UNCORDON:
                return FLEET_RESTORING;
        default:
                return FLEET_DRAINING;
        }
}

const char *fleet_reason(enum fleet_class c, const struct drain_state *st) {
        if (c == FLEET_FAILED)
                return st ? "refusal" : "bad-state";
        if (c != FLEET_WAITING)
                return NULL;
        /* the messages of ctl/manager.c */
        if (!st->message)
                return "unknown";
        if (strstr(st->message, "waiting for a drain slot") ||
            strstr(st->message, "cannot take a drain slot"))
                return "slot";
        if (strstr(st->message, "maintenance window"))
                return "window";
        if (strstr(st->message, "drains are paused") || strstr(st->message, "drainer.io/pause"))
                return "pause";
        return "error";
}

static int cmp_rec(const void *a, const void *b) {
        return strcmp((*(const struct node_rec *const *)a)->name,
                      (*(const struct node_rec *const *)b)->name);
}

int fleet_rows_build(const struct node_rec **recs, size_t n, struct fleet_row **ret,
                     size_t counts[_FLEET_CLASS_MAX]) {
        struct fleet_row *rows = calloc(n ? n : 1, sizeof(*rows));

        if (!rows)
                return -ENOMEM;
        memset(counts, 0, _FLEET_CLASS_MAX * sizeof(*counts));
        if (n > 0)
                qsort(recs, n, sizeof(*recs), cmp_rec);
        for (size_t i = 0; i < n; i++) {
                _cleanup_(drain_state_done) struct drain_state st = {};
                _cleanup_free_ char *err = NULL;
                bool parsed = drain_state_parse(recs[i], &st, &err) >= 0;
                struct fleet_row *r = &rows[i];
                const char *msg = parsed ? st.message : err;

                r->name = recs[i]->name;
                r->c = fleet_classify(parsed ? &st : NULL);
                r->reason = fleet_reason(r->c, parsed ? &st : NULL);
                r->has_phase = st.has_phase;
                r->phase = st.phase;
                r->since_usec = st.has_phase ? st.state_since_usec : 0;
                if (msg && !(r->message = strdup(msg))) {
                        fleet_rows_free(rows, i);
                        return -ENOMEM;
                }
                counts[r->c]++;
        }
        *ret = rows;
        return 0;
}

struct fleet_row *fleet_rows_free(struct fleet_row *rows, size_t n) {
        for (size_t i = 0; rows && i < n; i++)
                free(rows[i].message);
        free(rows);
        return NULL;
}

static int add_row_json(cJSON *nodes, const struct fleet_row *row) {
        cJSON *j = cJSON_CreateObject();
        char since[64];

        if (!j || !cJSON_AddItemToArray(nodes, j)) {
                cJSON_Delete(j);
                return -ENOMEM;
        }
        cJSON_AddStringToObject(j, "name", row->name);
        cJSON_AddStringToObject(j, "status", fleet_class_names[row->c]);
        if (row->has_phase)
                cJSON_AddStringToObject(j, "phase", drain_phase_to_string(row->phase));
        if (row->reason)
                cJSON_AddStringToObject(j, "reason", row->reason);
        if (row->since_usec > 0 && timesrc_format_rfc3339(row->since_usec, since, sizeof(since)) >= 0)
                cJSON_AddStringToObject(j, "since", since);
        if (row->message)
                cJSON_AddStringToObject(j, "message", row->message);
        return 0;
}

cJSON *fleet_rows_to_json(const struct fleet_row *rows, size_t n, const size_t counts[_FLEET_CLASS_MAX],
                          const char *selector) {
        cJSON *root = cJSON_CreateObject(), *counts_j, *nodes_j;

        if (!root)
                return NULL;
        if (selector)
                cJSON_AddStringToObject(root, "selector", selector);
        cJSON_AddNumberToObject(root, "nodes", (double)n);
        counts_j = cJSON_AddObjectToObject(root, "phases");
        nodes_j = cJSON_AddArrayToObject(root, "notInService");
        for (int c = 0; c < _FLEET_CLASS_MAX; c++)
                cJSON_AddNumberToObject(counts_j, fleet_class_names[c], (double)counts[c]);
        for (size_t i = 0; i < n; i++)
                if (rows[i].c != FLEET_IN_SERVICE && add_row_json(nodes_j, &rows[i]) < 0) {
                        cJSON_Delete(root);
                        return NULL;
                }
        return root;
}
