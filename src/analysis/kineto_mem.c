/* kineto_mem: allocator peaks from profile_memory traces. See kineto_mem.h. */
#include "kineto_mem.h"

#include <math.h>
#include <string.h>

#include "core/xalloc.h"

/* c10::DeviceType::CUDA (c10/core/DeviceType.h); ROCm builds report HIP
 * devices as CUDA too. */
#define KINETO_DEVICE_CUDA 1

static kineto_mem_device *device_of(kineto_rank *r, int64_t id)
{
    for (int i = 0; i < r->nmem; i++)
        if (r->mem[i].device == id) return &r->mem[i];
    r->mem = xrealloc_array(r->mem, (size_t)r->nmem + 1, sizeof *r->mem, "a trace's memory events");
    r->mem[r->nmem] = (kineto_mem_device){id, 0, 0, 0};
    return &r->mem[r->nmem++];
}

void kineto_mem_scan(const json_t *events, kineto_rank *r)
{
    size_t i;
    const json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph")),
                   *name = json_string_value(json_object_get(e, "name"));
        if (!ph || !name || strcmp(ph, "i") || strcmp(name, "[memory]")) continue;
        const json_t *a = json_object_get(e, "args");
        const json_t *type = json_object_get(a, "Device Type"), *id = json_object_get(a, "Device Id");
        const json_t *alloc = json_object_get(a, "Total Allocated"), *res = json_object_get(a, "Total Reserved");
        if (!json_is_integer(type) || json_integer_value(type) != KINETO_DEVICE_CUDA || !json_is_integer(id)) continue;
        if (!json_is_number(alloc) || !json_is_number(res)) continue;
        double al = json_number_value(alloc), rs = json_number_value(res);
        if (!isfinite(al) || !isfinite(rs) || al < 0 || rs < 0) continue;
        kineto_mem_device *d = device_of(r, json_integer_value(id));
        d->events++;
        if (al > d->alloc_peak) d->alloc_peak = al;
        if (rs > d->reserved_peak) d->reserved_peak = rs;
    }
}

int kineto_mem_fit_set(const kineto_set *s, kineto_mem_fit *out)
{
    memset(out, 0, sizeof *out);
    double sum = 0;
    for (int i = 0; i < s->n; i++)
        for (int j = 0; j < s->r[i].nmem; j++) {
            const kineto_mem_device *d = &s->r[i].mem[j];
            if (!(d->alloc_peak > 0)) continue;
            double f = d->reserved_peak / d->alloc_peak;
            if (!out->devices || f < out->factor_min) out->factor_min = f;
            if (!out->devices || f > out->factor_max) out->factor_max = f;
            if (d->alloc_peak > out->alloc_peak) out->alloc_peak = d->alloc_peak;
            if (d->reserved_peak > out->reserved_peak) out->reserved_peak = d->reserved_peak;
            sum += f;
            out->devices++;
        }
    if (out->devices) out->factor = sum / out->devices;
    return out->devices;
}
