/* npy: the .npy v1.0 header is "\x93NUMPY", version 1.0, a little-endian
 * uint16 header length, then a Python dict literal padded with spaces and a
 * newline so that the data starts on a 64-byte boundary. */
#include "npy.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int npy_write_to(FILE *f, const float *data, const size_t *shape, int ndim)
{
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%zu,%s", shape[i], i + 1 < ndim ? " " : "");
        count *= shape[i];
    }
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
    uint16_t hlen = (uint16_t)((size_t)n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    unsigned char le[2] = {(unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    fwrite(le, 1, 2, f);
    fwrite(dict, 1, (size_t)n, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(data, sizeof(float), count, f); /* x86-64 and aarch64: little-endian */
    return ferror(f) ? -1 : 0;
}
