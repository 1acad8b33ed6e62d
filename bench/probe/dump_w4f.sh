#!/usr/bin/env bash
# dump_w4f.sh - write the w4a16 fragment GEMV's device source (W4F_SRC_SYM) to bench/probe/w4f_gemv.cu, gemv1's
# (W4G_SRC_SYM) to w4g_gemv.cu and gemv1_tma's (W4T_SRC_SYM) to w4t_gemv.cu, the bases the probe variants (*_tail.cu) are appended to.  Run here before a device
# call; carry both (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the plugin's host functions are never called: stubs satisfy the linker
cat >"$tmp/dump.c" <<'C'
#include <stdio.h>
#include "w4a16_gemv_frag.c"
void w4_linear(const w4_view *v, const float *x, float *y, int64_t m) { (void)v, (void)x, (void)y, (void)m; }
void w4_why(qc_reason *why, const char *code, const char *fmt, ...) { (void)why, (void)code, (void)fmt; }
int w4_shape_ok(int64_t n, int64_t k, uint32_t g, qc_reason *why) { return (void)n, (void)k, (void)g, (void)why, 0; }
int w4_group_ok(uint32_t g) { return (void)g, 0; }
const char *w4_scheme_name(uint32_t s) { return (void)s, ""; }
int main(int argc, char **argv) {
    return fputs(argc > 1 ? (argv[1][0] == 't' ? W4T_SRC_SYM : W4G_SRC_SYM) : W4F_SRC_SYM, stdout) < 0;
}
C
gcc -w -I plugins/w4a16 -I core/include -I plugins/common -o "$tmp/dump" "$tmp/dump.c"
"$tmp/dump" >bench/probe/w4f_gemv.cu
"$tmp/dump" g >bench/probe/w4g_gemv.cu
"$tmp/dump" t >bench/probe/w4t_gemv.cu
echo "bench/probe/w4f_gemv.cu: $(wc -l <bench/probe/w4f_gemv.cu) lines, w4g_gemv.cu: $(wc -l <bench/probe/w4g_gemv.cu), w4t_gemv.cu: $(wc -l <bench/probe/w4t_gemv.cu)"
