/* npy: write float32 arrays in NumPy's .npy format (v1.0, little-endian),
 * into a file the caller opened through afile, so that a failure leaves no
 * partial file.
 *
 * Layer: exec (uses core; MPI and CBLAS only in the CPU device).
 */
#ifndef LOONG_EXEC_NPY_H
#define LOONG_EXEC_NPY_H

#include <stddef.h>
#include <stdio.h>

/* Write data (product of shape[0..ndim) floats) to f. Returns 0, or -1
 * on a write error. */
int npy_write_to(FILE *f, const float *data, const size_t *shape, int ndim);

#endif
