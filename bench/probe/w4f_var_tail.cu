/* probe entries: the fragment GEMV's g128 paths alone, under tighter register budgets (more warps an SM) */
#define W4V(NAME, R, NB, MINB) \
extern "C" __global__ void __launch_bounds__(256, MINB) NAME(const u16 *x, const u8 *q, const u16 *s, float *y, ll m, ll n, ll k, ll gs) { \
    extern __shared__ float red[]; \
    w4f_gemv<4, R, NB>(x, q, s, y, (int)m, (int)n, k, blockIdx.x * 16 * R, red); }
W4V(v_r1_nb1_b4, 1, 1, 4) W4V(v_r1_nb1_b3, 1, 1, 3) W4V(v_r1_nb1_b2, 1, 1, 2)
W4V(v_r2_nb1_b4, 2, 1, 4) W4V(v_r2_nb1_b3, 2, 1, 3)
W4V(v_r1_nb2_b4, 1, 2, 4) W4V(v_r1_nb2_b3, 1, 2, 3) W4V(v_r2_nb2_b3, 2, 2, 3)
