/* npy: write float32 arrays in NumPy's .npy format (v1.0, little-endian),
 * through afile so a failure leaves no partial file.
 *
 * Layer: exec (uses core; MPI and CBLAS only in the CPU device).
 */
#ifndef LOONG_EXEC_NPY_H
#define LOONG_EXEC_NPY_H

#include <stddef.h>

#include "core/units.h"

/* Write data (product of shape[0..ndim) floats) to path. Returns 0 or -1
 * with err. */
int npy_write(const char *path, const float *data, const size_t *shape, int ndim, char err[LOONG_ERRLEN]);

#endif
