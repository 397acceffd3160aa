// bf16_amx.c: the AMX-BF16 blocks (tdpbf16ps), in the layouts of
// matmul_bf16.h; bf16_variants.h gives the contract.
#include "bf16_variants.h"

#include <string.h>

// ---- AMX: C blocks of 32 x 32 in four 16 x 16 fp32 tiles (tmm0-3),
// two 16 x 32 tiles of A (tmm4-5) and two 16-pair x 16 tiles of B (tmm6-7)
// per step of 32 along K; every tile is 16 rows of 64 bytes.

#if HAVE_BF16_KERNELS
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

// Palette 1, tiles 0-7 all 16 rows of 64 bytes. In static storage: GCC 12
// dropped the stores that filled a local copy before ldtilecfg, as if the
// instruction did not read them (the garbage left there faulted).
static const TileConfig tile_config __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

AMX_TARGET void bf16_amx_configure(void) { _tile_loadconfig(&tile_config); }

AMX_TARGET void bf16_amx_release(void) { _tile_release(); }

// C (rows, cols) (+)= A (32 padded rows, kpad) . the 16 or 32 columns of a
// panel of padded width wp that b points at; rows, cols <= 32. A block
// that does not fill the 32 x 32 goes through a local buffer, so that no
// tile store writes past C's rows or columns.
AMX_TARGET void bf16_amx_block(float *c, int ldc, const bf16 *a, long lda, const bf16 *b, int wp,
                               int kpad, int rows, int cols, int accumulate) {
    float local[32 * 32];
    int direct = rows == 32 && cols == 32, two = cols > 16;
    float *cp = direct ? c : local;
    long ldcp = direct ? ldc : 32;
    if (!direct && accumulate) {
        memset(local, 0, sizeof local);
        for (int r = 0; r < rows; r++) memcpy(local + r * 32, c + (long)r * ldc, (size_t)cols * sizeof(float));
    }
    if (accumulate) {
        _tile_loadd(0, cp, ldcp * 4);
        _tile_loadd(2, cp + 16 * ldcp, ldcp * 4);
        if (two) {
            _tile_loadd(1, cp + 16, ldcp * 4);
            _tile_loadd(3, cp + 16 * ldcp + 16, ldcp * 4);
        }
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int k = 0; k < kpad; k += 32) {
        const bf16 *b_k = b + (long)(k / 2) * 2 * wp;
        _tile_loadd(4, a + k, lda * 2);
        _tile_loadd(5, a + 16 * lda + k, lda * 2);
        _tile_loadd(6, b_k, wp * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(2, 5, 6);
        if (two) {
            _tile_loadd(7, b_k + 32, wp * 4);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, cp, ldcp * 4);
    _tile_stored(2, cp + 16 * ldcp, ldcp * 4);
    if (two) {
        _tile_stored(1, cp + 16, ldcp * 4);
        _tile_stored(3, cp + 16 * ldcp + 16, ldcp * 4);
    }
    if (!direct)
        for (int r = 0; r < rows; r++) memcpy(c + (long)r * ldc, local + r * 32, (size_t)cols * sizeof(float));
}
#endif
