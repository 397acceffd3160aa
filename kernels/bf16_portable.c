// bf16_portable.c: the bf16 register tile in portable C, the same sums as
// vdpbf16ps; conversion and packing are matmul_bf16.c's portable loops.
// bf16_variants.h gives the contract.
#include "bf16_variants.h"

// The same tile in fp32 arithmetic: per pair, the odd product then the even
// one, each exact, each added with one rounding, as vdpbf16ps does.
static void tile_portable(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
                          int pairs, int wp, int rows, int cols, int accumulate) {
    float acc[ROWS][BF16_PANEL], b_even[BF16_PANEL], b_odd[BF16_PANEL];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) acc[r][j] = accumulate ? c[(long)r * ldc + j] : 0.0f;
    for (int q = 0; q < pairs; q++) {
        const bf16 *b_q = b + (long)q * 2 * wp;
        for (int j = 0; j < cols; j++) {
            b_even[j] = bf16_to_float(b_q[2 * j]);
            b_odd[j] = bf16_to_float(b_q[2 * j + 1]);
        }
        for (int r = 0; r < rows; r++) {
            const bf16 *a_rq = a + (long)r * a_row + (long)q * a_pair;
            float a_even = bf16_to_float(a_rq[0]), a_odd = bf16_to_float(a_rq[1]);
            for (int j = 0; j < cols; j++) {
                acc[r][j] += a_odd * b_odd[j];
                acc[r][j] += a_even * b_even[j];
            }
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) c[(long)r * ldc + j] = acc[r][j];
}

const Bf16Variant bf16_portable = {tile_portable, NULL, NULL, NULL};
