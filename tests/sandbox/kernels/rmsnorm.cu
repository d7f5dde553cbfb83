// Sandbox stand-in kernel (tests/sandbox/kernels/): compiled by the FlashInfer and SGLang build stand-ins with
// the real nvcc and the -gencode flags the real projects' own code derives from the build's environment.
// Small on purpose (seconds on 2 cores); what matters is which SASS the object ends up holding.
#ifndef __CUDACC_RTC__  // NVRTC (the contract test's CUDA 12.8 compiler) compiles device code only
#include <cuda_runtime.h>
#endif

__global__ void sandbox_rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                       int d, float eps) {
  extern __shared__ float partial[];
  const float* row = x + blockIdx.x * d;
  float sum = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) sum += row[i] * row[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = rsqrtf(partial[0] / d + eps);
  for (int i = threadIdx.x; i < d; i += blockDim.x) y[blockIdx.x * d + i] = row[i] * scale * w[i];
}

#ifndef __CUDACC_RTC__
extern "C" cudaError_t sandbox_rmsnorm(const float* x, const float* w, float* y, int rows, int d, float eps,
                                       cudaStream_t stream) {
  sandbox_rmsnorm_kernel<<<rows, 256, 256 * sizeof(float), stream>>>(x, w, y, d, eps);
  return cudaGetLastError();
}
#endif
