/* w4a16.h - public constants of the w4a16 format: scheme ids, buffer names, layout version. */
#ifndef QC_W4A16_H
#define QC_W4A16_H

/* Layout of every buffer below; recorded in qc_packed_weight.pack_version.
 * docs/formats/w4a16.md is the full definition. */
/* 2: codes interleaved within each 32-bit word (even elements in the low half, odd in the high half); 1 had
 * them in element order.  2 lets every GPU kernel take the bf16x2 pair (q(2i), q(2i+1)) with one shift and one
 * lop3, and the x pair beside it with no byte_perm. */
#define W4A16_PACK_VERSION 2u

/* qc_packed_weight.scheme (and qc_problem.scheme; 0 there means SYM).
 * q is the 4-bit code 0..15, s and d the f16 scale of its group, z the
 * u8 zero point of its group (0..15), m the f16 minimum of its group. */
#define W4A16_SCHEME_SYM 1u  /* w = s * (q - 8) */
#define W4A16_SCHEME_ASYM 2u /* w = s * (q - z) */
#define W4A16_SCHEME_FMIN 3u /* w = (d * q) + m, two f32 roundings, no FMA (GGUF Q4_1) */
/* Flag: the weight's input channels are stored in another order and a
 * "perm" buffer says which (stored column t holds input channel perm[t]).
 * GPTQ act-order imports set it; 0x11, 0x12 and 0x13 are valid schemes. */
#define W4A16_SCHEME_PERM 0x10u
#define W4A16_SCHEME_BASE(s) ((s) & 0x0fu)

#define W4A16_DEFAULT_GROUP 128u
#define W4A16_N_ALIGN 8u
#define W4A16_K_ALIGN 32u

#endif
