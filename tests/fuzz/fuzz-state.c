/* Fuzzes the drain-state annotations (state.h): drain_state_parse() over a
 * node_rec built from JSON, then what drainer would write next. The input is
 * either a whole Node as JSON (starts with '{') or lines:
 *   KEY=VALUE          annotation drainer.io/KEY (KEY with a '/' is taken as is)
 *   @taint=KEY:EFFECT  a taint (KEY may be KEY=VALUE)
 *   @label=KEY=VALUE   a label
 *   @unschedulable     spec.unschedulable: true
 *   @no-rv             no metadata.resourceVersion (patches must refuse)
 * Oracles: parse returns 0 or -EBADMSG with a one-line message; after a
 * successful parse every patch builder succeeds, and each patch, merged into
 * the node (RFC 7386), gives a node that parses again, with the state the
 * patch meant (what drainer writes always reads back). */
#include <errno.h>

#include <cjson/cJSON.h>

#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "fuzz-common.h"

#define NOW_USEC 1767225600123456LL /* 2026-01-01T00:00:00.123456Z */

/* ---- building the node ---- */

static cJSON *node_from_lines(const char *in) {
        cJSON *root = cJSON_CreateObject(), *meta, *ann, *labels, *spec, *taints;
        bool rv = true;
        char *copy = strdup(in), *save = NULL;

        meta = cJSON_AddObjectToObject(root, "metadata");
        cJSON_AddStringToObject(meta, "name", "node-1");
        cJSON_AddStringToObject(meta, "uid", "f6666666-7777-4888-8999-000000000000");
        ann = cJSON_AddObjectToObject(meta, "annotations");
        labels = cJSON_AddObjectToObject(meta, "labels");
        spec = cJSON_AddObjectToObject(root, "spec");
        taints = cJSON_AddArrayToObject(spec, "taints");

        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *eq;

                if (line[0] == '@') {
                        if (streq(line, "@unschedulable"))
                                cJSON_AddTrueToObject(spec, "unschedulable");
                        else if (streq(line, "@no-rv"))
                                rv = false;
                        else if (strncmp(line, "@label=", 7) == 0 && (eq = strchr(line + 7, '='))) {
                                *eq = 0;
                                cJSON_AddStringToObject(labels, line + 7, eq + 1);
                        } else if (strncmp(line, "@taint=", 7) == 0) {
                                cJSON *t = cJSON_CreateObject();
                                char *colon = strrchr(line + 7, ':');

                                if (colon) {
                                        *colon = 0;
                                        cJSON_AddStringToObject(t, "effect", colon + 1);
                                }
                                if ((eq = strchr(line + 7, '='))) {
                                        *eq = 0;
                                        cJSON_AddStringToObject(t, "value", eq + 1);
                                }
                                cJSON_AddStringToObject(t, "key", line + 7);
                                cJSON_AddItemToArray(taints, t);
                        }
                        continue;
                }
                eq = strchr(line, '=');
                if (!eq)
                        continue;
                *eq = 0;
                {
                        char key[256];

                        snprintf(key, sizeof(key), strchr(line, '/') ? "%s" : "drainer.io/%s", line);
                        cJSON_DeleteItemFromObjectCaseSensitive(ann, key);
                        cJSON_AddStringToObject(ann, key, eq + 1);
                }
        }
        if (rv)
                cJSON_AddStringToObject(meta, "resourceVersion", "4242");
        free(copy);
        return root;
}

static bool utf8_valid(const char *s) {
        const unsigned char *p = (const unsigned char *)s;

        while (*p) {
                int n = *p < 0x80             ? 0
                        : (*p & 0xE0) == 0xC0 ? 1
                        : (*p & 0xF0) == 0xE0 ? 2
                        : (*p & 0xF8) == 0xF0 ? 3
                                              : -1;

                if (n < 0)
                        return false;
                p++;
                for (int i = 0; i < n; i++, p++)
                        if ((*p & 0xC0) != 0x80)
                                return false;
        }
        return true;
}

/* Keeps the last of members with the same name, in every object under o. */
static void dedupe_keys(cJSON *o) {
        cJSON *c, *next;

        if (cJSON_IsObject(o))
                for (c = o->child; c; c = next) {
                        next = c->next;
                        for (cJSON *d = next; d; d = d->next)
                                if (c->string && d->string && streq(c->string, d->string)) {
                                        cJSON_Delete(cJSON_DetachItemViaPointer(o, c));
                                        break;
                                }
                }
        for (c = o ? o->child : NULL; c; c = c->next)
                dedupe_keys(c);
}

/* ---- RFC 7386 JSON merge patch, in place ---- */

static void merge_patch(cJSON *target, const cJSON *patch) {
        const cJSON *p;

        cJSON_ArrayForEach(p, patch) {
                cJSON *t = cJSON_GetObjectItemCaseSensitive(target, p->string);

                if (cJSON_IsNull(p)) {
                        if (t)
                                cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
                } else if (cJSON_IsObject(p)) {
                        if (!cJSON_IsObject(t)) {
                                if (t)
                                        cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
                                t = cJSON_AddObjectToObject(target, p->string);
                        }
                        merge_patch(t, p);
                } else {
                        cJSON *dup = cJSON_Duplicate(p, true);

                        if (t)
                                cJSON_ReplaceItemInObjectCaseSensitive(target, p->string, dup);
                        else
                                cJSON_AddItemToObject(target, p->string, dup);
                }
        }
}

static bool stop_equal(const struct driver_stop_record *a, const struct driver_stop_record *b) {
        if (a->ops != b->ops || !streq_ptr(a->arg, b->arg) || a->had_old != b->had_old ||
            !streq_ptr(a->old_value, b->old_value) || !streq_ptr(a->daemonset, b->daemonset) ||
            a->n_drivers != b->n_drivers)
                return false;
        for (size_t i = 0; i < a->n_drivers; i++)
                if (!streq_ptr(a->drivers[i], b->drivers[i]))
                        return false;
        return true;
}

/* Merges patch text into a copy of node, parses the result; returns the new
 * state (the caller frees it with drain_state_done). */
static void apply_and_parse(const cJSON *node, const char *patch_text, const char *what,
                            struct drain_state *ret, struct node_rec **ret_rec) {
        cJSON *patch = cJSON_Parse(patch_text), *copy;
        struct node_rec *n = NULL;
        char *err = NULL;
        int r;

        fuzz_check(patch && cJSON_IsObject(patch), "%s: patch is not a JSON object: %s", what, patch_text);
        copy = cJSON_Duplicate(node, true);
        merge_patch(copy, patch);
        r = node_rec_from_json(copy, &n);
        fuzz_check(r == 0, "%s: patched node does not build: %d", what, r);
        r = drain_state_parse(n, ret, &err);
        fuzz_check(r == 0, "%s: what drainer wrote does not read back: %s (patch %s)", what, strna(err),
                   patch_text);
        free(err);
        cJSON_Delete(patch);
        cJSON_Delete(copy);
        if (ret_rec)
                *ret_rec = n;
        else
                node_rec_free(n);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_setup_logging();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(drain_state_done) struct drain_state st = {};
        struct node_rec *n = NULL;
        char *in = fuzz_strndup(data, size), *err = NULL, *patch = NULL;
        cJSON *node;
        int r;

        if (size > 0 && data[0] == '{') {
                node = cJSON_ParseWithLength((const char *)data, size);
                if (!node) {
                        free(in);
                        return 0;
                }
                dedupe_keys(node);
                /* The API server only stores DNS-subdomain node names. */
                {
                        cJSON *meta = cJSON_GetObjectItemCaseSensitive(node, "metadata");
                        cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");

                        if (cJSON_IsString(name) &&
                            strspn(name->valuestring, "abcdefghijklmnopqrstuvwxyz0123456789.-") !=
                                    strlen(name->valuestring))
                                cJSON_ReplaceItemInObjectCaseSensitive(meta, "name",
                                                                       cJSON_CreateString("node-1"));
                }
        } else
                node = node_from_lines(in);

        r = node_rec_from_json(node, &n);
        if (r < 0)
                goto out;

        r = drain_state_parse(n, &st, &err);
        fuzz_check(r == 0 || r == -EBADMSG || r == -ENOMEM, "drain_state_parse returned %d", r);
        if (r == -EBADMSG) {
                fuzz_check(err, "-EBADMSG without a message");
                fuzz_check(fuzz_one_line(err), "message is not one line: %s", err);
                fuzz_check(strstr(err, "kubectl annotate"), "message has no reset hint: %s", err);
                /* cordon refuses a bad was-unschedulable or started-at itself */
                r = drain_patch_cordon(n, NOW_USEC, &patch);
                fuzz_check(r == 0 || r == -EBADMSG || r == -EINVAL, "cordon on a bad state returned %d", r);
                goto out;
        }
        fuzz_check(!err, "message set on %d", r);
        if (r < 0)
                goto out;

        fuzz_check(!st.has_phase || (st.phase >= 0 && st.phase < _DRAIN_PHASE_MAX), "phase %d",
                   (int)st.phase);
        fuzz_check(st.request >= 0 && st.request < _DRAIN_REQUEST_MAX, "request %d", (int)st.request);
        fuzz_check(st.n_stops <= DRAIN_STATE_MAX_STOPS, "%zu stops", st.n_stops);
        for (size_t i = 0; i < st.n_stops; i++) {
                fuzz_check(st.stops[i].n_drivers <= DRIVER_STOP_MAX_DRIVERS, "stop %zu: %zu drivers", i,
                           st.stops[i].n_drivers);
                fuzz_check(st.stops[i].ops && driver_stop_find(st.stops[i].ops->name) == st.stops[i].ops,
                           "stop %zu: not one of the strategies", i);
        }

        if (!n->resource_version) {
                fuzz_check(drain_patch_cordon(n, NOW_USEC, &patch) == -EINVAL, "unconditional cordon patch");
                fuzz_check(drain_patch_finish(n, true, false, &patch) == -EINVAL,
                           "unconditional finish patch");
                goto out;
        }

        /* driver-stop: the parsed records written back read back equal. */
        r = drain_patch_driver_stop(n, st.stops, st.n_stops, &patch);
        fuzz_check(r == 0, "parsed driver-stop records cannot be written back: %d", r);
        {
                _cleanup_(drain_state_done) struct drain_state again = {};

                apply_and_parse(node, patch, "driver-stop", &again, NULL);
                fuzz_check(again.n_stops == st.n_stops, "driver-stop: %zu records read back as %zu",
                           st.n_stops, again.n_stops);
                for (size_t i = 0; i < st.n_stops; i++)
                        fuzz_check(stop_equal(&st.stops[i], &again.stops[i]),
                                   "driver-stop record %zu changed on the way back (patch %s)", i, patch);
        }
        free(patch);
        patch = NULL;

        /* cordon: one patch, then the node reads as evict-claim-holders (a node's cordon goes
         * with the evictions that follow it at once), keeps who cordoned and when it started. */
        r = drain_patch_cordon(n, NOW_USEC, &patch);
        fuzz_check(r == 0, "cordon patch failed on a node whose state parses: %d", r);
        {
                _cleanup_(drain_state_done) struct drain_state again = {};
                struct node_rec *m = NULL;

                apply_and_parse(node, patch, "cordon", &again, &m);
                fuzz_check(again.has_phase && again.phase == DRAIN_PHASE_EVICT_CLAIM_HOLDERS,
                           "cordon: phase not evict-claim-holders");
                fuzz_check(again.has_was_unschedulable, "cordon: was-unschedulable not recorded");
                fuzz_check(!st.has_was_unschedulable || again.was_unschedulable == st.was_unschedulable,
                           "cordon: was-unschedulable overwritten");
                fuzz_check(st.has_was_unschedulable || again.was_unschedulable == n->unschedulable,
                           "cordon: was-unschedulable not the node's spec.unschedulable");
                fuzz_check(!st.started_at_usec || again.started_at_usec == st.started_at_usec,
                           "cordon: started-at overwritten");
                fuzz_check(m->unschedulable, "cordon: node not unschedulable");
                fuzz_check(node_rec_find_taint(m, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT),
                           "cordon: no drain taint");
                for (size_t i = 0; i < n->n_taints; i++)
                        if (n->taints[i].key)
                                fuzz_check(node_rec_find_taint(m, n->taints[i].key, n->taints[i].effect),
                                           "cordon: taint %s lost", n->taints[i].key);
                node_rec_free(m);
        }
        free(patch);
        patch = NULL;

        /* every phase, with the recorded message (cut to the cap, at a character boundary) */
        for (int p = 0; p < _DRAIN_PHASE_MAX; p++) {
                _cleanup_(drain_state_done) struct drain_state again = {};

                r = drain_patch_phase(n, (enum drain_phase)p, NOW_USEC, st.message, &patch);
                fuzz_check(r == 0, "phase patch %d failed: %d", p, r);
                apply_and_parse(node, patch, "phase", &again, NULL);
                fuzz_check(again.has_phase && again.phase == (enum drain_phase)p,
                           "phase %d did not read back", p);
                /* written in whole seconds, as the API server keeps metav1.Time */
                fuzz_check(again.state_since_usec == NOW_USEC / 1000000 * 1000000,
                           "state-since did not read back");
                fuzz_check(!again.message == !st.message, "message presence changed");
                if (again.message) {
                        size_t l = strlen(again.message);

                        fuzz_check(l <= DRAIN_MESSAGE_MAX, "message of %zu bytes", l);
                        fuzz_check(strncmp(again.message, st.message, l) == 0, "message is not a prefix");
                        /* (API strings are valid UTF-8; the API server replaces invalid bytes) */
                        fuzz_check(l == strlen(st.message) || l + 4 > DRAIN_MESSAGE_MAX ||
                                           !utf8_valid(st.message),
                                   "message cut to %zu bytes, below the cap", l);
                        fuzz_check(st.message[l] == 0 || ((unsigned char)st.message[l] & 0xC0) != 0x80,
                                   "message cut inside a UTF-8 character");
                }
                free(patch);
                patch = NULL;
        }
        {
                _cleanup_(drain_state_done) struct drain_state again = {};

                r = drain_patch_message(n, NULL, &patch);
                fuzz_check(r == 0, "message removal failed: %d", r);
                apply_and_parse(node, patch, "message", &again, NULL);
                fuzz_check(!again.message, "message not removed");
                free(patch);
                patch = NULL;
        }

        /* remove the taint, then finish: no drain taint, no drainer.io/ annotation left */
        {
                _cleanup_(drain_state_done) struct drain_state again = {};
                struct node_rec *m = NULL;

                r = drain_patch_remove_taint(n, NOW_USEC, NULL, &patch);
                fuzz_check(r == 0, "remove-taint patch failed: %d", r);
                apply_and_parse(node, patch, "remove-taint", &again, &m);
                fuzz_check(again.phase == DRAIN_PHASE_RESTORE_DRIVERS, "remove-taint: phase");
                fuzz_check(!node_rec_find_taint(m, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT),
                           "remove-taint: drain taint left");
                node_rec_free(m);
                free(patch);
                patch = NULL;
        }
        for (int keep = 0; keep < 2; keep++) {
                _cleanup_(drain_state_done) struct drain_state again = {};
                struct node_rec *m = NULL;

                r = drain_patch_finish(n, true, keep, &patch);
                fuzz_check(r == 0, "finish patch failed: %d", r);
                apply_and_parse(node, patch, "finish", &again, &m);
                fuzz_check(!again.has_phase && !again.state_since_usec && !again.started_at_usec &&
                                   !again.has_was_unschedulable && !again.n_stops && !again.message,
                           "finish left drain state behind (patch %s)", patch);
                fuzz_check(keep ? again.request == st.request : again.request == DRAIN_REQUEST_NONE,
                           "finish: request %s", drain_request_to_string(again.request));
                fuzz_check(!m->unschedulable, "finish: still unschedulable");
                fuzz_check(!node_rec_find_taint(m, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT),
                           "finish: drain taint left");
                node_rec_free(m);
                free(patch);
                patch = NULL;
        }

out:
        free(patch);
        free(err);
        node_rec_free(n);
        cJSON_Delete(node);
        free(in);
        return 0;
}
