/* The drain's persisted state: the phases and their table, and the parsing and
 * validation of the drainer.io/ annotations of a node record (patch.c builds the
 * patches that move it on, scope.c the state of a drain of one driver). Pure
 * functions over records: owns only what it returns, never talks to the API
 * server, logs nothing above debug. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "drainer/base/selector.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/drain/state.h"
#include "drainer/kube/objects.h"
#include "state-int.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

/* A bad value is quoted in error messages up to this many bytes. */
#define QUOTE_MAX 64
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

bool drain_driver_name_is_valid(const char *s) {
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
                        if (!drain_driver_name_is_valid(d->valuestring))
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

int drain_stop_to_json(const struct driver_stop_record *rec, cJSON *arr) {
        cJSON *o, *drivers;
        int r;

        if (!rec->ops || rec->n_drivers > DRIVER_STOP_MAX_DRIVERS)
                return -EINVAL;
        if (rec->daemonset && !daemonset_ref_is_valid(rec->daemonset))
                return -EINVAL;
        for (size_t i = 0; i < rec->n_drivers; i++)
                if (!rec->drivers[i] || !drain_driver_name_is_valid(rec->drivers[i]))
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
                if (!drain_phase_info(s.phase))
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
