/* The API server's side of the engine's unit tests (test-engine, test-engine-phases),
 * written once: node-1 as the API server holds it (a PATCH is merged in as RFC 7386
 * says, answered with the new object at a new resourceVersion, which the test then
 * sends on the watch), Lists and the list + watch every informer starts with, watch
 * event lines, and the JSON of node-1's pods, claims and slice. The tests keep their
 * own rules (when a pod goes, what a controller does); every function fails the test
 * (cmocka) rather than returning an error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "fakes/fake-transport.h"

/* The paths of node-1's informers and writes. */
#define FAKE_API_NODES    "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-1"
#define FAKE_API_PODS     "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
#define FAKE_API_CLAIMS   "/apis/resource.k8s.io/v1/resourceclaims"
#define FAKE_API_SLICES   "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dnode-1"
#define FAKE_API_PDBS     "/apis/policy/v1/poddisruptionbudgets"
#define FAKE_API_EVICTION "/api/v1/namespaces/demo/pods/"
#define FAKE_API_NODE     "/api/v1/nodes/node-1"
#define FAKE_API_EVENTS   "/api/v1/namespaces/default/events"
#define FAKE_API_NODE_UID "f6666666-7777-4888-8999-000000000000"

/* ownerReferences members, for fake_pod.meta */
#define FAKE_OWNED_BY_RS(name, uid)                                                                 \
        "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"" name \
        "\",\"uid\":\"" uid "\",\"controller\":true}]"
#define FAKE_OWNED_BY_DS(name, uid)                                                                \
        "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"" name \
        "\",\"uid\":\"" uid "\",\"controller\":true}]"

/* RFC 7386: patch merged into target (null deletes, objects merge, the rest replaces). */
void fake_api_merge_patch(cJSON *target, const cJSON *patch);

/* {"kind":KIND,"apiVersion":"v1","metadata":{"resourceVersion":RV},"items":[...]} of the n
 * malloc'd items, which are freed (malloc'd). */
char *fake_api_list(const char *kind, unsigned rv, char **items, size_t n);
/* The same of a NULL-terminated list, at resourceVersion 100. */
char *fake_api_list_strv(const char *kind, char **items);

/* An informer's start: GET list_prefix answered 200 with body (taken), then the watch
 * of path (path + "?watch=1" or "&watch=1") held open. */
void fake_api_expect_list_and_watch(struct fake_transport *ft, const char *path, const char *list_prefix,
                                    char *body);

/* A watch event line: {"type":TYPE,"object":OBJ}\n (malloc'd). */
char *fake_api_watch_event(const char *type, const char *obj);

/* node (the Node as the API server holds it) after the PATCH body: merged (the patch's
 * metadata.resourceVersion, a precondition, is not stored), at resourceVersion ++*rv; the
 * transport then answers the next PATCH of FAKE_API_NODE with it. Returns the new Node's
 * JSON (malloc'd), for the watch. */
char *fake_api_patch_node(struct fake_transport *ft, cJSON *node, unsigned *rv, const char *body);
/* The same for the Node at path (a world of several nodes). */
char *fake_api_patch_node_at(struct fake_transport *ft, const char *path, cJSON *node, unsigned *rv,
                             const char *body);

/* Parsed (fails the test on bad JSON). */
cJSON *fake_api_json(const char *s);

/* A pod of node-1 in namespace demo, uid "uid-<name>" unless uid says. */
struct fake_pod {
        const char *name;
        const char *uid;    /* NULL: "uid-<name>" */
        unsigned rv;        /* 0: 50 */
        const char *meta;   /* more metadata members (labels, ownerReferences, ...) or NULL */
        const char *spec;   /* more spec members (resourceClaims, volumes, ...) or NULL */
        const char *status; /* more status members or NULL */
        const char *ready;  /* the Ready condition's status; NULL: no conditions */
        const char *pod_ip; /* NULL: none */
};
char *fake_api_pod(const struct fake_pod *p);

/* A ResourceClaim of namespace demo asking for one gpu.example.com device. allocated: on
 * node-1 (driver DRIVER, pool node-1, device gpu-0, node-local selector); reserved_for:
 * a pod's "name" and "uid" in status.reservedFor, or NULL; owner: the members of an
 * ownerReferences entry (a template's pod), or NULL. */
struct fake_claim {
        const char *name;
        unsigned rv;
        const char *driver;
        bool allocated;
        const char *reserved_name, *reserved_uid;
        const char *owner_name, *owner_uid; /* the Pod that owns a claim made from a template */
        const char *reserved_podgroup;      /* reserved for this PodGroup instead of a pod */
};
char *fake_api_claim(const struct fake_claim *c);

/* node-1's ResourceSlice of driver, pool node-1, one device gpu-0. */
char *fake_api_slice(const char *driver, unsigned rv);
