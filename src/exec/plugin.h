/*
 * plugin: a device built as a shared object (loong-NAME.so) and loaded only
 * when a run asks for it (--device NAME), so that a process that computes
 * on the CPU, or only plans and simulates, neither loads nor needs the
 * device's libraries (the CUDA runtime, cuBLAS and NCCL for --device cuda),
 * and a CPU-only install runs on a machine without them.
 *
 * A plug-in defines one symbol, `loong_device_plugin`, a dev_plugin. Its
 * own references to the executor (devq_*) resolve against the loong
 * executable, which exports its symbols for that (-Wl,--export-dynamic).
 *
 * Layer: exec (libc and the dynamic loader only).
 */
#ifndef LOONG_EXEC_PLUGIN_H
#define LOONG_EXEC_PLUGIN_H

#include "device.h"

/* Bumped whenever dev_plugin or dev_ops changes shape: a plug-in built for
 * another version is refused rather than called. */
#define DEV_PLUGIN_ABI 1

typedef struct dev_plugin {
    int abi;              /* DEV_PLUGIN_ABI of the plug-in's build */
    const char *name;     /* "cuda" */
    const dev_ops *mpi;   /* one MPI rank per device */
    const dev_ops *local; /* every rank as a thread of one process (--transport local), or NULL */
    /* Devices this process sees: >= 1, or 0 with a one-line reason in err. */
    int (*count)(char err[LOONG_ERRLEN]);
    /* Bind this process to the device of node-local rank `local_rank` of
     * `local_size`: 0, or -1 with a message. */
    int (*select)(int local_rank, int local_size, char err[LOONG_ERRLEN]);
} dev_plugin;

/* Load the plug-in of device `name` (loong-NAME.so), searched in order in
 * $LOONG_PLUGIN_DIR, the directory of the running loong (a build tree), and
 * `libdir` (the installed plug-ins). The first file found is loaded and
 * kept for the life of the process; a second call returns the same.
 * Returns NULL with a one-line err: no file (naming every place looked and
 * the fix), a file the dynamic loader refuses (its reason: a missing CUDA
 * runtime, say), or one of another ABI. */
const dev_plugin *dev_plugin_load(const char *name, const char *libdir, char err[LOONG_ERRLEN]);

#endif
