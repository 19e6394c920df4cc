/* Pods and ResourceClaims as status shows them in JSON (recjson.h). Builds documents
 * from borrowed records; owns nothing, logs nothing. */
#include "drainer/dra/recjson.h"
#include "drainer/base/macro.h"

cJSON *pod_rec_to_json(const struct pod_rec *p) {
        cJSON *j = cJSON_CreateObject(), *claims;

        cJSON_AddStringToObject(j, "namespace", p->ns);
        cJSON_AddStringToObject(j, "name", p->name);
        cJSON_AddStringToObject(j, "phase", strna(pod_phase_to_string(p->phase)));
        cJSON_AddBoolToObject(j, "ready", p->ready);
        cJSON_AddBoolToObject(j, "terminating", p->deleting);
        if (p->controller) {
                cJSON *o = cJSON_AddObjectToObject(j, "controller");

                cJSON_AddStringToObject(o, "kind", strna(p->controller->kind));
                cJSON_AddStringToObject(o, "name", strna(p->controller->name));
        }
        if (p->priority_class_name)
                cJSON_AddStringToObject(j, "priorityClassName", p->priority_class_name);
        claims = cJSON_AddArrayToObject(j, "claims");
        for (size_t i = 0; i < p->n_claims; i++)
                if (p->claims[i].claim_name)
                        cJSON_AddItemToArray(claims, cJSON_CreateString(p->claims[i].claim_name));
        if (p->extended_claim_name)
                cJSON_AddItemToArray(claims, cJSON_CreateString(p->extended_claim_name));
        return j;
}

cJSON *claim_rec_to_json(const struct claim_rec *c, enum claim_on_node_reason why, bool driver_own) {
        cJSON *j = cJSON_CreateObject(), *devs, *res;

        cJSON_AddStringToObject(j, "namespace", c->ns);
        cJSON_AddStringToObject(j, "name", c->name);
        cJSON_AddStringToObject(j, "reason", claim_on_node_reason_to_string(why));
        cJSON_AddBoolToObject(j, "allocated", c->allocated);
        cJSON_AddBoolToObject(j, "deleting", c->deleting);
        cJSON_AddBoolToObject(j, "heldByDriver", driver_own);
        devs = cJSON_AddArrayToObject(j, "devices");
        for (size_t i = 0; i < c->n_devices; i++) {
                cJSON *d = cJSON_CreateObject();

                cJSON_AddStringToObject(d, "request", strna(c->devices[i].request));
                cJSON_AddStringToObject(d, "driver", strna(c->devices[i].driver));
                cJSON_AddStringToObject(d, "pool", strna(c->devices[i].pool));
                cJSON_AddStringToObject(d, "device", strna(c->devices[i].device));
                if (c->devices[i].admin_access)
                        cJSON_AddBoolToObject(d, "adminAccess", true);
                cJSON_AddItemToArray(devs, d);
        }
        res = cJSON_AddArrayToObject(j, "reservedFor");
        for (size_t i = 0; i < c->n_reserved; i++) {
                cJSON *r = cJSON_CreateObject();

                cJSON_AddStringToObject(r, "resource", strna(c->reserved[i].resource));
                cJSON_AddStringToObject(r, "name", strna(c->reserved[i].name));
                cJSON_AddStringToObject(r, "uid", strna(c->reserved[i].uid));
                cJSON_AddItemToArray(res, r);
        }
        return j;
}
