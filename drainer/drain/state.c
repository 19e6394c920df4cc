/* The drain's persisted state: parses and validates the drainer.io/ annotations
 * of a node record and builds the JSON merge patches that move it on. Pure
 * functions over records: owns only what it returns, never talks to the API
 * server, logs nothing above debug. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/json.h"
#include "drainer/log.h"
#include "drainer/objects.h"
#include "drainer/selector.h"
#include "drainer/state.h"
#include "drainer/text.h"
#include "drainer/timesrc.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

/* A bad value is quoted in error messages up to this many bytes. */
#define QUOTE_MAX       64
/* DRA driver names (ResourceSlice spec.driver) are DNS subdomains of at most 63. */
#define DRIVER_NAME_MAX 63

/* ---- enums ---- */

static const char *const drain_phase_table[_DRAIN_PHASE_MAX] = {
        [DRAIN_PHASE_WAITING] = "waiting",
        [DRAIN_PHASE_PREFLIGHT] = "preflight",
        [DRAIN_PHASE_CORDON] = "cordon",
        [DRAIN_PHASE_EVICT_CLAIM_HOLDERS] = "evict-claim-holders",
        [DRAIN_PHASE_EVICT_REST] = "evict-rest",
        [DRAIN_PHASE_WAIT_RELEASED] = "wait-released",
        [DRAIN_PHASE_STOP_DRIVERS] = "stop-drivers",
        [DRAIN_PHASE_DRAINED] = "drained",
        [DRAIN_PHASE_RESTORE_DRIVERS] = "restore-drivers",
        [DRAIN_PHASE_UNCORDON] = "uncordon",
};

DEFINE_STRING_TABLE_LOOKUP(drain_phase, enum drain_phase, _DRAIN_PHASE_MAX, _DRAIN_PHASE_INVALID)

static const struct drain_phase_info phase_info[_DRAIN_PHASE_MAX] = {
        [DRAIN_PHASE_WAITING] = { .stage = DRAIN_STAGE_QUEUED, .leaves = "a --max-parallel slot is held" },
        [DRAIN_PHASE_PREFLIGHT] = { .stage = DRAIN_STAGE_CHECKING,
                                    .leaves = "no blocker is found (or the drain is refused)" },
        [DRAIN_PHASE_CORDON] = { .stage = DRAIN_STAGE_TAKING,
                                 .changes_node = true,
                                 .leaves = "the node is seen cordoned and tainted" },
        [DRAIN_PHASE_EVICT_CLAIM_HOLDERS] = { .stage = DRAIN_STAGE_TAKING,
                                              .changes_node = true,
                                              .leaves = "every claim holder's eviction is accepted" },
        [DRAIN_PHASE_EVICT_REST] = { .stage = DRAIN_STAGE_TAKING,
                                     .changes_node = true,
                                     .evicts_rest = true,
                                     .leaves = "every other pod's eviction is accepted" },
        [DRAIN_PHASE_WAIT_RELEASED] = { .stage = DRAIN_STAGE_TAKING,
                                        .changes_node = true,
                                        .evicts_rest = true,
                                        .leaves = "the evicted pods are gone and no claim is on the node" },
        [DRAIN_PHASE_STOP_DRIVERS] = { .stage = DRAIN_STAGE_TAKING,
                                       .changes_node = true,
                                       .evicts_rest = true,
                                       .leaves = "the DRA drivers are stopped" },
        [DRAIN_PHASE_DRAINED] = { .stage = DRAIN_STAGE_DRAINED,
                                  .changes_node = true,
                                  .leaves = "an undo is asked for" },
        [DRAIN_PHASE_RESTORE_DRIVERS] = { .stage = DRAIN_STAGE_RESTORING,
                                          .changes_node = true,
                                          .leaves = "every DRA driver is healthy again" },
        [DRAIN_PHASE_UNCORDON] = { .stage = DRAIN_STAGE_RESTORING,
                                   .changes_node = true,
                                   .drivers_back = true,
                                   .leaves = "the node is uncordoned and drainer's annotations are gone" },
};

const struct drain_phase_info *drain_phase_info(enum drain_phase p) {
        return p >= 0 && p < _DRAIN_PHASE_MAX ? &phase_info[p] : NULL;
}

bool drain_phase_changes_node(enum drain_phase p) {
        const struct drain_phase_info *i = drain_phase_info(p);

        return i && i->changes_node;
}

bool drain_phase_evicts_rest(enum drain_phase p) {
        const struct drain_phase_info *i = drain_phase_info(p);

        return i && i->evicts_rest;
}

bool drain_phase_drivers_back(enum drain_phase p) {
        const struct drain_phase_info *i = drain_phase_info(p);

        return i && i->drivers_back;
}

bool drain_phase_in_stage(enum drain_phase p, enum drain_stage stage) {
        const struct drain_phase_info *i = drain_phase_info(p);

        return i && i->stage == stage;
}

/* "none" is never an annotation value: an absent request reads as NONE. */
static const char *const drain_request_table[_DRAIN_REQUEST_MAX] = {
        [DRAIN_REQUEST_NONE] = "none",
        [DRAIN_REQUEST_DRAIN] = "drain",
        [DRAIN_REQUEST_UNCORDON] = "uncordon",
};

DEFINE_STRING_TABLE_LOOKUP(drain_request, enum drain_request, _DRAIN_REQUEST_MAX, _DRAIN_REQUEST_INVALID)

/* ---- records ---- */

void drain_state_done(struct drain_state *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n_stops && i < DRAIN_STATE_MAX_STOPS; i++)
                driver_stop_record_done(&s->stops[i]);
        free(s->message);
        free(s->taint_rules);
        *s = (struct drain_state){};
}

/* ---- syntax checks ---- */

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63. */
static bool is_dns_label(const char *s, size_t n) {
        if (n == 0 || n > 63 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
                return false;
        for (size_t i = 1; i + 1 < n; i++)
                if (!is_lower_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

/* RFC 1123 subdomain: labels joined by dots, at most max in all. */
static bool is_dns_subdomain(const char *s, size_t max) {
        size_t n = strlen(s);
        const char *p = s;

        if (n == 0 || n > max)
                return false;
        for (;;) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t)(dot - p) : strlen(p);

                if (!is_dns_label(p, l))
                        return false;
                if (!dot)
                        return true;
                p = dot + 1;
        }
}

/* "namespace/name" of a DaemonSet. */
static bool daemonset_ref_is_valid(const char *s) {
        const char *slash = strchr(s, '/');

        return slash && is_dns_label(s, (size_t)(slash - s)) && is_dns_subdomain(slash + 1, 253);
}

static bool driver_name_is_valid(const char *s) {
        return is_dns_subdomain(s, DRIVER_NAME_MAX);
}

/* ---- error messages ---- */

static char *strjoin(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        char *s = malloc(la + lb + 1);

        if (!s)
                return NULL;
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
        return s;
}

/* s between double quotes, control characters, quotes and backslashes
 * escaped, cut after QUOTE_MAX bytes ("..."), so any value fits on one line. */
static char *quote(const char *s) {
        size_t l = utf8_prefix(s, QUOTE_MAX);
        char *buf, *p;

        /* Worst case 4 bytes per input byte, quotes, "..." and NUL. */
        buf = malloc(l * 4 + 6);
        if (!buf)
                return NULL;
        p = buf;
        *p++ = '"';
        for (size_t i = 0; i < l; i++) {
                unsigned char c = (unsigned char)s[i];

                if (c == '"' || c == '\\') {
                        *p++ = '\\';
                        *p++ = (char)c;
                } else if (c == '\n') {
                        *p++ = '\\';
                        *p++ = 'n';
                } else if (c < 0x20 || c == 0x7f)
                        p += sprintf(p, "\\x%02x", c);
                else
                        *p++ = (char)c;
        }
        if (s[l])
                p = stpcpy(p, "...");
        *p++ = '"';
        *p = 0;
        return buf;
}

#define PHASE_LIST                                                                                   \
        "preflight, cordon, evict-claim-holders, evict-rest, wait-released, stop-drivers, drained, " \
        "restore-drivers, uncordon"

enum hint {
        HINT_RESET_STATE,
        HINT_RESET_DRIVER_STOP,
        HINT_RESET_REQUEST,
        HINT_WAS_UNSCHEDULABLE,
};

/* The one-line -EBADMSG message: "node N: annotation K="V" WHY; HINT". */
static int bad_annotation(const struct node_rec *n, const char *key, const char *value, const char *why,
                          enum hint hint, char **ret_error) {
        _cleanup_free_ char *q = NULL;
        char *msg = NULL; /* asprintf() leaves it undefined on failure: no cleanup */
        int r = -1;

        log_debug("node \"%s\": bad annotation %s: %s", n->name, key, why);
        if (!ret_error)
                return -EBADMSG;
        q = quote(value);
        if (!q)
                return -ENOMEM;
        switch (hint) {
        case HINT_RESET_STATE:
        case HINT_RESET_DRIVER_STOP:
                r = asprintf(&msg,
                             "node %s: annotation %s=%s %s; to reset, run: kubectl annotate node %s "
                             "drainer.io/state- drainer.io/state-since- drainer.io/started-at- "
                             "drainer.io/driver-stop- drainer.io/message- (drainer.io/was-unschedulable "
                             "records who cordoned: keep it, or remove it and uncordon by hand)%s",
                             n->name, key, q, why, n->name,
                             hint == HINT_RESET_DRIVER_STOP
                                     ? "; a reset does not restart stopped drivers: set node labels that "
                                       "read " DRIVER_PAUSED_VALUE " back and start stopped units by hand"
                                     : "");
                break;
        case HINT_RESET_REQUEST:
                r = asprintf(&msg,
                             "node %s: annotation %s=%s %s; to reset, run: kubectl annotate node %s %s-",
                             n->name, key, q, why, n->name, key);
                break;
        case HINT_WAS_UNSCHEDULABLE:
                r = asprintf(&msg,
                             "node %s: annotation %s=%s %s; record whether the node was cordoned before "
                             "drainer cordoned it: kubectl annotate --overwrite node %s %s=true (or =false)",
                             n->name, key, q, why, n->name, key);
                break;
        }
        if (r < 0)
                return -ENOMEM;
        *ret_error = msg;
        return -EBADMSG;
}

/* ---- driver-stop JSON ---- */

/* Sets *ret_why to a malloc'd "[i].field ..." description ("[i] ..." when
 * field is ""); returns -EBADMSG (or -ENOMEM if even that fails). */
static int stop_error(char **ret_why, size_t i, const char *field, const char *value, const char *what) {
        _cleanup_free_ char *q = NULL;
        char *why;
        int r;

        if (value) {
                q = quote(value);
                if (!q)
                        return -ENOMEM;
                r = asprintf(&why, "[%zu]%s%s %s %s", i, *field ? "." : "", field, q, what);
        } else
                r = asprintf(&why, "[%zu]%s%s %s", i, *field ? "." : "", field, what);
        if (r < 0)
                return -ENOMEM;
        *ret_why = why;
        return -EBADMSG;
}

/* Optional string member: absent or null gives NULL; another type is an error. */
static int opt_string(const cJSON *o, const char *field, size_t i, const char **ret, char **ret_why) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);

        if (!v || cJSON_IsNull(v)) {
                *ret = NULL;
                return 0;
        }
        if (!cJSON_IsString(v))
                return stop_error(ret_why, i, field, NULL, "is not a string");
        *ret = v->valuestring;
        return 0;
}

static int parse_stop(const cJSON *o, size_t i, struct driver_stop_record *rec, char **ret_why) {
        const cJSON *v, *d;
        const char *strategy, *ds;
        int r;

        if (!cJSON_IsObject(o))
                return stop_error(ret_why, i, "", NULL, "is not an object");

        r = opt_string(o, "strategy", i, &strategy, ret_why);
        if (r < 0)
                return r;
        if (!strategy)
                return stop_error(ret_why, i, "strategy", NULL, "is missing");
        rec->ops = driver_stop_find(strategy);
        if (!rec->ops) {
                _cleanup_free_ char *what = NULL;

                if (asprintf(&what, "is not %s", driver_stop_names(false)) < 0)
                        return -ENOMEM;
                return stop_error(ret_why, i, "strategy", strategy, what);
        }
        /* The strategy's own members (key and old, unit). */
        if (rec->ops->read_record) {
                struct driver_stop_bad bad = {};

                r = rec->ops->read_record(o, rec, &bad);
                if (r == -EBADMSG)
                        return stop_error(ret_why, i, bad.field, bad.value, bad.what);
                if (r < 0)
                        return r;
        }

        r = opt_string(o, "daemonset", i, &ds, ret_why);
        if (r < 0)
                return r;
        if (ds) {
                if (!daemonset_ref_is_valid(ds))
                        return stop_error(ret_why, i, "daemonset", ds, "is not namespace/name");
                rec->daemonset = strdup(ds);
                if (!rec->daemonset)
                        return -ENOMEM;
        }

        v = cJSON_GetObjectItemCaseSensitive(o, "drivers");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsArray(v))
                        return stop_error(ret_why, i, "drivers", NULL, "is not an array");
                if (cJSON_GetArraySize(v) > DRIVER_STOP_MAX_DRIVERS)
                        return stop_error(ret_why, i, "drivers", NULL,
                                          "has more than " STRINGIFY(DRIVER_STOP_MAX_DRIVERS) " entries");
                cJSON_ArrayForEach(d, v) {
                        if (!cJSON_IsString(d))
                                return stop_error(ret_why, i, "drivers", NULL,
                                                  "has an entry that is not a string");
                        if (!driver_name_is_valid(d->valuestring))
                                return stop_error(ret_why, i, "drivers", d->valuestring,
                                                  "is not a DRA driver name");
                        rec->drivers[rec->n_drivers] = strdup(d->valuestring);
                        if (!rec->drivers[rec->n_drivers])
                                return -ENOMEM;
                        rec->n_drivers++;
                }
        }
        return 0;
}

/* Fills s->stops from the annotation value; on -EBADMSG *ret_why says why. */
static int parse_stops(const char *value, struct drain_state *s, char **ret_why) {
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        const cJSON *o;
        size_t i = 0;
        int r;

        j = cJSON_Parse(value);
        if (!j)
                /* cJSON gives no way to tell a syntax error from OOM. */
                return (*ret_why = strdup("is not JSON")) ? -EBADMSG : -ENOMEM;
        if (!cJSON_IsArray(j))
                return (*ret_why = strdup("is not a JSON array")) ? -EBADMSG : -ENOMEM;
        if (cJSON_GetArraySize(j) > DRAIN_STATE_MAX_STOPS)
                return (*ret_why = strdup("has more than " STRINGIFY(DRAIN_STATE_MAX_STOPS) " entries"))
                               ? -EBADMSG
                               : -ENOMEM;
        cJSON_ArrayForEach(o, j) {
                /* Count the entry first so drain_state_done() frees a half-built one. */
                s->n_stops = i + 1;
                r = parse_stop(o, i, &s->stops[i], ret_why);
                if (r < 0)
                        return r;
                i++;
        }
        return 0;
}

static int stop_to_json(const struct driver_stop_record *rec, cJSON *arr) {
        cJSON *o, *drivers;
        int r;

        if (!rec->ops || rec->n_drivers > DRIVER_STOP_MAX_DRIVERS)
                return -EINVAL;
        if (rec->daemonset && !daemonset_ref_is_valid(rec->daemonset))
                return -EINVAL;
        for (size_t i = 0; i < rec->n_drivers; i++)
                if (!rec->drivers[i] || !driver_name_is_valid(rec->drivers[i]))
                        return -EINVAL;

        o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        if (!cJSON_AddStringToObject(o, "strategy", rec->ops->name))
                return -ENOMEM;
        /* The strategy's own members, and its rules for them. */
        if (rec->ops->write_record) {
                r = rec->ops->write_record(rec, o);
                if (r < 0)
                        return r;
        }
        if (rec->daemonset && !cJSON_AddStringToObject(o, "daemonset", rec->daemonset))
                return -ENOMEM;
        if (rec->n_drivers > 0) {
                drivers = cJSON_AddArrayToObject(o, "drivers");
                if (!drivers)
                        return -ENOMEM;
                for (size_t i = 0; i < rec->n_drivers; i++) {
                        cJSON *d = cJSON_CreateString(rec->drivers[i]);

                        if (!d || !cJSON_AddItemToArray(drivers, d)) {
                                cJSON_Delete(d);
                                return -ENOMEM;
                        }
                }
        }
        return 0;
}

/* ---- parse ---- */

static int parse_time(const struct node_rec *n, const char *key, int64_t *ret, char **ret_error) {
        const char *v = kv_get(n->annotations, n->n_annotations, key);
        int64_t t;

        if (!v) {
                *ret = 0;
                return 0;
        }
        /* 0 means "absent", and drainer never wrote a time before 1970. */
        if (timesrc_parse_rfc3339(v, &t) < 0 || t <= 0)
                return bad_annotation(n, key, v, "is not an RFC 3339 time", HINT_RESET_STATE, ret_error);
        *ret = t;
        return 0;
}

int drain_state_parse(const struct node_rec *n, struct drain_state *ret, char **ret_error) {
        _cleanup_(drain_state_done) struct drain_state s = {};
        const struct kv *a;
        size_t na;
        const char *v;
        int r;

        assert(n);
        assert(ret);
        a = n->annotations;
        na = n->n_annotations;

        v = kv_get(a, na, DRAINER_ANN_REQUEST);
        if (v) {
                s.request = drain_request_from_string(v);
                if (s.request <= DRAIN_REQUEST_NONE)
                        return bad_annotation(n, DRAINER_ANN_REQUEST, v,
                                              "is not a request (drain, uncordon)", HINT_RESET_REQUEST,
                                              ret_error);
        }

        v = kv_get(a, na, DRAINER_ANN_STATE);
        if (v) {
                s.phase = drain_phase_from_string(v);
                if (s.phase < 0)
                        return bad_annotation(n, DRAINER_ANN_STATE, v,
                                              "is not a drainer phase (" PHASE_LIST ")", HINT_RESET_STATE,
                                              ret_error);
                s.has_phase = true;
        }

        r = parse_time(n, DRAINER_ANN_STATE_SINCE, &s.state_since_usec, ret_error);
        if (r < 0)
                return r;
        r = parse_time(n, DRAINER_ANN_STARTED_AT, &s.started_at_usec, ret_error);
        if (r < 0)
                return r;

        v = kv_get(a, na, DRAINER_ANN_WAS_UNSCHEDULABLE);
        if (v) {
                if (!streq(v, "true") && !streq(v, "false"))
                        return bad_annotation(n, DRAINER_ANN_WAS_UNSCHEDULABLE, v, "is not true or false",
                                              HINT_WAS_UNSCHEDULABLE, ret_error);
                s.has_was_unschedulable = true;
                s.was_unschedulable = streq(v, "true");
        }

        v = kv_get(a, na, DRAINER_ANN_DRIVER_STOP);
        if (v) {
                _cleanup_free_ char *why = NULL, *full = NULL;

                r = parse_stops(v, &s, &why);
                if (r == -EBADMSG) {
                        full = strjoin("is not a driver-stop record: ", why);
                        if (!full)
                                return -ENOMEM;
                        return bad_annotation(n, DRAINER_ANN_DRIVER_STOP, v, full, HINT_RESET_DRIVER_STOP,
                                              ret_error);
                }
                if (r < 0)
                        return r;
        }

        v = kv_get(a, na, DRAINER_ANN_OUT_OF_SERVICE);
        if (v && (timesrc_parse_rfc3339(v, &s.out_of_service_usec) < 0 || s.out_of_service_usec <= 0))
                return bad_annotation(
                        n, DRAINER_ANN_OUT_OF_SERVICE, v,
                        "is not an RFC 3339 time (when drainer applied the taint " OUT_OF_SERVICE_TAINT_KEY
                        "; without it drainer never removes that "
                        "taint)",
                        HINT_RESET_REQUEST, ret_error);

        v = kv_get(a, na, DRAINER_ANN_TAINT_RULES);
        if (v) {
                for (const char *c = v; *c; c++)
                        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                              *c == '.' || *c == ','))
                                return bad_annotation(n, DRAINER_ANN_TAINT_RULES, v,
                                                      "is not a list of DeviceTaintRule names",
                                                      HINT_RESET_STATE, ret_error);
                s.taint_rules = strdup(v);
                if (!s.taint_rules)
                        return -ENOMEM;
        }
        v = kv_get(a, na, DRAINER_ANN_MESSAGE);
        if (v) {
                s.message = strdup(v);
                if (!s.message)
                        return -ENOMEM;
        }

        *ret = s;
        s = (struct drain_state){};
        return 0;
}

/* ---- patches ---- */

/* {"metadata":{"resourceVersion":RV}}: every patch is conditional on the
 * version the engine decided from. */
static int patch_new(const struct node_rec *n, cJSON **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *meta;

        assert(n);
        if (!n->resource_version)
                return log_debug_errno(EINVAL,
                                       "node \"%s\" has no resourceVersion, refusing an "
                                       "unconditional patch",
                                       strna(n->name));
        root = cJSON_CreateObject();
        if (!root)
                return -ENOMEM;
        meta = cJSON_AddObjectToObject(root, "metadata");
        if (!meta || !cJSON_AddStringToObject(meta, "resourceVersion", n->resource_version))
                return -ENOMEM;
        *ret = TAKE_PTR(root);
        return 0;
}

/* The object at root.parent.name, created if needed. */
static cJSON *sub_object(cJSON *root, const char *parent, const char *name) {
        cJSON *p = cJSON_GetObjectItemCaseSensitive(root, parent), *o;

        if (!p)
                p = cJSON_AddObjectToObject(root, parent);
        if (!p)
                return NULL;
        if (!name)
                return p;
        o = cJSON_GetObjectItemCaseSensitive(p, name);
        return o ? o : cJSON_AddObjectToObject(p, name);
}

/* Sets metadata.annotations[key] to value, or null (removal) when value is NULL. */
static int set_annotation(cJSON *root, const char *key, const char *value) {
        cJSON *ann = sub_object(root, "metadata", "annotations");

        if (!ann)
                return -ENOMEM;
        cJSON_DeleteItemFromObjectCaseSensitive(ann, key); /* set once, whoever asks twice */
        if (!(value ? cJSON_AddStringToObject(ann, key, value) : cJSON_AddNullToObject(ann, key)))
                return -ENOMEM;
        return 0;
}

static int set_time_annotation(cJSON *root, const char *key, int64_t usec) {
        char buf[64];
        int r;

        r = timesrc_format_rfc3339(usec, buf, sizeof buf);
        if (r < 0)
                return r;
        return set_annotation(root, key, buf);
}

/* drainer.io/message, cut to DRAIN_MESSAGE_MAX at a character boundary. */
static int set_message(cJSON *root, const char *message) {
        _cleanup_free_ char *m = NULL;

        if (!message)
                return set_annotation(root, DRAINER_ANN_MESSAGE, NULL);
        m = strndup(message, utf8_prefix(message, DRAIN_MESSAGE_MAX));
        if (!m)
                return -ENOMEM;
        return set_annotation(root, DRAINER_ANN_MESSAGE, m);
}

static int set_phase(cJSON *root, enum drain_phase phase, int64_t now_usec) {
        const char *p = drain_phase_to_string(phase);
        int r;

        if (!p)
                return -EINVAL;
        r = set_annotation(root, DRAINER_ANN_STATE, p);
        if (r < 0)
                return r;
        return set_time_annotation(root, DRAINER_ANN_STATE_SINCE, now_usec);
}

static bool is_drain_taint(const struct node_taint *t) {
        return streq_ptr(t->key, DRAIN_TAINT_KEY) && streq_ptr(t->effect, DRAIN_TAINT_EFFECT);
}

static int add_taint(cJSON *arr, const char *key, const char *value, const char *effect,
                     const char *time_added) {
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        if ((key && !cJSON_AddStringToObject(o, "key", key)) ||
            (value && !cJSON_AddStringToObject(o, "value", value)) ||
            (effect && !cJSON_AddStringToObject(o, "effect", effect)) ||
            (time_added && !cJSON_AddStringToObject(o, "timeAdded", time_added)))
                return -ENOMEM;
        return 0;
}

static bool is_out_of_service_taint(const struct node_taint *t) {
        return streq_ptr(t->key, OUT_OF_SERVICE_TAINT_KEY) &&
               streq_ptr(t->effect, OUT_OF_SERVICE_TAINT_EFFECT);
}

/* spec.taints with the drain taint (drain) and the out-of-service taint (oos) each
 * present (1), absent (0) or as they are (-1). A merge patch replaces the whole list
 * (core/v1 has no merge key for taints), so when it changes the list is n's, in
 * order, plus or minus ours; when it does not, the field stays out of the patch and
 * nobody's taints are rewritten. */
static int set_taints(cJSON *root, const struct node_rec *n, int drain, int oos) {
        bool has_drain = node_rec_find_taint(n, DRAIN_TAINT_KEY, DRAIN_TAINT_EFFECT);
        bool has_oos = node_rec_find_taint(n, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_EFFECT);
        cJSON *spec, *arr;
        int r;

        if ((drain < 0 || (drain > 0) == has_drain) && (oos < 0 || (oos > 0) == has_oos))
                return 0;
        spec = sub_object(root, "spec", NULL);
        if (!spec)
                return -ENOMEM;
        arr = cJSON_CreateArray();
        if (!arr)
                return -ENOMEM;
        if (!cJSON_AddItemToObject(spec, "taints", arr)) {
                cJSON_Delete(arr);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n->n_taints; i++) {
                if ((drain >= 0 && is_drain_taint(&n->taints[i])) ||
                    (oos >= 0 && is_out_of_service_taint(&n->taints[i])))
                        continue;
                r = add_taint(arr, n->taints[i].key, n->taints[i].value, n->taints[i].effect,
                              n->taints[i].time_added);
                if (r < 0)
                        return r;
        }
        /* A kept taint stays as it was, its value and timeAdded included. */
        for (size_t i = 0; i < n->n_taints; i++) {
                bool keep = (drain > 0 && is_drain_taint(&n->taints[i])) ||
                            (oos > 0 && is_out_of_service_taint(&n->taints[i]));

                if (!keep)
                        continue;
                r = add_taint(arr, n->taints[i].key, n->taints[i].value, n->taints[i].effect,
                              n->taints[i].time_added);
                if (r < 0)
                        return r;
        }
        if (drain > 0 && !has_drain) {
                r = add_taint(arr, DRAIN_TAINT_KEY, NULL, DRAIN_TAINT_EFFECT, NULL);
                if (r < 0)
                        return r;
        }
        if (oos > 0 && !has_oos) {
                r = add_taint(arr, OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_VALUE,
                              OUT_OF_SERVICE_TAINT_EFFECT, NULL);
                if (r < 0)
                        return r;
        }
        if (cJSON_GetArraySize(arr) == 0) {
                /* null removes the field; [] would leave an empty list behind. */
                cJSON *null = cJSON_CreateNull();

                if (!null || !cJSON_ReplaceItemInObjectCaseSensitive(spec, "taints", null)) {
                        cJSON_Delete(null);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int set_drain_taint(cJSON *root, const struct node_rec *n, bool present) {
        return set_taints(root, n, present, -1);
}

/* The out-of-service taint goes with the drain taint only when drainer recorded it
 * (drainer.io/out-of-service): a taint someone else applied is theirs to remove. */
static int remove_drain_taints(cJSON *root, const struct node_rec *n) {
        bool ours = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_OUT_OF_SERVICE);
        int r;

        r = set_taints(root, n, 0, ours ? 0 : -1);
        if (r < 0 || !ours)
                return r;
        return set_annotation(root, DRAINER_ANN_OUT_OF_SERVICE, NULL);
}

static int set_unschedulable(cJSON *root, bool value) {
        cJSON *spec = sub_object(root, "spec", NULL);

        return spec && cJSON_AddBoolToObject(spec, "unschedulable", value) ? 0 : -ENOMEM;
}

static int patch_print(const cJSON *root, char **ret) {
        char *s = cJSON_PrintUnformatted(root);

        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int drain_patch_cordon(const struct node_rec *n, int64_t now_usec, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const char *v;
        int64_t t;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;

        /* Who cordoned is recorded once: after a crash between two attempts the
         * node is already unschedulable by our hand and must not read as the user's. */
        v = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_WAS_UNSCHEDULABLE);
        if (v && !streq(v, "true") && !streq(v, "false"))
                return log_debug_errno(EBADMSG, "node \"%s\": bad %s, not cordoning", n->name,
                                       DRAINER_ANN_WAS_UNSCHEDULABLE);
        if (!v) {
                r = set_annotation(root, DRAINER_ANN_WAS_UNSCHEDULABLE, n->unschedulable ? "true" : "false");
                if (r < 0)
                        return r;
        }
        v = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_STARTED_AT);
        if (v && (timesrc_parse_rfc3339(v, &t) < 0 || t <= 0))
                return log_debug_errno(EBADMSG, "node \"%s\": bad %s, not cordoning", n->name,
                                       DRAINER_ANN_STARTED_AT);
        if (!v) {
                r = set_time_annotation(root, DRAINER_ANN_STARTED_AT, now_usec);
                if (r < 0)
                        return r;
        }
        r = set_phase(root, DRAIN_PHASE_CORDON, now_usec);
        if (r < 0)
                return r;
        /* A message from before (e.g. serve's "waiting for a slot") is over now. */
        r = set_annotation(root, DRAINER_ANN_MESSAGE, "cordoned; evicting next");
        if (r < 0)
                return r;
        r = set_unschedulable(root, true);
        if (r < 0)
                return r;
        r = set_drain_taint(root, n, true);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_phase(const struct node_rec *n, enum drain_phase phase, int64_t now_usec,
                      const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        if (!drain_phase_to_string(phase))
                return -EINVAL;
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_phase(root, phase, now_usec);
        if (r < 0)
                return r;
        r = set_message(root, message);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_message(const struct node_rec *n, const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_message(root, message);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_driver_stop(const struct node_rec *n, const struct driver_stop_record *stops, size_t n_stops,
                            char **ret) {
        return drain_patch_driver_stop_phase(n, stops, n_stops, _DRAIN_PHASE_INVALID, 0, NULL, ret);
}

int drain_patch_driver_stop_phase(const struct node_rec *n, const struct driver_stop_record *stops,
                                  size_t n_stops, enum drain_phase phase, int64_t now_usec,
                                  const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL, *arr = NULL;
        _cleanup_free_ char *value = NULL;
        int r;

        assert(ret);
        assert(stops || n_stops == 0);
        if (n_stops > DRAIN_STATE_MAX_STOPS)
                return -EINVAL;
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        if (n_stops > 0) {
                arr = cJSON_CreateArray();
                if (!arr)
                        return -ENOMEM;
                for (size_t i = 0; i < n_stops; i++) {
                        r = stop_to_json(&stops[i], arr);
                        if (r < 0)
                                return r;
                }
                value = cJSON_PrintUnformatted(arr);
                if (!value)
                        return -ENOMEM;
        }
        r = set_annotation(root, DRAINER_ANN_DRIVER_STOP, value);
        if (r < 0)
                return r;
        if (phase != _DRAIN_PHASE_INVALID) {
                if (!drain_phase_to_string(phase))
                        return -EINVAL;
                r = set_phase(root, phase, now_usec);
                if (r < 0)
                        return r;
                r = set_message(root, message);
                if (r < 0)
                        return r;
        }
        return patch_print(root, ret);
}

int drain_patch_label(const struct node_rec *n, const char *key, const char *value, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *labels;
        int r;

        assert(ret);
        if (!label_key_is_valid(key) || (value && !label_value_is_valid(value)))
                return -EINVAL;
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        labels = sub_object(root, "metadata", "labels");
        if (!labels ||
            !(value ? cJSON_AddStringToObject(labels, key, value) : cJSON_AddNullToObject(labels, key)))
                return -ENOMEM;
        return patch_print(root, ret);
}

int drain_patch_remove_taint(const struct node_rec *n, int64_t now_usec, const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_phase(root, DRAIN_PHASE_RESTORE_DRIVERS, now_usec);
        if (r < 0)
                return r;
        if (message) {
                r = set_message(root, message);
                if (r < 0)
                        return r;
        }
        r = remove_drain_taints(root, n);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_finish(const struct node_rec *n, bool uncordon, bool keep_request, char **ret) {
        static const char *const keys[] = {
                DRAINER_ANN_STATE,       DRAINER_ANN_STATE_SINCE,
                DRAINER_ANN_STARTED_AT,  DRAINER_ANN_WAS_UNSCHEDULABLE,
                DRAINER_ANN_DRIVER_STOP, DRAINER_ANN_MESSAGE,
        };
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        if (!keep_request) {
                r = set_annotation(root, DRAINER_ANN_REQUEST, NULL);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                r = set_annotation(root, keys[i], NULL);
                if (r < 0)
                        return r;
        }
        /* Every other drainer.io/ annotation too (e.g. serve's shutdown-boot-id): the node
         * leaves drainer's hands clean. node_rec keeps only drainer.io/ annotations. */
        for (size_t i = 0; i < n->n_annotations; i++) {
                if (streq(n->annotations[i].key, DRAINER_ANN_REQUEST) ||
                    cJSON_GetObjectItemCaseSensitive(json_path(root, "metadata.annotations"),
                                                     n->annotations[i].key))
                        continue;
                r = set_annotation(root, n->annotations[i].key, NULL);
                if (r < 0)
                        return r;
        }
        if (uncordon) {
                r = set_unschedulable(root, false);
                if (r < 0)
                        return r;
        }
        r = remove_drain_taints(root, n);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_out_of_service(const struct node_rec *n, int64_t now_usec, const char *message, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_time_annotation(root, DRAINER_ANN_OUT_OF_SERVICE, now_usec);
        if (r < 0)
                return r;
        if (message) {
                r = set_message(root, message);
                if (r < 0)
                        return r;
        }
        r = set_taints(root, n, -1, 1);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

int drain_patch_request(const struct node_rec *n, const char *value, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r;

        assert(ret);
        if (value && drain_request_from_string(value) <= DRAIN_REQUEST_NONE)
                return -EINVAL;
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        r = set_annotation(root, DRAINER_ANN_REQUEST, value);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}

/* ---- node lifecycle conditions (--node-conditions) ---- */

#define CONDITION_REASON_PREFIX "Drainer"

struct condition_want {
        const char *status, *reason, *message;
};

static void conditions_wanted(bool has_phase, enum drain_phase phase,
                              struct condition_want w[_NODE_CONDITION_MAX]) {
        static const struct condition_want
                draining[] = {
                        [NODE_CONDITION_DRAIN_IN_PROGRESS] = { "True", "DrainerDraining",
                                                               "drainer is draining the node in the DRA-safe "
                                                               "order (its phase: annotation drainer.io/state)" },
                        [NODE_CONDITION_DRAINED] = { "False", "DrainerDraining", "drainer is draining the node" },
                },
                drained[] = {
                        [NODE_CONDITION_DRAIN_IN_PROGRESS] = { "False", "DrainerDrained",
                                                               "drainer drained the node" },
                        [NODE_CONDITION_DRAINED] = { "True", "DrainerDrained",
                                                     "drained by drainer: no pods, no ResourceClaims, DRA "
                                                     "drivers stopped" },
                },
                restoring[] = {
                        [NODE_CONDITION_DRAIN_IN_PROGRESS] = { "False", "DrainerRestoring",
                                                               "drainer is restoring the node" },
                        [NODE_CONDITION_DRAINED] = { "False", "DrainerRestoring",
                                                     "drainer is restoring the DRA drivers and uncordoning" },
                },
                idle[] = {
                        [NODE_CONDITION_DRAIN_IN_PROGRESS] = { "False", "DrainerRestored",
                                                               "no drain by drainer is in progress" },
                        [NODE_CONDITION_DRAINED] = { "False", "DrainerRestored",
                                                     "drainer restored the node (or no drain by drainer is "
                                                     "recorded on it)" },
                };
        const struct condition_want *src = idle;

        if (has_phase && drain_phase_in_stage(phase, DRAIN_STAGE_TAKING))
                src = draining;
        else if (has_phase && drain_phase_in_stage(phase, DRAIN_STAGE_DRAINED))
                src = drained;
        else if (has_phase && drain_phase_in_stage(phase, DRAIN_STAGE_RESTORING))
                src = restoring;
        memcpy(w, src, sizeof(struct condition_want) * _NODE_CONDITION_MAX);
}

int drain_patch_conditions(const struct node_rec *n, bool has_phase, enum drain_phase phase,
                           int64_t now_usec, char **ret) {
        struct condition_want w[_NODE_CONDITION_MAX];
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *list = NULL;
        char now[64];
        bool idle;
        int r;

        assert(n);
        assert(ret);
        conditions_wanted(has_phase, phase, w);
        idle = streq(w[0].reason, "DrainerRestored");
        r = timesrc_format_rfc3339(now_usec, now, sizeof(now));
        if (r < 0)
                return r;
        for (size_t c = 0; c < _NODE_CONDITION_MAX; c++) {
                const struct node_condition_rec *have = &n->lifecycle[c];
                cJSON *item;

                if (streq_ptr(have->status, w[c].status) && streq_ptr(have->reason, w[c].reason))
                        continue;
                /* No drain: only our own conditions are set back, never someone else's,
                 * and a node that never had them gets none. */
                if (idle &&
                    (!have->status || !have->reason ||
                     strncmp(have->reason, CONDITION_REASON_PREFIX, strlen(CONDITION_REASON_PREFIX)) != 0))
                        continue;
                if (!root) {
                        cJSON *status;

                        root = cJSON_CreateObject();
                        status = root ? cJSON_AddObjectToObject(root, "status") : NULL;
                        list = status ? cJSON_AddArrayToObject(status, "conditions") : NULL;
                        if (!list)
                                return -ENOMEM;
                }
                item = cJSON_CreateObject();
                if (!item)
                        return -ENOMEM;
                cJSON_AddItemToArray(list, item);
                if (!cJSON_AddStringToObject(item, "type", node_lifecycle_condition_type(c)) ||
                    !cJSON_AddStringToObject(item, "status", w[c].status) ||
                    !cJSON_AddStringToObject(item, "reason", w[c].reason) ||
                    !cJSON_AddStringToObject(item, "message", w[c].message) ||
                    !cJSON_AddStringToObject(item, "lastHeartbeatTime", now))
                        return -ENOMEM;
                if (!streq_ptr(have->status, w[c].status) &&
                    !cJSON_AddStringToObject(item, "lastTransitionTime", now))
                        return -ENOMEM;
        }
        if (!root) {
                *ret = NULL;
                return 0;
        }
        *ret = cJSON_PrintUnformatted(root);
        return *ret ? 1 : -ENOMEM;
}

/* ---- driver-scoped state ---- */

/* The scope of a drainer.io/ key: what follows the first dot after the prefix (NULL:
 * none, the node's own), and the length of the plain key before it. */
static const char *key_scope(const char *key, size_t *ret_plain_len) {
        const char *dot;

        if (strncmp(key, DRAINER_ANN_PREFIX, strlen(DRAINER_ANN_PREFIX)) != 0)
                return NULL;
        dot = strchr(key + strlen(DRAINER_ANN_PREFIX), '.');
        if (!dot)
                return NULL;
        *ret_plain_len = (size_t)(dot - key);
        return dot + 1;
}

int drain_scope_check(const char *driver, char *msg, size_t size) {
        /* the longest plain name part: "was-unschedulable" */
        size_t room = 63 - strlen(DRAINER_ANN_WAS_UNSCHEDULABLE) + strlen(DRAINER_ANN_PREFIX) - 1;

        assert(driver);
        if (!driver_name_is_valid(driver)) {
                snprintf(msg, size,
                         "--driver: \"%s\" is not a DRA driver name (a DNS subdomain of at most %d "
                         "characters, as in ResourceSlice spec.driver)",
                         driver, DRIVER_NAME_MAX);
                return -EINVAL;
        }
        if (strlen(driver) > room) {
                snprintf(msg, size,
                         "--driver: \"%s\" is longer than the %zu characters drainer's per-driver "
                         "annotations "
                         "(" DRAINER_ANN_WAS_UNSCHEDULABLE ".NAME) leave for it",
                         driver, room);
                return -EINVAL;
        }
        return 0;
}

int drain_scope_view_init(struct drain_scope_view *ret, const struct node_rec *n, const char *scope) {
        size_t n_kv = 0, bytes = 0, at = 0;

        assert(ret && n);
        *ret = (struct drain_scope_view){ .node = *n };
        for (size_t i = 0; i < n->n_annotations; i++)
                bytes += strlen(n->annotations[i].key) + 1;
        if (n->n_annotations > 0) {
                ret->kv = calloc(n->n_annotations, sizeof(*ret->kv));
                ret->keys = malloc(bytes);
                if (!ret->kv || !ret->keys) {
                        drain_scope_view_done(ret);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key, *sc;
                size_t plain = 0;

                sc = key_scope(k, &plain);
                if (!scope ? sc != NULL : !sc || !streq(sc, scope))
                        continue;
                if (!sc)
                        plain = strlen(k);
                memcpy(ret->keys + at, k, plain);
                ret->keys[at + plain] = 0;
                ret->kv[n_kv++] = (struct kv){ .key = ret->keys + at, .value = n->annotations[i].value };
                at += plain + 1;
        }
        ret->node.annotations = ret->kv;
        ret->node.n_annotations = n_kv;
        return 0;
}

void drain_scope_view_done(struct drain_scope_view *v) {
        if (!v)
                return;
        free(v->kv);
        free(v->keys);
        *v = (struct drain_scope_view){};
}

int drain_scope_patch(const char *scope, char **body) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        cJSON *ann, *a;
        char *s;

        assert(body && *body);
        if (!scope)
                return 0;
        root = cJSON_Parse(*body);
        if (!root)
                return -ENOMEM; /* our own patch: only out of memory makes it unparseable */
        ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"),
                                               "annotations");
        cJSON_ArrayForEach(a, ann) {
                char *k;

                if (!a->string || strncmp(a->string, DRAINER_ANN_PREFIX, strlen(DRAINER_ANN_PREFIX)) != 0)
                        continue;
                if (asprintf(&k, "%s.%s", a->string, scope) < 0)
                        return -ENOMEM;
                free(a->string);
                a->string = k;
        }
        s = cJSON_PrintUnformatted(root);
        if (!s)
                return -ENOMEM;
        free(*body);
        *body = s;
        return 0;
}

const char *drain_scope_conflict(const struct node_rec *n, const char *scope) {
        assert(n);
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key, *sc;
                size_t plain = 0;

                sc = key_scope(k, &plain);
                if (plain != strlen(DRAINER_ANN_STATE) || strncmp(k, DRAINER_ANN_STATE, plain) != 0) {
                        if (!sc && scope && streq(k, DRAINER_ANN_STATE))
                                return "";
                        continue;
                }
                if (!scope && sc)
                        return sc;
        }
        return NULL;
}

void drain_scope_foreach(const struct node_rec *n,
                         void (*f)(const char *driver, size_t len, const char *phase, void *userdata),
                         void *userdata) {
        assert(n && f);
        for (size_t i = 0; i < n->n_annotations; i++) {
                const char *k = n->annotations[i].key, *sc;
                size_t plain = 0;

                sc = key_scope(k, &plain);
                if (sc && plain == strlen(DRAINER_ANN_STATE) && strncmp(k, DRAINER_ANN_STATE, plain) == 0)
                        f(sc, strlen(sc), n->annotations[i].value, userdata);
        }
}

int drain_patch_isolate(const struct node_rec *n, int64_t now_usec, const char *rules, const char *message,
                        char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const char *v;
        int64_t t;
        int r;

        assert(ret);
        r = patch_new(n, &root);
        if (r < 0)
                return r;
        v = kv_get(n->annotations, n->n_annotations, DRAINER_ANN_STARTED_AT);
        if (!v) {
                r = set_time_annotation(root, DRAINER_ANN_STARTED_AT, now_usec);
                if (r < 0)
                        return r;
        } else if (timesrc_parse_rfc3339(v, &t) < 0)
                return log_debug_errno(EBADMSG, "node \"%s\": bad %s", strna(n->name),
                                       DRAINER_ANN_STARTED_AT);
        r = set_phase(root, DRAIN_PHASE_CORDON, now_usec);
        if (r < 0)
                return r;
        r = set_annotation(root, DRAINER_ANN_TAINT_RULES, rules && *rules ? rules : NULL);
        if (r < 0)
                return r;
        r = set_message(root, message);
        if (r < 0)
                return r;
        return patch_print(root, ret);
}
