# test_fp8_gemv_emu.py - plugins/fp8/cuda/gemv_mma.cu, gemv_wg.cu and gemv1_tma.cu: index and fragment math replayed on the CPU, no GPU needed.
# A transcription (keep it in step with the kernel and with fp8_gemv_mma_ks in fp8_kernels.c): the host's KS rule,
# each warp's chunk slice (contiguous, ceil(chunks / KS)), the unpredicated batches of U chunks (2 at m <= 8, 1 at
# m > 8) and the one predicated batch for the rest (chunks past the slice and lanes past k load zeros), each lane's
# 16-byte loads (W rows n0 + g and n0 + g + 8, x row g + 8 nb or row 0 past m, at k = 64 c + 16 t), the registers
# handed to the mma (A = {P.w[2h], Q.w[2h], P.w[2h+1], Q.w[2h+1]}, B = {X.w[2h], X.w[2h+1]}), the mma as a matrix
# product through the PTX ISA's m16n8k32 8-bit fragment ownership (A: a0..a3 row g cols 4t..4t+3, a4..a7 row g+8
# same cols, a8..a11 row g cols 16+4t.., a12..a15 row g+8; B: b0..b3 k rows 4t..4t+3 of column g, b4..b7 k rows
# 16+4t..; D: c0, c1 row g cols 2t, 2t+1, c2, c3 row g+8), the promotion (per batch for channel / tensor, per chunk
# with the 128-K group's scales for block), the shared-memory reduction in warp order, the epilogue's (row, col) and
# scales, and the masked stores into a NaN-poisoned y.  Then plugins/fp8/cuda/gemv_wg.cu (channel, tensor): the four
# warps of a warpgroup on four K ranges, each lane's x words stored into 128-byte-swizzled atoms (one per chunk,
# range and 8 x rows), B read back as wgmma reads a K-major swizzled operand (descriptor start + 32 h, SBO 1024),
# one product per (chunk, step, range) of which warp r keeps D_r, the batch promotion, the same reduction.  Sums are
# float64 here, so the result must equal a float64 reference to rounding.  Exit 77 (skip) without numpy.
import os, sys
try:
    import numpy as np
except ImportError:
    print("test_fp8_gemv_emu: skip: numpy is not installed")
    sys.exit(77)

rng = np.random.default_rng(5)
GM_SMS, GM_WARPS_PER_SM, GM_MAXKS = 132, 32, 16
U1, U2 = 2, 1


def e4m3_table():
    t = np.zeros(256)
    for c in range(256):
        s = -1.0 if c & 0x80 else 1.0
        e, m = (c >> 3) & 15, c & 7
        if (c & 0x7F) == 0x7F:
            t[c] = np.nan
        elif e == 0:
            t[c] = s * m / 8.0 * 2.0 ** -6
        else:
            t[c] = s * (1 + m / 8.0) * 2.0 ** (e - 7)
    return t


LUT = e4m3_table()


def ks_of(n, k):  # fp8_gemv_mma_ks
    tiles, chunks = (n + 15) // 16, (k + 63) // 64
    ks = 1
    while ks < GM_MAXKS and tiles * ks * 2 <= GM_SMS * GM_WARPS_PER_SM and chunks >= 4 * ks:
        ks *= 2
    return ks


def words(b16):
    """16 bytes -> 4 little-endian words, each a list of its 4 bytes low to high."""
    return [list(b16[4 * i:4 * i + 4]) for i in range(4)]


def mma(A, B):
    """D (16 x 8) = A B from per-lane registers: A[lane] = 4 words of 4 codes, B[lane] = 2 words (m16n8k32)."""
    Am = np.full((16, 32), np.nan)
    Bm = np.full((32, 8), np.nan)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        a = [c for w in A[lane] for c in w]  # a0..a15
        for i in range(16):
            row = g if (i < 4 or 8 <= i < 12) else g + 8
            col = 4 * t + (i & 3) + (16 if i >= 8 else 0)
            Am[row, col] = LUT[a[i]]
        b = [c for w in B[lane] for c in w]  # b0..b7
        for i in range(8):
            Bm[4 * t + (i & 3) + (16 if i >= 4 else 0), g] = LUT[b[i]]
    assert not np.isnan(Am).any() and not np.isnan(Bm).any(), "a fragment element was not set"
    D = Am @ Bm
    out = []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        out.append([D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]])
    return out


def run_block(ctx, bx, ks):
    mode, m, n, k, W, X, xs, ws, y = ctx
    NB, U = (2, U2) if m > 8 else (1, U1)
    n0 = bx * 16
    nch, kfull = (k + 63) >> 6, k >> 6
    cpw = (nch + ks - 1) // ks
    kb = (k + 127) // 128
    zero = np.zeros(16, np.uint8)
    red = {}
    for warp in range(ks):
        c0 = min(warp * cpw, nch)
        c1 = min(c0 + cpw, nch)
        cmain = min(c1, kfull)
        acc = [[[0.0] * 4 for _ in range(NB)] for _ in range(32)]

        def load(lane, c, cv, ok):
            g, t = lane >> 2, lane & 3
            kp = c * 64 + 16 * t
            P = W[n0 + g, kp:kp + 16] if ok else zero
            Q = W[n0 + g + 8, kp:kp + 16] if ok else zero
            xrow = [(g + 8 * nb) if g + 8 * nb < m else 0 for nb in range(NB)]
            Xs = [X[xrow[nb], kp:kp + 16] if ok else zero for nb in range(NB)]
            sx = sw = None
            if mode == 2 and cv:
                grp = c >> 1
                sx = [[xs[(r if r < m else 0) * kb + grp] for r in (8 * nb + 2 * t, 8 * nb + 2 * t + 1)]
                      for nb in range(NB)]
                sw = ws[(n0 // 128) * kb + grp]
            return (words(P), words(Q), [words(v) for v in Xs], sx, sw)

        def mma_chunk(st, part, fresh):
            for nb in range(NB):
                for h in range(2):
                    A = [[st[l][0][2 * h], st[l][1][2 * h], st[l][0][2 * h + 1], st[l][1][2 * h + 1]] for l in range(32)]
                    B = [[st[l][2][nb][2 * h], st[l][2][nb][2 * h + 1]] for l in range(32)]
                    D = mma(A, B)
                    for l in range(32):
                        for e in range(4):
                            part[l][nb][e] = D[l][e] if (fresh and h == 0) else part[l][nb][e] + D[l][e]

        def compute(batch, nvalid):
            if mode == 2:
                for u in range(nvalid):
                    part = [[[0.0] * 4 for _ in range(NB)] for _ in range(32)]
                    mma_chunk(batch[u], part, True)
                    for l in range(32):
                        for nb in range(NB):
                            s0 = batch[u][l][3][nb][0] * batch[u][l][4]
                            s1 = batch[u][l][3][nb][1] * batch[u][l][4]
                            for e in range(4):
                                acc[l][nb][e] += part[l][nb][e] * (s0 if e % 2 == 0 else s1)
            else:
                part = [[[0.0] * 4 for _ in range(NB)] for _ in range(32)]
                for u in range(nvalid):
                    mma_chunk(batch[u], part, u == 0)
                for l in range(32):
                    for nb in range(NB):
                        for e in range(4):
                            acc[l][nb][e] += part[l][nb][e]

        c = c0
        while c + U <= cmain:
            compute([[load(l, c + u, True, True) for l in range(32)] for u in range(U)], U)
            c += U
        if c < c1:
            batch = []
            for u in range(U):
                cv = c + u < c1
                batch.append([load(l, c + u, cv, cv and (c + u) * 64 + 16 * (l & 3) < k) for l in range(32)])
            compute(batch, c1 - c)
        for l in range(32):
            for nb in range(NB):
                for e in range(4):
                    red[(warp * 4 * NB + 4 * nb + e) * 32 + l] = acc[l][nb][e]
    for v in range(128 * NB):
        i, ln = v >> 5, v & 31
        nb, e = i >> 2, i & 3
        s = 0.0
        for w in range(ks):
            s += red[(w * 4 * NB + i) * 32 + ln]
        row, col = 8 * nb + 2 * (ln & 3) + (e & 1), n0 + (ln >> 2) + 8 * (e >> 1)
        if row < m:
            assert np.isnan(y[row, col]), "y[%d,%d] written twice" % (row, col)
            y[row, col] = s if mode == 2 else s * (xs[row] * (ws[0] if mode == 1 else ws[col]))


def a_matrix(A):
    """16 x 32 A of one warp from its lanes' 4 registers (the m16n8k32 layout, also each warp's slice of wgmma A)."""
    Am = np.full((16, 32), np.nan)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        a = [c for w in A[lane] for c in w]
        for i in range(16):
            Am[g if (i < 4 or 8 <= i < 12) else g + 8, 4 * t + (i & 3) + (16 if i >= 8 else 0)] = LUT[a[i]]
    return Am


def swz(r, off):  # gw_swz: logical byte off (< 128) of row r in a 1024-byte atom, 128-byte swizzle
    return r * 128 + ((((off >> 4) ^ r) & 7) << 4) + (off & 15)


def read_b(smem, start, nrows):
    """B (32 x nrows) as wgmma reads a K-major 128-byte-swizzled operand: descriptor start `start` (an atom base
    plus 32 h), 8-row groups 1024 bytes apart (SBO), row r of a group at 128 r, the swizzle on the row's 16-byte
    units (the hardware's address-bit XOR, the layout TMA writes for cuda/wgmma.cu)."""
    atom, off0 = start & ~1023, start & 1023
    Bm = np.full((32, nrows), np.nan)
    for i in range(nrows):
        base, r = atom + 1024 * (i >> 3), i & 7
        for s in range(32):
            Bm[s, i] = LUT[smem[base + swz(r, off0 + s)]]
    return Bm


def run_block_wg(ctx, bx, ks):
    """cuda/gemv_wg.cu: warps in warpgroups of four, warp wq of a warpgroup on K range wq (its chunk slice), x
    staged per range, one wgmma per (chunk, k32 step h, range r), warp wq keeping D_r for r == wq."""
    mode, m, n, k, W, X, xs, ws, y = ctx
    assert ks % 4 == 0 and mode < 2
    NB = 2 if m > 8 else 1
    U = 2 if NB == 1 else 1
    n0 = bx * 16
    nch = (k + 63) >> 6
    cpw = (nch + ks - 1) // ks
    zero = np.zeros(16, np.uint8)
    red = {}
    for wg in range(ks // 4):
        tot = [[[[0.0] * 4 for _ in range(NB)] for _ in range(32)] for _ in range(4)]
        for j in range(0, cpw, U):
            smem = np.full(U * 4 * NB * 1024, 0x7F, np.uint8)  # NaN codes: a byte not staged shows
            regs = [[None] * U for _ in range(4)]  # regs[wq][u][lane] = (P words, Q words)
            for wq in range(4):
                warp = 4 * wg + wq
                c0 = min(warp * cpw, nch)
                c1 = min(c0 + cpw, nch)
                for u in range(U):
                    c = c0 + j + u
                    lanes = []
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        ok = c < c1 and c * 64 + 16 * t < k
                        kp = c * 64 + 16 * t
                        P = W[n0 + g, kp:kp + 16] if ok else zero
                        Q = W[n0 + g + 8, kp:kp + 16] if ok else zero
                        lanes.append((words(P), words(Q)))
                        for nb in range(NB):
                            xrow = g + 8 * nb if g + 8 * nb < m else 0
                            xv = words(X[xrow, kp:kp + 16] if ok else zero)
                            at = ((u * 4 + wq) * NB + nb) * 1024
                            for wi, off in enumerate((4 * t, 16 + 4 * t, 32 + 4 * t, 48 + 4 * t)):
                                for b in range(4):
                                    smem[at + swz(g, off) + b] = xv[wi][b]
                    regs[wq][u] = lanes
            D = [[[0.0] * (4 * NB) for _ in range(32)] for _ in range(4)]  # D[r][lane] of warp r's rows
            for u in range(U):
                for h in range(2):
                    for r in range(4):
                        Bm = read_b(smem, ((u * 4 + r) * NB) * 1024 + 32 * h, 8 * NB)
                        wq = r  # only warp r keeps D_r: the other warps' rows of D_r are dropped
                        A = [[regs[wq][u][l][0][2 * h], regs[wq][u][l][1][2 * h], regs[wq][u][l][0][2 * h + 1],
                              regs[wq][u][l][1][2 * h + 1]] for l in range(32)]
                        Dm = a_matrix(A) @ Bm
                        for lane in range(32):
                            g, t = lane >> 2, lane & 3
                            for nb in range(NB):
                                vals = [Dm[g, 8 * nb + 2 * t], Dm[g, 8 * nb + 2 * t + 1], Dm[g + 8, 8 * nb + 2 * t],
                                        Dm[g + 8, 8 * nb + 2 * t + 1]]
                                for e in range(4):
                                    fresh = u == 0 and h == 0
                                    D[r][lane][4 * nb + e] = vals[e] + (0.0 if fresh else D[r][lane][4 * nb + e])
            for wq in range(4):
                for lane in range(32):
                    for nb in range(NB):
                        for e in range(4):
                            tot[wq][lane][nb][e] += D[wq][lane][4 * nb + e]
        for wq in range(4):
            warp = 4 * wg + wq
            for l in range(32):
                for nb in range(NB):
                    for e in range(4):
                        red[(warp * 4 * NB + 4 * nb + e) * 32 + l] = tot[wq][l][nb][e]
    for v in range(128 * NB):
        i, ln = v >> 5, v & 31
        nb, e = i >> 2, i & 3
        s = 0.0
        for w in range(ks):
            s += red[(w * 4 * NB + i) * 32 + ln]
        row, col = 8 * nb + 2 * (ln & 3) + (e & 1), n0 + (ln >> 2) + 8 * (e >> 1)
        if row < m:
            assert np.isnan(y[row, col]), "y[%d,%d] written twice" % (row, col)
            y[row, col] = s * (xs[row] * (ws[0] if mode == 1 else ws[col]))


def codes(shape):
    c = rng.integers(0, 256, size=shape).astype(np.uint8)
    c[(c & 0x7F) == 0x7F] -= 1  # no NaN codes
    return c


def case(mode, m, n, k, ks=None, wg=False):
    W, X = codes((n, k)), codes((m, k))
    kb = (k + 127) // 128
    if mode == 2:
        xs = rng.uniform(0.5, 2.0, size=m * kb)
        ws = rng.uniform(0.5, 2.0, size=((n + 127) // 128) * kb)
    else:
        xs = rng.uniform(0.5, 2.0, size=m)
        ws = rng.uniform(0.5, 2.0, size=1 if mode == 1 else n)
    if ks is None:
        ks = ks_of(n, k)
        if wg:
            ks = max(4, (ks + 3) // 4 * 4)
    Wd, Xd = LUT[W], LUT[X]
    ref = np.zeros((m, n))
    mag = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            if mode == 2:
                for gq in range(kb):
                    sl = slice(128 * gq, min(128 * gq + 128, k))
                    sc = xs[i * kb + gq] * ws[(j // 128) * kb + gq]
                    ref[i, j] += np.dot(Xd[i, sl], Wd[j, sl]) * sc
                    mag[i, j] += np.abs(Xd[i, sl]) @ np.abs(Wd[j, sl]) * sc
            else:
                sc = xs[i] * (ws[0] if mode == 1 else ws[j])
                ref[i, j] = np.dot(Xd[i], Wd[j]) * sc
                mag[i, j] = np.abs(Xd[i]) @ np.abs(Wd[j]) * sc
    y = np.full((m, n), np.nan)
    ctx = (mode, m, n, k, W, X, xs, ws, y)
    for bx in range(n // 16):
        (run_block_wg if wg else run_block)(ctx, bx, ks)
    left = int(np.isnan(y).sum())
    err = np.abs(y - ref) / (mag * 1e-12 + 1e-300)
    worst = float(np.nanmax(err)) if left < m * n else float("inf")
    ok = left == 0 and worst <= 1.0
    print("test_fp8_gemv_emu: %-4s %-7s m=%2d n=%3d k=%4d KS=%2d: %s, worst |d|/(1e-12 sum|xw|) %.3g%s" %
          ("wg" if wg else "mma", ["channel", "tensor", "block"][mode], m, n, k, ks, "ok" if ok else "FAIL", worst,
           "" if left == 0 else ", %d outputs unwritten" % left))
    return ok


# the host rule on the Llama-3-8B shapes (the unit test checks the same numbers against the plugin)
for (n, k, want) in ((6144, 4096, 8), (4096, 4096, 16), (28672, 4096, 2), (4096, 14336, 16)):
    assert ks_of(n, k) == want, "KS(%d, %d) = %d, want %d" % (n, k, ks_of(n, k), want)
cases = [
    # mode, m, n, k, KS: m across one and two n8 x tiles (x rows past m read row 0), K with a ragged 64-K chunk
    # (k % 64 = 16, 32, 48), warps whose slice is empty or holds a partial batch, a block of 128-K groups with a
    # ragged last group, several 16-row tiles in one 128-row scale block, KS from the host rule
    (0, 1, 16, 64, None),
    (0, 3, 32, 400, 2),
    (0, 8, 16, 1040, 4),
    (0, 9, 32, 208, 3),
    (0, 16, 16, 272, 16),
    (1, 5, 48, 336, 2),
    (1, 12, 16, 128, 1),
    (2, 1, 32, 400, 2),
    (2, 7, 16, 1040, 4),
    (2, 11, 48, 272, 2),
    (2, 16, 16, 128, 16),
    (2, 3, 144, 272, 2),
    (0, 2, 16, 16, 1),
]
# cuda/gemv_wg.cu (channel / tensor): one and two warpgroups, both x tiles, ragged chunks, empty slices
cases += [
    (0, 1, 16, 64, None, True),
    (0, 5, 32, 400, 4, True),
    (1, 8, 16, 1040, 8, True),
    (0, 9, 16, 208, 4, True),
    (1, 16, 32, 272, 8, True),
]


# ---- cuda/gemv1_tma.cu (m = 1, sm_90): the block / stage partition, x's f16 layout in shared memory, the
# diagonal mma.m16n8k16 f16 (PTX ISA fragments: A a0 row g cols 2t, 2t+1, a1 row g+8 same cols, a2 row g cols
# 2t+8, 2t+9, a3 row g+8; B b0 k rows 2t, 2t+1 of column g, b1 k rows 2t+8, 2t+9; D c0, c1 row g cols 2t, 2t+1,
# c2, c3 row g+8), the diagonal read-out (lane 4 g + g / 2, register g % 2 or 2 + g % 2) and the epilogue's
# scales.  FT_BLOCKS is a parameter here so that blocks of many stages are replayed on small n.
FT_R = 2


def ft_rpb(n, blocks):
    return ((n + blocks - 1) // blocks + FT_R - 1) // FT_R * FT_R


def ft_x_smem(xq, k):
    """The kernel's store loop: x's 16 bytes i (run c = i / 32, lane L = i % 32) in f16 pairs, bytes 0..7 to
    uint4 64 c + L, bytes 8..15 to 64 c + 32 + L; a uint4 is 4 words, a word a pair (lo byte's value, hi's)."""
    xh = {}
    for i in range(k // 16):
        c, L = i >> 5, i & 31
        b = xq[16 * i:16 * i + 16]
        xh[64 * c + L] = [(LUT[b[2 * j]], LUT[b[2 * j + 1]]) for j in range(4)]
        xh[64 * c + 32 + L] = [(LUT[b[8 + 2 * j]], LUT[b[8 + 2 * j + 1]]) for j in range(4)]
    return xh


def ft_rows(W, xh, ra, rb, k, mutate=False):
    """One warp's two rows (ra, rb) through the runs: returns the two diagonal sums as the kernel reads them."""
    D = np.zeros((16, 8))
    for c in range(k // 512):
        A4 = [np.full((16, 16), np.nan) for _ in range(4)]
        B4 = [np.full((16, 8), np.nan) for _ in range(4)]
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            P = W[ra, 512 * c + 16 * lane:512 * c + 16 * lane + 16]
            Q = W[rb, 512 * c + 16 * lane:512 * c + 16 * lane + 16]
            xw = xh[64 * c + lane] + xh[64 * c + 32 + lane]  # 8 words
            for e in range(4):
                lo_p, hi_p = (P[4 * e], P[4 * e + 1]), (P[4 * e + 2], P[4 * e + 3])
                lo_q, hi_q = (Q[4 * e], Q[4 * e + 1]), (Q[4 * e + 2], Q[4 * e + 3])
                for i in range(2):
                    A4[e][g, 2 * t + i] = LUT[lo_p[i]]
                    A4[e][g + 8, 2 * t + i] = LUT[lo_q[i]]
                    A4[e][g, 2 * t + 8 + i] = LUT[hi_p[i]]
                    A4[e][g + 8, 2 * t + 8 + i] = LUT[hi_q[i]]
                    b0, b1 = (xw[2 * e + 1], xw[2 * e]) if mutate else (xw[2 * e], xw[2 * e + 1])
                    B4[e][2 * t + i, g] = b0[i]
                    B4[e][2 * t + 8 + i, g] = b1[i]
        for e in range(4):
            assert not np.isnan(A4[e]).any() and not np.isnan(B4[e]).any(), "a fragment element nobody holds"
            D += A4[e] @ B4[e]
    va = vb = 0.0
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        if t == g >> 1:
            c0, c1, c2, c3 = D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]
            va += c1 if g & 1 else c0
            vb += c3 if g & 1 else c2
    return va, vb


def ft_case(mode, n, k, blocks, mutate=False):
    W, xq = codes((n, k)), codes((k,))
    xs = rng.uniform(0.5, 2.0, size=1)
    ws = rng.uniform(0.5, 2.0, size=1 if mode == 1 else n)
    xh = ft_x_smem(xq, k)
    y = np.full(n, np.nan)
    rpb = ft_rpb(n, blocks)
    grid = (n + rpb - 1) // rpb
    for bx in range(grid):
        r0 = bx * rpb
        r1 = min(r0 + rpb, n)
        for j in range((r1 - r0 + FT_R - 1) // FT_R):
            row0 = r0 + FT_R * j
            va, vb = ft_rows(W, xh, row0, row0 + 1 if row0 + 1 < n else row0, k, mutate)
            assert np.isnan(y[row0]), "row %d stored twice" % row0
            y[row0] = va * (xs[0] * (ws[0] if mode == 1 else ws[row0]))
            if row0 + 1 < r1:
                y[row0 + 1] = vb * (xs[0] * (ws[0] if mode == 1 else ws[row0 + 1]))
    ref = (LUT[W] @ LUT[xq]) * xs[0] * (ws[0] if mode == 1 else ws)
    mag = (np.abs(LUT[W]) @ np.abs(LUT[xq])) * xs[0] * (ws[0] if mode == 1 else ws)
    err = np.abs(y - ref) / (mag * 1e-12 + 1e-300)
    ok = not np.isnan(y).any() and float(err.max()) <= 1.0
    if not mutate:
        print("test_fp8_gemv_emu: gemv1_tma mode %d n=%d k=%d, %d blocks of %d rows: %s (max |d| / (1e-12 S) %.3g)" %
              (mode, n, k, grid, rpb, "ok" if ok else "FAIL", float(np.nanmax(err)) if not np.isnan(y).all() else -1))
    return ok

if os.environ.get("QC_FP8_GEMV_EMU_QUICK"):
    cases = cases[:3]
bad = 0
for c in cases:
    bad += 0 if case(*c) else 1
# gemv1_tma: one stage a block, blocks of 4 and 12 stages (few blocks), a short last block, k of 1 to 3 runs
ft_cases = [(0, 16, 512, 264), (1, 48, 1024, 6), (0, 40, 1536, 2), (0, 34, 512, 3), (1, 16, 512, 1)]
for c in ft_cases:
    bad += 0 if ft_case(*c) else 1
# the replay must catch a wrong fragment: B's two registers swapped
if ft_case(0, 16, 512, 264, mutate=True):
    print("test_fp8_gemv_emu: gemv1_tma: FAIL: a mutated B fragment was not caught")
    bad += 1
print("test_fp8_gemv_emu: %d of %d cases out of tolerance" % (bad, len(cases) + len(ft_cases) + 1))
sys.exit(1 if bad else 0)
