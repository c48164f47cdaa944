#!/usr/bin/env bash
# topologies/a100-pcie.fit from SimuMax's measured collectives on its A100
# PCIe server (a100-pcie-simumax.txt; no nccl-tests log of such a server is
# published with its topology): 2 CPU sockets of 4 GPUs (platform_spec.c),
# each GPU's PCIe link to its socket (nvlink_bw) and each socket's link
# to the other (socket_bw, per direction).
#
# Each measurement says what one link carries per direction, in GB/s
# (x 1.073741824 from GiB/s), under the model of src/model/nccl.c
# (socket_bound): in-socket groups of 2 and 4 are bound by the GPU link,
# their bus bandwidth is it; a ring of 8 crosses the socket link once each
# way, its bus bandwidth is the socket link's; an all-to-all of 8 sends
# 4/8 of each member's buffer across, 2 buffers per direction, so the link
# is 2 x 8/7 x its bus bandwidth; the strided data-parallel groups put
# G/m = 4 (dp 2) and 2 (dp 4) rings through the link at once, so it is 4
# and 2 x their bus bandwidth. Each link is the median of its estimates
# (the spread is the model's error on this server: the fit prints it).
#
# usage: experiments/platform-fit/a100-pcie.sh > topologies/a100-pcie.fit
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
awk '
function median(a, n,    i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
/^#/ || NF < 4 { next }
{
    bw = $4 * 1.073741824e9
    if ($1 == "in-socket") gpu[++ng] = bw
    else if ($1 == "ring8") sock[++ns] = bw
    else if ($1 == "a2a8") sock[++ns] = bw * 2 * 8 / 7
    else if ($1 == "dp2") sock[++ns] = bw * 4
    else if ($1 == "dp4") sock[++ns] = bw * 2
    else { print "a100-pcie.sh: unknown row " $1 > "/dev/stderr"; exit 2 }
}
END {
    for (i = 1; i <= ng; i++) { g2[i] = gpu[i]; gmin = i == 1 || gpu[i] < gmin ? gpu[i] : gmin; gmax = gpu[i] > gmax ? gpu[i] : gmax }
    for (i = 1; i <= ns; i++) { s2[i] = sock[i]; smin = i == 1 || sock[i] < smin ? sock[i] : smin; smax = sock[i] > smax ? sock[i] : smax }
    printf "# loong topo --gpu a100-pcie'"'"'s fitted links: the medians of SimuMax'"'"'s measured collectives\n"
    printf "# on its server (experiments/platform-fit/a100-pcie-simumax.txt): GPU link from %d in-socket\n", ng
    printf "# groups (%.1f-%.1f GB/s), socket link from %d cross-socket ones (%.1f-%.1f GB/s).\n", gmin / 1e9, gmax / 1e9, ns, smin / 1e9, smax / 1e9
    printf "# Written by experiments/platform-fit/a100-pcie.sh.\n"
    printf "gpu = a100-pcie\n"
    printf "nvlink_bw = %.6g\n", median(g2, ng)
    printf "socket_bw = %.6g\n", median(s2, ns)
}' "$HERE/a100-pcie-simumax.txt"
