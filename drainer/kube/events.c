/* core/v1 Event bodies about a Node (an API object, so built in kube/ beside
 * the records it reads). Builds JSON with cJSON and returns it; owns nothing,
 * sends nothing (the caller POSTs through the rate-limited client), logs
 * nothing above debug. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drainer/base/json.h"
#include "drainer/base/macro.h"
#include "drainer/base/text.h"
#include "drainer/base/timesrc.h"
#include "drainer/kube/events.h"
#include "drainer/kube/objects.h"

/* Adds obj[key] = the first at most max bytes of value. */
static bool add_prefix(cJSON *obj, const char *key, const char *value, size_t max) {
        _cleanup_free_ char *v = strndup(value, utf8_prefix(value, max));

        return v && cJSON_AddStringToObject(obj, key, v);
}

int event_build_node(const struct node_rec *n, const char *type, const char *reason, const char *message,
                     int64_t now_usec, const char *reporting_instance, char **ret_json, char **ret_path) {
        assert(n);
        return event_build_object(
                &(const struct event_object){
                        .api_version = "v1", .kind = "Node", .name = n->name, .uid = n->uid },
                type, reason, message, now_usec, reporting_instance, ret_json, ret_path);
}

int event_build_object(const struct event_object *o, const char *type, const char *reason,
                       const char *message, int64_t now_usec, const char *reporting_instance,
                       char **ret_json, char **ret_path) {
        _cleanup_(cJSON_Deletep) cJSON *ev = NULL;
        _cleanup_free_ char *gen = NULL, *json = NULL, *path = NULL;
        cJSON *meta, *obj, *src;
        char ts[64];
        int r;

        assert(o);
        assert(ret_json);
        assert(ret_path);
        if (!o->name || !o->kind || !o->api_version || !type ||
            (!streq(type, EVENT_TYPE_NORMAL) && !streq(type, EVENT_TYPE_WARNING)) || !reason || !*reason)
                return -EINVAL;
        r = timesrc_format_rfc3339(now_usec, ts, sizeof ts);
        if (r < 0)
                return r;
        /* The API server appends 5 random characters (and cuts a long base). */
        gen = malloc(strlen(o->name) + 2);
        if (!gen)
                return -ENOMEM;
        stpcpy(stpcpy(gen, o->name), ".");

        ev = cJSON_CreateObject();
        if (!ev)
                return -ENOMEM;
        if (!cJSON_AddStringToObject(ev, "apiVersion", "v1") ||
            !cJSON_AddStringToObject(ev, "kind", "Event"))
                return -ENOMEM;
        meta = cJSON_AddObjectToObject(ev, "metadata");
        if (!meta || !cJSON_AddStringToObject(meta, "generateName", gen) ||
            !cJSON_AddStringToObject(meta, "namespace", o->ns ? o->ns : EVENT_NAMESPACE))
                return -ENOMEM;

        /* No involvedObject.namespace for a cluster-scoped object: with no eventTime the
         * API server wants it empty for an event in "default"; a namespaced object's
         * Event lives in its namespace and names it. */
        obj = cJSON_AddObjectToObject(ev, "involvedObject");
        if (!obj || !cJSON_AddStringToObject(obj, "apiVersion", o->api_version) ||
            !cJSON_AddStringToObject(obj, "kind", o->kind) ||
            (o->ns && !cJSON_AddStringToObject(obj, "namespace", o->ns)) ||
            !cJSON_AddStringToObject(obj, "name", o->name) ||
            (o->uid && !cJSON_AddStringToObject(obj, "uid", o->uid)))
                return -ENOMEM;

        if (!cJSON_AddStringToObject(ev, "reason", reason))
                return -ENOMEM;
        if (message && !add_prefix(ev, "message", message, EVENT_MESSAGE_MAX))
                return -ENOMEM;
        if (!cJSON_AddStringToObject(ev, "type", type))
                return -ENOMEM;

        src = cJSON_AddObjectToObject(ev, "source");
        if (!src || !cJSON_AddStringToObject(src, "component", EVENT_COMPONENT) ||
            (reporting_instance &&
             !add_prefix(src, "host", reporting_instance, EVENT_REPORTING_INSTANCE_MAX)))
                return -ENOMEM;

        if (!cJSON_AddStringToObject(ev, "firstTimestamp", ts) ||
            !cJSON_AddStringToObject(ev, "lastTimestamp", ts) || !cJSON_AddNumberToObject(ev, "count", 1))
                return -ENOMEM;
        /* core/v1 spells ReportingController "reportingComponent". */
        if (!cJSON_AddStringToObject(ev, "reportingComponent", EVENT_COMPONENT) ||
            (reporting_instance &&
             !add_prefix(ev, "reportingInstance", reporting_instance, EVENT_REPORTING_INSTANCE_MAX)))
                return -ENOMEM;

        json = cJSON_PrintUnformatted(ev);
        if (!json)
                return -ENOMEM;
        if (asprintf(&path, "/api/v1/namespaces/%s/events", o->ns ? o->ns : EVENT_NAMESPACE) < 0)
                return -ENOMEM;
        *ret_json = TAKE_PTR(json);
        *ret_path = TAKE_PTR(path);
        return 0;
}
