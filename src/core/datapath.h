/*
 * datapath: where loong finds a data file (a platform, a calibration table)
 * that is named without a directory. In order: a first directory the caller
 * knows (the working directory for a platform, the platform's directory for
 * its table), each directory of $LOONG_DATA_PATH (colon-separated), the
 * source tree's topologies/ when this loong runs from the build directory
 * it was built in (a fresh clone's build/loong finds the shipped platforms
 * from anywhere), then the installed data directory, $(pkgdatadir) (e.g.
 * /usr/local/share/loong, where `make install` puts topologies/).
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_DATAPATH_H
#define LOONG_DATAPATH_H

#include <stddef.h>

#include "units.h"

/* The installed data directory this loong was built for. */
const char *datapath_installed(void);

/* The source tree's data directory when this process's binary sits in the
 * build directory it was built in, else NULL. */
const char *datapath_source(void);

/* The directories searched after the caller's first one: $LOONG_DATA_PATH's
 * (empty entries skipped), datapath_source() if any, then
 * datapath_installed(). Returns their count
 * (at most max) and points dirs[i] into a static copy (valid until the
 * environment changes). */
int datapath_dirs(const char **dirs, int max);

/* Find `name`. A name that contains '/' is a path: returned as it is. Else
 * look for name, then name + ext (when ext is not NULL and name does not end
 * with it), in `first` (NULL: none), then datapath_dirs(). Returns 0 with the
 * path in out (len bytes); -1 with a message in err: "<what> '<name>' not
 * found in: <every directory tried, in order>". */
int datapath_find(const char *what, const char *name, const char *ext, const char *first, char *out, size_t len,
                  char err[LOONG_ERRLEN]);

#endif
