// Sandbox stand-in kernel (tests/sandbox/kernels/): see rmsnorm.cu.
#ifndef __CUDACC_RTC__  // NVRTC (the contract test's CUDA 12.8 compiler) compiles device code only
#include <cuda_runtime.h>
#endif

__global__ void sandbox_silu_and_mul_kernel(const float* __restrict__ x, float* __restrict__ y, int d) {
  const float* gate = x + blockIdx.x * 2 * d;
  const float* up = gate + d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float g = gate[i];
    y[blockIdx.x * d + i] = g / (1.f + __expf(-g)) * up[i];
  }
}

#ifndef __CUDACC_RTC__
extern "C" cudaError_t sandbox_silu_and_mul(const float* x, float* y, int rows, int d, cudaStream_t stream) {
  sandbox_silu_and_mul_kernel<<<rows, 256, 0, stream>>>(x, y, d);
  return cudaGetLastError();
}
#endif
