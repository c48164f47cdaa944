/* loong calibrate: fit compute rates and link alpha/beta from measured
 * traces; write a calibration table and a platform that loong sim reads. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/afile.h"
#include "core/xalloc.h"
#include "analysis/calibrate.h"
#include "model/platform_spec.h"
#include "cli.h"

static void calibrate_usage(FILE *f)
{
    fprintf(f, "usage: loong calibrate MEASURED.json [MORE.json ...] --platform IN.xml -o OUTDIR [--calib BASE.calib]\n"
               "\n"
               "Fit, with GSL's least squares, per compute kind time = t0 + work / rate (work =\n"
               "FLOPs; HBM bytes for merge and acc) and per link class (same node, other node)\n"
               "alpha and beta from the point-to-point transfers, counting how many transfers\n"
               "shared the link at once. Prints R^2 and residuals per fit. Writes\n"
               "OUTDIR/<gpu>.calib (the base table with the fitted kinds replaced) and\n"
               "OUTDIR/<platform name> (IN.xml regenerated with the fitted NVLink / NIC\n"
               "latency and bandwidth); `loong sim --platform OUTDIR/<platform name>` uses both.\n"
               "A fit with too few points or all sizes equal is an error, never a default.\n"
               "\n"
               "  --platform FILE   platform written by loong topo (it records its spec)\n"
               "  --calib FILE      base table                 [<platform dir>/<gpu>.calib]\n"
               "  -o, --output DIR  where to write (created if missing)\n"
               "  -h, --help        this text\n");
}

/* Map the link fits onto the platform's spec: a same-node path crosses two
 * NVLink links, another-node path two NIC links (and two leaf-spine links
 * whose latency stays as it is). */
static void apply_links(const calibrate_result *r, platform_spec *sp)
{
    if (r->have_link[LINK_INTRA]) {
        sp->nvlink_lat = r->link[LINK_INTRA].c0 / 2;
        sp->nvlink_bw = 1 / r->link[LINK_INTRA].c1;
    }
    if (r->have_link[LINK_INTER]) {
        double lat = (r->link[LINK_INTER].c0 - 2 * sp->uplink_lat) / 2;
        sp->nic_lat = lat > 0 ? lat : 0;
        sp->nic_bw = 1 / r->link[LINK_INTER].c1;
    }
}

static int write_outputs(const char *dir, const char *platform, const calib *cb, const platform_spec *sp,
                         const char *origin, char err[LOONG_ERRLEN])
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, LOONG_ERRLEN, "cannot create '%s': %s", dir, strerror(errno));
        return -1;
    }
    char path[4096], *pcopy = xstrdup(platform, "the platform path");
    snprintf(path, sizeof path, "%s/%s.calib", dir, sp->gpu);
    afile a;
    int rc = afile_open(&a, path, err);
    if (rc == 0 && calib_write(a.f, cb) < 0)
        afile_abort(&a), rc = -1;
    else if (rc == 0)
        rc = afile_commit(&a, err);
    snprintf(path, sizeof path, "%s/%s", dir, basename(pcopy));
    free(pcopy);
    if (rc == 0 && (rc = afile_open(&a, path, err)) == 0) {
        if (platform_spec_write(a.f, sp, origin) < 0)
            afile_abort(&a), rc = -1;
        else
            rc = afile_commit(&a, err);
    }
    if (rc < 0 && !err[0]) snprintf(err, LOONG_ERRLEN, "write error in '%s'", dir);
    return rc;
}

static int run(int ntr, char **paths, const char *platform, const char *base, const char *dir, const char *origin)
{
    char err[LOONG_ERRLEN] = "";
    platform_spec sp;
    if (platform_spec_read(platform, &sp, err) < 0) return cli_fail("calibrate", "%s", err);
    calib *cb = calib_for_platform(platform, sp.gpu, base, err);
    if (!cb) return cli_fail("calibrate", "%s", err);
    trace *tr = xcalloc((size_t)ntr, sizeof *tr, "the traces");
    const trace **tp = xcalloc((size_t)ntr, sizeof *tp, "the traces");
    int rc = 0, loaded = 0;
    for (; loaded < ntr && rc == 0; loaded++) {
        if (trace_read(paths[loaded], &tr[loaded], err) < 0) rc = cli_fail("calibrate", "%s", err);
        tp[loaded] = &tr[loaded];
    }
    calibrate_result r;
    if (rc == 0 && (calibrate_fit(tp, ntr, &r, err) < 0 || calibrate_apply(&r, cb, err) < 0))
        rc = cli_fail("calibrate", "%s", err);
    if (rc == 0) {
        apply_links(&r, &sp);
        calibrate_print(stdout, &r);
        if (write_outputs(dir, platform, cb, &sp, origin, err) < 0)
            rc = cli_fail("calibrate", "%s", err);
        else
            printf("# wrote %s/%s.calib and %s/ with the fitted platform\n", dir, sp.gpu, dir);
    }
    for (int i = 0; i < loaded; i++)
        trace_free(&tr[i]);
    free(tr);
    free(tp);
    calib_free(cb);
    return rc;
}

int cmd_calibrate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"platform", required_argument, 0, 'p'},
        {"calib", required_argument, 0, 'c'},
        {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *platform = NULL, *base = NULL, *dir = NULL;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'p': platform = optarg; break;
        case 'c': base = optarg; break;
        case 'o': dir = optarg; break;
        case 'h': calibrate_usage(stdout); return 0;
        default:
            return cli_fail("calibrate", "unknown or incomplete option '%s': see loong calibrate --help",
                            argv[optind - 1]);
        }
    }
    if (optind >= argc) return cli_fail("calibrate", "give at least one measured trace: see loong calibrate --help");
    if (!platform) return cli_fail("calibrate", "--platform is required (the platform to fit, written by loong topo)");
    if (!dir) return cli_fail("calibrate", "-o OUTDIR is required");
    char origin[2048];
    size_t n = (size_t)snprintf(origin, sizeof origin, "loong");
    for (int i = 0; i < argc && n < sizeof origin; i++)
        n += (size_t)snprintf(origin + n, sizeof origin - n, " %s", argv[i]);
    return run(argc - optind, argv + optind, platform, base, dir, origin);
}
