/* w4a16_reg_variants.h - the builds of w4a16.gemv_reg_* that the tests compile and time (NVRTC defines). */
#ifndef QC_W4A16_REG_VARIANTS_H
#define QC_W4A16_REG_VARIANTS_H

/* R rows per warp (the grid is ceil(n / 8R) blocks of 8 warps), U vectors of
 * 16 bytes per row in flight for m <= 2 (UBIG for m > 2), MATH 0 shift + FADD,
 * 1 positional mask + FFMA (plugins/w4a16/w4a16_gemv_reg.c).  R = 4 needs
 * MINB 1 (up to 255 registers) or it spills at m = 8.  Variant 0 is the
 * source's defaults, the registered kernel. */
typedef struct w4r_variant {
    const char *name;
    const char *defines; /* prepended to the kernel's source */
    int r;
} w4r_variant;

static const w4r_variant W4R_VARIANTS[] = {
    {"R2U4-B", "", 2},
    {"R2U4-A", "#define W4R_MATH 0\n", 2},
    {"R2U8-B", "#define W4R_U 8\n", 2},
    {"R1U8-B", "#define W4R_R 1\n#define W4R_U 8\n#define W4R_UBIG 2\n", 1},
    {"R4U2-B", "#define W4R_R 4\n#define W4R_U 2\n#define W4R_UBIG 1\n#define W4R_MINB 1\n", 4},
    {"R4U4-B", "#define W4R_R 4\n#define W4R_U 4\n#define W4R_UBIG 1\n#define W4R_MINB 1\n", 4},
};
#define W4R_N_VARIANTS (sizeof W4R_VARIANTS / sizeof W4R_VARIANTS[0])

#endif
