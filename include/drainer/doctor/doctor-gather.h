/* What `drainer doctor` reads, and the picture of the cluster the rules
 * (drainer/doctor/rules.c) judge: nodes, ResourceSlices and ResourceClaims,
 * (Cluster)RoleBindings and what the API server answers about their subjects,
 * DRA driver pods grouped by controller and by driver, their DaemonSets and
 * gRPC health, drainer pods, static control-plane pods, pods of cordoned
 * nodes. The picture is built by pure functions (unit tests feed them
 * fixtures); doctor_gather_start() feeds them the API server's answers. Reads
 * only: a SubjectAccessReview is a question, not an object. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "drainer/base/macro.h"
#include "drainer/dra/health.h"

struct claim_rec;
struct hashmap;
struct kube_client;
struct node_rec;
struct pod_rec;
struct slice_rec;
struct transport;

/* The DRA API group and the version doctor reads its ResourceSlices and
 * ResourceClaims from (doctor_data.dra_api names it for the rules). */
#define DOCTOR_DRA_GROUP   "resource.k8s.io"
#define DOCTOR_DRA_VERSION "v1"

/* At most this many --driver-selector lists. */
#define DOCTOR_DRIVER_SELECTORS_MAX 16

/* Pods of drainer itself (serve daemons, per node or --all-nodes). */
#define DOCTOR_DRAINER_POD_SELECTOR "app.kubernetes.io/name=drainer"

/* An array of owned pointers. */
#define DOCTOR_ARRAY(type)       \
        struct {                 \
                type **v;        \
                size_t n, alloc; \
        }

/* ---- subjects of (Cluster)RoleBindings ---- */

enum doctor_subject_kind {
        DOCTOR_SUBJECT_USER,
        DOCTOR_SUBJECT_GROUP,
        DOCTOR_SUBJECT_SERVICE_ACCOUNT,
        _DOCTOR_SUBJECT_KIND_MAX,
        _DOCTOR_SUBJECT_KIND_INVALID = -EINVAL,
};

/* "User", "Group", "ServiceAccount" (rbac/v1 Subject kinds) */
const char *doctor_subject_kind_to_string(enum doctor_subject_kind k);
enum doctor_subject_kind doctor_subject_kind_from_string(const char *s);

struct doctor_subject {
        enum doctor_subject_kind kind;
        const char *name;
        const char *ns; /* ServiceAccounts only */
};

/* Why a subject may write DeviceClasses and ResourceSlices, or not. */
enum doctor_subject_role {
        DOCTOR_ROLE_OTHER, /* everybody else: may not */
        DOCTOR_ROLE_ADMIN, /* group system:masters, or bound to ClusterRole cluster-admin cluster-wide */
        DOCTOR_ROLE_CONTROL_PLANE, /* users system:kube-controller-manager, system:kube-scheduler,
                                    * system:apiserver, system:node:*, group system:nodes,
                                    * ServiceAccounts of kube-system */
        DOCTOR_ROLE_DRIVER,        /* a ServiceAccount that DRA driver pods run as */
        _DOCTOR_SUBJECT_ROLE_MAX,
        _DOCTOR_SUBJECT_ROLE_INVALID = -EINVAL,
};

/* "other", "cluster-admin", "control-plane", "dra-driver" */
const char *doctor_subject_role_to_string(enum doctor_subject_role r);

/* cluster_admin_bound: a ClusterRoleBinding binds the subject to ClusterRole
 * cluster-admin. driver_sas: "namespace/name" of the ServiceAccounts driver
 * pods run as (n entries). */
enum doctor_subject_role doctor_subject_role(const struct doctor_subject *s, bool cluster_admin_bound,
                                             const char *const *driver_sas, size_t n);

/* "User alice", "Group g", "ServiceAccount ns/name"; NULL when out of memory. */
char *doctor_subject_to_string(const struct doctor_subject *s);

/* The body of an authorization.k8s.io/v1 SubjectAccessReview asking whether s
 * may VERB RESOURCE of GROUP in namespace ns (NULL: cluster-scoped, or all
 * namespaces). The subject is asked as bound, on its own: a User by name, a
 * Group as that group only, a ServiceAccount as its user
 * system:serviceaccount:NS:NAME (without the groups a token would add, so a
 * grant to a group is reported once, for the group). NULL when out of memory. */
cJSON *doctor_sar_request(const struct doctor_subject *s, const char *ns, const char *group,
                          const char *resource, const char *verb);
/* status.allowed of a SubjectAccessReview answer; reason: status.reason (may be
 * NULL), borrowed from answer. -EBADMSG without a status. */
int doctor_sar_parse(const cJSON *answer, bool *ret_allowed, const char **ret_reason);

/* ---- what is read ---- */

/* The lists doctor starts with, all at once. */
enum doctor_list {
        DOCTOR_LIST_NODES,
        DOCTOR_LIST_SLICES,
        DOCTOR_LIST_CLAIMS,
        DOCTOR_LIST_CLUSTER_ROLE_BINDINGS,
        DOCTOR_LIST_ROLE_BINDINGS,
        DOCTOR_LIST_DRAINER_PODS, /* by DOCTOR_DRAINER_POD_SELECTOR */
        DOCTOR_LIST_SYSTEM_PODS,  /* namespace kube-system */
        DOCTOR_LIST_NODECLAIMS,   /* Karpenter's (karpenter.sh/v1; 404 where it is not installed) */
        DOCTOR_LIST_DRIVER_PODS,  /* one list per driver selector */
        _DOCTOR_LIST_MAX,
        _DOCTOR_LIST_INVALID = -EINVAL,
};

/* "list nodes", "list resourceslices", ..., as messages name them. */
const char *doctor_list_to_string(enum doctor_list l);
/* Whether the report cannot be made without it. Without the others the
 * findings that need them say so. */
bool doctor_list_required(enum doctor_list l);

struct doctor_list_status {
        int error;     /* 0, or why the list failed (-ECANCELED when doctor stopped it) */
        char *message; /* the API server's message (or strerror), NULL when cancelled */
};

/* Client settings of a control plane component, from its static pod. */
struct doctor_client_conn {
        bool have_qps, have_burst;
        double qps;
        int burst;
        bool config_file; /* --config given: its clientConnection is not visible to us */
};

/* Reads --kube-api-qps/--kube-api-burst ("--f=V" or "--f V") and --config from
 * the command and args of the pod's containers. 0, or -EINVAL for a value that
 * is not a number (the component would not start either). */
int doctor_client_conn_from_pod(const cJSON *pod, struct doctor_client_conn *ret);

/* A pod as doctor needs it: the compact record, plus what the record leaves out. */
struct doctor_pod {
        struct pod_rec *rec; /* owned */
        char *sa;            /* "namespace/serviceAccountName" */
        char *text;          /* containers' command, args and env values, space-separated (capped) */
        /* gRPC health probe (driver pods in scope that declare a grpc liveness port) */
        bool probed;
        int probe_error;
        enum health_status probe_status;
        char *probe_message;
};

/* Whether the pod runs and is not being deleted. */
bool doctor_pod_running(const struct doctor_pod *p);

/* A kube-system pod of kube-controller-manager or kube-scheduler. */
struct doctor_cp_pod {
        char *component; /* "kube-controller-manager" or "kube-scheduler" */
        char *ns_name;   /* "namespace/name" */
        struct doctor_client_conn conn;
        int error; /* from doctor_client_conn_from_pod() */
};

/* A (Cluster)RoleBinding, as far as doctor names it. */
struct doctor_binding {
        bool cluster;
        char *ns, *name, *role_kind, *role_name;
        char *label; /* "ClusterRoleBinding NAME -> ClusterRole ROLE" */
        char *rbac;  /* how RBAC's SubjectAccessReview reasons name it */
};

/* What the SubjectAccessReviews ask: may the subject write DeviceClasses and
 * ResourceSlices (cluster-scoped), may it create ResourceClaims and
 * ResourceClaimTemplates (in every namespace, and in each namespace of its
 * RoleBindings). */
enum doctor_write_resource {
        DOCTOR_RES_DEVICECLASSES,
        DOCTOR_RES_RESOURCESLICES,
        _DOCTOR_RES_WRITE_MAX,
};
#define DOCTOR_N_WRITE_VERBS 4
extern const char *const doctor_write_resources[_DOCTOR_RES_WRITE_MAX]; /* "deviceclasses", ... */
extern const char
        *const doctor_write_verbs[DOCTOR_N_WRITE_VERBS]; /* "create", "update", "patch", "delete" */

enum doctor_claim_resource {
        DOCTOR_RES_CLAIMS,
        DOCTOR_RES_CLAIM_TEMPLATES,
        _DOCTOR_RES_CLAIM_MAX,
};
extern const char *const doctor_claim_resources[_DOCTOR_RES_CLAIM_MAX]; /* "resourceclaims", ... */

/* A subject of some (Cluster)RoleBinding, and what the API server answered. */
struct doctor_subject_ent {
        struct doctor_subject s;      /* strings owned */
        char *label;                  /* doctor_subject_to_string() */
        size_t *bindings, n_bindings; /* indices into doctor_data.bindings */
        bool cluster_admin;           /* a ClusterRoleBinding binds it to ClusterRole cluster-admin */
        enum doctor_subject_role role;
        /* The answers; only subjects of DOCTOR_ROLE_OTHER are asked. */
        bool write[_DOCTOR_RES_WRITE_MAX][DOCTOR_N_WRITE_VERBS];
        bool claims_all[_DOCTOR_RES_CLAIM_MAX]; /* create, in every namespace */
        char **reasons;                         /* of the allowed answers, each once */
        size_t n_reasons;
        char **claim_ns; /* namespaces of the RoleBindings that name it */
        size_t n_claim_ns;
        bool (*claims_ns)[_DOCTOR_RES_CLAIM_MAX]; /* create, per claim_ns */
};

/* The pods of one controller that run a DRA kubelet plugin. */
struct doctor_group {
        char *kind, *ns, *name; /* the controller; kind NULL: a pod without one (name = the pod's) */
        size_t *pods, n_pods;   /* indices into doctor_data.driver_pods */
        cJSON *ds;              /* the DaemonSet, once read; owned */
        int ds_error;
        char *ds_message;
};

/* A driver named in ResourceSlices. */
struct doctor_driver {
        char *name;
        char **nodes; /* of its node-local slices */
        size_t n_nodes;
        size_t n_slices, n_other_slices;
        /* The driver pod groups that run on its nodes, narrowed to those whose
         * command, args or env name the driver when several do. */
        size_t *groups, n_groups;
};

/* A Karpenter NodeClaim: its node and spec.terminationGracePeriod (NULL: none). */
struct doctor_nodeclaim {
        char *name, *node, *tgp;
};

/* A node in scope whose pods are read: cordoned (for the claims on it), or Karpenter's
 * with a NodeClaim that sets a terminationGracePeriod (for its pods' grace), or both. */
struct doctor_cordoned {
        const struct node_rec *node; /* borrowed */
        bool cordoned;
        const struct doctor_nodeclaim *nodeclaim; /* borrowed; NULL: none with a grace period */
        DOCTOR_ARRAY(struct pod_rec) pods;
        int error; /* listing its pods failed */
};

struct doctor_sar_job;

struct doctor_data {
        const char *node; /* --node: the per-node checks look at it only; NULL: every node. Borrowed */
        /* The DRA API its slices and claims come from: "resource.k8s.io/v1" (or v1beta2,
         * v1beta1; static), NULL when the API server serves none (DRA is off). */
        const char *dra_api;
        bool dra_known; /* the gather has asked the API server (else dra_api is v1 by default) */

        /* The lists (doctor_data_add()). */
        DOCTOR_ARRAY(struct node_rec) nodes;
        DOCTOR_ARRAY(struct slice_rec) slices;
        DOCTOR_ARRAY(struct claim_rec) claims;
        DOCTOR_ARRAY(struct doctor_binding) bindings;
        DOCTOR_ARRAY(struct doctor_subject_ent) subjects;
        DOCTOR_ARRAY(struct doctor_pod) driver_pods; /* unique by uid */
        DOCTOR_ARRAY(struct doctor_pod) drainer_pods;
        DOCTOR_ARRAY(struct doctor_cp_pod) cp_pods;
        DOCTOR_ARRAY(struct doctor_nodeclaim) nodeclaims;
        struct doctor_list_status lists[_DOCTOR_LIST_MAX];
        struct hashmap *subject_by_label;

        /* What the lists lead to (doctor_data_index()). */
        struct hashmap *node_by_name;
        char **driver_sas; /* "namespace/name" of the ServiceAccounts driver pods run as */
        size_t n_driver_sas;
        DOCTOR_ARRAY(struct doctor_group) groups;
        DOCTOR_ARRAY(struct doctor_driver) drivers; /* by name */
        DOCTOR_ARRAY(struct doctor_cordoned) cordoned;
        struct doctor_sar_job *sars;
        size_t n_sars;
        size_t *probes, n_probes; /* the driver pods to probe: indices into driver_pods */

        /* The answers. */
        size_t sar_failed; /* SubjectAccessReviews without an answer */
        int sar_error;     /* the first failure */
        char *sar_message;
};

/* node: as doctor_data.node (borrowed). -ENOMEM. */
int doctor_data_init(struct doctor_data *d, const char *node);
/* Frees everything. This function can't fail. */
void doctor_data_done(struct doctor_data *d);
/* What the report was made of, for its -o json: {nodes, resourceClaims, drivers:
 * [NAME], node, prometheus} (node and prometheus null when not asked). NULL when out
 * of memory. */
cJSON *doctor_data_to_json(const struct doctor_data *d, const char *node, const char *prometheus);

/* Adds one item of list l. -EBADMSG for an item without the fields doctor
 * needs (skip it, as an informer would), -ENOMEM. */
int doctor_data_add(struct doctor_data *d, enum doctor_list l, const cJSON *item);
/* Records how list l ended: error 0, or the error with the API server's
 * message (NULL: strerror), or -ECANCELED. For DOCTOR_LIST_DRIVER_PODS the
 * first failure of its lists is kept. -ENOMEM. */
int doctor_data_list_done(struct doctor_data *d, enum doctor_list l, int error, const char *message);

/* Once the lists are in: indexes the nodes, groups the driver pods by
 * controller and by driver, and plans what the lists lead to (the
 * SubjectAccessReviews, the DaemonSets, the probes, the pods of cordoned
 * nodes). -ENOENT when d->node is not a node, -ENOMEM. */
int doctor_data_index(struct doctor_data *d);

/* The node of that name, or NULL. */
const struct node_rec *doctor_data_node(const struct doctor_data *d, const char *name);
/* Whether a node is in scope (d->node unset, or that node). */
bool doctor_data_in_scope(const struct doctor_data *d, const char *node);
/* Whether a pod of the group runs on the node. */
bool doctor_data_group_on_node(const struct doctor_data *d, const struct doctor_group *g, const char *node);

/* SubjectAccessReview k of doctor_data.n_sars: its body (the caller frees it;
 * NULL when out of memory), and its answer (error < 0 with the API server's
 * message, NULL: strerror, when it failed; else the answer). -ENOMEM. */
cJSON *doctor_data_sar_request(const struct doctor_data *d, size_t k);
int doctor_data_sar_done(struct doctor_data *d, size_t k, int error, const char *message,
                         const cJSON *answer);

/* Whether the DaemonSet of group i is to be read (it runs pods of a driver);
 * its namespace and name are the group's. Its answer: the DaemonSet, or the
 * error and the API server's message (NULL: strerror). -ENOMEM. */
bool doctor_data_wants_daemonset(const struct doctor_data *d, size_t i);
int doctor_data_daemonset_done(struct doctor_data *d, size_t i, int error, const char *message,
                               const cJSON *ds);

/* Probe k of doctor_data.n_probes answered (health_done_fn's arguments). */
void doctor_data_probe_done(struct doctor_data *d, size_t k, int error, enum health_status status,
                            const char *message);

/* Cordoned node k of doctor_data.cordoned: one of its pods (-EBADMSG for a
 * malformed one, -ENOMEM), and how the list ended. */
int doctor_data_add_cordoned_pod(struct doctor_data *d, size_t k, const cJSON *item);
void doctor_data_cordoned_done(struct doctor_data *d, size_t k, int error);

/* ---- the reads ---- */

/* error: 0 when the picture is complete; else why not, with message a
 * one-line explanation for the user ("list nodes: forbidden ...", "node \"x\"
 * not found"; NULL when out of memory), valid during the call. */
typedef void (*doctor_gather_done_fn)(int error, const char *message, void *userdata);

struct doctor_gather;

/* Reads the cluster into d (initialized, empty) through c (the API server)
 * and t (the gRPC health probes of driver pods at their pod IPs): the lists
 * at once, then what they lead to (SubjectAccessReviews and probes at most
 * 32 at a time). driver_selectors: NULL-terminated, at most
 * DOCTOR_DRIVER_SELECTORS_MAX used. A failed list that the report cannot do
 * without stops the rest. done runs exactly once, never from inside this
 * call; *ret (may be NULL) is valid until then. Fails without running done
 * (-ENOMEM) when nothing could be started. */
int doctor_gather_start(struct kube_client *c, struct transport *t, struct doctor_data *d,
                        const char *const *driver_selectors, doctor_gather_done_fn done, void *userdata,
                        struct doctor_gather **ret);
/* Stops the reads: done runs later with -ECANCELED. Only while done has not run. */
void doctor_gather_cancel(struct doctor_gather *g);
