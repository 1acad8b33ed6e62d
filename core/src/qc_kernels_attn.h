/* qc_kernels_attn.h - paged-attention GPU kernels (KV write, split-K decode, causal prefill) and their geometry (internal). */
#ifndef QC_KERNELS_ATTN_H
#define QC_KERNELS_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "qcore/plugin.h"

/* Tokens per KV-cache block (the engine's QC_KV_BLOCK). */
#define QC_ATTN_BLOCK 16

/* Register "core.kv_write", "core.attn_decode", "core.attn_decode_reduce" and
 * "core.attn_prefill" under the "bf16" format (found by id; their
 * eligibility refuses selection for a linear layer).  Layouts, numerics and
 * parameters are described at the top of qc_kernels_attn.c. */
qc_status qc_attn_kernels_register(const qc_host_api *api, qc_host *host);

/* 1 when the kernels take this shape (head_dim 64 or 128; n_heads a positive
 * multiple of n_kv_heads), else 0 with why->code "shape" and a sentence. */
int qc_attn_shape_supported(int n_heads, int n_kv_heads, int head_dim, qc_reason *why);

/* Bytes of the decode `work` buffer for up to n_seqs sequences whose block
 * tables hold max_ctx tokens (max_ctx >= max_blocks * 16), any n_kv_heads. */
size_t qc_attn_decode_workspace_bytes(int n_seqs, int n_heads, int head_dim, int max_ctx);

/* Partitions per sequence of a decode launch: what the kernels compute from
 * their own parameters (sets the work layout and grid.x). */
int qc_attn_decode_parts(int n_seqs, int n_kv_heads, int max_blocks);

/* Launch geometry, per launch.  Decode: core.attn_decode then
 * core.attn_decode_reduce, both every step (either pointer may be NULL).
 * Shapes beyond the grid limits (or empty) give a zero grid. */
void qc_attn_decode_dims(int n_seqs, int n_heads, int n_kv_heads, int head_dim, int max_blocks,
                         qc_launch_dims *decode, qc_launch_dims *reduce);
void qc_attn_prefill_dims(int64_t t, int n_seqs, int n_heads, int n_kv_heads, int head_dim, qc_launch_dims *d);
void qc_attn_kv_write_dims(int64_t t, int n_kv_heads, int head_dim, qc_launch_dims *d);

/* The qc_problem the descriptors' launch_dims read: m = tokens (kv_write,
 * prefill) or sequences (decode, reduce), n = n_heads, k = head_dim,
 * group_size = n_kv_heads, scheme = max_blocks (decode, reduce) or n_seqs
 * (prefill; unused by kv_write). */
void qc_attn_problem(qc_problem *p, int64_t m, int n_heads, int n_kv_heads, int head_dim, int scheme);

#endif
