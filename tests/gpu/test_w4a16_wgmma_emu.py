# test_w4a16_wgmma_emu.py - plugins/w4a16/w4a16_wgmma.c's index math replayed on the CPU, no GPU needed.
# A line-by-line transcription (keep it in step with the kernel; the group-128 W4W_PF loop computes the same
# sums, and its ring bookkeeping is checked separately by ring_check): the producer's copies into a stage (W rows with
# their halves swapped per 4-row group, the aligned scale/zero words), each consumer thread's A fragments built with
# the same bit operations (shift, lop3 mask, bf16x2 subtract), the accumulator layout, the per-group
# promotion, the K split with its reduction, the epilogue's masked stores, stale shared memory where the kernel
# leaves it stale.  wgmma itself is a matrix product here (A as cute's ALayout_64x16, B = x^T).  Compared with
# a float64 reference, in which every sum here is exact.  Exit 77 (skip) without numpy.
import struct, sys
try:
    import numpy as np
except ImportError:
    print("test_w4a16_wgmma_emu: skip: numpy is not installed")
    sys.exit(77)
rng = np.random.default_rng(1)
def bf16_bits_to_f(b): return np.frombuffer(struct.pack('<I', (b & 0xffff) << 16), '<f4')[0]
def f16_to_f(h): return float(np.frombuffer(struct.pack('<H', h & 0xffff), '<f2')[0])
def bf16x2_sub(v, negz):  # exact: (128+q) - (128+z)
    lo = bf16_bits_to_f(v & 0xffff) + bf16_bits_to_f(negz & 0xffff)
    hi = bf16_bits_to_f(v >> 16) + bf16_bits_to_f(negz >> 16)
    return lo, hi
def deq(w, sh, negz):  # codes 2t, 2t + 1 at nibbles t, t + 4: w >> 4t, then the lop3
    v = ((w >> sh) & 0x000F000F) | 0x43004300
    return bf16x2_sub(v, negz)
def negz_of(z): return ((0xC300 | z) * 0x10001) & 0xffffffff

def run(m, n, k, g, asym, cfg_force=None):
    ng = k // g
    q = rng.integers(0, 16, size=(n, k))
    sc = rng.normal(size=(n, ng)).astype(np.float16)
    zp = rng.integers(0, 16, size=(n, ng)) if asym else np.full((n, ng), 8)
    x = rng.normal(size=(m, k)).astype(np.float32)
    x = (x.view(np.uint32) & 0xffff0000).view(np.float32)  # bf16 values
    qb = np.zeros(n * k // 2, np.uint8)
    for j in range(n):
        for t in range(k):
            c = q[j, t]
            i = t % 8; p = (i >> 1) + 4 * (i & 1)  # pack_version 2: nibble p of the row's word t // 8
            qb[j*(k//2) + (t//8)*4 + p//2] |= (c if p % 2 == 0 else c << 4)
    sc_u16 = sc.view(np.uint16).reshape(-1)
    zp_u8 = zp.astype(np.uint8).reshape(-1)
    W = (q - zp.repeat(g, axis=1)) * sc.astype(np.float64).repeat(g, axis=1)
    ref = x.astype(np.float64) @ W.T
    bm = 64 if m <= 64 else 128
    cfg = (2 if bm == 64 else 0) + (1 if ((m + bm - 1)//bm) * ((n + 127)//128) < 132 else 0)
    if cfg_force is not None: cfg = cfg_force
    BM, KS = [(128, 1), (128, 2), (64, 1), (64, 2)][cfg]
    NT = 128 // KS; GS = g // 16; GPS = 2 if GS == 2 else 1
    kt_n = (k + 63) // 64
    y = np.full((m, n), np.nan)
    tiles_m, tiles_n = (m + BM - 1)//BM, (n + NT - 1)//NT
    for tm in range(tiles_m):
        for tn in range(tiles_n):
            m0, n0 = tm*BM, tn*NT
            accs = {}
            for c in range(2):
                for warp in range(4):
                    for lane in range(32):
                        accs[(c, warp, lane)] = np.zeros(BM // 2)
            for kt in range(kt_n):
                # producer
                Wsm = np.zeros(NT*32, np.uint8) + 0xAB  # stale garbage
                Ssm = np.zeros((2, NT), np.uint32) + 0xFFFFFFFF
                Zsm = np.zeros((2, NT), np.uint32) + 0xFFFFFFFF
                for cidx in range(2*NT):
                    row, h = cidx >> 1, cidx & 1
                    if kt*64 + 32*h < k:
                        r = min(n0 + row, n - 1)
                        src = r*(k//2) + kt*32 + 16*h
                        dst = row*32 + 16*(h ^ ((row >> 2) & 1))
                        Wsm[dst:dst+16] = qb[src:src+16]
                for pt in range(NT):
                    r = min(n0 + pt, n - 1)
                    for gq in range(GPS):
                        gi = 2*kt + gq if GS == 2 else kt*4//GS
                        if gi < ng:
                            e = r*ng + gi
                            Ssm[gq, pt] = int(sc_u16[e & ~1]) | (int(sc_u16[(e & ~1) + 1]) << 16)
                            zz = e & ~3
                            Zsm[gq, pt] = sum(int(zp_u8[zz+i]) << (8*i) for i in range(4) if zz + i < len(zp_u8))
                X = np.zeros((BM, 64))
                for rr in range(BM):
                    if m0 + rr < m:
                        kk = min(64, k - kt*64)
                        X[rr, :kk] = x[m0 + rr, kt*64:kt*64+kk]
                nb = 2 if BM == 128 and m0 + 64 < m else 1
                if BM == 128 and nb == 1: X[64:, :] = np.nan  # the box is not loaded: stale
                for c in range(2):
                    if not (KS == 1 or (kt & 1) == c): continue
                    first = KS == 2 or GS != 8 or (kt & 1) == 0
                    last = KS == 2 or GS != 8 or (kt & 1) == 1
                    half = GS == 2 and kt*64 + 32 >= k
                    # per thread values
                    thr = {}
                    for warp in range(4):
                        for lane in range(32):
                            g_, t = lane >> 2, lane & 3
                            rl = (64*c if KS == 1 else 0) + 16*warp + g_
                            swz = (rl >> 2) & 1
                            sel = 4 * t
                            rc0, rc1 = min(n0 + rl, n-1), min(n0 + rl + 8, n - 1)
                            s0, s1, z0, z1 = [], [], [], []
                            for gq in range(GPS):
                                gi = 2*kt + gq if GS == 2 else kt*4//GS
                                e0, e1 = rc0*ng + gi, rc1*ng + gi
                                a, b = int(Ssm[gq, rl]), int(Ssm[gq, rl + 8])
                                s0.append(f16_to_f((a >> 16) if e0 & 1 else a)); s1.append(f16_to_f((b >> 16) if e1 & 1 else b))
                                if asym:
                                    za, zb = int(Zsm[gq, rl]), int(Zsm[gq, rl + 8])
                                    z0.append(negz_of((za >> (8*(e0 & 3))) & 15)); z1.append(negz_of((zb >> (8*(e1 & 3))) & 15))
                                else:
                                    z0.append(0xC308C308); z1.append(0xC308C308)
                            frags = []
                            for j in range(4):
                                off = 16*((j >> 1) ^ swz) + 8*(j & 1); gq = j >> 1 if GS == 2 else 0
                                r0 = Wsm[rl*32+off: rl*32+off+8].view('<u4'); r1 = Wsm[(rl+8)*32+off:(rl+8)*32+off+8].view('<u4')
                                frags.append((deq(int(r0[0]), sel, z0[gq]), deq(int(r1[0]), sel, z1[gq]), deq(int(r0[1]), sel, z0[gq]), deq(int(r1[1]), sel, z1[gq])))
                            thr[(warp, lane)] = (s0, s1, frags)
                    def A_of(j):  # 64 x 16 from the fragments (ALayout_64x16)
                        A = np.zeros((64, 16))
                        for (warp, lane), (_, _, frags) in thr.items():
                            g_, t = lane >> 2, lane & 3
                            f = frags[j]
                            A[16*warp + g_, 2*t:2*t+2] = f[0]; A[16*warp + g_ + 8, 2*t:2*t+2] = f[1]
                            A[16*warp + g_, 2*t+8:2*t+10] = f[2]; A[16*warp + g_ + 8, 2*t+8:2*t+10] = f[3]
                        return A
                    part = getattr(run, 'part', {}).get(c) if not first else None
                    def promote(P, h):
                        for (warp, lane), (s0, s1, _) in thr.items():
                            t = lane & 3; g_ = lane >> 2
                            acc = accs[(c, warp, lane)]
                            for i in range(BM // 2):
                                col = 8*(i >> 2) + 2*t + (i & 1); row = 16*warp + g_ + (8 if i & 2 else 0)
                                acc[i] = (s1[h] if i & 2 else s0[h]) * P[row, col] + acc[i]
                    if GS == 2:
                        for h in range(2):
                            if h == 1 and half: break
                            P = A_of(2*h) @ X[:, 32*h:32*h+16].T + A_of(2*h+1) @ X[:, 32*h+16:32*h+32].T
                            promote(P, h)
                    else:
                        P = sum(A_of(j) @ X[:, 16*j:16*j+16].T for j in range(4))
                        if not first: P = P + run.part[c]
                        run.part = getattr(run, 'part', {}); run.part[c] = P
                        if last: promote(P, 0)
            # epilogue
            for c in range(2):
                for warp in range(4):
                    for lane in range(32):
                        if KS == 2 and c == 1: continue
                        acc = accs[(c, warp, lane)].copy()
                        if KS == 2: acc += accs[(1, warp, lane)]
                        g_, t = lane >> 2, lane & 3
                        rl = (64*c if KS == 1 else 0) + 16*warp + g_
                        for i in range(BM // 2):
                            r = m0 + 8*(i >> 2) + 2*t + (i & 1); cn = n0 + rl + (8 if i & 2 else 0)
                            if r < m and cn < n: y[r, cn] = acc[i]
    err = np.nanmax(np.abs(y - ref)) / (np.abs(ref).max() + 1e-30)
    unw = np.isnan(y).sum()
    print(f"m={m} n={n} k={k} g={g} {'asym' if asym else 'sym'} cfg={cfg} (BM {BM} KS {KS}): max rel err {err:.2e}, unwritten/NaN {unw}")
    return err < 1e-5 and unw == 0
ok = True
for (m, n, k, g, asym, cf) in [(17, 24, 96, 32, False, None), (19, 40, 128, 64, True, None), (70, 136, 256, 128, True, None),
                               (70, 136, 256, 128, False, 0), (33, 8, 96, 32, True, 2), (130, 16, 192, 64, False, 0),
                               (100, 24, 256, 128, True, 1), (65, 200, 160, 32, True, 0), (17, 136, 256, 128, False, 2)]:
    ok &= run(m, n, k, g, asym, cf)

def ring_check(ST, KS, kt_n, tiles):
    """The group-128 (W4W_PF) consumer loop's ring bookkeeping, transcribed: every stage a consumer waits on,
    issues from and releases must be its block's (the producer fills block G of the block's run into stage
    G % ST, phase (G // ST) & 1), each consumer must take its own blocks exactly once, and the ring position
    after a tile must be the next tile's first block.  Returns the first error or None."""
    st = {}
    for c in range(2):
        s, ph, G0 = 0, 0, 0
        for _ in range(tiles):
            seen = []
            def adv():
                nonlocal s, ph
                s += 1
                if s == ST: s, ph = 0, ph ^ 1
            def expect(kt, s_, p_, what):
                G = G0 + kt
                if (s_, p_) != (G % ST, (G // ST) & 1):
                    raise AssertionError(f"ST={ST} KS={KS} kt_n={kt_n} c={c} block {kt}: {what} stage {s_} phase {p_}")
            s0, p0 = s, ph
            if KS == 2 and c == 1: adv()
            kt0 = c if KS == 2 else 0
            pend = {}
            if kt0 < kt_n: expect(kt0, s, ph, "wait"); pend[kt0] = (s, ph)
            kt = kt0
            while kt < kt_n:
                for u in range(2):
                    k_ = kt + 2 * u
                    if KS == 1:
                        sa, pa = s, ph; adv()
                        expect(k_, sa, pa, "issue")
                        sb, pb = s, ph; adv()
                        expect(k_ + 1, sb, pb, "wait")
                        if k_ + 2 < kt_n: expect(k_ + 2, s, ph, "wait ahead")
                        seen += [k_, k_ + 1]
                    else:
                        sa, pa = s, ph; adv(); adv()
                        expect(k_, sa, pa, "issue")
                        if k_ + 2 < kt_n: expect(k_ + 2, s, ph, "wait ahead")
                        seen.append(k_)
                    if k_ + 2 >= kt_n: break
                kt += 4
            s = (s0 + kt_n) % ST
            ph = p0 ^ (((s0 + kt_n) // ST) & 1)
            want = list(range(kt_n)) if KS == 1 else list(range(c, kt_n, 2))
            if sorted(seen) != want: raise AssertionError(f"ST={ST} KS={KS} kt_n={kt_n} c={c}: took blocks {seen}")
            G0 += kt_n
    return None
try:
    for ST in (8, 10, 12, 16):
        for KS in (1, 2):
            for kt_n in (2, 4, 6, 8, 10, 14, 18, 64, 224):
                ring_check(ST, KS, kt_n, 5)
    print("test_w4a16_wgmma_emu: W4W_PF ring bookkeeping holds (ST 8-16, K split or not, 2-224 blocks, 5 tiles)")
except AssertionError as e:
    print("test_w4a16_wgmma_emu: W4W_PF ring:", e)
    ok = False
print("test_w4a16_wgmma_emu: " + ("all cases match" if ok else "MISMATCH"))
sys.exit(0 if ok else 1)
