/* drainer version: the release, the source revision it was built from (git, or the
 * tarball's record of it), the build options, and each library's version at build
 * time and as loaded now (an image or a package may run drainer against other
 * library builds than the ones it was compiled with). Prints no paths and no build
 * time, so two builds of one commit print the same. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <microhttpd.h>
#include <stdio.h>
#include <time.h>
#include <uv.h>
#include <yaml.h>

#include "app.h"
#include "drainer-build.h"
#include "drainer-version.h"
#include "drainer/base/json.h"
#include "drainer/base/log.h"
#include "output.h"
#include "verbs.h"

#ifdef NDEBUG
#define DRAINER_ASSERTS false
#else
#define DRAINER_ASSERTS true
#endif

struct library {
        const char *name;
        const char *built;   /* the version of its headers (pkg-config) */
        const char *runtime; /* the version of the copy loaded, NULL when it cannot tell */
};

/* The libraries drainer links, as loaded now. curl_version_info() is libcurl's
 * own answer (the transport owns every other libcurl call); libsystemd has no
 * version call. */
static void libraries(struct library ret[static 6]) {
        const curl_version_info_data *c = curl_version_info(CURLVERSION_NOW);

        ret[0] = (struct library){ "libcurl", DRAINER_BUILD_LIBCURL, c ? c->version : NULL };
        ret[1] = (struct library){ "libuv", DRAINER_BUILD_LIBUV, uv_version_string() };
        ret[2] = (struct library){ "cJSON", DRAINER_BUILD_LIBCJSON, cJSON_Version() };
        ret[3] = (struct library){ "libyaml", DRAINER_BUILD_LIBYAML, yaml_get_version_string() };
        ret[4] = (struct library){ "libmicrohttpd", DRAINER_BUILD_LIBMICROHTTPD, MHD_get_version() };
        ret[5] = (struct library){ "libsystemd", DRAINER_BUILD_LIBSYSTEMD, NULL };
}

/* The commit time as RFC 3339 UTC, or "" when unknown. */
static void commit_time(char buf[static 32]) {
        time_t t = (time_t)DRAINER_COMMIT_TIME;
        struct tm tm;

        buf[0] = '\0';
        if (t > 0 && gmtime_r(&t, &tm))
                strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int print_json(void) {
        _cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
        struct library libs[6];
        cJSON *build, *arr;
        char when[32];

        if (!j)
                return -ENOMEM;
        commit_time(when);
        cJSON_AddStringToObject(j, "version", DRAINER_VERSION);
        cJSON_AddStringToObject(j, "revision", DRAINER_REVISION);
        cJSON_AddBoolToObject(j, "dirty", DRAINER_DIRTY);
        if (when[0])
                cJSON_AddStringToObject(j, "commitTime", when);
        else
                cJSON_AddNullToObject(j, "commitTime");
        build = cJSON_AddObjectToObject(j, "build");
        if (!build)
                return -ENOMEM;
        cJSON_AddStringToObject(build, "buildtype", DRAINER_BUILD_TYPE);
        cJSON_AddStringToObject(build, "optimization", DRAINER_BUILD_OPTIMIZATION);
        cJSON_AddBoolToObject(build, "debug", DRAINER_BUILD_DEBUG);
        cJSON_AddBoolToObject(build, "asserts", DRAINER_ASSERTS);
        cJSON_AddStringToObject(build, "sanitize", DRAINER_BUILD_SANITIZE);
        cJSON_AddStringToObject(build, "compiler", DRAINER_BUILD_COMPILER);
        arr = cJSON_AddArrayToObject(j, "libraries");
        if (!arr)
                return -ENOMEM;
        libraries(libs);
        for (size_t i = 0; i < ELEMENTSOF(libs); i++) {
                cJSON *l = cJSON_CreateObject();

                if (!l || !cJSON_AddItemToArray(arr, l))
                        return cJSON_Delete(l), -ENOMEM;
                cJSON_AddStringToObject(l, "name", libs[i].name);
                cJSON_AddStringToObject(l, "built", libs[i].built);
                if (libs[i].runtime)
                        cJSON_AddStringToObject(l, "runtime", libs[i].runtime);
                else
                        cJSON_AddNullToObject(l, "runtime");
        }
        return output_print(j, false); /* -o json, yaml or name */
}

static void print_text(void) {
        struct library libs[6];
        char when[32];

        commit_time(when);
        printf("drainer %s\n", DRAINER_VERSION);
        printf("revision:  %s%s%s%s\n", DRAINER_REVISION, when[0] ? ", committed " : "", when,
               DRAINER_DIRTY ? ", built with uncommitted changes" : "");
        printf("build:     %s, -O%s%s, asserts %s, sanitizers %s, %s\n", DRAINER_BUILD_TYPE,
               DRAINER_BUILD_OPTIMIZATION, DRAINER_BUILD_DEBUG ? ", debug info" : "",
               DRAINER_ASSERTS ? "on" : "off", DRAINER_BUILD_SANITIZE, DRAINER_BUILD_COMPILER);
        libraries(libs);
        printf("libraries (built with, running with):\n");
        for (size_t i = 0; i < ELEMENTSOF(libs); i++)
                printf("  %-14s %-8s %s\n", libs[i].name, libs[i].built,
                       libs[i].runtime ? libs[i].runtime : "-");
}

int verb_version(int argc, char **argv, struct global_flags *g) {
        int r = verb_parse(argc, argv, g, NULL, NULL, NULL);

        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_DONE;
        if (argc - optind != 0) {
                log_error("drainer version: takes no arguments; see 'drainer version --help'");
                return EXIT_USAGE;
        }
        if (g->output == OUTPUT_JSON) {
                if (print_json() < 0)
                        return log_oom(), EXIT_ERROR;
        } else
                print_text();
        return EXIT_DONE;
}
