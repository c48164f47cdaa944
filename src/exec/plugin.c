/* plugin: loading a device's shared object (see plugin.h). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"

/* The directory of the running executable ("" when /proc cannot say). */
static void exe_dir(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = '\0';
    else
        out[0] = '\0';
}

static const dev_plugin *open_plugin(const char *path, const char *name, char err[LOONG_ERRLEN])
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, LOONG_ERRLEN, "cannot load %.80s: %.100s (install the device's runtime libraries)", path,
                 dlerror());
        return NULL;
    }
    const dev_plugin *p = dlsym(h, "loong_device_plugin");
    if (!p || p->abi != DEV_PLUGIN_ABI || !p->name || strcmp(p->name, name) || !p->mpi || !p->count || !p->select) {
        snprintf(err, LOONG_ERRLEN, "%.120s is not a loong %.8s plug-in of ABI %d: rebuild it with this loong", path,
                 name, DEV_PLUGIN_ABI);
        dlclose(h);
        return NULL;
    }
    return p; /* the handle stays open: the device's code runs until exit */
}

const dev_plugin *dev_plugin_load(const char *name, const char *libdir, char err[LOONG_ERRLEN])
{
    static const dev_plugin *loaded;
    if (loaded && !strcmp(loaded->name, name)) return loaded;
    char exe[PATH_MAX], file[64];
    exe_dir(exe, sizeof exe);
    snprintf(file, sizeof file, "loong-%s.so", name);
    const char *env = getenv("LOONG_PLUGIN_DIR");
    const char *dirs[3] = {env && *env ? env : NULL, exe[0] ? exe : NULL, libdir};
    char looked[LOONG_ERRLEN / 2] = "";
    for (int i = 0; i < 3; i++) {
        if (!dirs[i]) continue;
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dirs[i], file);
        if (access(path, F_OK) == 0) return loaded = open_plugin(path, name, err);
        size_t n = strlen(looked);
        snprintf(looked + n, sizeof looked - n, "%s%s", n ? ", " : "", dirs[i]);
    }
    snprintf(err, LOONG_ERRLEN,
             "this loong has no %.8s device: %.20s is not in %.90s (rebuild with its SDK, or set "
             "LOONG_PLUGIN_DIR)",
             name, file, looked);
    return NULL;
}
