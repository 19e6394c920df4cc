/* Benchmark: watch-event decode rate on one core (pod events of ~3.5 KB, fed
 * in 16 KiB chunks, decoded and turned into pod records) and the memory held
 * by 10,000 compact ResourceClaim records. Prints figures; asserts nothing.
 * Usage: bench-watchdec [EVENTS] [CLAIMS] */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "drainer/kube/objects.h"
#include "drainer/kube/watchdec.h"

#define POOL  4096 /* distinct events in the in-memory stream, replayed */
#define CHUNK 16384

static double now_sec(clockid_t clk) {
        struct timespec ts;

        clock_gettime(clk, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double peak_rss_mib(void) {
        struct rusage ru;

        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_maxrss / 1024.0;
}

static double cur_rss_mib(void) {
        unsigned long size = 0, resident = 0;
        FILE *f = fopen("/proc/self/statm", "re");

        if (f) {
                if (fscanf(f, "%lu %lu", &size, &resident) != 2)
                        resident = 0;
                fclose(f);
        }
        return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

/* A pod as a Deployment with a DRA template claim produces it, with
 * managedFields, as a watch event line. */
static int pod_event(char *buf, size_t size, unsigned i, const char *type) {
        unsigned h = i * 2654435761u;

        return snprintf(
                buf, size,
                "{\"type\":\"%s\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
                "\"trainer-%08x-%05u\",\"generateName\":\"trainer-%08x-\",\"namespace\":\"team-%u\",\"uid\":"
                "\"%08x-%04x-4%03x-8%03x-%012x\",\"resourceVersion\":\"%u\",\"creationTimestamp\":"
                "\"2025-09-02T10:15:31Z\",\"labels\":{\"app\":\"trainer-%u\",\"pod-template-hash\":\"%08x\","
                "\"app.kubernetes.io/"
                "part-of\":\"ml-platform\",\"team\":\"team-%u\"},\"ownerReferences\":[{\"apiVersion\":"
                "\"apps/v1\",\"kind\":"
                "\"ReplicaSet\",\"name\":\"trainer-%08x\",\"uid\":\"0f7a6e1d-2c3b-4a59-8e7f-%012x\","
                "\"controller\":"
                "true,\"blockOwnerDeletion\":true}],\"managedFields\":[{\"manager\":\"kube-controller-"
                "manager\","
                "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2025-09-02T10:15:31Z\","
                "\"fieldsType\":"
                "\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:generateName\":{},\"f:labels\":{\".\":{},"
                "\"f:app\":"
                "{},\"f:pod-template-hash\":{}},\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":"
                "\\\"0f7a6e1d\\\"}\":{}}},"
                "\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"trainer\\\"}\":{\".\":{},\"f:image\":{}"
                ","
                "\"f:imagePullPolicy\":{},\"f:name\":{},\"f:resources\":{\".\":{},\"f:claims\":{}},"
                "\"f:terminationMessagePath\":{},\"f:terminationMessagePolicy\":{}}},\"f:dnsPolicy\":{},"
                "\"f:resourceClaims\":{},\"f:restartPolicy\":{},\"f:schedulerName\":{},\"f:"
                "securityContext\":{},"
                "\"f:terminationGracePeriodSeconds\":{}}}}]},\"spec\":{\"volumes\":[{\"name\":\"scratch\","
                "\"emptyDir\":{}},{\"name\":\"kube-api-access-%05u\",\"projected\":{\"sources\":[{"
                "\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":\"token\"}},{\"configMap\":{"
                "\"name\":"
                "\"kube-root-ca.crt\",\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}]}}],"
                "\"defaultMode\":420}}],"
                "\"containers\":[{\"name\":\"trainer\",\"image\":\"registry.example.com/ml/trainer:1.4.%u\","
                "\"args\":[\"--epochs=%u\",\"--batch-size=256\"],\"ports\":[{\"name\":\"metrics\","
                "\"containerPort\":"
                "9090,\"protocol\":\"TCP\"}],\"resources\":{\"limits\":{\"cpu\":\"4\",\"memory\":\"16Gi\"},"
                "\"requests\":{\"cpu\":\"2\","
                "\"memory\":\"8Gi\"},\"claims\":[{\"name\":\"gpu\"}]},\"volumeMounts\":[{\"name\":"
                "\"scratch\","
                "\"mountPath\":\"/"
                "scratch\"},{\"name\":\"kube-api-access-%05u\",\"readOnly\":true,\"mountPath\":"
                "\"/var/run/secrets/kubernetes.io/serviceaccount\"}],\"terminationMessagePath\":\"/dev/"
                "termination-log\","
                "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"}],"
                "\"restartPolicy\":"
                "\"Always\",\"terminationGracePeriodSeconds\":120,\"dnsPolicy\":\"ClusterFirst\","
                "\"serviceAccountName\":\"default\",\"serviceAccount\":\"default\",\"nodeName\":\"node-%u\","
                "\"securityContext\":{},\"schedulerName\":\"default-scheduler\",\"tolerations\":[{\"key\":"
                "\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
                "\"tolerationSeconds\":300},{\"key\":\"node.kubernetes.io/"
                "unreachable\",\"operator\":\"Exists\","
                "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],\"priority\":0,\"enableServiceLinks\":"
                "true,"
                "\"preemptionPolicy\":\"PreemptLowerPriority\",\"resourceClaims\":[{\"name\":\"gpu\","
                "\"resourceClaimTemplateName\":\"single-gpu\"}]},\"status\":{\"phase\":\"Running\","
                "\"conditions\":["
                "{\"type\":\"Initialized\",\"status\":\"True\","
                "\"lastProbeTime\":null,\"lastTransitionTime\":\"2025-09-02T10:15:33Z\"},{\"type\":"
                "\"Ready\","
                "\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2025-09-02T10:15:36Z\"}"
                ","
                "{\"type\":\"ContainersReady\",\"status\":\"True\",\"lastProbeTime\":null,"
                "\"lastTransitionTime\":"
                "\"2025-09-02T10:15:36Z\"},{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastProbeTime\":"
                "null,"
                "\"lastTransitionTime\":\"2025-09-02T10:15:33Z\"}],\"hostIP\":\"10.0.%u.%u\",\"hostIPs\":[{"
                "\"ip\":"
                "\"10.0.%u.%u\"}],\"podIP\":\"10.244.%u.%u\",\"podIPs\":[{\"ip\":\"10.244.%u.%u\"}],"
                "\"startTime\":"
                "\"2025-09-02T10:15:33Z\",\"containerStatuses\":[{\"name\":\"trainer\",\"state\":{"
                "\"running\":{"
                "\"startedAt\":\"2025-09-02T10:15:35Z\"}},\"lastState\":{},\"ready\":true,\"restartCount\":"
                "0,"
                "\"image\":\"registry.example.com/ml/trainer:1.4.%u\",\"imageID\":"
                "\"registry.example.com/ml/"
                "trainer@sha256:4f6d7b0c2a1e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a"
                "%08x\",\"containerID\":\"containerd://"
                "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"
                "%08x\",\"started\":true}],\"qosClass\":\"Burstable\",\"resourceClaimStatuses\":[{\"name\":"
                "\"gpu\","
                "\"resourceClaimName\":\"trainer-%08x-%05u-gpu-%05x\"}]}}}\n",
                type, h, i, h, i % 50, h, i & 0xffff, i & 0xfff, (h >> 4) & 0xfff, i, 100000 + i, i % 97, h,
                i % 50, h, i, i, i % 10, i % 100, i, i % 100, i / 256 % 256, i % 256, i / 256 % 256, i % 256,
                i / 256 % 256, i % 256, i / 256 % 256, i % 256, i % 10, h, h ^ 0x5a5a5a5a, h, i,
                h & 0xfffff);
}

/* A generated claim, allocated node-local and reserved for its pod, as the
 * API server returns it in a list (managedFields included). */
static int claim_json(char *buf, size_t size, unsigned i) {
        unsigned h = i * 2246822519u;

        return snprintf(
                buf, size,
                "{\"kind\":\"ResourceClaim\",\"apiVersion\":\"resource.k8s.io/v1\",\"metadata\":{\"name\":"
                "\"trainer-%08x-%05u-gpu-%05x\",\"generateName\":\"trainer-%08x-%05u-gpu-\",\"namespace\":"
                "\"team-%u\",\"uid\":\"%08x-3b3b-4c4c-8d8d-%012x\",\"resourceVersion\":\"%u\","
                "\"creationTimestamp\":\"2025-09-02T10:15:31Z\",\"annotations\":{"
                "\"resource.kubernetes.io/"
                "pod-claim-name\":\"gpu\"},\"ownerReferences\":[{\"apiVersion\":\"v1\","
                "\"kind\":\"Pod\",\"name\":\"trainer-%08x-%05u\",\"uid\":\"%08x-9d4e-4f5a-8b7c-%012x\","
                "\"controller\":true,\"blockOwnerDeletion\":true}],\"finalizers\":["
                "\"resource.kubernetes.io/delete-protection\"],\"managedFields\":[{\"manager\":"
                "\"kube-controller-manager\",\"operation\":\"Update\",\"apiVersion\":\"resource.k8s.io/v1\","
                "\"time\":\"2025-09-02T10:15:31Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":"
                "{"
                "\"f:annotations\":{},\"f:generateName\":{},\"f:ownerReferences\":{}},\"f:spec\":{\"f:"
                "devices\":{"
                "\"f:requests\":{}}}}},{\"manager\":\"kube-scheduler\",\"operation\":\"Update\","
                "\"apiVersion\":"
                "\"resource.k8s.io/v1\",\"time\":\"2025-09-02T10:15:32Z\",\"fieldsType\":\"FieldsV1\","
                "\"fieldsV1\":{\"f:status\":{\"f:allocation\":{},\"f:reservedFor\":{}}},\"subresource\":"
                "\"status\"}]},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{"
                "\"deviceClassName\":\"gpu.example.com\",\"allocationMode\":\"ExactCount\",\"count\":1}}]}},"
                "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":"
                "\"gpu.example.com\",\"pool\":\"node-%u\",\"device\":\"gpu-%u\"}]},\"nodeSelector\":{"
                "\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                "\"values\":[\"node-%u\"]}]}]}},\"reservedFor\":[{\"resource\":\"pods\",\"name\":"
                "\"trainer-%08x-%05u\",\"uid\":\"%08x-9d4e-4f5a-8b7c-%012x\"}]}}",
                h, i, h & 0xfffff, h, i, i % 50, h, i, 200000 + i, h, i, h, i, i / 8, i % 8, i / 8, h, i, h,
                i);
}

struct ctx {
        struct pod_rec **cache; /* POOL slots: stands in for an informer's store */
        size_t next;
        size_t bytes_held;
        unsigned long long events;
        bool build;
};

static int on_event(enum watch_event_type type, const cJSON *object, void *userdata) {
        struct ctx *c = userdata;
        struct pod_rec *p = NULL;
        size_t slot = c->next++ % POOL;
        int r;

        c->events++;
        if (!c->build)
                return 0;
        r = pod_rec_from_json(object, &p);
        if (r < 0)
                return r;
        c->bytes_held -= pod_rec_size(c->cache[slot]);
        pod_rec_free(c->cache[slot]);
        c->cache[slot] = p;
        c->bytes_held += pod_rec_size(p);
        return 0;
}

static int run_stream(const char *stream, size_t len, unsigned long long n_events, bool build,
                      double *ret_wall, double *ret_cpu, size_t *ret_bytes_fed, size_t *ret_held) {
        struct watch_decoder d;
        struct ctx c = { .build = build };
        double w0, c0;
        size_t fed = 0;
        int r = 0;

        c.cache = calloc(POOL, sizeof(*c.cache));
        if (!c.cache)
                return -ENOMEM;
        watch_decoder_init(&d, 0);

        w0 = now_sec(CLOCK_MONOTONIC);
        c0 = now_sec(CLOCK_PROCESS_CPUTIME_ID);
        while (c.events < n_events && r >= 0) {
                /* replay the pool; chunk edges fall anywhere, also across replays */
                for (size_t off = 0; off < len && r >= 0; off += CHUNK) {
                        size_t n = len - off < CHUNK ? len - off : CHUNK;

                        r = watch_decoder_feed(&d, stream + off, n, on_event, &c);
                        fed += n;
                }
        }
        *ret_wall = now_sec(CLOCK_MONOTONIC) - w0;
        *ret_cpu = now_sec(CLOCK_PROCESS_CPUTIME_ID) - c0;
        *ret_bytes_fed = fed;
        *ret_held = c.bytes_held;

        if (r < 0)
                fprintf(stderr, "decode failed: %s\n", strerror(-r));
        if (c.events < n_events && r >= 0)
                r = -EIO;
        /* report events actually decoded */
        if (r >= 0)
                r = (int)(c.events > (unsigned long long)INT32_MAX ? INT32_MAX : c.events);

        watch_decoder_done(&d);
        for (size_t i = 0; i < POOL; i++)
                pod_rec_free(c.cache[i]);
        free(c.cache);
        return r;
}

int main(int argc, char **argv) {
        /* bench-watchdec [--quick] [EVENTS [CLAIMS]]: --quick is CI's smoke run. */
        bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
        int a = quick ? 2 : 1;
        unsigned long long n_events = argc > a ? strtoull(argv[a], NULL, 10) : (quick ? 20000 : 200000);
        unsigned n_claims = argc > a + 1 ? (unsigned)strtoul(argv[a + 1], NULL, 10) : 10000;
        static const char *const types[] = { "ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED" };
        char *stream, *p, line[8192];
        size_t len = 0, alloc = (size_t)POOL * 4096, fed, held, min_ev = SIZE_MAX, max_ev = 0;
        double wall, cpu, rss_base;
        int r;

        /* ---- claim records ---- */
        {
                struct claim_rec **recs = calloc(n_claims, sizeof(*recs));
                size_t total = 0, json_total = 0;
                double t0, rss1;

                if (!recs)
                        return 1;
                rss_base = cur_rss_mib();
                t0 = now_sec(CLOCK_PROCESS_CPUTIME_ID);
                for (unsigned i = 0; i < n_claims; i++) {
                        int n = claim_json(line, sizeof line, i);
                        cJSON *j;

                        if (n < 0 || (size_t)n >= sizeof line)
                                return 1;
                        json_total += (size_t)n;
                        j = cJSON_ParseWithLength(line, (size_t)n);
                        if (!j || claim_rec_from_json(j, &recs[i]) < 0)
                                return 1;
                        cJSON_Delete(j);
                        total += claim_rec_size(recs[i]);
                }
                cpu = now_sec(CLOCK_PROCESS_CPUTIME_ID) - t0;
                rss1 = cur_rss_mib();
                printf("claim records: %u claims (JSON avg %.0f bytes, %.1f MiB as JSON)\n", n_claims,
                       (double)json_total / n_claims, (double)json_total / (1024 * 1024));
                printf("  bytes held (sum of claim_rec_size): %zu (%.2f MiB, %.0f bytes/claim)\n", total,
                       (double)total / (1024 * 1024), (double)total / n_claims);
                printf("  RSS: %.1f MiB before, %.1f MiB after (+%.1f MiB); parse + build %.0f claims/s\n",
                       rss_base, rss1, rss1 - rss_base, n_claims / cpu);
                printf("  peak RSS so far: %.1f MiB\n", peak_rss_mib());
                for (unsigned i = 0; i < n_claims; i++)
                        claim_rec_free(recs[i]);
                free(recs);
        }

        /* ---- build the in-memory stream ---- */
        stream = malloc(alloc);
        if (!stream)
                return 1;
        for (unsigned i = 0; i < POOL; i++) {
                int n = pod_event(line, sizeof line, i, types[i % ELEMENTSOF(types)]);

                if (n < 0 || (size_t)n >= sizeof line)
                        return 1;
                while (len + (size_t)n > alloc) {
                        alloc *= 2;
                        p = realloc(stream, alloc);
                        if (!p)
                                return 1;
                        stream = p;
                }
                memcpy(stream + len, line, (size_t)n);
                len += (size_t)n;
                min_ev = MIN(min_ev, (size_t)n);
                max_ev = MAX(max_ev, (size_t)n);
        }

        printf("watch decode: %u distinct pod events, %zu-%zu bytes each (avg %.0f), stream %.1f MiB, "
               "fed in %d KiB chunks, replayed to %llu events\n",
               POOL, min_ev, max_ev, (double)len / POOL, (double)len / (1024 * 1024), CHUNK / 1024,
               n_events);

        /* warm up (page in, malloc arenas) */
        r = run_stream(stream, len, POOL, true, &wall, &cpu, &fed, &held);
        if (r < 0)
                return 1;

        r = run_stream(stream, len, n_events, false, &wall, &cpu, &fed, &held);
        if (r < 0)
                return 1;
        printf("  decode only:          %9.0f events/s  %7.1f MB/s  (%d events, %.2f s wall, %.2f s cpu)\n",
               r / cpu, (double)fed / cpu / 1e6, r, wall, cpu);

        r = run_stream(stream, len, n_events, true, &wall, &cpu, &fed, &held);
        if (r < 0)
                return 1;
        printf("  decode + pod_rec:     %9.0f events/s  %7.1f MB/s  (%d events, %.2f s wall, %.2f s cpu)\n",
               r / cpu, (double)fed / cpu / 1e6, r, wall, cpu);
        printf("  pod_rec: %zu bytes held for %u pods (%.0f bytes/pod)\n", held, POOL, (double)held / POOL);
        printf("  peak RSS: %.1f MiB (of which the in-memory stream: %.1f MiB)\n", peak_rss_mib(),
               (double)len / (1024 * 1024));
        free(stream);

        printf("peak RSS (whole run): %.1f MiB\n", peak_rss_mib());
        return 0;
}
