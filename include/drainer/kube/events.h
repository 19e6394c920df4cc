/* Kubernetes Events about the Node: the core/v1 Event body of what an admin acts
 * on, so `kubectl describe node` and `kubectl get events` show the drain.
 * Building only; announcer.h decides which Event and sends it (POST ret_path). */
#pragma once

#include <stdint.h>

struct node_rec;

#define EVENT_TYPE_NORMAL  "Normal"
#define EVENT_TYPE_WARNING "Warning"

#define EVENT_REASON_PHASE            "DrainerPhase"   /* a drain, a restore or a wait for a slot started */
#define EVENT_REASON_BLOCKED          "DrainerBlocked" /* preflight blockers, PDB, ... */
#define EVENT_REASON_FAILED           "DrainerFailed"  /* gave up */
#define EVENT_REASON_DONE             "DrainerDone"    /* drained / uncordoned */
/* The node went not Ready during a drain (its kubelet cannot finish pods nor unprepare
 * claims), and Ready again */
#define EVENT_REASON_NOT_READY        "DrainerNodeNotReady"
#define EVENT_REASON_READY            "DrainerNodeReady"
/* --out-of-service: drainer applied node.kubernetes.io/out-of-service / removed it */
#define EVENT_REASON_OUT_OF_SERVICE   "DrainerOutOfService"
/* an object drainer was pointed at (by an annotation) is not its own: left alone */
#define EVENT_REASON_FOREIGN          "DrainerForeignObject"
/* serve --on-unhealthy-device: a device of the node reported unhealthy, and healthy again */
#define EVENT_REASON_DEVICE_UNHEALTHY "DrainerDeviceUnhealthy"
#define EVENT_REASON_DEVICE_HEALTHY   "DrainerDeviceHealthy"

#define EVENT_COMPONENT              "drainer"
/* kubectl and the kubelet put Node events (cluster-scoped object) in "default". */
#define EVENT_NAMESPACE              "default"
/* Messages are cut to this many bytes, at a UTF-8 character boundary. */
#define EVENT_MESSAGE_MAX            1024
/* Event validation's limit for reportingInstance. */
#define EVENT_REPORTING_INSTANCE_MAX 128

/* Builds a core/v1 Event about node n (legacy fields: firstTimestamp,
 * lastTimestamp and count 1, no eventTime, so the API server applies the
 * v1 rules): metadata.generateName "<node>.", namespace "default",
 * involvedObject {v1, Node, name, uid}, reason, message (cut to
 * EVENT_MESSAGE_MAX; NULL means none), type, source {drainer, host},
 * reportingComponent "drainer", reportingInstance (cut to
 * EVENT_REPORTING_INSTANCE_MAX; NULL leaves it and source.host out).
 *
 * type must be EVENT_TYPE_NORMAL or EVENT_TYPE_WARNING and reason non-empty
 * (-EINVAL). On success *ret_json is the body and *ret_path the URL path to
 * POST it to, both malloc'd. Returns 0, -EINVAL or -ENOMEM. */
int event_build_node(const struct node_rec *n, const char *type, const char *reason, const char *message,
                     int64_t now_usec, const char *reporting_instance, char **ret_json, char **ret_path);

/* The object an Event is about: ns NULL for a cluster-scoped one (its Event goes to
 * "default"), else the Event goes to ns and involvedObject names it. uid may be NULL. */
struct event_object {
        const char *api_version, *kind, *ns, *name, *uid;
};

/* The same about any object o (event_build_node() is this for a Node); -EINVAL also
 * without o->api_version, o->kind or o->name. */
int event_build_object(const struct event_object *o, const char *type, const char *reason,
                       const char *message, int64_t now_usec, const char *reporting_instance,
                       char **ret_json, char **ret_path);
