/* The process's kube observer: where the client and the informers report
 * requests and watches. Holds one borrowed pointer; keeps no figures itself. */
#include <stddef.h>

#include "drainer/kube/kobserver.h"

static const struct kube_observer *observer;

void kube_observer_set(const struct kube_observer *o) {
        observer = o;
}

void kube_observe_request(const char *verb, long status, bool watch, uint64_t duration_usec) {
        if (observer && observer->request_done)
                observer->request_done(verb, status, watch, duration_usec);
}

void kube_observe_rate_limit(const char *verb, uint64_t wait_usec) {
        if (observer && observer->rate_limited)
                observer->rate_limited(verb, wait_usec);
}

void kube_observe_rate(double qps) {
        if (observer && observer->rate_changed)
                observer->rate_changed(qps);
}

void kube_observe_pushback(const char *verb, long status) {
        if (observer && observer->pushback)
                observer->pushback(verb, status);
}

void kube_observe_watch_event(const char *resource, const char *type) {
        if (observer && observer->watch_event)
                observer->watch_event(resource, type);
}

void kube_observe_watch_end(const char *resource, const char *reason) {
        if (observer && observer->watch_ended)
                observer->watch_ended(resource, reason);
}
