// Sandbox stand-in for FlashInfer 0.7.2's JIT module "sampling" (flashinfer/jit/sampling.py, gen_sampling_module:
// data/csrc/sampling.cu, renorm.cu, flashinfer_sampling_binding.cu). The stand-in FlashInfer JIT-compiles this file
// with the real nvcc into its JIT cache, as the real one compiles its sources, when the module is first built.
#include <cuda_runtime.h>

// Greedy pick per row: the index of the largest probability (what top-k 1 sampling returns).
__global__ void sandbox_argmax_sampling_kernel(const float* __restrict__ probs, int* __restrict__ out, int vocab) {
  const float* row = probs + blockIdx.x * vocab;
  if (threadIdx.x == 0) {
    int best = 0;
    for (int i = 1; i < vocab; ++i) best = row[i] > row[best] ? i : best;
    out[blockIdx.x] = best;
  }
}

extern "C" cudaError_t sandbox_argmax_sampling(const float* probs, int* out, int rows, int vocab, cudaStream_t stream) {
  sandbox_argmax_sampling_kernel<<<rows, 32, 0, stream>>>(probs, out, vocab);
  return cudaGetLastError();
}
