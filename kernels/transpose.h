// transpose.h: copying a matrix transposed, the products' and attention's
// operand preparation (in fp32: the weights for the linear layer's forward,
// each head's keys and values for attention).
#ifndef TRANSPOSE_H
#define TRANSPOSE_H

// dst (cols, rows) = src (rows, cols)^T: dst's element (j, i) at
// dst[j * ld_dst + i] is src's (i, j) at src[i * ld_src + j]. On the calling
// thread; 8 x 8 blocks in registers where the CPU has AVX, each element a
// plain copy (bit for bit).
void transpose_rows(float *dst, long ld_dst, const float *src, long ld_src, int rows, int cols);

#endif
